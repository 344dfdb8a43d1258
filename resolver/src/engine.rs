//! A lookup run, driven from ordinary (synchronous) code: the input lines
//! go in, one finished record per name comes out.
//!
//! Two engines run lookups behind this one face:
//!
//! - UDP lookups of one record type (the scanner's case) go to the
//!   in-flight table of [`super::slots`]: one thread, a few sockets,
//!   thousands of names at once, paced per nameserver;
//! - TCP, TLS and HTTPS lookups, the modules (ALOOKUP, MXLOOKUP, ...) and
//!   iterative resolution go to the workers of [`super::worker`]: tokio
//!   tasks on the board of per-nameserver queues, keeping connections.
//!
//! [`LookupEngine::submit`] offers one input line, waiting for room when
//! the run is at its bound of outstanding names (and handing out finished
//! records meanwhile, so a single thread can both feed and drain it);
//! [`LookupEngine::next_result`] returns finished records, and
//! [`LookupEngine::summary`] the counters.

use super::config::LookupConfig;
use super::format::RecordStyle;
use super::iterative::summary::IterativeSummary;
use super::job::parse_line;
use super::record::{Batch, Finished};
use super::shared::Shared;
use super::slots::{self, SlotEngine};
use super::stats::{LookupSummary, NameserverStats, RunCounters};
use super::worker;
use dnsluice_net::{Endpoint, NetCounters, NetError};
use std::collections::{HashMap, VecDeque};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a wait for room goes before looking again whether the run was
/// stopped.
const STOP_LOOK: Duration = Duration::from_millis(10);

/// Which engine runs the names.
enum Backend {
    /// The workers on their board, in a tokio runtime.
    Tasks {
        runtime: tokio::runtime::Runtime,
        shared: Arc<Shared>,
    },
    /// The UDP engine.
    Slots(SlotEngine),
}

/// A running lookup; see the module docs.
pub struct LookupEngine {
    backend: Option<Backend>,
    run: Arc<RunCounters>,
    net: Arc<NetCounters>,
    style: RecordStyle,
    results: mpsc::Receiver<Batch>,
    /// Records received and not handed out yet.
    received: VecDeque<Finished>,
    /// Records handed back ([`LookupEngine::recycle`]) not yet sent back.
    spent: Vec<Finished>,
    /// Outstanding names at most.
    bound: u64,
    outstanding: u64,
    next_index: u64,
    started: Instant,
    closed: bool,
    /// Pinned nameservers already parsed (a host name is resolved once).
    endpoints: HashMap<String, Endpoint>,
    /// Room to check that a name encodes.
    scratch: Vec<u8>,
    transport: dnsluice_net::DnsTransport,
    iterative: bool,
    has_nameservers: bool,
}

impl LookupEngine {
    /// Starts the engine the configuration calls for. Fails on setup
    /// problems: a CA file that does not load, a `--local-addr` that
    /// cannot be bound.
    pub fn start(config: LookupConfig) -> Result<LookupEngine, NetError> {
        let (results_tx, results) = mpsc::channel();
        let run = Arc::new(RunCounters::default());
        let net = Arc::new(NetCounters::default());
        let style = config.style;
        let (transport, iterative) = (config.transport, config.iterative.is_some());
        let has_nameservers = !config.nameservers.is_empty();
        let (backend, bound) = if slots::runs(&config) {
            let engine = SlotEngine::start(&config, run.clone(), net.clone(), results_tx)
                .map_err(NetError::Setup)?;
            // Enough waiting beside the table that it never runs dry.
            (Backend::Slots(engine), 2 * config.depth.max(1))
        } else {
            raise_open_file_limit();
            let threads = config.threads.max(1);
            let inflight = config.inflight.max(1);
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2.min(std::thread::available_parallelism().map_or(1, |n| n.get())))
                .thread_name("dnsluice-lookup")
                .enable_all()
                .build()
                .map_err(NetError::Runtime)?;
            let shared = Arc::new(Shared::new(config, run.clone(), net.clone(), results_tx)?);
            for id in 0..threads {
                runtime.spawn(worker::run(shared.clone(), id));
            }
            // Enough to keep every queue and worker busy.
            let bound = (4 * threads * inflight).clamp(64, 1 << 20);
            (Backend::Tasks { runtime, shared }, bound)
        };
        Ok(LookupEngine {
            backend: Some(backend),
            run,
            net,
            style,
            results,
            received: VecDeque::new(),
            spent: Vec::new(),
            bound: bound as u64,
            outstanding: 0,
            next_index: 0,
            started: Instant::now(),
            closed: false,
            endpoints: HashMap::new(),
            scratch: Vec::with_capacity(256),
            transport,
            iterative,
            has_nameservers,
        })
    }

    /// Offers one input line (`name` or `name,nameserver`). Waits while the run
    /// is at its bound, passing finished records to `sink` meanwhile. A line
    /// that cannot be looked up gets its `ERROR` record at once.
    ///
    /// Blank lines and lines starting with `#` are no names: they are skipped
    /// (and get no record); the return value says whether the line was a name.
    pub fn submit(&mut self, line: &str, sink: &mut dyn FnMut(Finished)) -> bool {
        let taken = self.submit_as(line, self.next_index, sink);
        self.next_index += u64::from(taken);
        taken
    }

    /// As [`LookupEngine::submit`], the record's index chosen by the caller
    /// (`lookup.dns`: the line's number less one, so that a record carries
    /// the number of its line, which may be a work item's ticket).
    pub fn submit_as(&mut self, line: &str, index: u64, sink: &mut dyn FnMut(Finished)) -> bool {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return false;
        }
        // The UDP engine checks the name as it builds the query (the same
        // error); the workers are handed names already checked.
        let check = match self.backend {
            Some(Backend::Slots(_)) => None,
            _ => Some(&mut self.scratch),
        };
        let parsed = parse_line(index, line, self.transport, &mut self.endpoints, check);
        let job = match parsed {
            Ok(job) => job,
            Err(bad) => {
                self.reject(index, &bad.name, &bad.reason, sink);
                return true;
            }
        };
        if job.pinned.is_some() && self.iterative {
            let reason = "a line pinned to a nameserver cannot be resolved iteratively \
                          (the walk starts at the root servers)";
            self.reject(index, &job.name, reason, sink);
            return true;
        }
        if job.pinned.is_none() && !self.has_nameservers && !self.iterative {
            let reason = "no nameserver: give --name-servers or pin the line (name,nameserver)";
            self.reject(index, &job.name, reason, sink);
            return true;
        }
        let route = match self.backend.as_ref() {
            Some(Backend::Tasks { shared, .. }) => {
                let ns = match &job.pinned {
                    Some(endpoint) => Some(shared.board.nameserver(endpoint)),
                    None => shared.board.choose(),
                };
                let Some(ns) = ns else {
                    let reason = "no nameserver: give --name-servers or pin the line";
                    self.reject(index, &job.name, reason, sink);
                    return true;
                };
                Some(ns)
            }
            _ => None,
        };
        if !self.wait_for_room(sink) {
            // Stopped while full: the name is read but not asked.
            return true;
        }
        self.outstanding += 1;
        match (self.backend.as_ref(), route) {
            (Some(Backend::Slots(engine)), _) => {
                engine.submit(job.index, &job.name, job.pinned.map(|e| e.addr));
            }
            (Some(Backend::Tasks { shared, .. }), Some(ns)) => shared.board.offer(job, &ns),
            _ => {}
        }
        true
    }

    /// The `ERROR` record of a line that is not looked up.
    fn reject(&mut self, index: u64, name: &str, reason: &str, sink: &mut dyn FnMut(Finished)) {
        self.run.finished("ERROR");
        sink(worker::bad_line_record(index, name, reason, &self.style));
    }

    /// Waits until fewer than `bound` names are in flight, handing `sink`
    /// what finishes meanwhile; false when the run was stopped (SIGINT,
    /// SIGTERM) before there was room: the name is not asked.
    fn wait_for_room(&mut self, sink: &mut dyn FnMut(Finished)) -> bool {
        while self.outstanding >= self.bound {
            if dnsluice_core::stop::requested().is_some() {
                return false;
            }
            match self.next_result_within(STOP_LOOK) {
                Waited::Record(done) => sink(done),
                Waited::Later => {}
                // Nothing comes back (the engine is gone): never spin.
                Waited::Nothing => return true,
            }
        }
        true
    }

    /// A finished record if one is ready, without waiting.
    pub fn try_result(&mut self) -> Option<Finished> {
        if self.received.is_empty() {
            let batch = self.results.try_recv().ok()?;
            self.received.extend(batch);
        }
        self.hand_out()
    }

    /// The next finished record, waiting for it; `None` once nothing is outstanding.
    pub fn next_result(&mut self) -> Option<Finished> {
        if self.outstanding == 0 {
            return None;
        }
        while self.received.is_empty() {
            let batch = self.results.recv().ok()?;
            self.received.extend(batch);
        }
        self.hand_out()
    }

    /// The next finished record, waiting at most `wait` for it.
    pub fn next_result_within(&mut self, wait: Duration) -> Waited {
        if self.outstanding == 0 {
            return Waited::Nothing;
        }
        if self.received.is_empty() {
            match self.results.recv_timeout(wait) {
                Ok(batch) => self.received.extend(batch),
                Err(mpsc::RecvTimeoutError::Timeout) => return Waited::Later,
                Err(mpsc::RecvTimeoutError::Disconnected) => return Waited::Nothing,
            }
        }
        self.hand_out().map_or(Waited::Later, Waited::Record)
    }

    /// Takes back records the caller has written: the engine that made
    /// them writes new ones in them (the UDP engine; the other drops them).
    pub fn recycle(&mut self, done: impl IntoIterator<Item = Finished>) {
        if let Some(Backend::Slots(engine)) = &self.backend {
            self.spent.extend(done);
            if self.spent.len() >= 256 {
                engine.give_back(std::mem::take(&mut self.spent));
            }
        }
    }

    fn hand_out(&mut self) -> Option<Finished> {
        let done = self.received.pop_front()?;
        self.outstanding = self.outstanding.saturating_sub(1);
        Some(done)
    }

    /// No more input: the engine stops once everything is resolved.
    pub fn close_input(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        match self.backend.as_ref() {
            Some(Backend::Slots(engine)) => engine.close(),
            Some(Backend::Tasks { shared, .. }) => shared.board.close_input(),
            None => {}
        }
    }

    /// The counters so far.
    pub fn summary(&self) -> LookupSummary {
        self.probe().summary()
    }

    /// A handle that reads the counters from another thread (for interval
    /// statistics and progress while this thread feeds and drains).
    pub fn probe(&self) -> LookupProbe {
        let source = match self.backend.as_ref() {
            Some(Backend::Slots(engine)) => Source::Slots(engine.published()),
            Some(Backend::Tasks { shared, .. }) => Source::Tasks(shared.clone()),
            None => Source::Slots(Default::default()),
        };
        LookupProbe {
            source,
            run: self.run.clone(),
            net: self.net.clone(),
            started: self.started,
        }
    }

    /// Names resolved so far (records handed out or queued).
    pub fn finished_count(&self) -> u64 {
        self.run.names.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The local addresses of the UDP engine's sockets (none for the other engine).
    pub fn local_addrs(&self) -> Vec<std::net::SocketAddr> {
        match self.backend.as_ref() {
            Some(Backend::Slots(engine)) => engine.locals().to_vec(),
            _ => Vec::new(),
        }
    }

    /// Stops the engine and waits briefly for it.
    pub fn shutdown(mut self) {
        self.close_input();
        match self.backend.take() {
            Some(Backend::Slots(engine)) => engine.shutdown(),
            Some(Backend::Tasks { runtime, .. }) => {
                runtime.shutdown_timeout(Duration::from_millis(100))
            }
            None => {}
        }
    }
}

/// What [`LookupEngine::next_result_within`] found.
pub enum Waited {
    /// A finished record.
    Record(Finished),
    /// None in the time given; names are still outstanding.
    Later,
    /// Nothing is outstanding: every name has its record.
    Nothing,
}

/// Where a probe reads the nameservers' counters.
#[derive(Clone)]
enum Source {
    Tasks(Arc<Shared>),
    Slots(slots::Published),
}

/// Reads a running lookup's counters from any thread.
#[derive(Clone)]
pub struct LookupProbe {
    source: Source,
    run: Arc<RunCounters>,
    net: Arc<NetCounters>,
    started: Instant,
}

impl LookupProbe {
    /// The counters so far.
    pub fn summary(&self) -> LookupSummary {
        let nameservers: Vec<(String, Arc<NameserverStats>)> = match &self.source {
            // Iterative runs have no nameservers of their own (only the board's route).
            Source::Tasks(shared) if shared.iterative.is_some() => Vec::new(),
            Source::Tasks(shared) => shared
                .board
                .nameservers()
                .iter()
                .map(|ns| (ns.endpoint.resolver_name(), ns.stats.clone()))
                .collect(),
            Source::Slots(published) => dnsluice_core::sync::lock(published).clone(),
        };
        let mut summary = LookupSummary::gather(
            &self.run,
            &self.net,
            nameservers
                .iter()
                .map(|(name, stats)| (name.clone(), &**stats)),
            self.started.elapsed(),
        );
        if let Source::Tasks(shared) = &self.source {
            if let Some(resolver) = shared.iterative.as_deref() {
                summary.connections_reused = resolver
                    .authorities
                    .reused
                    .load(std::sync::atomic::Ordering::Relaxed);
                summary.timeouts = resolver
                    .counters
                    .timeouts
                    .load(std::sync::atomic::Ordering::Relaxed);
                summary.iterative = Some(IterativeSummary::gather(resolver));
            }
        }
        summary
    }
}

/// Raises the soft limit on open files to the hard limit: each worker keeps
/// connections (up to 64), and 100 workers over several nameservers pass the
/// usual soft limit of 1024.
fn raise_open_file_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own; setrlimit only reads it.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            // Failing leaves the old limit: connects may then fail, each with its error.
            let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

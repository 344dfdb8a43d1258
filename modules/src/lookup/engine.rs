//! A lookup run: a tokio runtime with the workers, the board they take work
//! from, and the channel their result records come back on.
//!
//! The engine is driven from ordinary (synchronous) code: [`LookupEngine::submit`]
//! offers one input line, waiting for room when the run is at its bound of
//! outstanding names (and handing out finished records meanwhile, so a single
//! thread can both feed and drain it), [`LookupEngine::next_result`] returns
//! finished records, and [`LookupEngine::summary`] the counters.

use super::config::LookupConfig;
use super::iterative::summary::IterativeSummary;
use super::job::parse_line;
use super::record::Finished;
use super::shared::Shared;
use super::stats::LookupSummary;
use super::worker;
use dnsluice_net::{Endpoint, NetError};
use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// A running lookup; see the module docs.
pub struct LookupEngine {
    runtime: tokio::runtime::Runtime,
    shared: Arc<Shared>,
    results: mpsc::Receiver<Finished>,
    permits: Arc<Semaphore>,
    outstanding: u64,
    next_index: u64,
    started: Instant,
    closed: bool,
    /// Pinned nameservers already parsed (a host name is resolved once).
    endpoints: HashMap<String, Endpoint>,
}

impl LookupEngine {
    /// Starts the workers. Fails on TLS setup problems (a CA file that does not load).
    pub fn start(config: LookupConfig) -> Result<LookupEngine, NetError> {
        raise_open_file_limit();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2.min(std::thread::available_parallelism().map_or(1, |n| n.get())))
            .thread_name("dnsluice-lookup")
            .enable_all()
            .build()
            .map_err(NetError::Runtime)?;
        let threads = config.threads.max(1);
        let inflight = config.inflight.max(1);
        let (results_tx, results) = mpsc::channel();
        let shared = Arc::new(Shared::new(config, results_tx)?);
        for id in 0..threads {
            runtime.spawn(worker::run(shared.clone(), id));
        }
        // Outstanding names at most: enough to keep every queue and worker busy.
        let bound = (4 * threads * inflight).clamp(64, 1 << 20);
        Ok(LookupEngine {
            runtime,
            shared,
            results,
            permits: Arc::new(Semaphore::new(bound)),
            outstanding: 0,
            next_index: 0,
            started: Instant::now(),
            closed: false,
            endpoints: HashMap::new(),
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
        let job = match parse_line(
            index,
            line,
            self.shared.config.transport,
            &mut self.endpoints,
        ) {
            Ok(job) => job,
            Err(bad) => {
                self.shared.run.finished("ERROR");
                sink(worker::bad_line_record(
                    index,
                    &bad.name,
                    &bad.reason,
                    &self.shared.config.style,
                ));
                return true;
            }
        };
        if job.pinned.is_some() && self.shared.iterative.is_some() {
            self.shared.run.finished("ERROR");
            let reason = "a line pinned to a nameserver cannot be resolved iteratively \
                          (the walk starts at the root servers)";
            sink(worker::bad_line_record(
                index,
                &job.name,
                reason,
                &self.shared.config.style,
            ));
            return true;
        }
        let ns = match &job.pinned {
            Some(endpoint) => self.shared.board.nameserver(endpoint),
            None => match self.shared.board.choose() {
                Some(ns) => ns,
                None => {
                    self.shared.run.finished("ERROR");
                    let reason =
                        "no nameserver: give --name-servers or pin the line (name,nameserver)";
                    sink(worker::bad_line_record(
                        index,
                        &job.name,
                        reason,
                        &self.shared.config.style,
                    ));
                    return true;
                }
            },
        };
        self.wait_for_room(sink);
        self.outstanding += 1;
        self.shared.board.offer(job, &ns);
        true
    }

    fn wait_for_room(&mut self, sink: &mut dyn FnMut(Finished)) {
        loop {
            if self.permits.try_acquire().map(|p| p.forget()).is_ok() {
                return;
            }
            match self.next_result() {
                Some(done) => sink(done),
                // Nothing outstanding yet no permit: cannot happen, but never spin.
                None => return,
            }
        }
    }

    /// A finished record if one is ready, without waiting.
    pub fn try_result(&mut self) -> Option<Finished> {
        let done = self.results.try_recv().ok()?;
        self.returned();
        Some(done)
    }

    /// The next finished record, waiting for it; `None` once nothing is outstanding.
    pub fn next_result(&mut self) -> Option<Finished> {
        if self.outstanding == 0 {
            return None;
        }
        let done = self.results.recv().ok()?;
        self.returned();
        Some(done)
    }

    fn returned(&mut self) {
        self.outstanding -= 1;
        self.permits.add_permits(1);
    }

    /// No more input: workers stop once everything is resolved.
    pub fn close_input(&mut self) {
        if !self.closed {
            self.closed = true;
            self.shared.board.close_input();
        }
    }

    /// The counters so far.
    pub fn summary(&self) -> LookupSummary {
        self.probe().summary()
    }

    /// A handle that reads the counters from another thread (for interval
    /// statistics and progress while this thread feeds and drains).
    pub fn probe(&self) -> LookupProbe {
        LookupProbe {
            shared: self.shared.clone(),
            started: self.started,
        }
    }

    /// Names resolved so far (records handed out or queued).
    pub fn finished_count(&self) -> u64 {
        self.shared
            .run
            .names
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Tells the workers to stop and waits briefly for them.
    pub fn shutdown(mut self) {
        self.close_input();
        let LookupEngine { runtime, .. } = self;
        runtime.shutdown_timeout(Duration::from_millis(100));
    }
}

/// Reads a running lookup's counters from any thread.
#[derive(Clone)]
pub struct LookupProbe {
    shared: Arc<Shared>,
    started: Instant,
}

impl LookupProbe {
    /// The counters so far.
    pub fn summary(&self) -> LookupSummary {
        let nameservers = self.shared.board.nameservers();
        // Iterative runs have no nameservers of their own (only the board's route).
        let listed = if self.shared.iterative.is_some() {
            &nameservers[..0]
        } else {
            &nameservers[..]
        };
        let mut summary = LookupSummary::gather(
            &self.shared.run,
            &self.shared.net,
            listed
                .iter()
                .map(|ns| (ns.endpoint.resolver_name(), &ns.stats)),
            self.started.elapsed(),
        );
        if let Some(resolver) = self.shared.iterative.as_deref() {
            summary.connections_reused = resolver
                .authorities
                .reused
                .load(std::sync::atomic::Ordering::Relaxed);
            summary.iterative = Some(IterativeSummary::gather(resolver));
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

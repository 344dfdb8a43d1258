//! `output.dnscli`: a DNS client replaying queries to a server over UDP, TCP,
//! TLS (DNS-over-TLS) or HTTPS (DNS-over-HTTPS, HTTP/2, POST or GET).
//!
//! Each query is matched to its answer (id and question), with a per-query
//! timeout and at most `inflight` queries outstanding. The capture's source
//! addresses are spread over `clients` simulated clients, each with its own
//! UDP socket or connection (reused and pipelined on TCP and TLS, one HTTP/2
//! connection with a stream per query on HTTPS), so the server sees many
//! clients. A truncated UDP answer is retried over TCP when `tcp_fallback` is on.
//!
//! Over UDP, TCP and TLS the chain's thread writes each query straight to its
//! client's socket and one receiver thread reads every answer (`direct`: no
//! task, timer or channel per query). Over HTTPS the stage owns a tokio
//! runtime (`https_threads` worker threads) running h2, and hands each query over a
//! bounded channel.
//! When `responses` names a file, every query's outcome (answer or error,
//! with the latency) is written there as a JSON line ([`Object::Response`]),
//! and [`DnsCli::with_responses`] hands them to any receiver.
//!
//! `filter.dnscli` is the same client in the middle of a chain ([`chain`]):
//! queries come in, and the responses go on to the next stage as
//! [`Object::Response`]s, pushed (`input → … → filter.dnscli → output.json`)
//! or pulled (the next stage asks for the next response).
//!
//! Counters (see [`tally::keys`]): `sent`, `answered`, `timeouts`, `errors`,
//! `connections_opened`, `tls_handshakes`, `rcode.*`, `latency_us.*`; every
//! query sent ends in exactly one of answered, timeouts and errors.

pub mod chain;
mod direct;
mod doh;
pub(crate) mod outcome;
pub mod tally;

use crate::clients::{query_bytes, ClientMap};
use crate::output::json::JsonLines;
use dnsluice_core::registry::ModuleEntry;
use dnsluice_core::{Object, Receiver, StageError, StageStats};
use dnsluice_net::{ClientOptions, ClientSetup, DnsTransport, Endpoint, NetCounters};
use dnsluice_options::Options;
use doh::{DohShared, Job};
use outcome::{hand_on, Outcome};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

const MODULE: &str = "output.dnscli";

/// Queries waiting in the channel between the chain and the runtime.
const QUEUE: usize = 1024;
/// The most a growing window holds (see `DnsCliOptions::grow_inflight`).
pub const MAX_GROWN_INFLIGHT: usize = 100_000;

/// Options of the replay client, `filter.dnscli`'s and (with `responses`)
/// `output.dnscli`'s.
#[derive(Debug, Clone, Options)]
#[options(hint(
    responses = "each response goes on to the next stage; to write them, put an output stage after this one (output.json, output.pcap)"
))]
pub struct DnsCliOptions {
    /// The server: `IP:PORT`, `[IPv6]:PORT`, `HOST:PORT`, or for https a URL
    /// `https://HOST:PORT/PATH`.
    pub server: String,
    /// Transport, timeout, TCP fallback, DoH method and certificates.
    #[option(flatten)]
    pub client: ClientOptions,
    /// Simulated clients: the capture's sources are spread over this many
    /// sockets or connections, so the server sees many clients.
    #[option(default = 1, range = 1..=100_000)]
    pub clients: u32,
    /// Queries outstanding at most, over all clients (dnsperf's -q); with
    /// grow_inflight, where the window starts.
    #[option(default = 100, range = 1..=1_000_000)]
    pub inflight: u32,
    /// Let the in-flight window grow, doubling whenever it is full and no
    /// query timed out since it last grew, up to 100,000 (udp, tcp, tls): a
    /// pace of R queries/s to a server T seconds away needs R × T in flight.
    /// For paced replays: `dnsluice replay` turns it on when it paces
    /// (--rate, --speed, --keep-timing) and --inflight is not given. As fast
    /// as possible, a growing window would grow until the server drops.
    #[option(default)]
    pub grow_inflight: bool,
    /// How long a connect and TLS handshake may take.
    #[option(default = Duration::from_secs(5), range = Duration::from_millis(1)..=Duration::from_secs(3600))]
    pub connect_timeout: Duration,
    /// Threads of the HTTPS client runtime (udp, tcp and tls send from the
    /// chain's thread and receive on one more).
    #[option(default = 1, range = 1..=256)]
    pub https_threads: u32,
    /// Queries a client holds to send them together (udp: one `sendmmsg`;
    /// tcp: one write; tls: one record), for replays as fast as possible.
    ///
    /// They also go when the window fills and at the end. Keep 1 when
    /// pacing; https ignores it.
    #[option(default = 1, range = 1..=1024)]
    pub send_batch: u32,
}

/// Options of `output.dnscli`.
#[derive(Debug, Clone, Options)]
pub struct DnsCliOutputOptions {
    /// The client.
    #[option(flatten)]
    pub cli: DnsCliOptions,
    /// Write every query's outcome here: JSON lines (answer or error,
    /// latency), or for a `.pcap`/`.pcapng` file made-up UDP packets (the
    /// query and its answer); `-` is standard output.
    pub responses: Option<PathBuf>,
}

/// The DNS client stage; see the module docs.
pub struct DnsCli {
    /// The engine for UDP, TCP and TLS; `None` for HTTPS (the runtime's).
    direct: Option<direct::Direct>,
    /// Outcomes taken from `direct`, reused.
    direct_outcomes: Vec<Outcome>,
    runtime: Option<tokio::runtime::Runtime>,
    jobs: Option<mpsc::Sender<Job>>,
    dispatcher: Option<tokio::task::JoinHandle<()>>,
    outcomes: Option<mpsc::UnboundedReceiver<Outcome>>,
    responses: Option<Box<dyn Receiver>>,
    shared: Arc<DohShared>,
    map: ClientMap,
    server_name: String,
    inflight: usize,
    skipped: u64,
    /// Responses handed to the responses receiver.
    handed_on: u64,
    /// The module name the counters go under: `filter.dnscli` when the
    /// responses go to the next stage of a chain, whose counters then
    /// follow this stage's.
    module: &'static str,
}

impl DnsCli {
    /// A client with `options`, its runtime started (no connection is opened
    /// before the first query).
    pub fn new(options: &DnsCliOptions, responses: Option<&Path>) -> Result<Self, StageError> {
        let bad = |key: &str, message: String| StageError::option(MODULE, Some(key), message);
        let ClientOptions {
            transport,
            timeout,
            tcp_fallback,
            doh_method: method,
            tls,
        } = options.client.clone();
        if tls.insecure && tls.ca_file.is_some() {
            return Err(StageError::config(
                MODULE,
                "`insecure` and `ca_file` exclude each other: verify against the CA file, or not at all",
            ));
        }
        let endpoint = Endpoint::parse(&options.server, transport)
            .map_err(|e| bad("server", e.to_string()))?;
        let counters = Arc::new(NetCounters::default());
        let connect_timeout = options.connect_timeout;
        let setup = ClientSetup::new(transport, &tls, connect_timeout, method, counters.clone())
            .map_err(|e| StageError::config(MODULE, e.to_string()))?;
        let responses = match responses {
            Some(path) => Some(responses_writer(path)?),
            None => None,
        };
        if transport != DnsTransport::Https {
            let plan = direct::Plan {
                endpoint: endpoint.clone(),
                tls,
                tcp_retry: tcp_fallback,
                connect_timeout,
                timeout,
                clients: options.clients,
                inflight: match options.grow_inflight {
                    false => (options.inflight as usize, options.inflight as usize),
                    true => (options.inflight as usize, MAX_GROWN_INFLIGHT),
                },
                keep_outcomes: responses.is_some(),
                send_batch: options.send_batch as usize,
            };
            let engine = direct::Direct::start(plan, counters.clone())
                .map_err(|e| StageError::config(MODULE, e.to_string()))?;
            return Ok(DnsCli {
                direct: Some(engine),
                direct_outcomes: Vec::new(),
                runtime: None,
                jobs: None,
                dispatcher: None,
                outcomes: None,
                responses,
                shared: Arc::new(DohShared {
                    endpoint: endpoint.clone(),
                    setup,
                    timeout,
                    clients: Vec::new(),
                    tally: Mutex::new(tally::Tally::new()),
                    counters,
                }),
                map: ClientMap::new(options.clients),
                server_name: endpoint.resolver_name(),
                inflight: options.inflight as usize,
                skipped: 0,
                handed_on: 0,
                module: MODULE,
            });
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(options.https_threads as usize)
            .thread_name("dnscli")
            .enable_all()
            .build()
            .map_err(|e| {
                StageError::other(MODULE, format!("cannot start the client runtime: {e}"))
            })?;
        let server_name = endpoint.resolver_name();
        let shared = Arc::new(DohShared {
            endpoint,
            setup,
            timeout,
            clients: (0..options.clients).map(|_| Default::default()).collect(),
            tally: Mutex::new(tally::Tally::new()),
            counters,
        });
        let mut cli = DnsCli {
            direct: None,
            direct_outcomes: Vec::new(),
            runtime: Some(runtime),
            jobs: None,
            dispatcher: None,
            outcomes: None,
            responses: None,
            shared,
            map: ClientMap::new(options.clients),
            server_name,
            inflight: options.inflight as usize,
            skipped: 0,
            handed_on: 0,
            module: MODULE,
        };
        let inflight = cli.inflight;
        cli.start(inflight, false, responses);
        Ok(cli)
    }

    /// Hands every query's outcome, as an [`Object::Response`], to `receiver`
    /// (replacing the `responses` file, if any). Call before the first query.
    pub fn with_responses(mut self, receiver: Box<dyn Receiver>) -> Self {
        if let Some(direct) = &self.direct {
            direct.keep_outcomes();
            self.responses = Some(receiver);
            return self;
        }
        let inflight = self.inflight;
        self.stop_dispatcher();
        self.start(inflight, false, Some(receiver));
        self
    }

    /// [`DnsCli::with_responses`] for the next stage of a chain: its counters
    /// are reported after this stage's.
    pub fn into_filter(self, next: Box<dyn Receiver>) -> Self {
        let mut cli = self.with_responses(next);
        cli.module = chain::MODULE;
        cli
    }

    /// Keeps every query's outcome for [`DnsCli::take_ready`] (the pull form).
    /// Call before the first query.
    pub(crate) fn keep_outcomes(mut self) -> Self {
        self.module = chain::MODULE;
        if let Some(direct) = &self.direct {
            direct.keep_outcomes();
            return self;
        }
        let inflight = self.inflight;
        self.stop_dispatcher();
        self.start(inflight, true, None);
        self
    }

    /// Moves the outcomes that are ready to `into` (after
    /// [`DnsCli::keep_outcomes`]; without it there are none).
    pub(crate) fn take_ready(&mut self, into: &mut std::collections::VecDeque<Outcome>) {
        if let Some(direct) = &self.direct {
            direct.take_outcomes(&mut self.direct_outcomes);
            into.extend(self.direct_outcomes.drain(..));
            return;
        }
        if let Some(outcomes) = &mut self.outcomes {
            while let Ok(outcome) = outcomes.try_recv() {
                into.push_back(outcome);
            }
        }
    }

    /// Starts the HTTPS dispatcher. With `keep` or `responses`, outcomes are
    /// kept for [`DnsCli::take_ready`] or handed to `responses`.
    fn start(&mut self, inflight: usize, keep: bool, responses: Option<Box<dyn Receiver>>) {
        let Some(runtime) = &self.runtime else { return };
        let (jobs_tx, jobs_rx) = mpsc::channel(QUEUE);
        // Unbounded, so that no outcome is ever dropped: with a receiver they
        // are drained at each query sent (at most `inflight` + `QUEUE` + 1
        // wait), but kept for `take_ready` they wait for as long as the caller
        // sends (`diff --reask` sends up to 65,535 first; a channel sized for
        // the first case dropped all but about 1,100 of them).
        let (outcomes_tx, outcomes_rx) = if keep || responses.is_some() {
            let (tx, rx) = mpsc::unbounded_channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        self.dispatcher = Some(runtime.spawn(doh::dispatch(
            self.shared.clone(),
            jobs_rx,
            inflight,
            outcomes_tx,
        )));
        self.jobs = Some(jobs_tx);
        self.outcomes = outcomes_rx;
        self.responses = responses;
    }

    fn stop_dispatcher(&mut self) {
        self.jobs = None;
        if let (Some(runtime), Some(dispatcher)) = (&self.runtime, self.dispatcher.take()) {
            let _ = runtime.block_on(dispatcher);
        }
    }

    /// Hands the outcomes that are ready to the responses receiver.
    fn drain(&mut self) -> Result<(), StageError> {
        if let Some(direct) = &self.direct {
            let Some(receiver) = &mut self.responses else {
                return Ok(());
            };
            direct.take_outcomes(&mut self.direct_outcomes);
            for outcome in self.direct_outcomes.drain(..) {
                self.handed_on += 1;
                hand_on(&outcome, &self.server_name, receiver.as_mut())?;
            }
            return Ok(());
        }
        // Without a receiver the outcomes stay queued for `take_ready`.
        let (Some(outcomes), Some(receiver)) = (&mut self.outcomes, &mut self.responses) else {
            return Ok(());
        };
        while let Ok(outcome) = outcomes.try_recv() {
            self.handed_on += 1;
            hand_on(&outcome, &self.server_name, receiver.as_mut())?;
        }
        Ok(())
    }

    /// The server as responses name it.
    pub(crate) fn server_name(&self) -> &str {
        &self.server_name
    }
}

impl Receiver for DnsCli {
    fn receive(&mut self, obj: &mut Object<'_>) -> Result<(), StageError> {
        let Some(query) = query_bytes(obj) else {
            self.skipped += 1;
            return Ok(());
        };
        let client = self.map.client_for_object(obj);
        self.submit(client, query)
    }

    fn finish(&mut self) -> Result<(), StageError> {
        self.finish_client()
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        self.client_stats(out)
    }
}

impl DnsCli {
    /// Sends `query` (a DNS message) from simulated client `client`.
    pub(crate) fn submit(&mut self, client: u32, query: &[u8]) -> Result<(), StageError> {
        self.drain()?;
        if let Some(direct) = &mut self.direct {
            direct.submit(client, query);
            return Ok(());
        }
        let Some(jobs) = &self.jobs else {
            return Err(StageError::other(MODULE, "the client has finished"));
        };
        let job = Job {
            client,
            query: query.to_vec(),
        };
        jobs.blocking_send(job)
            .map_err(|_| StageError::other(MODULE, "the client runtime stopped"))
    }

    /// Waits for every answer (or its timeout), hands the rest on, stops.
    pub(crate) fn finish_client(&mut self) -> Result<(), StageError> {
        if let Some(direct) = &mut self.direct {
            direct.finish();
        }
        self.stop_dispatcher();
        // Every query task has finished: the rest of the outcomes are queued.
        self.drain()?;
        if let Some(receiver) = &mut self.responses {
            receiver.finish()?;
        }
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(Duration::from_secs(1));
        }
        Ok(())
    }

    fn client_stats(&self, out: &mut Vec<StageStats>) {
        let tally = match &self.direct {
            Some(direct) => direct.tally(),
            None => self.shared.tally().clone(),
        };
        let mut stats = tally.stats(self.module, &self.shared.counters);
        if let Some(direct) = &self.direct {
            window_report(direct.window(), &mut stats);
        }
        stats.add_counter(tally::keys::SKIPPED, self.skipped);
        stats.input += self.skipped;
        let in_chain = self.module == chain::MODULE;
        if in_chain {
            // Pulled, `chain::ResponseProducer` counts what it hands out instead.
            stats.output = self.handed_on;
        }
        out.push(stats);
        if let (true, Some(next)) = (in_chain, &self.responses) {
            next.stats(out);
        }
    }
}

/// The window's size at the end (`inflight_window`), its cap
/// (`inflight_cap`) and the times the sender found it full at its cap
/// (`window_full`): what says whether the window held a pace back.
fn window_report((max, cap, bound): (usize, usize, u64), stats: &mut StageStats) {
    stats.add_counter(tally::keys::INFLIGHT_WINDOW, max as u64);
    stats.add_counter(tally::keys::INFLIGHT_CAP, cap as u64);
    stats.add_counter(tally::keys::WINDOW_FULL, bound);
}

/// When a paced chain fell behind (`filter.timing`'s `late`) while this
/// client's window was full at its cap: why, which cap, and what to raise.
pub fn window_hint(stats: &[StageStats]) -> Option<String> {
    let late = stats
        .iter()
        .find(|s| s.module == "filter.timing")
        .and_then(|s| s.counters.get("late"))?;
    let client = stats
        .iter()
        .find(|s| s.module == MODULE || s.module == chain::MODULE)?;
    let count = |key: &str| client.counters.get(key).copied().unwrap_or(0);
    let (full, cap) = (
        count(tally::keys::WINDOW_FULL),
        count(tally::keys::INFLIGHT_CAP),
    );
    if *late == 0 || full == 0 {
        return None;
    }
    let p50_ms = count("latency_us.p50") as f64 / 1000.0;
    Some(format!(
        "the pace was held back by the in-flight window: it was full at its cap of {cap} \
         queries {full} times, and answers took {p50_ms:.1} ms at the median, so a pace of R \
         queries/s needs about R × {:.3} in flight: raise --inflight (inflight)",
        p50_ms / 1000.0
    ))
}

/// The registry entry.
pub fn entry() -> ModuleEntry {
    ModuleEntry::output(
        MODULE,
        "DNS client: replay queries over udp, tcp, tls or https, match answers, time them",
        |o: DnsCliOutputOptions| Ok(Box::new(DnsCli::new(&o.cli, o.responses.as_deref())?)),
    )
}

/// Where `responses = PATH` goes: a capture file for `.pcap` / `.pcapng`
/// (query and answer as UDP packets, see `crate::synth`), else JSON lines.
fn responses_writer(path: &std::path::Path) -> Result<Box<dyn Receiver>, StageError> {
    use crate::output::pcap::{Format, PcapOutputOptions, PcapWriter, Resolution};
    let format = match path.extension().and_then(|e| e.to_str()) {
        Some("pcap") => Format::Pcap,
        Some("pcapng") => Format::Pcapng,
        _ => return Ok(Box::new(JsonLines::create(path.to_path_buf())?)),
    };
    Ok(Box::new(PcapWriter::create(PcapOutputOptions {
        path: path.to_path_buf(),
        format,
        resolution: Resolution::Ns,
        snaplen: 65535,
    })?))
}

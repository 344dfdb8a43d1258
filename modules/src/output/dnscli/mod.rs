//! `output.dnscli`: a DNS client replaying queries to a server over UDP, TCP,
//! TLS (DNS-over-TLS) or HTTPS (DNS-over-HTTPS, HTTP/2, POST or GET).
//!
//! Each query is matched to its answer (id and question), with a per-query
//! timeout and at most `inflight` queries outstanding. The capture's source
//! addresses are spread over `clients` simulated clients, each with its own
//! UDP socket or connection (reused and pipelined on TCP and TLS, one HTTP/2
//! connection with a stream per query on HTTPS), so the server sees many
//! clients. A truncated UDP answer is retried over TCP when `tcp_retry` is on.
//!
//! Over UDP, TCP and TLS the chain's thread writes each query straight to its
//! client's socket and one receiver thread reads every answer (`direct`: no
//! task, timer or channel per query). Over HTTPS the stage owns a tokio
//! runtime (`threads` worker threads) running h2, and hands each query over a
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
mod outcome;
pub mod tally;

use crate::clients::{query_bytes, ClientMap};
use crate::output::json::JsonLines;
use dnsluice_core::registry::{Factory, ModuleEntry, OptionDoc, StageOptions};
use dnsluice_core::{Object, Receiver, StageError, StageStats};
use dnsluice_net::{ClientSetup, DohMethod, Endpoint, NetCounters, TlsOptions, Transport};
use doh::{Job, Shared};
use outcome::{hand_on, Outcome};
use serde::Deserialize;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

const MODULE: &str = "output.dnscli";

/// Queries waiting in the channel between the chain and the runtime.
const QUEUE: usize = 1024;

/// Options of `output.dnscli`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DnsCliOptions {
    /// The server: `IP:PORT`, `[IPv6]:PORT`, `HOST:PORT`, or for HTTPS a URL.
    pub server: String,
    /// `udp`, `tcp`, `tls` or `https`.
    #[serde(default = "default_transport")]
    pub transport: String,
    /// Simulated clients (sockets or connections); sources are spread over them.
    #[serde(default = "one")]
    pub clients: u32,
    /// Queries outstanding at most, over all clients.
    #[serde(default = "default_inflight")]
    pub inflight: u32,
    /// Per-query timeout in milliseconds.
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
    /// Connect (and TLS handshake) timeout in milliseconds.
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout_ms: u64,
    /// Retry a truncated (TC=1) UDP answer over TCP.
    #[serde(default = "yes")]
    pub tcp_retry: bool,
    /// PEM file of the CA(s) to trust for TLS and HTTPS (default: the system's).
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Do not verify the server's certificate (test servers only).
    #[serde(default)]
    pub insecure: bool,
    /// The name the certificate must carry (default: the URL's host, else the IP).
    #[serde(default)]
    pub tls_name: Option<String>,
    /// `post` or `get`, for HTTPS.
    #[serde(default = "default_method")]
    pub method: String,
    /// Tokio worker threads for HTTPS (UDP, TCP and TLS always use the chain's
    /// thread to send and one receiver thread).
    #[serde(default = "one")]
    pub threads: u32,
    /// Write every query's outcome as a JSON line here (`-` for stdout).
    #[serde(default)]
    pub responses: Option<PathBuf>,
    /// Queries a client holds to send them together (UDP: one `sendmmsg`;
    /// TCP: one write; TLS: one record), for replays as fast as possible.
    /// 1 sends each query as it comes. HTTPS ignores it.
    #[serde(default = "one")]
    pub send_batch: u32,
}

fn default_transport() -> String {
    "udp".to_string()
}
fn one() -> u32 {
    1
}
fn yes() -> bool {
    true
}
fn default_inflight() -> u32 {
    100
}
fn default_timeout() -> u64 {
    2000
}
fn default_connect_timeout() -> u64 {
    5000
}
fn default_method() -> String {
    "post".to_string()
}

const OPTIONS: &[OptionDoc] = &[
    OptionDoc {
        name: "server",
        kind: "string",
        default: "",
        help: "IP:PORT, HOST:PORT, or https://HOST:PORT/PATH for https",
    },
    OptionDoc {
        name: "transport",
        kind: "string",
        default: "\"udp\"",
        help: "udp, tcp, tls (DNS-over-TLS) or https (DNS-over-HTTPS, HTTP/2)",
    },
    OptionDoc {
        name: "clients",
        kind: "integer",
        default: "1",
        help:
            "simulated clients: the capture's sources are spread over this many sockets/connections",
    },
    OptionDoc {
        name: "inflight",
        kind: "integer",
        default: "100",
        help: "queries outstanding at most (over all clients)",
    },
    OptionDoc {
        name: "timeout_ms",
        kind: "integer",
        default: "2000",
        help: "per-query timeout",
    },
    OptionDoc {
        name: "connect_timeout_ms",
        kind: "integer",
        default: "5000",
        help: "connect and TLS handshake timeout",
    },
    OptionDoc {
        name: "tcp_retry",
        kind: "bool",
        default: "true",
        help: "retry a truncated (TC=1) UDP answer over TCP",
    },
    OptionDoc {
        name: "ca_file",
        kind: "string",
        default: "(system roots)",
        help: "PEM file of CA certificates to trust (tls, https)",
    },
    OptionDoc {
        name: "insecure",
        kind: "bool",
        default: "false",
        help: "do not verify the server certificate (test servers only)",
    },
    OptionDoc {
        name: "tls_name",
        kind: "string",
        default: "(URL host or IP)",
        help: "name the server certificate must carry, sent as SNI",
    },
    OptionDoc {
        name: "method",
        kind: "string",
        default: "\"post\"",
        help: "post or get (https)",
    },
    OptionDoc {
        name: "threads",
        kind: "integer",
        default: "1",
        help: "tokio worker threads for https (udp, tcp and tls use one sending and one receiving thread)",
    },
    OptionDoc {
        name: "send_batch",
        kind: "integer",
        default: "1",
        help: "queries each client holds to send together (udp: one sendmmsg; tcp: one write; tls: one record; they also go when the window fills and at the end); for replays as fast as possible, keep 1 when pacing",
    },
    OptionDoc {
        name: "responses",
        kind: "string",
        default: "(none)",
        help: "write each query's outcome here: as JSON lines (answer or error, latency), or, for a .pcap/.pcapng file, as made-up UDP packets (query and answer)",
    },
];

/// The DNS client stage; see the module docs.
pub struct DnsCli {
    /// The engine for UDP, TCP and TLS; `None` for HTTPS (the runtime's).
    direct: Option<direct::Direct>,
    /// Outcomes taken from `direct`, reused.
    direct_outcomes: Vec<Outcome>,
    runtime: Option<tokio::runtime::Runtime>,
    jobs: Option<mpsc::Sender<Job>>,
    dispatcher: Option<tokio::task::JoinHandle<()>>,
    outcomes: Option<mpsc::Receiver<Outcome>>,
    responses: Option<Box<dyn Receiver>>,
    shared: Arc<Shared>,
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
    pub fn new(options: &DnsCliOptions) -> Result<Self, StageError> {
        let bad = |key: &str, message: String| StageError::option(MODULE, Some(key), message);
        let transport: Transport = options
            .transport
            .parse()
            .map_err(|e: String| bad("transport", e))?;
        let method: DohMethod = options
            .method
            .parse()
            .map_err(|e: String| bad("method", e))?;
        if options.clients == 0 || options.clients > 100_000 {
            return Err(bad("clients", "must be 1..=100000".into()));
        }
        if options.inflight == 0 || options.inflight > 1_000_000 {
            return Err(bad("inflight", "must be 1..=1000000".into()));
        }
        if options.threads == 0 || options.threads > 256 {
            return Err(bad("threads", "must be 1..=256".into()));
        }
        if options.send_batch == 0 || options.send_batch > 1024 {
            return Err(bad("send_batch", "must be 1..=1024".into()));
        }
        if options.timeout_ms == 0 {
            return Err(bad("timeout_ms", "must be at least 1".into()));
        }
        if options.insecure && options.ca_file.is_some() {
            return Err(StageError::config(
                MODULE,
                "`insecure` and `ca_file` exclude each other: verify against the CA file, or not at all",
            ));
        }
        let endpoint = Endpoint::parse(&options.server, transport)
            .map_err(|e| bad("server", e.to_string()))?;
        let tls = TlsOptions {
            ca_file: options.ca_file.clone(),
            insecure: options.insecure,
            server_name: options.tls_name.clone(),
        };
        let counters = Arc::new(NetCounters::default());
        let connect_timeout = Duration::from_millis(options.connect_timeout_ms.max(1));
        let setup = ClientSetup::new(transport, &tls, connect_timeout, method, counters.clone())
            .map_err(|e| StageError::config(MODULE, e.to_string()))?;
        let responses = match &options.responses {
            Some(path) => Some(responses_writer(path)?),
            None => None,
        };
        if transport != Transport::Https {
            let plan = direct::Plan {
                endpoint: endpoint.clone(),
                tls,
                tcp_retry: options.tcp_retry,
                connect_timeout,
                timeout: Duration::from_millis(options.timeout_ms),
                clients: options.clients,
                inflight: options.inflight as usize,
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
                shared: Arc::new(Shared {
                    endpoint: endpoint.clone(),
                    setup,
                    timeout: Duration::from_millis(options.timeout_ms),
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
            .worker_threads(options.threads as usize)
            .thread_name("dnscli")
            .enable_all()
            .build()
            .map_err(|e| {
                StageError::other(MODULE, format!("cannot start the client runtime: {e}"))
            })?;
        let server_name = endpoint.resolver_name();
        let shared = Arc::new(Shared {
            endpoint,
            setup,
            timeout: Duration::from_millis(options.timeout_ms),
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
        cli.start(options.inflight as usize, false, responses);
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
        // Between two drains (one per query received) at most `inflight` running
        // queries and the `QUEUE` waiting ones (+1) can finish: with this room
        // a query task never waits to hand over its outcome.
        let (outcomes_tx, outcomes_rx) = if keep || responses.is_some() {
            let (tx, rx) = mpsc::channel(inflight + QUEUE + 2);
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

    fn finish(&mut self) -> Result<(), StageError> {
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

    fn stats(&self, out: &mut Vec<StageStats>) {
        let tally = match &self.direct {
            Some(direct) => direct.tally(),
            None => self.shared.tally().clone(),
        };
        let mut stats = tally.stats(self.module, &self.shared.counters);
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

/// The registry entry.
pub fn entry() -> ModuleEntry {
    ModuleEntry {
        name: MODULE,
        summary: "DNS client: replay queries over udp, tcp, tls or https, match answers, time them",
        options: OPTIONS,
        factory: Factory::Output(Arc::new(|opts: &StageOptions| {
            let o: DnsCliOptions = opts.parse()?;
            Ok(Box::new(DnsCli::new(&o)?) as Box<dyn Receiver>)
        })),
    }
}

/// Where `responses = PATH` goes: a capture file for `.pcap` / `.pcapng`
/// (query and answer as UDP packets, see `output::synth`), else JSON lines.
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

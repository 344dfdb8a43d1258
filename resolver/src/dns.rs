//! `lookup.dns`: the lookup engine as a chain stage. Lines (`input.lines`) go
//! in, one JSON record per line comes out (`output.json` writes it as it is);
//! blank and `#` lines get none (an empty line is a turn: nothing to look
//! up, but the records finished so far are passed on; `input.nats` gives
//! such turns while it waits). A record's `number` is its line's (a work
//! item's ticket, for `output.nats`). Objects that are not lines are passed on
//! untouched when pushed; pulled, they are counted (`not_lines`) and dropped
//! (a lending producer cannot hand on its upstream's object after pulling more).

use super::config::LookupConfig;
use super::engine::{LookupEngine, Waited};
use super::format::{OutputFormat, RecordStyle, Verbosity};
use super::iterative::IterativeOptions;
use super::modules::ModuleOptions;
use super::record::Finished;
use super::{LookupType, Scheduler};
use dnsluice_core::registry::ModuleEntry;
use dnsluice_core::{Object, Producer, Pulled, Receiver, StageError, StageStats, Text, TextKind};
use dnsluice_net::query::QueryOptions;
use dnsluice_net::{ClientOptions, DnsTransport};
use dnsluice_options::Options;
use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const MODULE: &str = "lookup.dns";

/// How long the pull form waits for a record at a time before it looks
/// whether the driver is due to look at the chain.
const LOOK: Duration = Duration::from_millis(10);

/// Options of `lookup.dns`, which are also `dnsluice lookup`'s flags
/// (`--name-servers` for `name_servers`).
#[derive(Debug, Clone, Options)]
pub struct LookupOptions {
    /// What to ask: a record type (A, MX, TYPEnnn, ...) or one of ZDNS's
    /// modules (ALOOKUP, MXLOOKUP, ...; docs/lookups.md lists them and what
    /// each asks).
    #[option(rename = "type", default = LookupType::Single(1))]
    pub qtype: LookupType,
    /// Nameservers for the names not pinned to one (`name,nameserver` lines):
    /// IP, IP:PORT, [IPv6]:PORT, or for https a URL https://HOST:PORT/PATH;
    /// @FILE reads them from a file, one per line (# comments). `dnsluice
    /// lookup` without them asks those of /etc/resolv.conf (and says so).
    #[option(default)]
    pub name_servers: Vec<String>,
    /// Transport, timeout, TCP fallback, DoH method and certificates.
    #[option(flatten)]
    pub client: ClientOptions,
    /// Names resolved at once in a UDP lookup of one record type: each is a
    /// slot of the in-flight table, as massdns's --hashmap-size (over a
    /// network, names per second are about this over the round trip; the
    /// pacing keeps it polite). The modules, TCP, TLS and HTTPS use
    /// --workers and --inflight-per-worker.
    #[option(default = 10_000, range = 1..=1_000_000)]
    pub inflight: usize,
    /// Workers (tokio tasks), each keeping its own connections: ZDNS's
    /// `--threads`. For TCP, TLS and HTTPS lookups, the modules (ALOOKUP,
    /// MXLOOKUP, ...) and --iterative. Default: 100 over TCP, TLS and
    /// HTTPS (connections kept), 1,000 for the modules over UDP and for
    /// --iterative.
    #[option(default, range = 1..=100_000, flag_alias = "threads")]
    pub workers: Option<usize>,
    /// Names each worker resolves at once, pipelined on its connection.
    #[option(default = 1, range = 1..=10_000)]
    pub inflight_per_worker: usize,
    /// Tries after the first, on a timeout, a failure, or an answer with an
    /// RCODE of --retry-rcodes, while --name-timeout lasts. Over UDP, one
    /// try in 50 lost each way leaves one name in ten billion unanswered
    /// after six tries.
    #[option(default = 5, range = 0..=100)]
    pub retries: u32,
    /// How long one name may take, every try (and, --iterative, every step
    /// and nested lookup) included: one budget (ZDNS's --timeout; our
    /// --timeout is the wait for each answer, ZDNS's --network-timeout),
    /// counted from its first query (the wait for --rate to let it go is
    /// not counted).
    #[option(default = Duration::from_secs(20), range = Duration::from_millis(1)..=Duration::from_secs(3600))]
    pub name_timeout: Duration,
    /// Answers with these RCODEs are asked again (on another nameserver
    /// when there are several) while the name's budget lasts, as massdns's
    /// --retry: a loaded or rate-limiting server refuses. The last such
    /// answer is the record when the budget runs out. Not with --iterative
    /// (its walk asks a zone's other servers).
    #[option(default = vec!["REFUSED".to_string(), "SERVFAIL".to_string()])]
    pub retry_rcodes: Vec<String>,
    /// Queries per second at most, to every nameserver together (no limit
    /// when not given); retries, TCP after TC=1, a module's questions and
    /// the steps of --iterative included. A name's budget (--name-timeout)
    /// starts when the rate lets its first query go.
    #[option(default, range = 1.0..=1e9)]
    pub rate: Option<f64>,
    /// Queries per second at most to each nameserver (not with
    /// --iterative, whose servers are the authorities it finds: use --rate).
    #[option(default, range = 1.0..=1e9)]
    pub rate_per_nameserver: Option<f64>,
    /// Adapt each nameserver's rate to what it does: fewer queries when it
    /// drops them (timeouts) or refuses above its usual share, more while
    /// it answers (additive increase, multiplicative decrease), within
    /// --rate-per-nameserver. UDP lookups of one record type with the
    /// sticky scheduler; the others hold to the caps as given.
    #[option(default = true)]
    pub adaptive_rate: bool,
    /// Source addresses of the queries, used in turn (IPv4 and IPv6; each
    /// must be an address of this machine).
    #[option(default)]
    pub local_addr: Vec<IpAddr>,
    /// How names are handed to workers: sticky (per-nameserver priority
    /// queues and a global queue, connections kept), fifo (input order,
    /// re-dial on a change of nameserver) or random (a new connection per
    /// query).
    #[option(default = Scheduler::Sticky)]
    pub scheduler: Scheduler,
    /// Sticky: how long a worker waits for work on its home queue before
    /// stealing (0s: at once).
    #[option(default = Duration::ZERO)]
    pub steal_wait: Duration,
    /// Set RD (recursion desired).
    #[option(default = true)]
    pub recursion_desired: bool,
    /// The EDNS UDP payload size to advertise; 0 sends no EDNS record.
    #[option(default = 1232)]
    pub edns_udp_size: u16,
    /// Set DO (DNSSEC OK).
    #[option(default)]
    pub dnssec_ok: bool,
    /// Iterative resolution from the root (--iterative and its settings).
    #[option(flatten)]
    pub iterative: IterativeOptions,
    /// NSLOOKUP, MXLOOKUP, AXFR (and ALOOKUP): look up the A records of the
    /// hosts found (the default for all but ALOOKUP, which asks A and AAAA,
    /// when neither this nor ipv6_lookup is set).
    #[option(default)]
    pub ipv4_lookup: bool,
    /// NSLOOKUP, MXLOOKUP, AXFR (and ALOOKUP): look up the AAAA records of
    /// the hosts found.
    #[option(default)]
    pub ipv6_lookup: bool,
    /// The records' shape: native (dnsluice's) or zdns (ZDNS 2.x's,
    /// `results.<MODULE>.status/data/...`, for jq scripts written for ZDNS).
    #[option(default = OutputFormat::Native)]
    pub output_format: OutputFormat,
    /// How much each record says, as ZDNS's --result-verbosity: short (no
    /// TTLs, protocol, resolver), normal, long (and flags, class), trace
    /// (and every exchange: server asked, response, time).
    #[option(default = Verbosity::Normal)]
    pub result_verbosity: Verbosity,
}

impl LookupOptions {
    /// The engine configuration; errors name the option at fault.
    pub fn to_config(&self) -> Result<LookupConfig, StageError> {
        let transport = self.client.transport;
        let nameservers = super::nameserver_list::parse(&self.name_servers, transport)
            .map_err(|e| StageError::option(MODULE, Some("name_servers"), e))?;
        // Checked now, not at each name's connection (a bad one gave every
        // name an ERROR record, after six tries).
        if self.client.tls.server_name.is_some() {
            let any = std::net::Ipv4Addr::UNSPECIFIED.into();
            dnsluice_net::tls::server_name(&self.client.tls, None, any)
                .map_err(|e| StageError::option(MODULE, Some("tls_name"), e.to_string()))?;
        }
        let iterative = self
            .iterative
            .to_config(&nameservers, self.name_timeout)
            .map_err(|(key, why)| StageError::option(MODULE, Some(key), why))?;
        if iterative.is_some() && !matches!(transport, DnsTransport::Udp | DnsTransport::Tcp) {
            return Err(StageError::option(
                MODULE,
                Some("transport"),
                format!(
                    "iterative resolution talks to authoritative servers over udp or tcp, not {}",
                    transport.as_str()
                ),
            ));
        }
        if iterative.is_some() && self.rate_per_nameserver.is_some() {
            return Err(StageError::option(
                MODULE,
                Some("rate_per_nameserver"),
                "iterative resolution asks the authorities it finds, not given nameservers \
                 (cap it with --rate)"
                    .to_string(),
            ));
        }
        let retry_rcodes = self
            .retry_rcodes
            .iter()
            .filter(|text| !text.trim().is_empty())
            .map(|text| {
                let code = dnsluice_core::dns::mnemonic::rcode_from_str(text.trim())
                    .filter(|code| *code < 16);
                code.map(|c| c as u8).ok_or_else(|| {
                    StageError::option(
                        MODULE,
                        Some("retry_rcodes"),
                        format!(
                            "`{text}` is not an RCODE (REFUSED, SERVFAIL, FORMERR, NOTIMP, ...)"
                        ),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let modules_or_iterative =
            iterative.is_some() || !matches!(self.qtype, LookupType::Single(_));
        let workers = self.workers.unwrap_or(match transport {
            DnsTransport::Udp if modules_or_iterative => 1000,
            _ => 100,
        });
        Ok(LookupConfig {
            qtype: self.qtype,
            transport,
            nameservers,
            threads: workers,
            inflight: self.inflight_per_worker,
            depth: self.inflight,
            retries: self.retries,
            timeout: self.client.timeout,
            name_timeout: self.name_timeout,
            retry_rcodes,
            rate: self.rate,
            rate_per_nameserver: self.rate_per_nameserver,
            adaptive_rate: self.adaptive_rate,
            local_addrs: self.local_addr.clone(),
            scheduler: self.scheduler,
            steal_wait: (!self.steal_wait.is_zero()).then_some(self.steal_wait),
            tls: self.client.tls.clone(),
            doh_method: self.client.doh_method,
            tcp_fallback: self.client.tcp_fallback,
            query: QueryOptions {
                recursion_desired: self.recursion_desired,
                edns_udp_size: (self.edns_udp_size > 0).then_some(self.edns_udp_size),
                dnssec_ok: self.dnssec_ok,
            },
            iterative,
            module: ModuleOptions {
                ipv4_lookup: self.ipv4_lookup,
                ipv6_lookup: self.ipv6_lookup,
            },
            style: RecordStyle {
                format: self.output_format,
                verbosity: self.result_verbosity,
                module: self.qtype,
            },
        })
    }
}

/// The registry entry.
pub fn entry() -> ModuleEntry {
    ModuleEntry::filter(
        MODULE,
        "bulk DNS lookups of names (lines) with sticky connections; one JSON record per name",
        |o: LookupOptions, next| {
            Ok(Box::new(LookupPush {
                core: StageCore::new(&o)?,
                next,
            }))
        },
        |o: LookupOptions, upstream| {
            Ok(Box::new(LookupPull {
                core: StageCore::new(&o)?,
                upstream,
                ready: VecDeque::new(),
                current: None,
                upstream_done: false,
            }))
        },
    )
}

/// What the push and pull forms share.
struct StageCore {
    engine: Option<LookupEngine>,
    lines: u64,
    /// Lines that were names (not blank, not comments): each gets a record.
    names: u64,
    passed_through: u64,
    not_lines: u64,
    records: u64,
}

impl StageCore {
    fn new(options: &LookupOptions) -> Result<StageCore, StageError> {
        let engine = LookupEngine::start(options.to_config()?)
            .map_err(|e| StageError::config(MODULE, e.to_string()))?;
        Ok(StageCore {
            engine: Some(engine),
            lines: 0,
            names: 0,
            passed_through: 0,
            not_lines: 0,
            records: 0,
        })
    }

    fn engine(&mut self) -> &mut LookupEngine {
        self.engine
            .as_mut()
            .expect("the engine lives until the stage is dropped")
    }

    fn stats(&self) -> StageStats {
        let mut s = StageStats::new(MODULE);
        s.add_error("not_lines", self.not_lines);
        s.input = self.lines + self.passed_through;
        s.output = self.records + self.passed_through;
        if let Some(engine) = &self.engine {
            engine.summary().fill(&mut s);
        }
        if let Some(warning) = self.stopped_warning() {
            s.warnings.push(warning);
        }
        s
    }

    /// Once the chain was stopped early, what that left: the names read
    /// that have no record (every name read gets one otherwise): in flight,
    /// not asked yet, or answered as the chain stopped pulling.
    fn stopped_warning(&self) -> Option<String> {
        let unrecorded = self.names.saturating_sub(self.records);
        let why = match dnsluice_core::stop::requested()? {
            signal if signal > 0 => "stopped by a signal",
            _ => "stopped as another part of the run failed",
        };
        (unrecorded > 0).then(|| {
            format!(
                "{why}: {unrecorded} names read have no record \
                 (in flight or not yet written; dnsluice lookup --resume asks them again)"
            )
        })
    }
}

fn record_object(done: &Finished) -> Object<'_> {
    Object::Text(Text {
        kind: TextKind::Record,
        number: done.index + 1,
        text: &done.json,
    })
}

/// Push form.
struct LookupPush {
    core: StageCore,
    next: Box<dyn Receiver>,
}

impl LookupPush {
    /// Pushes `done` on (unless an earlier push failed); gives it back for
    /// the engine to reuse.
    fn forward(
        next: &mut dyn Receiver,
        records: &mut u64,
        done: Finished,
        failed: &mut Option<StageError>,
    ) -> Finished {
        if failed.is_none() {
            *records += 1;
            if let Err(e) = next.receive(&mut record_object(&done)) {
                *failed = Some(e);
            }
        }
        done
    }
}

impl Receiver for LookupPush {
    fn receive(&mut self, obj: &mut Object<'_>) -> Result<(), StageError> {
        let Object::Text(Text {
            kind: TextKind::Line,
            text,
            number,
        }) = obj
        else {
            self.core.passed_through += 1;
            return self.next.receive(obj);
        };
        let mut failed = None;
        let next = &mut self.next;
        let records = &mut self.core.records;
        let engine = self.core.engine.as_mut().expect("engine present");
        let mut spent = Vec::new();
        let name = engine.submit_as(text, number.saturating_sub(1), &mut |done| {
            spent.push(Self::forward(next.as_mut(), records, done, &mut failed));
        });
        self.core.lines += u64::from(!text.is_empty());
        self.core.names += u64::from(name);
        while let Some(done) = engine.try_result() {
            spent.push(Self::forward(next.as_mut(), records, done, &mut failed));
        }
        engine.recycle(spent);
        failed.map_or(Ok(()), Err)
    }

    fn finish(&mut self) -> Result<(), StageError> {
        let mut failed = None;
        let engine = self.core.engine.as_mut().expect("engine present");
        engine.close_input();
        // Stopped (SIGINT, SIGTERM): the records come that are already
        // back; the names still in flight get none (the statistics say how
        // many), rather than waiting out their tries.
        loop {
            let done = match dnsluice_core::stop::requested() {
                Some(_) => match engine.try_result() {
                    Some(done) => done,
                    None => break,
                },
                None => match engine.next_result_within(LOOK) {
                    Waited::Record(done) => done,
                    Waited::Later => continue,
                    Waited::Nothing => break,
                },
            };
            let done = Self::forward(
                self.next.as_mut(),
                &mut self.core.records,
                done,
                &mut failed,
            );
            engine.recycle([done]);
        }
        if let Some(e) = failed {
            return Err(e);
        }
        self.next.finish()
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        out.push(self.core.stats());
        self.next.stats(out);
    }
}

/// Pull form: each record is handed out on its own (the driver sees the
/// chain between two records, so a progress bar and interval statistics
/// go on while the last names in flight finish), and given back to the
/// engine at the next call.
struct LookupPull {
    core: StageCore,
    upstream: Box<dyn Producer>,
    ready: VecDeque<Finished>,
    /// The record handed out last, for the engine to reuse.
    current: Option<Finished>,
    upstream_done: bool,
}

impl Producer for LookupPull {
    fn produce(&mut self) -> Result<Option<Object<'_>>, StageError> {
        // Always due: an input that has nothing to give yet (a quiet pipe)
        // says so at once, and the records done meanwhile come out, not
        // when the next name does.
        let due = AtomicBool::new(true);
        loop {
            match self.produce_or_wait(&due)? {
                Pulled::Object(_) => break,
                Pulled::Waiting => {}
                Pulled::End => return Ok(None),
            }
        }
        // The record handed out is the one kept as current.
        Ok(self.current.as_ref().map(record_object))
    }

    fn waits(&self) -> bool {
        true
    }

    fn produce_or_wait(&mut self, due: &AtomicBool) -> Result<Pulled<'_>, StageError> {
        if let Some(spent) = self.current.take() {
            self.core.engine().recycle([spent]);
        }
        loop {
            if let Some(done) = self.ready.pop_front() {
                self.core.records += 1;
                let done = self.current.insert(done);
                return Ok(Pulled::Object(record_object(done)));
            }
            if self.upstream_done {
                if dnsluice_core::stop::requested().is_some() {
                    // Stopped: as in `LookupPush::finish`, the records
                    // already back come out; the names in flight get none.
                    match self.core.engine().try_result() {
                        Some(done) => self.ready.push_back(done),
                        None => return Ok(Pulled::End),
                    }
                    continue;
                }
                match self.core.engine().next_result_within(LOOK) {
                    Waited::Record(done) => self.ready.push_back(done),
                    Waited::Nothing => return Ok(Pulled::End),
                    Waited::Later if due.load(Ordering::Relaxed) => return Ok(Pulled::Waiting),
                    Waited::Later => {}
                }
                continue;
            }
            let engine = self.core.engine.as_mut().expect("engine present");
            if dnsluice_core::stop::requested().is_some() {
                // Stopped: no more names are read (the driver stops pulling
                // at its next object; this loop may not return to it soon).
                self.upstream_done = true;
                engine.close_input();
                continue;
            }
            match self.upstream.produce_or_wait(due)? {
                Pulled::End => {
                    self.upstream_done = true;
                    engine.close_input();
                }
                Pulled::Object(Object::Text(Text {
                    kind: TextKind::Line,
                    text,
                    number,
                })) => {
                    let ready = &mut self.ready;
                    let name = engine.submit_as(text, number.saturating_sub(1), &mut |done| {
                        ready.push_back(done)
                    });
                    self.core.lines += u64::from(!text.is_empty());
                    self.core.names += u64::from(name);
                    while let Some(done) = engine.try_result() {
                        ready.push_back(done);
                    }
                }
                Pulled::Object(_) => {
                    // Not a line: counted and dropped (see the module docs).
                    self.core.not_lines += 1;
                }
                Pulled::Waiting => {
                    // The input waits: hand out what is done meanwhile.
                    while let Some(done) = engine.try_result() {
                        self.ready.push_back(done);
                    }
                    if self.ready.is_empty() {
                        return Ok(Pulled::Waiting);
                    }
                }
            }
        }
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        self.upstream.stats(out);
        out.push(self.core.stats());
    }
}

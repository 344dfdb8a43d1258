//! `lookup.dns`: the lookup engine as a chain stage. Lines (`input.lines`) go
//! in, one JSON record per line comes out (`output.json` writes it as it is);
//! blank and `#` lines get none. Objects that are not lines are passed on
//! untouched when pushed; pulled, they are counted (`not_lines`) and dropped
//! (a lending producer cannot hand on its upstream's object after pulling more).

use super::engine::{Finished, LookupConfig, LookupEngine};
use super::{LookupType, Scheduler};
use dnsluice_core::registry::{Factory, ModuleEntry, OptionDoc, StageOptions};
use dnsluice_core::{Object, Producer, Receiver, StageError, StageStats, Text, TextKind};
use dnsluice_net::query::QueryOptions;
use dnsluice_net::{DohMethod, Endpoint, TlsOptions, Transport};
use serde::Deserialize;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

const MODULE: &str = "lookup.dns";

/// Options of `lookup.dns` (the same as `dnsluice lookup`'s flags).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LookupOptions {
    /// Record type, or `ALOOKUP`.
    #[serde(default = "default_type", rename = "type")]
    pub qtype: String,
    /// Nameservers for unpinned names.
    #[serde(default)]
    pub name_servers: Vec<String>,
    /// `udp`, `tcp`, `tls` or `https`.
    #[serde(default = "default_transport")]
    pub transport: String,
    /// Workers.
    #[serde(default = "default_threads")]
    pub threads: usize,
    /// Names per worker at once.
    #[serde(default = "default_inflight")]
    pub inflight: usize,
    /// Tries after the first.
    #[serde(default = "default_retries")]
    pub retries: u32,
    /// Per query, in ms.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// `sticky`, `fifo` or `random`.
    #[serde(default = "default_scheduler")]
    pub scheduler: String,
    /// Sticky: ms to wait for home work before stealing (0: steal at once).
    #[serde(default)]
    pub steal_wait_ms: u64,
    /// CA certificates (PEM) to trust instead of the system's.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Do not verify certificates (test servers only).
    #[serde(default)]
    pub insecure: bool,
    /// Name to verify the certificate against.
    #[serde(default)]
    pub tls_name: Option<String>,
    /// `post` or `get` (DoH).
    #[serde(default = "default_doh_method")]
    pub doh_method: String,
    /// Retry over TCP on TC=1.
    #[serde(default = "default_true")]
    pub tcp_fallback: bool,
    /// Set RD.
    #[serde(default = "default_true")]
    pub recursion_desired: bool,
    /// EDNS UDP size (0: no EDNS).
    #[serde(default = "default_edns")]
    pub edns_udp_size: u16,
    /// Set DO.
    #[serde(default)]
    pub dnssec_ok: bool,
}

fn default_type() -> String {
    "A".into()
}
fn default_transport() -> String {
    "udp".into()
}
fn default_threads() -> usize {
    100
}
fn default_inflight() -> usize {
    1
}
fn default_retries() -> u32 {
    1
}
fn default_timeout_ms() -> u64 {
    3000
}
fn default_scheduler() -> String {
    "sticky".into()
}
fn default_doh_method() -> String {
    "post".into()
}
fn default_true() -> bool {
    true
}
fn default_edns() -> u16 {
    1232
}

impl LookupOptions {
    /// The engine configuration; errors name the option at fault.
    pub fn to_config(&self) -> Result<LookupConfig, StageError> {
        let bad = |key: &str, message: String| StageError::option(MODULE, Some(key), message);
        let transport: Transport = self.transport.parse().map_err(|e| bad("transport", e))?;
        let nameservers = self
            .name_servers
            .iter()
            .map(|text| {
                Endpoint::parse(text, transport).map_err(|e| bad("name_servers", e.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if self.threads == 0 || self.threads > 100_000 {
            return Err(bad("threads", "must be from 1 to 100000".into()));
        }
        if self.inflight == 0 || self.inflight > 10_000 {
            return Err(bad("inflight", "must be from 1 to 10000".into()));
        }
        if self.timeout_ms == 0 {
            return Err(bad("timeout_ms", "must be at least 1".into()));
        }
        Ok(LookupConfig {
            qtype: LookupType::parse(&self.qtype).map_err(|e| bad("type", e))?,
            transport,
            nameservers,
            threads: self.threads,
            inflight: self.inflight,
            retries: self.retries,
            timeout: Duration::from_millis(self.timeout_ms),
            scheduler: self
                .scheduler
                .parse::<Scheduler>()
                .map_err(|e| bad("scheduler", e))?,
            steal_wait: (self.steal_wait_ms > 0).then(|| Duration::from_millis(self.steal_wait_ms)),
            tls: TlsOptions {
                ca_file: self.ca_file.clone(),
                insecure: self.insecure,
                server_name: self.tls_name.clone(),
            },
            doh_method: self
                .doh_method
                .parse::<DohMethod>()
                .map_err(|e| bad("doh_method", e))?,
            tcp_fallback: self.tcp_fallback,
            query: QueryOptions {
                recursion_desired: self.recursion_desired,
                edns_udp_size: (self.edns_udp_size > 0).then_some(self.edns_udp_size),
                dnssec_ok: self.dnssec_ok,
            },
        })
    }
}

const OPTIONS: &[OptionDoc] = &[
    OptionDoc { name: "type", kind: "string", default: "A", help: "record type (A, AAAA, NS, MX, TXT, SOA, PTR, CNAME, SRV, CAA, HTTPS, ANY, TYPEnnn) or ALOOKUP" },
    OptionDoc { name: "name_servers", kind: "array of strings", default: "[]", help: "nameservers for unpinned names: IP, IP:PORT, [IPv6]:PORT, or https://HOST:PORT/PATH" },
    OptionDoc { name: "transport", kind: "string", default: "udp", help: "udp, tcp, tls (DoT) or https (DoH)" },
    OptionDoc { name: "threads", kind: "integer", default: "100", help: "workers" },
    OptionDoc { name: "inflight", kind: "integer", default: "1", help: "names each worker resolves at once, pipelined on its connection" },
    OptionDoc { name: "retries", kind: "integer", default: "1", help: "tries after the first, on timeout or failure" },
    OptionDoc { name: "timeout_ms", kind: "integer", default: "3000", help: "per query" },
    OptionDoc { name: "scheduler", kind: "string", default: "sticky", help: "sticky (per-nameserver queues + global queue), fifo or random (baselines)" },
    OptionDoc { name: "steal_wait_ms", kind: "integer", default: "0", help: "sticky: wait this long for home work before stealing" },
    OptionDoc { name: "ca_file", kind: "string", default: "", help: "trust these CA certificates (PEM) instead of the system's" },
    OptionDoc { name: "insecure", kind: "bool", default: "false", help: "do not verify certificates (test servers only)" },
    OptionDoc { name: "tls_name", kind: "string", default: "", help: "name to verify the certificate against (default: URL host or IP)" },
    OptionDoc { name: "doh_method", kind: "string", default: "post", help: "post or get" },
    OptionDoc { name: "tcp_fallback", kind: "bool", default: "true", help: "ask again over TCP when a UDP answer is truncated (TC=1)" },
    OptionDoc { name: "recursion_desired", kind: "bool", default: "true", help: "set RD" },
    OptionDoc { name: "edns_udp_size", kind: "integer", default: "1232", help: "EDNS UDP payload size; 0 sends no EDNS" },
    OptionDoc { name: "dnssec_ok", kind: "bool", default: "false", help: "set DO" },
];

/// The registry entry.
pub fn entry() -> ModuleEntry {
    ModuleEntry {
        name: MODULE,
        summary:
            "bulk DNS lookups of names (lines) with sticky connections; one JSON record per name",
        options: OPTIONS,
        factory: Factory::Filter {
            push: Arc::new(|opts: &StageOptions, next: Box<dyn Receiver>| {
                Ok(Box::new(LookupPush {
                    core: StageCore::new(opts)?,
                    next,
                }) as Box<dyn Receiver>)
            }),
            pull: Arc::new(|opts: &StageOptions, upstream: Box<dyn Producer>| {
                Ok(Box::new(LookupPull {
                    core: StageCore::new(opts)?,
                    upstream,
                    ready: VecDeque::new(),
                    current: String::new(),
                    upstream_done: false,
                }) as Box<dyn Producer>)
            }),
        },
    }
}

/// What the push and pull forms share.
struct StageCore {
    engine: Option<LookupEngine>,
    lines: u64,
    passed_through: u64,
    not_lines: u64,
    records: u64,
}

impl StageCore {
    fn new(opts: &StageOptions) -> Result<StageCore, StageError> {
        let options: LookupOptions = opts.parse()?;
        let engine = LookupEngine::start(options.to_config()?)
            .map_err(|e| StageError::config(MODULE, e.to_string()))?;
        Ok(StageCore {
            engine: Some(engine),
            lines: 0,
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
            let summary = engine.summary();
            for (key, value) in [
                ("names", summary.names),
                ("queries", summary.queries),
                ("connections_opened", summary.connections_opened),
                ("tls_handshakes", summary.tls_handshakes),
                ("connections_reused", summary.connections_reused),
                ("retries", summary.retries),
                ("stale_redials", summary.stale_redials),
                ("timeouts", summary.timeouts),
                ("steals", summary.steals),
            ] {
                s.add_counter(key, value);
            }
            for (status, n) in &summary.statuses {
                s.add_counter(&format!("status_{status}"), *n);
            }
        }
        s
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
    fn forward(
        next: &mut dyn Receiver,
        records: &mut u64,
        done: Finished,
        failed: &mut Option<StageError>,
    ) {
        if failed.is_some() {
            return;
        }
        *records += 1;
        if let Err(e) = next.receive(&mut record_object(&done)) {
            *failed = Some(e);
        }
    }
}

impl Receiver for LookupPush {
    fn receive(&mut self, obj: &mut Object<'_>) -> Result<(), StageError> {
        let Object::Text(Text {
            kind: TextKind::Line,
            text,
            ..
        }) = obj
        else {
            self.core.passed_through += 1;
            return self.next.receive(obj);
        };
        self.core.lines += 1;
        let mut failed = None;
        let next = &mut self.next;
        let records = &mut self.core.records;
        let engine = self.core.engine.as_mut().expect("engine present");
        engine.submit(text, &mut |done| {
            Self::forward(next.as_mut(), records, done, &mut failed)
        });
        while let Some(done) = engine.try_result() {
            Self::forward(next.as_mut(), records, done, &mut failed);
        }
        failed.map_or(Ok(()), Err)
    }

    fn finish(&mut self) -> Result<(), StageError> {
        let mut failed = None;
        let engine = self.core.engine.as_mut().expect("engine present");
        engine.close_input();
        while let Some(done) = engine.next_result() {
            Self::forward(
                self.next.as_mut(),
                &mut self.core.records,
                done,
                &mut failed,
            );
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

/// Pull form.
struct LookupPull {
    core: StageCore,
    upstream: Box<dyn Producer>,
    ready: VecDeque<Finished>,
    current: String,
    upstream_done: bool,
}

impl Producer for LookupPull {
    fn produce(&mut self) -> Result<Option<Object<'_>>, StageError> {
        loop {
            if let Some(done) = self.ready.pop_front() {
                self.core.records += 1;
                self.current = done.json;
                return Ok(Some(Object::Text(Text {
                    kind: TextKind::Record,
                    number: done.index + 1,
                    text: &self.current,
                })));
            }
            if self.upstream_done {
                return match self.core.engine().next_result() {
                    Some(done) => {
                        self.ready.push_back(done);
                        continue;
                    }
                    None => Ok(None),
                };
            }
            match self.upstream.produce()? {
                None => {
                    self.upstream_done = true;
                    self.core.engine().close_input();
                }
                Some(Object::Text(Text {
                    kind: TextKind::Line,
                    text,
                    ..
                })) => {
                    self.core.lines += 1;
                    let ready = &mut self.ready;
                    let engine = self.core.engine.as_mut().expect("engine present");
                    engine.submit(text, &mut |done| ready.push_back(done));
                    while let Some(done) = engine.try_result() {
                        ready.push_back(done);
                    }
                }
                Some(_) => {
                    // Not a line: counted and dropped (see the module docs).
                    self.core.not_lines += 1;
                }
            }
        }
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        self.upstream.stats(out);
        out.push(self.core.stats());
    }
}

//! The configuration of a lookup run.

use super::board::Scheduler;
use super::format::RecordStyle;
use super::iterative::IterativeConfig;
use super::modules::ModuleOptions;
use super::qtype::LookupType;
use dnsluice_net::query::QueryOptions;
use dnsluice_net::{DnsTransport, DohMethod, Endpoint, TlsOptions};
use std::time::Duration;

/// Everything a lookup run is configured with, made from the declared
/// options ([`super::dns::LookupOptions::to_config`], where the defaults are).
#[derive(Clone, Debug)]
pub struct LookupConfig {
    /// What to ask.
    pub qtype: LookupType,
    /// How to reach the nameservers.
    pub transport: DnsTransport,
    /// The nameservers unpinned names go to.
    pub nameservers: Vec<Endpoint>,
    /// Workers.
    pub threads: usize,
    /// Names each worker resolves at once (pipelined on its connection).
    pub inflight: usize,
    /// Names in flight at once in the UDP engine (its table's slots).
    pub depth: usize,
    /// Tries after the first.
    pub retries: u32,
    /// The wait for one answer (the longest, where it adapts to the round trip).
    pub timeout: Duration,
    /// The time budget of one name.
    pub name_timeout: Duration,
    /// Answers with these RCODEs are asked again while the budget lasts.
    pub retry_rcodes: Vec<u8>,
    /// Queries per second in all, at most.
    pub rate: Option<f64>,
    /// Queries per second to each nameserver, at most.
    pub rate_per_nameserver: Option<f64>,
    /// Adapt each nameserver's rate to what it does.
    pub adaptive_rate: bool,
    /// Source addresses, used in turn.
    pub local_addrs: Vec<std::net::IpAddr>,
    /// How work is handed out.
    pub scheduler: Scheduler,
    /// Sticky: wait this long for home work before stealing.
    pub steal_wait: Option<Duration>,
    /// Certificates and names, for TLS and HTTPS.
    pub tls: TlsOptions,
    /// POST or GET, for HTTPS.
    pub doh_method: DohMethod,
    /// Ask again over TCP when a UDP answer has TC=1.
    pub tcp_fallback: bool,
    /// RD, EDNS.
    pub query: QueryOptions,
    /// Resolve from the root instead of asking the nameservers.
    pub iterative: Option<IterativeConfig>,
    /// The modules' options (which addresses to look up).
    pub module: ModuleOptions,
    /// How records are written (format, verbosity; `style.module` is `qtype`).
    pub style: RecordStyle,
}

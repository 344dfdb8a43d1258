//! The options every DNS client module shares (`lookup.dns`, `output.dnscli`,
//! `filter.dnscli`): declared once here and embedded in each module's options
//! with `#[option(flatten)]`, so the keys, their defaults and their docs are
//! the same everywhere.

use crate::{DnsTransport, DohMethod, TlsOptions};
use dnsluice_options::Options;
use std::time::Duration;

/// How long a client waits for an answer when not told otherwise: ZDNS's
/// network timeout and DNS Shotgun's.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

/// How a DNS client talks to its servers.
#[derive(Clone, Debug, Options)]
pub struct ClientOptions {
    /// How queries travel: udp, tcp, tls (DNS-over-TLS) or https (DNS-over-HTTPS).
    #[option(default = DnsTransport::Udp)]
    pub transport: DnsTransport,
    /// How long to wait for each answer. UDP lookups of one record type
    /// wait this long for a nameserver's first answers, then as long as its
    /// round trip says (twice it, at least 100 ms), doubled per try, never
    /// more than this.
    #[option(default = DEFAULT_TIMEOUT, range = Duration::from_millis(1)..=Duration::from_secs(3600))]
    pub timeout: Duration,
    /// Ask again over TCP when a UDP answer is truncated (TC=1).
    #[option(default = true)]
    pub tcp_fallback: bool,
    /// The HTTP method of DNS-over-HTTPS queries: post, or get (the query
    /// base64url-encoded in the URL, cacheable).
    #[option(default = DohMethod::Post)]
    pub doh_method: DohMethod,
    /// Certificates (tls and https).
    #[option(flatten)]
    pub tls: TlsOptions,
}

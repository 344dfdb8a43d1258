//! DNS clients for dnsluice: the transports that replay and lookups share.
//!
//! A [`Connection`] carries DNS messages to one nameserver over UDP, TCP, TLS
//! (DNS-over-TLS, RFC 7858) or HTTPS (DNS-over-HTTPS, RFC 8484, over HTTP/2).
//! Every kind multiplexes: many queries may be in flight on one connection and
//! answers are matched to their queries whatever order they come back in
//! (RFC 7766 pipelining on TCP and TLS, one HTTP/2 stream per query on HTTPS).
//!
//! Everything here is async (tokio). The synchronous chain stages in
//! `dnsluice-modules` own a runtime and hand queries to it.

#![warn(missing_docs)]

mod base64url;
pub mod conn;
pub mod endpoint;
pub mod error;
pub mod ids;
pub mod latency;
pub mod options;
pub mod query;
pub mod stats;
pub mod tls;

pub use conn::{connect, ClientSetup, Connection, DohMethod, Exchange};
pub use endpoint::{Endpoint, Transport};
pub use error::NetError;
pub use latency::{Latency, Percentiles};
pub use options::ClientOptions;
pub use stats::NetCounters;
pub use tls::TlsOptions;

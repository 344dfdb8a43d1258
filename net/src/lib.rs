//! DNS clients for dnsluice: the transports that replay and lookups share.
//!
//! A client sends queries to one nameserver over UDP, TCP, TLS (DNS-over-TLS,
//! RFC 7858) or HTTPS (DNS-over-HTTPS, RFC 8484, over HTTP/2). Every kind
//! multiplexes: many queries may be in flight on one connection and answers
//! are matched to their queries whatever order they come back in (RFC 7766
//! pipelining on TCP and TLS, one HTTP/2 stream per query on HTTPS).
//!
//! The crate is layered so that the logic is written once:
//!
//! - [`protocol`]: sans-I/O pieces (framing, ids, matching by id and question,
//!   deadlines, building queries), and [`health`]: the dead-connection and
//!   reconnect rules; [`tls`]: the TLS client setup, verified by default.
//! - Two drivers that are thin users of them: [`tokio_driver`] (async, a
//!   [`Connection`] per nameserver; the lookups and DoH use it) and
//!   [`poll_driver`] (blocking connects, non-blocking sockets on an epoll set
//!   the caller polls; replay's UDP, TCP and TLS use it).
//! - [`sys`]: the socket calls std does not have (`sendmmsg` with UDP GSO,
//!   `recvmmsg`, waiting for a full socket).

#![warn(missing_docs)]

mod base64url;
pub mod datagrams;
pub mod endpoint;
pub mod error;
pub mod health;
pub mod latency;
pub mod options;
pub mod poll_driver;
pub mod protocol;
pub mod stats;
pub mod sys;
pub mod tls;
pub mod tokio_driver;

pub use endpoint::{DnsTransport, Endpoint};
pub use error::NetError;
pub use latency::{Latency, Percentiles};
pub use options::ClientOptions;
/// Building queries (kept at this path: `dnsluice_net::query`).
pub use protocol::query;
pub use stats::NetCounters;
pub use tls::{TlsClient, TlsOptions};
pub use tokio_driver::{connect, transfer, ClientSetup, Connection, DohMethod, Exchange, Transfer};

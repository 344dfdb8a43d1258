//! What can go wrong talking to a nameserver.

use std::io;

/// A failed connection or exchange.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    /// A nameserver given in a form we cannot use.
    #[error("bad nameserver `{text}`: {why}")]
    BadEndpoint {
        /// What was given.
        text: String,
        /// What is wrong with it.
        why: String,
    },
    /// A client that cannot be set up (a source address that cannot be
    /// bound, no event loop): the message says what and why.
    #[error("{0}")]
    Setup(String),
    /// TLS options that cannot be used (a CA file that does not load, a bad name).
    #[error("TLS setup: {0}")]
    TlsSetup(String),
    /// The connection could not be opened.
    #[error("connect to {addr}: {error}")]
    Connect {
        /// The nameserver.
        addr: String,
        /// What the operating system said.
        error: io::Error,
    },
    /// The TLS handshake failed (for example a certificate that does not verify).
    #[error("TLS handshake with {addr}: {error}")]
    Handshake {
        /// The nameserver.
        addr: String,
        /// What went wrong.
        error: io::Error,
    },
    /// The HTTP/2 connection or a request on it failed.
    #[error("HTTP/2 with {addr}: {message}")]
    Http {
        /// The nameserver.
        addr: String,
        /// What went wrong.
        message: String,
    },
    /// One DoH request failed (an HTTP error status, a reset stream, a body
    /// that is no DNS message); the connection stays usable.
    #[error("DoH request to {addr}: {message}")]
    HttpRequest {
        /// The nameserver.
        addr: String,
        /// What went wrong.
        message: String,
    },
    /// No answer within the timeout.
    #[error("timeout")]
    Timeout,
    /// The connection closed (or failed) with the query still unanswered.
    #[error("connection closed before the answer: {0}")]
    Closed(String),
    /// Sending failed.
    #[error("send: {0}")]
    Send(io::Error),
    /// The client's async runtime (its threads) could not be started.
    #[error("cannot start the client runtime: {0}")]
    Runtime(io::Error),
    /// A zone transfer that failed on the server's side (refused, a message
    /// for another query, no opening SOA).
    #[error("zone transfer: {0}")]
    Transfer(crate::protocol::transfer::TransferError),
    /// A query that cannot be sent (too short to carry a DNS header, too long).
    #[error("bad query: {0}")]
    BadQuery(&'static str),
}

impl NetError {
    /// A short, stable name for counters and JSON (`timeout`, `connect`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            NetError::BadEndpoint { .. } => "bad_endpoint",
            NetError::Setup(_) => "setup",
            NetError::TlsSetup(_) => "tls_setup",
            NetError::Connect { .. } => "connect",
            NetError::Handshake { .. } => "tls_handshake",
            NetError::Http { .. } => "http",
            NetError::HttpRequest { .. } => "http_request",
            NetError::Timeout => "timeout",
            NetError::Closed(_) => "closed",
            NetError::Send(_) => "send",
            NetError::BadQuery(_) => "bad_query",
            NetError::Transfer(_) => "transfer",
            NetError::Runtime(_) => "runtime",
        }
    }

    /// Whether the connection this happened on can no longer be used.
    pub fn breaks_connection(&self) -> bool {
        !matches!(
            self,
            NetError::Timeout | NetError::BadQuery(_) | NetError::HttpRequest { .. }
        )
    }
}

//! Counters of what really happened on the sockets, shared by all connections
//! a client opens.

use std::sync::atomic::{AtomicU64, Ordering};

/// Connection-level counters; cheap to update from any thread.
#[derive(Debug, Default)]
pub struct NetCounters {
    /// Connections opened (TCP, TLS and HTTPS connects that succeeded, UDP sockets).
    pub connections_opened: AtomicU64,
    /// TLS handshakes completed.
    pub tls_handshakes: AtomicU64,
    /// Connection attempts that failed (refused, handshake error, timeout).
    pub connect_failures: AtomicU64,
    /// Responses that matched no query in flight (late after a timeout, wrong id
    /// or question), ignored.
    pub unmatched_responses: AtomicU64,
    /// Queries sent.
    pub queries_sent: AtomicU64,
    /// Connections that were open and closed before the end (the server
    /// closed them, or an error did); opened minus closed is open now.
    pub connections_closed: AtomicU64,
}

impl NetCounters {
    /// Adds one to `counter`.
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Reads `counter`.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

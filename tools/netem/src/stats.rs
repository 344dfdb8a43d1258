//! What the emulator did, by cause, per link: counters that the UDP loop and
//! the TCP threads update and that are written out as JSON.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// One link's counters.
#[derive(Default, Debug)]
pub struct LinkStats {
    /// Queries (client to server datagrams) received.
    pub up_received: AtomicU64,
    /// Queries passed on to the server.
    pub up_forwarded: AtomicU64,
    /// Queries lost on the way up (the loss setting).
    pub up_lost: AtomicU64,
    /// Responses (server to client datagrams) received from the server.
    pub down_received: AtomicU64,
    /// Responses passed on to their client.
    pub down_forwarded: AtomicU64,
    /// Responses lost on the way down.
    pub down_lost: AtomicU64,
    /// Queries over their client's rate limit, dropped.
    pub limited_dropped: AtomicU64,
    /// Queries over their client's rate limit, answered REFUSED.
    pub limited_refused: AtomicU64,
    /// Queries over their client's rate limit, answered TC=1.
    pub limited_truncated: AtomicU64,
    /// Distinct clients seen (UDP source addresses).
    pub udp_clients: AtomicU64,
    /// TCP connections accepted.
    pub tcp_connections: AtomicU64,
    /// TCP chunks held back for an emulated retransmission.
    pub tcp_retransmits: AtomicU64,
    /// TCP bytes passed on, both ways.
    pub tcp_bytes: AtomicU64,
}

impl LinkStats {
    /// Adds one to `counter`.
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn fields(&self) -> [(&'static str, &AtomicU64); 13] {
        [
            ("up_received", &self.up_received),
            ("up_forwarded", &self.up_forwarded),
            ("up_lost", &self.up_lost),
            ("down_received", &self.down_received),
            ("down_forwarded", &self.down_forwarded),
            ("down_lost", &self.down_lost),
            ("limited_dropped", &self.limited_dropped),
            ("limited_refused", &self.limited_refused),
            ("limited_truncated", &self.limited_truncated),
            ("udp_clients", &self.udp_clients),
            ("tcp_connections", &self.tcp_connections),
            ("tcp_retransmits", &self.tcp_retransmits),
            ("tcp_bytes", &self.tcp_bytes),
        ]
    }
}

/// Writes the statistics of every link, plus the kernel's count of
/// datagrams it dropped on the emulator's own sockets, as one JSON object:
/// `{"kernel_drops":N,"links":[{"listen":..,"target":..,"up_received":..}]}`.
pub fn to_json(links: &[(String, String, &LinkStats)], kernel_drops: u64) -> String {
    let mut out = format!("{{\"kernel_drops\":{kernel_drops},\"links\":[");
    for (i, (listen, target, stats)) in links.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{{\"listen\":\"{listen}\",\"target\":\"{target}\"");
        for (key, value) in stats.fields() {
            let _ = write!(out, ",\"{key}\":{}", value.load(Ordering::Relaxed));
        }
        out.push('}');
    }
    out.push_str("]}\n");
    out
}

//! What a DNS client counts: queries sent, answered, timed out and failed,
//! rcodes, latency percentiles, answers per second.

use dnsluice_core::dns::mnemonic;
use dnsluice_core::StageStats;
use dnsluice_net::{Latency, NetCounters};
use std::collections::BTreeMap;
use std::time::Instant;

/// The full RCODE of `message`: the header's 4 bits, extended by its OPT
/// record's upper 8 (BADVERS is 16, BADCOOKIE 23: read from the header
/// alone they were NOERROR and YXDOMAIN).
pub fn full_rcode_of(message: &[u8]) -> u16 {
    let low = message.get(3).map_or(0, |b| u16::from(b & 0x0f));
    // Only an additional section can hold the OPT record.
    match message.get(10..12) {
        Some([0, 0]) | None => low,
        Some(_) => dnsluice_core::dns::scan(message, false).rcode(),
    }
}

/// The counter names in [`StageStats::counters`] that `dnsluice replay`
/// reads back (latencies in microseconds: counters are integers).
pub mod keys {
    /// Queries handed to the client (each ends answered, timed out or failed).
    pub const SENT: &str = "sent";
    /// Queries answered.
    pub const ANSWERED: &str = "answered";
    /// Queries not answered within the timeout.
    pub const TIMEOUTS: &str = "timeouts";
    /// Queries that failed otherwise (connection refused or lost, TLS, HTTP).
    pub const ERRORS: &str = "errors";
    /// Connections (UDP sockets, TCP/TLS/HTTPS connections) opened.
    pub const CONNECTIONS_OPENED: &str = "connections_opened";
    /// TLS handshakes completed.
    pub const TLS_HANDSHAKES: &str = "tls_handshakes";
    /// Connection attempts that failed.
    pub const CONNECT_FAILURES: &str = "connect_failures";
    /// Answers that matched no query in flight (late, wrong id or question).
    pub const UNMATCHED: &str = "unmatched_responses";
    /// UDP queries retried over TCP after a truncated (TC=1) answer.
    pub const TCP_RETRIES: &str = "tcp_retries";
    /// Objects that were not queries (responses, non-DNS packets), not sent.
    pub const SKIPPED: &str = "skipped";
    /// Prefix of the per-rcode counters (`rcode.NOERROR`).
    pub const RCODE_PREFIX: &str = "rcode.";
    /// Prefix of the latency percentiles in microseconds (`latency_us.p50`).
    pub const LATENCY_PREFIX: &str = "latency_us.";
    /// The answers' latency histogram (microseconds), whose percentiles
    /// the `latency_us.*` counters are.
    pub const LATENCY: &str = "latency_us";
    /// Connections closed (by the server, or after an error) before the end.
    pub const CONNECTIONS_CLOSED: &str = "connections_closed";
    /// The series of answers per second of the run.
    pub const ANSWERED_PER_S: &str = "answered_per_s";
    /// Queries the window let be outstanding at the end (udp, tcp, tls).
    pub const INFLIGHT_WINDOW: &str = "inflight_window";
    /// The most the window lets be outstanding (udp, tcp, tls).
    pub const INFLIGHT_CAP: &str = "inflight_cap";
    /// Times the sender found the window full at its cap (udp, tcp, tls).
    pub const WINDOW_FULL: &str = "window_full";
}

/// The outcome counts of one client stage.
#[derive(Debug, Clone)]
pub struct Tally {
    started: Instant,
    sent: u64,
    answered: u64,
    timeouts: u64,
    errors: BTreeMap<&'static str, u64>,
    /// The first message of each kind of failure, for the warnings.
    first_error: BTreeMap<&'static str, String>,
    rcodes: BTreeMap<u16, u64>,
    latency: Latency,
    per_second: Vec<u64>,
    tcp_retries: u64,
}

impl Tally {
    /// Counts from now.
    pub fn new() -> Self {
        Tally {
            started: Instant::now(),
            sent: 0,
            answered: 0,
            timeouts: 0,
            errors: BTreeMap::new(),
            first_error: BTreeMap::new(),
            rcodes: BTreeMap::new(),
            latency: Latency::default(),
            per_second: Vec::new(),
            tcp_retries: 0,
        }
    }

    /// One query handed to the client.
    pub fn sent(&mut self) {
        self.sent += 1;
    }

    /// Sets the number of queries handed to the client (when another thread
    /// counted them).
    pub fn set_sent(&mut self, sent: u64) {
        self.sent = sent;
    }

    /// One UDP query retried over TCP.
    pub fn tcp_retry(&mut self) {
        self.tcp_retries += 1;
    }

    /// An answer with RCODE `rcode` ([`full_rcode_of`]) after `latency`.
    pub fn answered(&mut self, rcode: u16, latency: std::time::Duration) {
        self.answered += 1;
        self.latency.record(latency);
        *self.rcodes.entry(rcode).or_default() += 1;
        let second = self.started.elapsed().as_secs() as usize;
        // A run of days would grow this by one entry a second: small.
        if self.per_second.len() <= second {
            self.per_second.resize(second + 1, 0);
        }
        self.per_second[second] += 1;
    }

    /// A failure of kind `kind`, described by `message` (`timeout` counts as a
    /// timeout, not an error).
    pub fn failed(&mut self, kind: &'static str, message: &str) {
        if !self.first_error.contains_key(kind) {
            self.first_error.insert(kind, message.to_string());
        }
        if kind == "timeout" {
            self.timeouts += 1;
        } else {
            *self.errors.entry(kind).or_default() += 1;
        }
    }

    /// Queries that timed out so far.
    pub fn timeouts(&self) -> u64 {
        self.timeouts
    }

    /// The counts as a stage's statistics (see [`keys`]).
    pub fn stats(&self, module: &str, counters: &NetCounters) -> StageStats {
        let mut stats = StageStats::new(module);
        let errors: u64 = self.errors.values().sum();
        // These are always present, zero or not: they are a contract.
        for (key, value) in [
            (keys::SENT, self.sent),
            (keys::ANSWERED, self.answered),
            (keys::TIMEOUTS, self.timeouts),
            (keys::ERRORS, errors),
            (
                keys::CONNECTIONS_OPENED,
                NetCounters::get(&counters.connections_opened),
            ),
            (
                keys::TLS_HANDSHAKES,
                NetCounters::get(&counters.tls_handshakes),
            ),
            // With the opened ones, the connections open now (a gauge).
            (
                keys::CONNECTIONS_CLOSED,
                NetCounters::get(&counters.connections_closed),
            ),
        ] {
            stats.counters.insert(key.to_string(), value);
        }
        stats.add_counter(
            keys::CONNECT_FAILURES,
            NetCounters::get(&counters.connect_failures),
        );
        stats.add_counter(
            keys::UNMATCHED,
            NetCounters::get(&counters.unmatched_responses),
        );
        stats.add_counter(keys::TCP_RETRIES, self.tcp_retries);
        for (kind, n) in &self.errors {
            stats.add_error(kind, *n);
        }
        if self.timeouts > 0 {
            stats.add_error("timeout", self.timeouts);
        }
        for (kind, message) in &self.first_error {
            let n = match *kind {
                "timeout" => self.timeouts,
                _ => self.errors.get(kind).copied().unwrap_or(0),
            };
            stats.warnings.push(format!(
                "{module}: {n} queries failed ({kind}); the first: {message}"
            ));
        }
        for (rcode, n) in &self.rcodes {
            stats.add_counter(
                &format!("{}{}", keys::RCODE_PREFIX, mnemonic::rcode(*rcode)),
                *n,
            );
        }
        if self.answered > 0 {
            let us = |ms: f64| (ms * 1000.0).round() as u64;
            let p = self.latency.percentiles();
            for (name, value) in [
                ("p50", p.p50),
                ("p90", p.p90),
                ("p99", p.p99),
                ("p999", p.p999),
                ("max", p.max),
            ] {
                stats
                    .counters
                    .insert(format!("{}{name}", keys::LATENCY_PREFIX), us(value));
            }
        }
        stats
            .histograms
            .insert(keys::LATENCY.to_string(), self.latency.buckets().collect());
        stats
            .series
            .insert(keys::ANSWERED_PER_S.to_string(), self.per_second.clone());
        stats.input = self.sent;
        stats.output = self.answered;
        stats
    }
}

impl Default for Tally {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn every_query_ends_in_one_bucket() {
        let mut tally = Tally::new();
        for _ in 0..4 {
            tally.sent();
        }
        tally.answered(0, Duration::from_millis(2));
        tally.answered(3, Duration::from_millis(4));
        tally.failed("timeout", "timeout");
        tally.failed("closed", "connection closed before the answer: reset");
        let stats = tally.stats("output.dnscli", &NetCounters::default());
        let c = &stats.counters;
        assert_eq!(c["sent"], 4);
        assert_eq!(c["answered"], 2);
        assert_eq!(c["timeouts"], 1);
        assert_eq!(c["errors"], 1);
        assert_eq!(c["connections_opened"], 0);
        assert_eq!(c["rcode.NOERROR"], 1);
        assert_eq!(c["rcode.NXDOMAIN"], 1);
        // Three significant digits.
        assert!(
            c["latency_us.max"].abs_diff(4000) <= 4,
            "{}",
            c["latency_us.max"]
        );
        assert_eq!(stats.errors["closed"], 1);
        assert!(stats
            .warnings
            .iter()
            .any(|w| w.contains("1 queries failed (closed)")));
        assert_eq!(stats.series["answered_per_s"].iter().sum::<u64>(), 2);
        let histogram = &stats.histograms["latency_us"];
        assert_eq!(histogram.count(), 2);
        assert_eq!(histogram.percentile(50.0), 2000);
    }
}

//! The counters that are the evidence for the scheduler design: what really
//! happened on the sockets, overall and per nameserver.

use super::iterative::summary::IterativeSummary;
use dnsluice_core::{Histogram, StageStats};
use dnsluice_json::push_json_str;
use dnsluice_net::{Latency, NetCounters};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Per-nameserver counters.
#[derive(Default)]
pub struct NameserverStats {
    /// Queries sent to it.
    pub queries: AtomicU64,
    /// Connections (or UDP sockets) opened to it.
    pub connections_opened: AtomicU64,
    /// Exchanges with it that failed (timeouts, refused or lost connections).
    pub failures: AtomicU64,
    /// Queries to it that got no answer in time (lost, over UDP).
    pub timeouts: AtomicU64,
    /// Answers from it that refused the query (REFUSED, SERVFAIL, TC=1 over
    /// UDP), taken as a sign of load.
    pub refusals: AtomicU64,
    /// Latency of its answers.
    pub latency: Mutex<Latency>,
    /// Gauge: the queries per second it may be sent now (the adaptive rate;
    /// 0 when nothing limits it). UDP lookups only.
    pub rate: AtomicU64,
    /// Gauge: its queries waiting for an answer now. UDP lookups only.
    pub in_flight: AtomicU64,
    /// Gauge: its smoothed round trip, microseconds (0 before the first
    /// answer). UDP lookups only.
    pub srtt_us: AtomicU64,
}

/// Run-wide counters beside the socket-level [`NetCounters`].
#[derive(Default)]
pub struct RunCounters {
    /// Result records written (one per input name).
    pub names: AtomicU64,
    /// Queries sent on a connection that had carried a query before.
    pub connections_reused: AtomicU64,
    /// Queries sent again after a timeout or a failure.
    pub retries: AtomicU64,
    /// Queries sent again at once, on a new connection, because the server
    /// had closed their kept one (not counted as retries or attempts).
    pub stale_redials: AtomicU64,
    /// Queries that got no answer in time.
    pub timeouts: AtomicU64,
    /// Jobs a worker took from outside its home queue.
    pub steals: AtomicU64,
    /// UDP answers with TC=1 retried over TCP.
    pub tcp_fallbacks: AtomicU64,
    /// Result statuses (`NOERROR`, `TIMEOUT`, ...).
    pub statuses: Mutex<BTreeMap<String, u64>>,
}

impl RunCounters {
    /// Counts one finished name with `status`.
    pub fn finished(&self, status: &str) {
        self.names.fetch_add(1, Ordering::Relaxed);
        let mut statuses = self.statuses.lock().unwrap_or_else(|p| p.into_inner());
        match statuses.get_mut(status) {
            Some(n) => *n += 1,
            None => {
                statuses.insert(status.to_string(), 1);
            }
        }
    }
}

/// One nameserver's line in the summary.
#[derive(Clone, Debug)]
pub struct NameserverSummary {
    /// `ip:port` or URL.
    pub nameserver: String,
    /// Queries sent.
    pub queries: u64,
    /// Connections opened.
    pub connections_opened: u64,
    /// Exchanges that failed.
    pub failures: u64,
    /// Queries that got no answer in time.
    pub timeouts: u64,
    /// Answers that refused (REFUSED, SERVFAIL, TC=1 over UDP).
    pub refusals: u64,
    /// Queries per second it may be sent at the end (0: not limited).
    pub rate: u64,
    /// Its queries in flight at the end.
    pub in_flight: u64,
    /// Its smoothed round trip at the end, ms (0 before any answer).
    pub srtt_ms: f64,
    /// Its answers' latencies (microseconds).
    pub latency: Histogram,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th percentile latency, ms.
    pub p99_ms: f64,
}

/// Everything a run reports at the end.
#[derive(Clone, Debug, Default)]
pub struct LookupSummary {
    /// Input names (result records written).
    pub names: u64,
    /// Queries sent.
    pub queries: u64,
    /// Connections (and UDP sockets) opened.
    pub connections_opened: u64,
    /// TLS handshakes completed.
    pub tls_handshakes: u64,
    /// Queries sent on an already used connection.
    pub connections_reused: u64,
    /// Retries.
    pub retries: u64,
    /// Queries resent at once because the server had closed their kept connection.
    pub stale_redials: u64,
    /// Timeouts.
    pub timeouts: u64,
    /// Steals.
    pub steals: u64,
    /// Connection attempts that failed.
    pub connect_failures: u64,
    /// Answers that matched no query in flight.
    pub unmatched_responses: u64,
    /// UDP answers retried over TCP because TC=1.
    pub tcp_fallbacks: u64,
    /// Result statuses.
    pub statuses: BTreeMap<String, u64>,
    /// Per nameserver, in order of first use.
    pub per_nameserver: Vec<NameserverSummary>,
    /// Wall time.
    pub elapsed: Duration,
    /// The iterative resolver's counters, when names were resolved from the root.
    pub iterative: Option<IterativeSummary>,
}

impl LookupSummary {
    /// Gathers the counters.
    pub fn gather<'a>(
        run: &RunCounters,
        net: &NetCounters,
        nameservers: impl Iterator<Item = (String, &'a NameserverStats)>,
        elapsed: Duration,
    ) -> LookupSummary {
        let get = NetCounters::get;
        LookupSummary {
            names: get(&run.names),
            queries: get(&net.queries_sent),
            connections_opened: get(&net.connections_opened),
            tls_handshakes: get(&net.tls_handshakes),
            connections_reused: get(&run.connections_reused),
            retries: get(&run.retries),
            stale_redials: get(&run.stale_redials),
            timeouts: get(&run.timeouts),
            steals: get(&run.steals),
            connect_failures: get(&net.connect_failures),
            unmatched_responses: get(&net.unmatched_responses),
            tcp_fallbacks: get(&run.tcp_fallbacks),
            statuses: run
                .statuses
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            per_nameserver: nameservers
                .map(|(name, s)| {
                    let latency = s.latency.lock().unwrap_or_else(|p| p.into_inner());
                    NameserverSummary {
                        nameserver: name,
                        queries: get(&s.queries),
                        connections_opened: get(&s.connections_opened),
                        failures: get(&s.failures),
                        timeouts: get(&s.timeouts),
                        refusals: get(&s.refusals),
                        rate: get(&s.rate),
                        in_flight: get(&s.in_flight),
                        srtt_ms: get(&s.srtt_us) as f64 / 1000.0,
                        latency: latency
                            .buckets()
                            .fold(Histogram::default(), |mut h, (us, n)| {
                                h.add(us, n);
                                h
                            }),
                        p50_ms: latency.percentile_ms(50.0),
                        p99_ms: latency.percentile_ms(99.0),
                    }
                })
                .collect(),
            elapsed,
            iterative: None,
        }
    }

    /// Every counter with its name: the one list that `--stats-json`, the
    /// `lookup.dns` stage's counters and the summary share.
    pub fn counters(&self) -> [(&'static str, u64); 12] {
        [
            ("names", self.names),
            ("queries", self.queries),
            ("connections_opened", self.connections_opened),
            ("tls_handshakes", self.tls_handshakes),
            ("connections_reused", self.connections_reused),
            ("retries", self.retries),
            ("stale_redials", self.stale_redials),
            ("timeouts", self.timeouts),
            ("steals", self.steals),
            ("connect_failures", self.connect_failures),
            ("unmatched_responses", self.unmatched_responses),
            ("tcp_fallbacks", self.tcp_fallbacks),
        ]
    }

    /// The summary as one JSON object (the `--stats-json` contract).
    pub fn to_json(&self) -> String {
        let mut s = String::from("{");
        for (key, value) in self.counters() {
            let _ = write!(s, "\"{key}\":{value},");
        }
        s.push_str("\"statuses\":{");
        for (i, (status, n)) in self.statuses.iter().enumerate() {
            let comma = if i > 0 { "," } else { "" };
            let _ = write!(s, "{comma}\"{status}\":{n}");
        }
        s.push_str("},\"per_nameserver\":{");
        for (i, ns) in self.per_nameserver.iter().enumerate() {
            let comma = if i > 0 { "," } else { "" };
            let mut key = Vec::new();
            push_json_str(ns.nameserver.as_bytes(), &mut key);
            let _ = write!(
                s,
                "{comma}{}:{{\"queries\":{},\"connections_opened\":{},\"failures\":{},\"timeouts\":{},\"refusals\":{},\"rate\":{},\"in_flight\":{},\"srtt_ms\":{:.3},\"p50_ms\":{:.3},\"p99_ms\":{:.3}}}",
                String::from_utf8_lossy(&key), ns.queries, ns.connections_opened, ns.failures,
                ns.timeouts, ns.refusals, ns.rate, ns.in_flight, ns.srtt_ms, ns.p50_ms, ns.p99_ms
            );
        }
        s.push('}');
        if let Some(iterative) = &self.iterative {
            let _ = write!(s, ",\"iterative\":{}", iterative.to_json());
        }
        let _ = write!(s, ",\"elapsed_s\":{:.3}}}", self.elapsed.as_secs_f64());
        s
    }

    /// The counters as a stage's statistics: every counter, `status_X` per
    /// status, and for interval statistics the breakdowns `status`,
    /// `nameserver_queries`, `nameserver_failures`, `nameserver_timeouts`,
    /// `nameserver_refusals`, one latency histogram per nameserver
    /// (`latency_us NAMESERVER`), and the gauges `nameserver_rate`,
    /// `nameserver_in_flight`, `nameserver_srtt_us` (values at the
    /// snapshot, not counts: an interval reads them from its end).
    pub fn fill(&self, s: &mut StageStats) {
        for (key, value) in self.counters() {
            s.add_counter(key, value);
        }
        for (key, value) in self.iterative.iter().flat_map(|i| &i.counters) {
            s.add_counter(&format!("iterative_{key}"), *value);
        }
        for (status, n) in &self.statuses {
            s.add_counter(&format!("status_{status}"), *n);
            s.add_breakdown("status", status, *n);
        }
        for ns in &self.per_nameserver {
            s.add_breakdown("nameserver_queries", &ns.nameserver, ns.queries);
            s.add_breakdown("nameserver_failures", &ns.nameserver, ns.failures);
            s.add_breakdown("nameserver_timeouts", &ns.nameserver, ns.timeouts);
            s.add_breakdown("nameserver_refusals", &ns.nameserver, ns.refusals);
            s.add_breakdown("nameserver_rate", &ns.nameserver, ns.rate);
            s.add_breakdown("nameserver_in_flight", &ns.nameserver, ns.in_flight);
            let srtt_us = (ns.srtt_ms * 1000.0) as u64;
            s.add_breakdown("nameserver_srtt_us", &ns.nameserver, srtt_us);
            s.histograms
                .insert(format!("latency_us {}", ns.nameserver), ns.latency.clone());
        }
    }

    /// The summary for people, several lines.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        let _ = writeln!(
            s,
            "lookup: {} names in {:.2} s ({:.0} names/s), {} queries, {} retries, {} timeouts",
            self.names,
            secs,
            self.names as f64 / secs,
            self.queries,
            self.retries,
            self.timeouts
        );
        let _ = writeln!(
            s,
            "  connections: {} opened, {} TLS handshakes, {} queries on reused connections, {} resent after the server closed one, {} failed connects, {} steals",
            self.connections_opened,
            self.tls_handshakes,
            self.connections_reused,
            self.stale_redials,
            self.connect_failures,
            self.steals
        );
        let statuses: Vec<String> = self
            .statuses
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let _ = writeln!(s, "  statuses: {}", statuses.join(", "));
        if let Some(iterative) = &self.iterative {
            s.push_str(&iterative.to_text(self.names, self.queries));
        }
        for ns in &self.per_nameserver {
            let _ = writeln!(
                s,
                "  {}: {} queries, {} connections, {} timeouts, {} refusals, p50 {:.2} ms, p99 {:.2} ms{}",
                ns.nameserver,
                ns.queries,
                ns.connections_opened,
                ns.timeouts,
                ns.refusals,
                ns.p50_ms,
                ns.p99_ms,
                if ns.rate > 0 {
                    format!(", {} queries/s allowed at the end", ns.rate)
                } else {
                    String::new()
                }
            );
        }
        s
    }
}

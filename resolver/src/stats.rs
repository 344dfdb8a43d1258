//! The counters that are the evidence for the scheduler design: what really
//! happened on the sockets, overall and per nameserver.

use super::iterative::summary::IterativeSummary;
use dnsluice_core::sync;
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
        let mut statuses = sync::lock(&self.statuses);
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

/// The names of [`LookupSummary`]'s counters, in their order.
const COUNTER_NAMES: [&str; 12] = [
    "names",
    "queries",
    "connections_opened",
    "tls_handshakes",
    "connections_reused",
    "retries",
    "stale_redials",
    "timeouts",
    "steals",
    "connect_failures",
    "unmatched_responses",
    "tcp_fallbacks",
];

/// Percentile `q` of latencies in microseconds, in milliseconds.
fn percentile_ms(latency: &Histogram, q: f64) -> f64 {
    latency.percentile(q) as f64 / 1000.0
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
            statuses: sync::lock(&run.statuses).clone(),
            per_nameserver: nameservers
                .map(|(name, s)| {
                    let latency: Histogram = sync::lock(&s.latency).buckets().fold(
                        Histogram::default(),
                        |mut h, (us, n)| {
                            h.add(us, n);
                            h
                        },
                    );
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
                        p50_ms: percentile_ms(&latency, 50.0),
                        p99_ms: percentile_ms(&latency, 99.0),
                        latency,
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
        let values = [
            self.names,
            self.queries,
            self.connections_opened,
            self.tls_handshakes,
            self.connections_reused,
            self.retries,
            self.stale_redials,
            self.timeouts,
            self.steals,
            self.connect_failures,
            self.unmatched_responses,
            self.tcp_fallbacks,
        ];
        std::array::from_fn(|i| (COUNTER_NAMES[i], values[i]))
    }

    /// The counters' fields, in [`COUNTER_NAMES`]' order (as
    /// [`LookupSummary::counters`] reads them; a test holds the two equal).
    fn counter_fields(&mut self) -> [&mut u64; 12] {
        [
            &mut self.names,
            &mut self.queries,
            &mut self.connections_opened,
            &mut self.tls_handshakes,
            &mut self.connections_reused,
            &mut self.retries,
            &mut self.stale_redials,
            &mut self.timeouts,
            &mut self.steals,
            &mut self.connect_failures,
            &mut self.unmatched_responses,
            &mut self.tcp_fallbacks,
        ]
    }

    /// The summary back from the statistics [`LookupSummary::fill`] wrote
    /// (the `lookup.dns` stage's), so a command that runs the stage in a
    /// chain reports what the engine counted; `elapsed` is the run's.
    pub fn from_stats(s: &StageStats, elapsed: Duration) -> LookupSummary {
        let mut summary = LookupSummary {
            elapsed,
            ..LookupSummary::default()
        };
        for (name, field) in COUNTER_NAMES.iter().zip(summary.counter_fields()) {
            *field = s.counters.get(*name).copied().unwrap_or(0);
        }
        let breakdown = |name: &str| s.breakdowns.get(name).cloned().unwrap_or_default();
        summary.statuses = breakdown("status");
        let order = breakdown("nameserver_order");
        let mut nameservers: Vec<(&String, &u64)> = order.iter().collect();
        nameservers.sort_by_key(|(_, position)| **position);
        let of = |name: &str, ns: &str| s.breakdowns.get(name).and_then(|b| b.get(ns)).copied();
        let count = |name: &str, ns: &str| of(name, ns).unwrap_or(0);
        summary.per_nameserver = nameservers
            .into_iter()
            .map(|(ns, _)| {
                let latency = s
                    .histograms
                    .get(&format!("latency_us {ns}"))
                    .cloned()
                    .unwrap_or_default();
                NameserverSummary {
                    nameserver: ns.clone(),
                    queries: count("nameserver_queries", ns),
                    connections_opened: count("nameserver_connections", ns),
                    failures: count("nameserver_failures", ns),
                    timeouts: count("nameserver_timeouts", ns),
                    refusals: count("nameserver_refusals", ns),
                    rate: count("nameserver_rate", ns),
                    in_flight: count("nameserver_in_flight", ns),
                    srtt_ms: count("nameserver_srtt_us", ns) as f64 / 1000.0,
                    p50_ms: percentile_ms(&latency, 50.0),
                    p99_ms: percentile_ms(&latency, 99.0),
                    latency,
                }
            })
            .collect();
        summary.iterative = IterativeSummary::from_values(|name| {
            s.counters.get(&format!("iterative_{name}")).copied()
        });
        summary
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
    /// `nameserver_refusals`, `nameserver_connections`, one latency
    /// histogram per nameserver (`latency_us NAMESERVER`), and the gauges
    /// `nameserver_rate`, `nameserver_in_flight`, `nameserver_srtt_us`
    /// (values at the snapshot, not counts: an interval reads them from its
    /// end) and `nameserver_order` (1 for the first used, 2...).
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
        for (position, ns) in self.per_nameserver.iter().enumerate() {
            // From 1: a breakdown keeps no zero.
            s.add_breakdown("nameserver_order", &ns.nameserver, position as u64 + 1);
            s.add_breakdown("nameserver_queries", &ns.nameserver, ns.queries);
            let opened = ns.connections_opened;
            s.add_breakdown("nameserver_connections", &ns.nameserver, opened);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A summary with every counter distinct, two nameservers in an order
    /// that is not sorted, and the iterative counters.
    fn full_summary() -> LookupSummary {
        let mut summary = LookupSummary {
            elapsed: Duration::from_millis(2500),
            ..LookupSummary::default()
        };
        for (value, field) in (1..).zip(summary.counter_fields()) {
            *field = value * 100 + value;
        }
        summary.statuses = [("NOERROR".to_string(), 90), ("TIMEOUT".to_string(), 11)].into();
        for (i, name) in ["127.0.0.9:53", "127.0.0.1:53"].iter().enumerate() {
            let mut latency = Histogram::default();
            latency.add(1500 + i as u64, 7);
            latency.add(50_047, 3);
            summary.per_nameserver.push(NameserverSummary {
                nameserver: name.to_string(),
                queries: 40 + i as u64,
                connections_opened: 2 + i as u64,
                failures: 3,
                timeouts: 4 + i as u64,
                refusals: 5,
                rate: 1000 * (i as u64 + 1),
                in_flight: 17,
                srtt_ms: 51.25,
                p50_ms: percentile_ms(&latency, 50.0),
                p99_ms: percentile_ms(&latency, 99.0),
                latency,
            });
        }
        // Every counter but one: a zero is left out of the stage's counters.
        summary.iterative = IterativeSummary::from_values(|name| {
            Some(if name == "referrals" {
                0
            } else {
                name.len() as u64
            })
        });
        summary
    }

    #[test]
    fn a_summary_comes_back_whole_from_the_stage_statistics() {
        let summary = full_summary();
        let mut stats = StageStats::new("lookup.dns");
        summary.fill(&mut stats);
        let back = LookupSummary::from_stats(&stats, summary.elapsed);
        assert_eq!(back.counters(), summary.counters());
        assert_eq!(back.to_json(), summary.to_json());
        assert_eq!(back.to_text(), summary.to_text());
        let order: Vec<&str> = back
            .per_nameserver
            .iter()
            .map(|ns| ns.nameserver.as_str())
            .collect();
        assert_eq!(order, ["127.0.0.9:53", "127.0.0.1:53"]);
        assert_eq!(back.per_nameserver[1].connections_opened, 3);
        assert_eq!(back.counters()[0], ("names", 101));
        assert_eq!(back.counters()[11], ("tcp_fallbacks", 1212));
    }
}

//! Every stage's statistics as Prometheus' text exposition format (0.0.4):
//! one `# HELP` and `# TYPE` per family, samples grouped under them.
//!
//! The families (see docs/prometheus-and-duckdb.md):
//! - every stage: `dnsluice_stage_in_total`, `dnsluice_stage_out_total`,
//!   `dnsluice_stage_errors_total{kind}`, `dnsluice_stage_events_total{counter}`
//!   (each counter of `--stats-json` that only grows), and
//!   `dnsluice_stage_breakdown_total{breakdown,key}` (complete counts by
//!   qtype, rcode, lookup status...), labelled `stage` (its index) and `module`;
//! - gauges: `dnsluice_queries_in_flight`, `dnsluice_connections_open`,
//!   `dnsluice_replay_window_queries`, `dnsluice_replay_window_cap_queries`,
//!   `dnsluice_nats_held_items`, `dnsluice_nats_held_lines` (input.nats);
//! - latency histograms in seconds with classic buckets:
//!   `dnsluice_latency_seconds` (replay),
//!   `dnsluice_lookup_nameserver_latency_seconds{nameserver}` and
//!   `dnsluice_diff_latency_seconds{server}` (each server of a diff);
//! - per nameserver of a lookup: `dnsluice_lookup_nameserver_*`;
//! - `dnsluice_build_info{version}` and `dnsluice_run_finished`;
//! - the process's own: `process_cpu_seconds_total`,
//!   `process_resident_memory_bytes` and `dnsluice_thread_cpu_seconds_total{thread}`
//!   (each thread's time by name, ended ones included: see [`super::process`]).

use dnsluice_core::{Histogram, StageStats};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Upper bounds (seconds) of the classic latency buckets, `+Inf` after them.
pub const LATENCY_BUCKETS: [f64; 17] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0,
];

/// A lookup's per-nameserver breakdowns that count (`nameserver_X` →
/// `dnsluice_lookup_nameserver_X_total`), with their help.
const NAMESERVER_COUNTS: [(&str, &str); 5] = [
    ("queries", "Queries sent to the nameserver."),
    ("connections", "Connections opened to the nameserver."),
    ("failures", "Queries to the nameserver that failed."),
    ("timeouts", "Queries to the nameserver that timed out."),
    (
        "refusals",
        "REFUSED, SERVFAIL or truncated answers from the nameserver.",
    ),
];

/// Samples of one family, by name, in the order they were added.
#[derive(Default)]
struct Families {
    /// `(name, type, help)` in first-seen order, then the sample lines of each.
    order: Vec<(&'static str, &'static str, &'static str)>,
    lines: BTreeMap<&'static str, String>,
}

impl Families {
    fn family(
        &mut self,
        name: &'static str,
        kind: &'static str,
        help: &'static str,
    ) -> &mut String {
        if !self.lines.contains_key(name) {
            self.order.push((name, kind, help));
        }
        self.lines.entry(name).or_default()
    }

    fn sample(
        &mut self,
        family: (&'static str, &'static str, &'static str),
        labels: &Labels,
        value: f64,
    ) {
        let (name, kind, help) = family;
        let out = self.family(name, kind, help);
        let _ = writeln!(out, "{name}{} {}", labels.text(), number(value));
    }

    fn histogram(&mut self, family: (&'static str, &'static str), labels: &Labels, h: &Histogram) {
        let (name, help) = family;
        let out = self.family(name, "histogram", help);
        let (buckets, sum, count) = classic(h);
        for (bound, n) in LATENCY_BUCKETS.iter().zip(buckets) {
            let le = labels.with("le", &number(*bound));
            let _ = writeln!(out, "{name}_bucket{} {n}", le.text());
        }
        let _ = writeln!(
            out,
            "{name}_bucket{} {count}",
            labels.with("le", "+Inf").text()
        );
        let _ = writeln!(out, "{name}_sum{} {}", labels.text(), number(sum));
        let _ = writeln!(out, "{name}_count{} {count}", labels.text());
    }

    fn text(self) -> String {
        let mut text = String::new();
        for (name, kind, help) in &self.order {
            let _ = writeln!(text, "# HELP {name} {help}");
            let _ = writeln!(text, "# TYPE {name} {kind}");
            text.push_str(&self.lines[name]);
        }
        text
    }
}

/// A sample's labels, in order.
#[derive(Clone, Default)]
struct Labels(Vec<(&'static str, String)>);

impl Labels {
    fn with(&self, name: &'static str, value: &str) -> Labels {
        let mut out = self.clone();
        out.0.push((name, value.to_string()));
        out
    }

    fn text(&self) -> String {
        if self.0.is_empty() {
            return String::new();
        }
        let pairs: Vec<String> = self
            .0
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
            .collect();
        format!("{{{}}}", pairs.join(","))
    }
}

/// A label value escaped as the format asks: `\`, `"` and newlines.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// A sample value: integers without a fraction, others as Rust prints them.
fn number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

/// A microsecond histogram in the classic buckets: the cumulative count at
/// each bound of [`LATENCY_BUCKETS`], the sum in seconds and the count. A
/// bucket of `h` counts under the first bound at or above its highest
/// value (so a value is never counted under a bound below it), and the sum
/// adds each bucket's highest value (within the histogram's resolution).
fn classic(h: &Histogram) -> ([u64; LATENCY_BUCKETS.len()], f64, u64) {
    let mut counts = [0u64; LATENCY_BUCKETS.len()];
    let (mut sum, mut count) = (0.0, 0);
    for (us, n) in h.buckets() {
        let seconds = us as f64 / 1e6;
        sum += seconds * n as f64;
        count += n;
        if let Some(i) = LATENCY_BUCKETS.iter().position(|b| seconds <= *b) {
            counts[i] += n;
        }
    }
    for i in 1..counts.len() {
        counts[i] += counts[i - 1];
    }
    (counts, sum, count)
}

/// Whether counter `key` of `s` is derived (a histogram's percentile
/// `H.p50`, a breakdown's view `B KEY`): not a count of its own.
fn derived(s: &StageStats, key: &str) -> bool {
    s.histograms.keys().any(|h| {
        key.strip_prefix(h.as_str())
            .is_some_and(|rest| rest.starts_with('.'))
    }) || s.breakdowns.keys().any(|b| {
        key.strip_prefix(b.as_str())
            .is_some_and(|rest| rest.starts_with(' '))
    })
}

/// The exposition of `stages`; `finished`: the run has ended and these are
/// its final values.
pub fn render(stages: &[StageStats], finished: bool) -> String {
    let mut f = Families::default();
    let none = Labels::default();
    let build = none.with("version", env!("CARGO_PKG_VERSION"));
    f.sample(
        (
            "dnsluice_build_info",
            "gauge",
            "The dnsluice build: its version.",
        ),
        &build,
        1.0,
    );
    f.sample(
        (
            "dnsluice_run_finished",
            "gauge",
            "1 once the run has ended and the values are its final ones.",
        ),
        &none,
        if finished { 1.0 } else { 0.0 },
    );
    process_families(&mut f, &none);
    for (index, s) in stages.iter().enumerate() {
        let stage = none
            .with("stage", &index.to_string())
            .with("module", &s.module);
        stage_families(&mut f, &stage, s);
    }
    f.text()
}

/// The process's processor time (in all and by thread name) and memory.
fn process_families(f: &mut Families, none: &Labels) {
    f.sample(
        (
            "process_cpu_seconds_total",
            "counter",
            "User and system processor time of the dnsluice process, in seconds.",
        ),
        none,
        super::process::cpu_seconds(),
    );
    if let Some(bytes) = super::process::resident_bytes() {
        f.sample(
            (
                "process_resident_memory_bytes",
                "gauge",
                "Resident memory of the dnsluice process, in bytes.",
            ),
            none,
            bytes,
        );
    }
    for (name, seconds) in super::process::thread_cpu_seconds() {
        f.sample(
            (
                "dnsluice_thread_cpu_seconds_total",
                "counter",
                "User and system processor time of the process's threads of a name (ended ones included), in seconds.",
            ),
            &none.with("thread", &name),
            seconds,
        );
    }
}

/// One stage's samples.
fn stage_families(f: &mut Families, stage: &Labels, s: &StageStats) {
    let count = |c: u64| c as f64;
    f.sample(
        (
            "dnsluice_stage_in_total",
            "counter",
            "Objects a stage received (records an input read).",
        ),
        stage,
        count(s.input),
    );
    f.sample(
        (
            "dnsluice_stage_out_total",
            "counter",
            "Objects a stage passed on.",
        ),
        stage,
        count(s.output),
    );
    for (kind, n) in &s.errors {
        f.sample(
            (
                "dnsluice_stage_errors_total",
                "counter",
                "Problems a stage met, by kind.",
            ),
            &stage.with("kind", kind),
            count(*n),
        );
    }
    for (key, n) in &s.counters {
        if derived(s, key) {
            continue;
        }
        if GAUGES.iter().any(|(name, _, _)| name == key) {
            gauge(f, stage, key, *n as f64);
        } else {
            f.sample(
                (
                    "dnsluice_stage_events_total",
                    "counter",
                    "A stage's counters as --stats-json has them, by name.",
                ),
                &stage.with("counter", key),
                count(*n),
            );
        }
    }
    for (name, breakdown) in &s.breakdowns {
        if name.starts_with("nameserver_") {
            continue;
        }
        for (key, n) in breakdown {
            let labels = stage.with("breakdown", name).with("key", key);
            f.sample(
                (
                    "dnsluice_stage_breakdown_total",
                    "counter",
                    "Complete counts along one dimension (qtype, rcode, lookup status), by key.",
                ),
                &labels,
                count(*n),
            );
        }
    }
    in_flight(f, stage, s);
    for (name, h) in &s.histograms {
        if name == "latency_us" {
            f.histogram(
                (
                    "dnsluice_latency_seconds",
                    "Answer latencies of a DNS client stage (replay), in seconds.",
                ),
                stage,
                h,
            );
        } else if let Some(server) = name.strip_prefix("latency_us ") {
            let (family, label) = per_server_latency(&s.module);
            f.histogram(family, &stage.with(label, server), h);
        }
    }
    nameservers(f, stage, s);
}

/// The histogram family of a stage's per-server latencies
/// (`latency_us SERVER`) and the label naming the server: a diff's
/// servers, or else a lookup's nameservers.
fn per_server_latency(module: &str) -> ((&'static str, &'static str), &'static str) {
    if module == "output.diff" {
        (
            (
                "dnsluice_diff_latency_seconds",
                "Answer latencies of each server a diff compares, in seconds.",
            ),
            "server",
        )
    } else {
        (
            (
                "dnsluice_lookup_nameserver_latency_seconds",
                "Answer latencies of a lookup, per nameserver, in seconds.",
            ),
            "nameserver",
        )
    }
}

/// Gauges of a stage (values at the snapshot), by counter or derived name:
/// `(name, family, help)`.
const GAUGES: [(&str, &str, &str); 8] = [
    (
        "queries_in_flight",
        "dnsluice_queries_in_flight",
        "Queries a DNS client stage sent that are not yet answered, timed out or failed.",
    ),
    (
        "connections_open",
        "dnsluice_connections_open",
        "Connections a DNS client stage holds open.",
    ),
    (
        "inflight_window",
        "dnsluice_replay_window_queries",
        "Queries the replay window lets be outstanding now.",
    ),
    (
        "inflight_cap",
        "dnsluice_replay_window_cap_queries",
        "The most queries the replay window lets be outstanding.",
    ),
    (
        "held_items",
        "dnsluice_nats_held_items",
        "Work items input.nats took that are not yet acknowledged (their results not all stored).",
    ),
    (
        "held_lines",
        "dnsluice_nats_held_lines",
        "Lines of the work items input.nats holds whose results are not yet stored.",
    ),
    (
        "unfinished_items",
        "dnsluice_nats_unfinished_items",
        "Work items output.nats is gathering the results of (not all stored yet).",
    ),
    (
        "iterative_cache_entries",
        "dnsluice_iterative_cache_entries",
        "Entries in the iterative resolver's cache (expired ones leave it).",
    ),
];

/// Gauge `name` (one of [`GAUGES`]) of a stage.
fn gauge(f: &mut Families, stage: &Labels, name: &str, value: f64) {
    if let Some((_, family, help)) = GAUGES.iter().find(|(n, _, _)| *n == name) {
        f.sample((family, "gauge", help), stage, value);
    }
}

/// A DNS client stage's queries in flight and connections open, derived
/// from its counts (each query sent ends answered, timed out or failed).
fn in_flight(f: &mut Families, stage: &Labels, s: &StageStats) {
    let c = |k: &str| s.counters.get(k).copied();
    if let (Some(sent), Some(answered)) = (c("sent"), c("answered")) {
        let ended = answered + c("timeouts").unwrap_or(0) + c("errors").unwrap_or(0);
        gauge(
            f,
            stage,
            "queries_in_flight",
            sent.saturating_sub(ended) as f64,
        );
    }
    // Only where closes are counted (the DNS clients of replay; a lookup
    // counts the connections it opened, not those it closed).
    if let (Some(opened), Some(closed)) = (c("connections_opened"), c("connections_closed")) {
        gauge(
            f,
            stage,
            "connections_open",
            opened.saturating_sub(closed) as f64,
        );
    }
}

/// A lookup's per-nameserver series.
fn nameservers(f: &mut Families, stage: &Labels, s: &StageStats) {
    for (what, help) in NAMESERVER_COUNTS {
        let Some(b) = s.breakdowns.get(&format!("nameserver_{what}")) else {
            continue;
        };
        let name = family_name(what);
        for (ns, n) in b {
            f.sample(
                (name, "counter", help),
                &stage.with("nameserver", ns),
                *n as f64,
            );
        }
    }
    let gauges: [(&str, &'static str, &'static str, f64); 3] = [
        (
            "nameserver_rate",
            "dnsluice_lookup_nameserver_rate",
            "The queries per second the nameserver is paced at.",
            1.0,
        ),
        (
            "nameserver_in_flight",
            "dnsluice_lookup_nameserver_in_flight",
            "Queries in flight to the nameserver.",
            1.0,
        ),
        (
            "nameserver_srtt_us",
            "dnsluice_lookup_nameserver_srtt_seconds",
            "The nameserver's smoothed round trip, in seconds.",
            1e-6,
        ),
    ];
    for (key, name, help, scale) in gauges {
        let Some(b) = s.breakdowns.get(key) else {
            continue;
        };
        for (ns, n) in b {
            f.sample(
                (name, "gauge", help),
                &stage.with("nameserver", ns),
                *n as f64 * scale,
            );
        }
    }
}

/// The family of a per-nameserver count.
fn family_name(what: &str) -> &'static str {
    match what {
        "queries" => "dnsluice_lookup_nameserver_queries_total",
        "connections" => "dnsluice_lookup_nameserver_connections_total",
        "failures" => "dnsluice_lookup_nameserver_failures_total",
        "timeouts" => "dnsluice_lookup_nameserver_timeouts_total",
        _ => "dnsluice_lookup_nameserver_refusals_total",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_gauge_counter_is_served_as_a_gauge_and_no_count_is() {
        use dnsluice_core::stats::{is_gauge, GAUGE_COUNTERS};
        for name in GAUGE_COUNTERS {
            assert!(GAUGES.iter().any(|(n, _, _)| *n == name), "{name}");
        }
        // Derived from counts here, not counters of their own.
        let derived = ["queries_in_flight", "connections_open"];
        for (name, _, _) in GAUGES {
            assert!(is_gauge(name) || derived.contains(&name), "{name}");
        }
    }

    #[test]
    fn histograms_count_each_bucket_under_the_first_bound_above_it() {
        let mut h = Histogram::default();
        h.add(100, 2); // 100 µs: under 0.0001 s exactly
        h.add(101, 1); // just above: under 0.00025
        h.add(40_000_000, 1); // 40 s: only under +Inf
        let (buckets, sum, count) = classic(&h);
        assert_eq!(buckets[0], 2);
        assert_eq!(buckets[1], 3);
        assert_eq!(buckets[LATENCY_BUCKETS.len() - 1], 3);
        assert_eq!(count, 4);
        assert!((sum - (0.0002 + 0.000101 + 40.0)).abs() < 1e-9);
    }

    #[test]
    fn a_diffs_servers_and_a_workers_held_items_have_their_families() {
        let mut diff = StageStats::new("output.diff");
        let mut h = Histogram::default();
        h.add(30_000, 2);
        diff.histograms.insert("latency_us 127.0.0.2:53".into(), h);
        let mut nats = StageStats::new("input.nats");
        nats.counters.insert("held_items".into(), 0);
        nats.counters.insert("held_lines".into(), 12);
        let text = render(&[nats, diff], false);
        assert!(text.contains("dnsluice_diff_latency_seconds_count{stage=\"1\",module=\"output.diff\",server=\"127.0.0.2:53\"} 2\n"), "{text}");
        assert!(text.contains("# TYPE dnsluice_nats_held_items gauge\ndnsluice_nats_held_items{stage=\"0\",module=\"input.nats\"} 0\n"), "{text}");
        assert!(
            text.contains("dnsluice_nats_held_lines{stage=\"0\",module=\"input.nats\"} 12\n"),
            "{text}"
        );
        assert!(!text.contains("nameserver"), "{text}");
    }

    #[test]
    fn labels_are_escaped_and_derived_counters_left_out() {
        let mut s = StageStats::new("output.dnscli");
        s.counters.insert("sent".into(), 5);
        s.counters.insert("answered".into(), 4);
        s.counters.insert("latency_us.p50".into(), 70);
        s.histograms
            .insert("latency_us".into(), Histogram::default());
        s.add_breakdown("qtype", "A\"\\\n", 3);
        s.add_counter("qtype A\"\\\n", 3);
        let text = render(&[s], true);
        assert!(text.contains("dnsluice_stage_events_total{stage=\"0\",module=\"output.dnscli\",counter=\"sent\"} 5\n"), "{text}");
        assert!(!text.contains("p50"), "{text}");
        assert!(!text.contains("counter=\"qtype"), "{text}");
        assert!(text.contains("key=\"A\\\"\\\\\\n\"} 3"), "{text}");
        assert!(
            text.contains("dnsluice_queries_in_flight{stage=\"0\",module=\"output.dnscli\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("dnsluice_run_finished 1\n"), "{text}");
        assert_eq!(
            text.matches("# TYPE dnsluice_stage_events_total counter")
                .count(),
            1
        );
    }
}

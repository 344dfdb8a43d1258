//! Per-stage counters, reported at the end of a run, and the arithmetic on
//! them that interval statistics and split threads need: [`StageStats::since`]
//! (what happened between two snapshots) and [`StageStats::absorb`] (two
//! parts of one stream added up).

mod histogram;
mod top;

pub use histogram::{coarse_bucket, Histogram, PERCENTILES};
pub use top::{TopEntry, TopList};

use std::collections::BTreeMap;

/// What one stage counted during a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StageStats {
    /// The module's dotted name (`input.mmpcap`, ...).
    pub module: String,
    /// Objects received (filters, outputs) or records read (inputs).
    pub input: u64,
    /// Objects passed on.
    pub output: u64,
    /// Problems by kind (`bad_udp_length`, `truncated_record`, ...).
    pub errors: BTreeMap<String, u64>,
    /// Other named counters a stage wants to report (bytes, non-IP frames, ...).
    /// They only grow during a run; a counter named `H.p50`, `H.max`... for
    /// a histogram `H` is that histogram's percentile, and one named
    /// `B KEY` for a breakdown `B` is that breakdown's count of `KEY`.
    pub counters: BTreeMap<String, u64>,
    /// Human-readable warnings (a truncated file, ...), printed at the end.
    pub warnings: Vec<String>,
    /// Lines describing examples of a problem counted in the counters (the
    /// IP datagrams `filter.dns` gave up on), by the frame each began at:
    /// the first [`EXAMPLES_MOST`] by frame. Threads' examples merge into
    /// the first by frame of them all, the ones one thread gives. Printed
    /// after the warnings ([`StageStats::warning_lines`]).
    pub examples: BTreeMap<u64, String>,
    /// Named series of values over time (a client's answers per second, ...),
    /// for `--stats-json`; not shown in the summary.
    pub series: BTreeMap<String, Vec<u64>>,
    /// Complete counts along one dimension (`qtype` → `A` → n): where the
    /// summary's counters list only the most frequent (`qtype A`), a
    /// breakdown has every key, so intervals of it add up. Not in the summary.
    pub breakdowns: BTreeMap<String, BTreeMap<String, u64>>,
    /// Distributions (`latency_us`: answer latencies in microseconds). Not in the summary.
    pub histograms: BTreeMap<String, Histogram>,
    /// Bounded most-frequent lists (`qnames`, `clients`), with their error bounds.
    pub top: BTreeMap<String, TopList>,
    /// Where an input is in what it reads (for progress and capture times).
    pub reading: Option<Reading>,
    /// Breakdowns whose largest counts the counters list ([`StageStats::list_top`]),
    /// with how many: a merge lists them again from the merged breakdown.
    pub listed: BTreeMap<String, usize>,
}

/// Where an input is: bytes read of how many, and the capture times seen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    /// Bytes of the source consumed so far.
    pub offset: u64,
    /// The source's size, when known (a regular file).
    pub total: Option<u64>,
    /// Capture time of the first record with one, ns since the Unix epoch.
    pub first_ts_ns: Option<i64>,
    /// Capture time of the last record read so far.
    pub last_ts_ns: Option<i64>,
}

/// Counters that are a value now (gauges), not a count: an interval
/// ([`StageStats::since`]) carries their value at its end, and a set of
/// runs the latest run's, not a difference or a sum.
pub const GAUGE_COUNTERS: [&str; 6] = [
    "inflight_window",
    "inflight_cap",
    "held_items",
    "held_lines",
    "unfinished_items",
    "iterative_cache_entries",
];

/// Breakdowns that are gauges (a lookup's, per nameserver), as
/// [`GAUGE_COUNTERS`].
pub const GAUGE_BREAKDOWNS: [&str; 3] = [
    "nameserver_rate",
    "nameserver_in_flight",
    "nameserver_srtt_us",
];

/// Counters that hold the largest value seen, not a count: merged by
/// taking the larger (`filter.timing`'s largest drift).
pub const MAX_COUNTERS: [&str; 1] = ["max_drift_us"];

/// Whether counter `name` is a gauge ([`GAUGE_COUNTERS`]).
pub fn is_gauge(name: &str) -> bool {
    GAUGE_COUNTERS.contains(&name)
}

/// Whether breakdown `name` is a gauge ([`GAUGE_BREAKDOWNS`]).
pub fn is_gauge_breakdown(name: &str) -> bool {
    GAUGE_BREAKDOWNS.contains(&name)
}

/// The most examples a stage keeps ([`StageStats::examples`]).
pub const EXAMPLES_MOST: usize = 10;

/// Adds the example `line()` about frame `frame` to `examples` if it is
/// among the first [`EXAMPLES_MOST`] by frame (the line is made only then;
/// of two examples about one frame, the first stays).
pub fn keep_example(
    examples: &mut BTreeMap<u64, String>,
    frame: u64,
    line: impl FnOnce() -> String,
) {
    let full = examples.len() >= EXAMPLES_MOST;
    if examples.contains_key(&frame)
        || (full
            && examples
                .last_key_value()
                .is_some_and(|(last, _)| *last < frame))
    {
        return;
    }
    examples.insert(frame, line());
    while examples.len() > EXAMPLES_MOST {
        examples.pop_last();
    }
}

impl StageStats {
    /// The warnings, then the examples in frame order: what is printed and
    /// written as the stage's warnings.
    pub fn warning_lines(&self) -> impl Iterator<Item = &String> {
        self.warnings.iter().chain(self.examples.values())
    }

    /// Adds the example `line`, about frame `frame`, if it is among the
    /// first [`EXAMPLES_MOST`] by frame.
    pub fn add_example(&mut self, frame: u64, line: String) {
        keep_example(&mut self.examples, frame, || line);
    }

    /// Empty counters for `module`.
    pub fn new(module: &str) -> Self {
        StageStats {
            module: module.to_string(),
            ..Default::default()
        }
    }

    /// Adds `n` to the error kind `kind` (kinds with 0 are left out).
    pub fn add_error(&mut self, kind: &str, n: u64) {
        if n > 0 {
            *self.errors.entry(kind.to_string()).or_default() += n;
        }
    }

    /// Adds `n` to the counter `name` (counters with 0 are left out).
    pub fn add_counter(&mut self, name: &str, n: u64) {
        if n > 0 {
            *self.counters.entry(name.to_string()).or_default() += n;
        }
    }

    /// Lists breakdown `name`'s `n` largest counts as counters `name KEY`
    /// (ties by key), for the summary. A merge of two parts of a stream
    /// ([`StageStats::absorb`]) lists them again from the merged breakdown,
    /// so a stream in parts lists what the whole stream lists.
    pub fn list_top(&mut self, name: &str, n: usize) {
        let prefix = format!("{name} ");
        self.counters.retain(|key, _| !key.starts_with(&prefix));
        if let Some(breakdown) = self.breakdowns.get(name) {
            let mut counts: Vec<(&String, &u64)> = breakdown.iter().collect();
            counts.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            for (key, count) in counts.into_iter().take(n) {
                self.counters.insert(format!("{prefix}{key}"), *count);
            }
        }
        self.listed.insert(name.to_string(), n);
    }

    /// Adds `n` to `key` of breakdown `name` (zero counts are left out).
    pub fn add_breakdown(&mut self, name: &str, key: &str, n: u64) {
        if n > 0 {
            let breakdown = self.breakdowns.entry(name.to_string()).or_default();
            *breakdown.entry(key.to_string()).or_default() += n;
        }
    }

    /// Sets every derived counter present (`H.p50`... from histogram `H`,
    /// `B KEY` from breakdown `B`) from what it is derived from.
    fn derive(&mut self) {
        let keys: Vec<String> = self.counters.keys().cloned().collect();
        for key in keys {
            if let Some(value) = self.derived_value(&key) {
                self.counters.insert(key, value);
            }
        }
    }

    /// The value of derived counter `key`, or `None` when it is not one.
    fn derived_value(&self, key: &str) -> Option<u64> {
        for (name, histogram) in &self.histograms {
            if let Some(suffix) = key
                .strip_prefix(name.as_str())
                .and_then(|r| r.strip_prefix('.'))
            {
                if suffix == "max" {
                    return Some(histogram.max());
                }
                if let Some((_, q)) = PERCENTILES.iter().find(|(s, _)| *s == suffix) {
                    return Some(histogram.percentile(*q));
                }
            }
        }
        for (name, breakdown) in &self.breakdowns {
            if let Some(k) = key
                .strip_prefix(name.as_str())
                .and_then(|r| r.strip_prefix(' '))
            {
                return Some(breakdown.get(k).copied().unwrap_or(0));
            }
        }
        None
    }

    /// What this stage counted since `earlier` (a snapshot of the same stage
    /// taken before): counts, errors, breakdowns and histograms subtracted
    /// (a count that shrank gives 0), percentiles computed from the
    /// interval's histograms, the `B KEY` counters of breakdowns left out
    /// (the breakdowns have them all), warnings that are new, no series and
    /// no top lists (they do not subtract). The reading spans the capture
    /// times from `earlier`'s last record (or this one's first) to this one's
    /// last.
    pub fn since(&self, earlier: &StageStats) -> StageStats {
        let minus = |now: &BTreeMap<String, u64>, then: &BTreeMap<String, u64>| {
            now.iter()
                .filter_map(|(k, v)| {
                    let d = v.saturating_sub(then.get(k).copied().unwrap_or(0));
                    (d > 0).then(|| (k.clone(), d))
                })
                .collect::<BTreeMap<_, _>>()
        };
        let mut out = StageStats::new(&self.module);
        out.input = self.input.saturating_sub(earlier.input);
        out.output = self.output.saturating_sub(earlier.output);
        out.errors = minus(&self.errors, &earlier.errors);
        for (name, breakdown) in &self.breakdowns {
            if is_gauge_breakdown(name) {
                out.breakdowns.insert(name.clone(), breakdown.clone());
                continue;
            }
            let empty = BTreeMap::new();
            let then = earlier.breakdowns.get(name).unwrap_or(&empty);
            let d = minus(breakdown, then);
            if !d.is_empty() {
                out.breakdowns.insert(name.clone(), d);
            }
        }
        for (name, histogram) in &self.histograms {
            let d = match earlier.histograms.get(name) {
                Some(then) => histogram.since(then),
                None => histogram.clone(),
            };
            out.histograms.insert(name.clone(), d);
        }
        // Every counter present now, with its difference (zero included);
        // percentiles from the interval's histograms; breakdown views left out.
        for (key, value) in &self.counters {
            if is_gauge(key) {
                out.counters.insert(key.clone(), *value);
            } else if self.derived_value(key).is_none() {
                let before = earlier.counters.get(key).copied().unwrap_or(0);
                out.counters
                    .insert(key.clone(), value.saturating_sub(before));
            } else if self
                .histograms
                .keys()
                .any(|h| key.starts_with(&format!("{h}.")))
            {
                out.counters.insert(key.clone(), 0);
            }
        }
        out.derive();
        out.warnings = self
            .warnings
            .iter()
            .filter(|w| !earlier.warnings.contains(w))
            .cloned()
            .collect();
        out.examples = self
            .examples
            .iter()
            .filter(|(frame, _)| !earlier.examples.contains_key(frame))
            .map(|(frame, line)| (*frame, line.clone()))
            .collect();
        out.reading = self.reading.map(|now| Reading {
            first_ts_ns: earlier
                .reading
                .and_then(|r| r.last_ts_ns)
                .or(now.first_ts_ns),
            ..now
        });
        out
    }

    /// Adds `other`, the same stage's statistics over another part of the
    /// stream (another thread's copy of it): counts, errors, breakdowns,
    /// histograms and series add up, top lists merge (keeping as many
    /// entries as the longer had), warnings are kept once, percentile
    /// counters are recomputed from the summed histograms.
    pub fn absorb(&mut self, other: StageStats) {
        self.input += other.input;
        self.output += other.output;
        for (kind, n) in other.errors {
            *self.errors.entry(kind).or_default() += n;
        }
        for (name, breakdown) in other.breakdowns {
            let sum = self.breakdowns.entry(name).or_default();
            for (key, n) in breakdown {
                *sum.entry(key).or_default() += n;
            }
        }
        for (name, histogram) in &other.histograms {
            self.histograms
                .entry(name.clone())
                .or_default()
                .absorb(histogram);
        }
        for (name, n) in &other.counters {
            let mine = self.counters.entry(name.clone()).or_default();
            match MAX_COUNTERS.contains(&name.as_str()) {
                true => *mine = (*mine).max(*n),
                false => *mine += n,
            }
        }
        self.derive();
        for (name, n) in other.listed {
            let n = self.listed.get(&name).map_or(n, |mine| n.max(*mine));
            self.list_top(&name, n);
        }
        for (name, list) in other.top {
            match self.top.get_mut(&name) {
                Some(mine) => {
                    let keep = mine.entries.len().max(list.entries.len());
                    mine.absorb(&list, keep);
                }
                None => {
                    self.top.insert(name, list);
                }
            }
        }
        for (name, values) in other.series {
            let series = self.series.entry(name).or_default();
            if series.len() < values.len() {
                series.resize(values.len(), 0);
            }
            for (s, v) in series.iter_mut().zip(values) {
                *s += v;
            }
        }
        for warning in other.warnings {
            if !self.warnings.contains(&warning) {
                self.warnings.push(warning);
            }
        }
        for (frame, line) in other.examples {
            self.add_example(frame, line);
        }
    }
}

impl StageStats {
    /// Adds `later`, the same stage's statistics over a later run of the
    /// same pipeline (the next file of a set), as [`StageStats::absorb`]
    /// does, but its gauges ([`GAUGE_COUNTERS`], [`GAUGE_BREAKDOWNS`]: what
    /// was held as the run ended) replace this one's instead of adding up.
    pub fn absorb_later(&mut self, later: StageStats) {
        let gauges: Vec<(String, u64)> = later
            .counters
            .iter()
            .filter(|(name, _)| is_gauge(name))
            .map(|(name, n)| (name.clone(), *n))
            .collect();
        let gauge_breakdowns: Vec<(String, BTreeMap<String, u64>)> = later
            .breakdowns
            .iter()
            .filter(|(name, _)| is_gauge_breakdown(name))
            .map(|(name, b)| (name.clone(), b.clone()))
            .collect();
        self.absorb(later);
        // A gauge the later run does not have was 0 as it ended (zeros are
        // left out), not what an earlier run held.
        self.counters.retain(|name, _| !is_gauge(name));
        self.breakdowns.retain(|name, _| !is_gauge_breakdown(name));
        self.counters.extend(gauges);
        self.breakdowns.extend(gauge_breakdowns);
    }
}

/// What every stage of a chain counted since `earlier` (see
/// [`StageStats::since`]), stage by stage in order; a stage with no
/// counterpart in `earlier` (the stages after a split appear at its end)
/// is compared with nothing.
pub fn since(now: &[StageStats], earlier: &[StageStats]) -> Vec<StageStats> {
    now.iter()
        .enumerate()
        .map(
            |(i, stage)| match earlier.get(i).filter(|e| e.module == stage.module) {
                Some(then) => stage.since(then),
                None => stage.since(&StageStats::new(&stage.module)),
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(answered: u64, latencies: &[u64]) -> StageStats {
        let mut s = StageStats::new("output.dnscli");
        s.counters.insert("answered".into(), answered);
        s.counters.insert("timeouts".into(), 0);
        let mut h = Histogram::default();
        for l in latencies {
            h.add(*l, 1);
        }
        s.counters
            .insert("latency_us.p50".into(), h.percentile(50.0));
        s.counters.insert("latency_us.max".into(), h.max());
        s.histograms.insert("latency_us".into(), h);
        s
    }

    #[test]
    fn an_interval_has_its_own_percentiles_and_keeps_zero_contract_counters() {
        let early = client(3, &[100, 100, 100]);
        let late = client(6, &[100, 100, 100, 900, 900, 900]);
        let d = late.since(&early);
        assert_eq!(d.counters["answered"], 3);
        assert_eq!(
            d.counters["timeouts"], 0,
            "present at zero: {:?}",
            d.counters
        );
        assert_eq!(d.counters["latency_us.p50"], 900);
        assert_eq!(d.counters["latency_us.max"], 900);
        assert_eq!(d.histograms["latency_us"].count(), 3);
    }

    #[test]
    fn breakdown_views_are_left_out_of_intervals() {
        let mut early = StageStats::new("filter.dns");
        early.add_counter("messages", 5);
        early.add_counter("qtype A", 5);
        early.add_breakdown("qtype", "A", 5);
        let mut late = early.clone();
        late.counters.insert("messages".into(), 9);
        late.counters.remove("qtype A");
        late.add_counter("qtype MX", 99);
        late.add_breakdown("qtype", "NS", 4);
        let d = late.since(&early);
        assert_eq!(d.counters.get("messages"), Some(&4));
        assert!(!d.counters.keys().any(|k| k.starts_with("qtype ")), "{d:?}");
        assert_eq!(d.breakdowns["qtype"].get("NS"), Some(&4));
        assert_eq!(d.breakdowns["qtype"].get("A"), None);
    }

    #[test]
    fn reading_spans_from_the_last_snapshot() {
        let mut early = StageStats::new("input.mmpcap");
        early.reading = Some(Reading {
            offset: 100,
            total: Some(1000),
            first_ts_ns: Some(10),
            last_ts_ns: Some(20),
        });
        let mut late = early.clone();
        late.reading.as_mut().unwrap().last_ts_ns = Some(50);
        let span = late.since(&early).reading.unwrap();
        assert_eq!((span.first_ts_ns, span.last_ts_ns), (Some(20), Some(50)));
        let first = early
            .since(&StageStats::new("input.mmpcap"))
            .reading
            .unwrap();
        assert_eq!((first.first_ts_ns, first.last_ts_ns), (Some(10), Some(20)));
    }

    #[test]
    fn absorbed_halves_have_the_percentiles_of_the_whole() {
        let mut a = client(2, &[100, 200]);
        let b = client(2, &[300, 400]);
        a.absorb(b);
        assert_eq!(a.counters["answered"], 4);
        assert_eq!(a.counters["latency_us.p50"], 200);
        assert_eq!(a.counters["latency_us.max"], 400);
    }

    #[test]
    fn stages_appearing_later_are_compared_with_nothing() {
        let early = vec![StageStats::new("filter.split")];
        let mut late = early.clone();
        let mut appended = StageStats::new("output.null");
        appended.input = 7;
        late.push(appended);
        let d = since(&late, &early);
        assert_eq!(d.len(), 2);
        assert_eq!(d[1].input, 7);
    }

    #[test]
    fn examples_merge_into_the_first_by_frame_of_all() {
        // Two threads' examples, each its own first ten of frames 2, 4, ...
        // and 1, 3, ...: merged, the first ten of the frames 1 to 20.
        let mut even = StageStats::new("filter.dns");
        let mut odd = StageStats::new("filter.dns");
        for frame in (1..=40).rev() {
            let side = if frame % 2 == 0 { &mut even } else { &mut odd };
            side.add_example(frame, format!("frame {frame}"));
        }
        assert_eq!(even.examples.keys().copied().max(), Some(20));
        even.warnings.push("a warning".into());
        even.absorb(odd);
        let lines: Vec<&String> = even.warning_lines().collect();
        let mut expected = vec!["a warning".to_string()];
        expected.extend((1..=10).map(|f| format!("frame {f}")));
        assert_eq!(lines, expected.iter().collect::<Vec<_>>());
    }

    #[test]
    fn an_example_past_the_first_ten_is_not_made() {
        let mut examples = BTreeMap::new();
        for frame in 1..=10 {
            keep_example(&mut examples, frame, || frame.to_string());
        }
        keep_example(&mut examples, 11, || panic!("made a line that is not kept"));
        keep_example(&mut examples, 3, || panic!("made a line for a frame kept"));
        assert_eq!(examples.len(), EXAMPLES_MOST);
    }

    #[test]
    fn an_interval_has_a_gauges_value_not_its_change() {
        let snapshot = |cap: u64, window: u64, sent: u64| {
            let mut s = StageStats::new("output.dnscli");
            s.counters.insert("inflight_cap".into(), cap);
            s.counters.insert("inflight_window".into(), window);
            s.counters.insert("sent".into(), sent);
            s.breakdowns
                .entry("nameserver_in_flight".into())
                .or_default()
                .insert("127.0.0.1:53".into(), window);
            s
        };
        let d = snapshot(100, 40, 900).since(&snapshot(100, 60, 500));
        assert_eq!(d.counters["inflight_cap"], 100);
        assert_eq!(d.counters["inflight_window"], 40);
        assert_eq!(d.counters["sent"], 400);
        assert_eq!(d.breakdowns["nameserver_in_flight"]["127.0.0.1:53"], 40);
    }
}

//! Per-stage counters, reported at the end of a run.

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
    pub counters: BTreeMap<String, u64>,
    /// Human-readable warnings (a truncated file, ...), printed at the end.
    pub warnings: Vec<String>,
    /// Named series of values over time (a client's answers per second, ...),
    /// for `--stats-json`; not shown in the summary.
    pub series: BTreeMap<String, Vec<u64>>,
}

impl StageStats {
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
}

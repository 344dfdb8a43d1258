//! The iterative resolver's counters at the end of a run: the cache's hits
//! and misses, queries per zone level, referrals, lame responses, glueless
//! lookups, TCP fallbacks and records dropped for their bailiwick.

use super::{Resolver, LEVELS};
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

/// The counters, by name, in a fixed order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IterativeSummary {
    /// `(name, value)` pairs.
    pub counters: Vec<(&'static str, u64)>,
}

/// Names of the counters other than the per-level ones, in their order.
const COUNTER_NAMES: [&str; 14] = [
    "cache_hits",
    "cache_misses",
    "cache_delegation_hits",
    "cache_entries",
    "referrals",
    "lame_responses",
    "timeouts",
    "glueless_lookups",
    "tcp_fallbacks",
    "edns_fallbacks",
    "out_of_bailiwick_dropped",
    "malformed_responses",
    "network_errors",
    "tcp_dials_spared",
];

/// Names of the per-level query counters.
const LEVEL_NAMES: [&str; LEVELS] = [
    "queries_root",
    "queries_level1",
    "queries_level2",
    "queries_level3",
    "queries_level4",
    "queries_deeper",
];

impl IterativeSummary {
    /// Reads the counters of `resolver`.
    pub fn gather(resolver: &Resolver) -> IterativeSummary {
        let get = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
        let cache = &resolver.cache.counters;
        let r = &resolver.counters;
        let values = [
            get(&cache.hits),
            get(&cache.misses),
            get(&cache.delegation_hits),
            resolver.cache.len() as u64,
            get(&r.referrals),
            get(&r.lame_responses),
            get(&r.timeouts),
            get(&r.glueless_lookups),
            get(&r.tcp_fallbacks),
            get(&r.edns_fallbacks),
            get(&r.out_of_bailiwick),
            get(&r.malformed_responses),
            get(&r.network_errors),
            get(&resolver.authorities.dials_spared),
        ];
        let levels = r.queries_by_level.iter().map(get);
        let counters = COUNTER_NAMES
            .iter()
            .chain(&LEVEL_NAMES)
            .copied()
            .zip(values.into_iter().chain(levels))
            .collect();
        IterativeSummary { counters }
    }

    /// The counters back from their values by name (`value_of("referrals")`),
    /// as [`IterativeSummary::gather`] named them, a missing one 0 (where
    /// counters are kept, zeros are left out); `None` when none is there
    /// (the names were not resolved from the root).
    pub fn from_values(value_of: impl Fn(&str) -> Option<u64>) -> Option<IterativeSummary> {
        let names = COUNTER_NAMES.iter().chain(&LEVEL_NAMES);
        let values: Vec<Option<u64>> = names.clone().map(|name| value_of(name)).collect();
        values
            .iter()
            .any(Option::is_some)
            .then(|| IterativeSummary {
                counters: names
                    .copied()
                    .zip(values.into_iter().map(Option::unwrap_or_default))
                    .collect(),
            })
    }

    /// A counter by name (0 when unknown).
    pub fn get(&self, name: &str) -> u64 {
        self.counters
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0, |(_, v)| *v)
    }

    /// The counters as one JSON object.
    pub fn to_json(&self) -> String {
        let fields: Vec<String> = self
            .counters
            .iter()
            .map(|(k, v)| format!("\"{k}\":{v}"))
            .collect();
        format!("{{{}}}", fields.join(","))
    }

    /// Two lines for people.
    pub fn to_text(&self, names: u64, queries: u64) -> String {
        let hits = self.get("cache_hits");
        let looked = hits + self.get("cache_misses");
        let mut s = String::new();
        let _ = writeln!(
            s,
            "  iterative: {:.2} queries per name, cache hit rate {:.1}% ({} entries), {} referrals, {} lame responses, {} glueless lookups, {} TCP fallbacks, {} EDNS fallbacks, {} out-of-bailiwick records dropped, {} malformed responses, {} network errors, {} TCP dials spared (the server's last failed)",
            queries as f64 / names.max(1) as f64,
            100.0 * hits as f64 / looked.max(1) as f64,
            self.get("cache_entries"),
            self.get("referrals"),
            self.get("lame_responses"),
            self.get("glueless_lookups"),
            self.get("tcp_fallbacks"),
            self.get("edns_fallbacks"),
            self.get("out_of_bailiwick_dropped"),
            self.get("malformed_responses"),
            self.get("network_errors"),
            self.get("tcp_dials_spared"),
        );
        let levels: Vec<String> = LEVEL_NAMES
            .iter()
            .map(|n| format!("{} {}", n.trim_start_matches("queries_"), self.get(n)))
            .collect();
        let _ = writeln!(s, "  queries by zone level: {}", levels.join(", "));
        s
    }
}

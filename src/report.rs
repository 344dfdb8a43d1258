//! End-of-run reporting: the per-stage summary on stderr, `--stats-json`,
//! and a stage's statistics as JSON (also what interval lines hold).

use dnsluice_core::{Histogram, StageStats, TopEntry, TopList};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::io::Write;

/// Significant bits of the histogram buckets written to files (under 1 % wide).
pub const HISTOGRAM_BITS: u32 = 8;

/// Prints one line per stage (objects in/out, rate), then its errors and
/// counters on indented lines of at most about 100 characters.
pub fn print_summary(stats: &[StageStats], elapsed: f64) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "dnsluice: {:.3} s", elapsed);
    for s in stats {
        let rate = if elapsed > 0.0 {
            s.input as f64 / elapsed
        } else {
            0.0
        };
        let _ = writeln!(
            err,
            "  {:<16} in {:>10}  out {:>10}  {:>12.0}/s",
            s.module, s.input, s.output, rate
        );
        for (label, map) in [("errors", &s.errors), ("counts", &s.counters)] {
            for line in wrap(map, 96) {
                let _ = writeln!(err, "    {label:<7} {line}");
            }
        }
        for (name, list) in &s.top {
            let entries: Vec<String> = list
                .entries
                .iter()
                .take(5)
                .map(|e| format!("{} {}", e.key, e.count))
                .collect();
            let _ = writeln!(err, "    top {name}: {}", entries.join(", "));
        }
    }
}

/// `key=value` pairs joined with spaces, in lines of at most `width` characters.
fn wrap(map: &std::collections::BTreeMap<String, u64>, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for (k, v) in map {
        let item = format!("{k}={v}");
        match lines.last_mut() {
            Some(line) if line.len() + 1 + item.len() <= width => {
                line.push(' ');
                line.push_str(&item);
            }
            _ => lines.push(item),
        }
    }
    lines
}

/// The summary as one JSON object:
/// `{"stages":[{"module","in","out","errors","counters","warnings"[,"top"]}...],"elapsed_s"}`
/// (`top`: a stage's bounded top lists, when it keeps any).
pub fn stats_json(stats: &[StageStats], elapsed: f64) -> String {
    let stages: Vec<Value> = stats.iter().map(|s| stage_value(s, false)).collect();
    let mut text = json!({ "stages": stages, "elapsed_s": elapsed }).to_string();
    text.push('\n');
    text
}

fn counts(m: &BTreeMap<String, u64>) -> Value {
    Value::Object(
        m.iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect::<Map<_, _>>(),
    )
}

/// A histogram as `[[highest value of the bucket, count], ...]`, coarsened
/// to [`HISTOGRAM_BITS`].
pub fn histogram_value(h: &Histogram) -> Value {
    let coarse = h.coarsened(HISTOGRAM_BITS);
    Value::Array(coarse.buckets().map(|(b, n)| json!([b, n])).collect())
}

/// The histogram [`histogram_value`] wrote.
pub fn histogram_from(value: &Value) -> Histogram {
    let mut h = Histogram::default();
    for pair in value.as_array().into_iter().flatten() {
        if let (Some(b), Some(n)) = (pair[0].as_u64(), pair[1].as_u64()) {
            h.add(b, n);
        }
    }
    h
}

fn top_value(list: &TopList) -> Value {
    json!({
        "entries": list.entries.iter().map(|e| json!({"key": e.key, "count": e.count, "error": e.error})).collect::<Vec<_>>(),
        "counted": list.counted,
        "capacity": list.capacity,
        "unlisted_max": list.unlisted_max,
    })
}

/// One stage as JSON: module, in, out, errors, counters, warnings, and its
/// top lists when it has any; with `detail` also its breakdowns,
/// histograms and reading (what interval lines and reports use).
pub fn stage_value(s: &StageStats, detail: bool) -> Value {
    let mut v = json!({
        "module": s.module,
        "in": s.input,
        "out": s.output,
        "errors": counts(&s.errors),
        "counters": counts(&s.counters),
        "warnings": s.warning_lines().collect::<Vec<_>>(),
    });
    if !s.top.is_empty() {
        let top: Map<String, Value> = s
            .top
            .iter()
            .map(|(k, l)| (k.clone(), top_value(l)))
            .collect();
        v["top"] = Value::Object(top);
    }
    if detail {
        if !s.breakdowns.is_empty() {
            let b: Map<String, Value> = s
                .breakdowns
                .iter()
                .map(|(k, m)| (k.clone(), counts(m)))
                .collect();
            v["breakdowns"] = Value::Object(b);
        }
        if !s.histograms.is_empty() {
            let h: Map<String, Value> = s
                .histograms
                .iter()
                .map(|(k, h)| (k.clone(), histogram_value(h)))
                .collect();
            v["histograms"] = Value::Object(h);
        }
        if !s.listed.is_empty() {
            v["listed"] = json!(s.listed);
        }
        if let Some(r) = &s.reading {
            v["reading"] = json!({
                "offset": r.offset,
                "total": r.total,
                "first_ts_ns": r.first_ts_ns,
                "last_ts_ns": r.last_ts_ns,
            });
        }
    }
    v
}

/// `--stats-json` of every stage with its detail (breakdowns, histograms,
/// the breakdowns its counters list): what a run's summary must carry to be
/// merged exactly with others' ([`stage_from_value`]).
pub fn stats_json_detailed(stats: &[StageStats], elapsed: f64) -> Value {
    let stages: Vec<Value> = stats
        .iter()
        .map(|s| {
            let mut v = stage_value(s, true);
            // Every bucket as kept, not coarsened as for a report: the runs'
            // percentiles merge to one run's (coarsened, up to 0.8 % high).
            if !s.histograms.is_empty() {
                let exact = |h: &Histogram| -> Value {
                    Value::Array(h.buckets().map(|(b, n)| json!([b, n])).collect())
                };
                let h: Map<String, Value> = (s.histograms.iter())
                    .map(|(k, h)| (k.clone(), exact(h)))
                    .collect();
                v["histograms"] = Value::Object(h);
            }
            v
        })
        .collect();
    json!({ "stages": stages, "elapsed_s": elapsed })
}

/// The statistics [`stage_value`] wrote, as far as it wrote them: counts,
/// warnings and top lists always, breakdowns, histograms and the listed
/// breakdowns when written with their detail.
pub fn stage_from_value(v: &Value) -> StageStats {
    let mut s = StageStats::new(v["module"].as_str().unwrap_or(""));
    s.input = v["in"].as_u64().unwrap_or(0);
    s.output = v["out"].as_u64().unwrap_or(0);
    s.errors = counts_from(&v["errors"]);
    s.counters = counts_from(&v["counters"]);
    s.warnings = v["warnings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w.as_str().map(str::to_string))
        .collect();
    for (name, list) in v["top"].as_object().into_iter().flatten() {
        let entries: Vec<TopEntry> = list["entries"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| TopEntry {
                key: e["key"].as_str().unwrap_or("").to_string(),
                count: e["count"].as_u64().unwrap_or(0),
                error: e["error"].as_u64().unwrap_or(0),
            })
            .collect();
        let top = TopList {
            length: entries.len(),
            entries,
            counted: list["counted"].as_u64().unwrap_or(0),
            capacity: list["capacity"].as_u64().unwrap_or(0),
            unlisted_max: list["unlisted_max"].as_u64().unwrap_or(0),
        };
        s.top.insert(name.clone(), top);
    }
    for (name, breakdown) in v["breakdowns"].as_object().into_iter().flatten() {
        s.breakdowns.insert(name.clone(), counts_from(breakdown));
    }
    for (name, histogram) in v["histograms"].as_object().into_iter().flatten() {
        s.histograms.insert(name.clone(), histogram_from(histogram));
    }
    for (name, n) in v["listed"].as_object().into_iter().flatten() {
        s.listed
            .insert(name.clone(), n.as_u64().unwrap_or(0) as usize);
    }
    s
}

fn counts_from(map: &Value) -> BTreeMap<String, u64> {
    map.as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
        .collect()
}

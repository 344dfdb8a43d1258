//! The `run` report: DNS messages per second of capture time, objects per
//! second by stage, qtypes, rcodes, malformed messages by kind; the
//! stages, top-k (from `filter.top`), qtype and rcode, malformed and
//! reassembly tables.

use super::svg::{self, Axis, Bars, Plot};
use super::{cell, escape, line, pointer, stage, style, table, text_cell, Run};
use std::collections::BTreeMap;

/// Seconds of capture time of `ns` after `origin`.
fn capture_s(ns: i64, origin: i64) -> f64 {
    (ns - origin) as f64 / 1e9
}

/// The index of the stage named `module` in the interval lines' stages.
fn index_of(run: &Run, module: &str) -> Option<usize> {
    stage(run, &[module]).map(|(i, _)| i)
}

/// A step line over capture time: its points, where it ends, what it counts.
type CapturePoints = (Vec<(f64, f64)>, f64, &'static str);

/// Messages (or records, without filter.dns) per second of capture time,
/// interval by interval: `(start in capture seconds since the first
/// record, rate)`, the last interval's end, and what was counted.
fn capture_points(run: &Run) -> Option<CapturePoints> {
    let origin = run
        .intervals
        .iter()
        .find_map(|l| l["capture"]["first_ns"].as_i64())?;
    let dns = index_of(run, "filter.dns");
    let mut points = Vec::new();
    let mut end = 0.0;
    for l in &run.intervals {
        let (Some(first), Some(last)) = (
            l["capture"]["first_ns"].as_i64(),
            l["capture"]["last_ns"].as_i64(),
        ) else {
            continue;
        };
        let span = capture_s(last, first);
        let count = match dns {
            Some(i) => l["stages"][i]["counters"]["messages"].as_f64(),
            None => l["stages"][0]["out"].as_f64(),
        };
        if let (true, Some(count)) = (span > 0.0, count) {
            points.push((capture_s(first, origin), count / span));
            end = capture_s(last, origin);
        }
    }
    let what = if dns.is_some() {
        "DNS messages"
    } else {
        "records"
    };
    Some((points, end, what))
}

fn messages(runs: &[Run]) -> String {
    let mut lines = Vec::new();
    for (r, run) in runs.iter().enumerate() {
        if let Some((points, end, what)) = capture_points(run) {
            let mut l = line(runs, r, 0, what, points);
            l.step = Some(end);
            lines.push(l);
        }
    }
    svg::plot(&Plot {
        id: "run-capture-rate".into(),
        title: "Messages per second of capture time".into(),
        x: Axis::linear("capture time since the first record (s)"),
        y: Axis::linear("messages per capture second"),
        lines,
    })
}

fn objects(runs: &[Run]) -> String {
    let mut lines = Vec::new();
    for (r, run) in runs.iter().enumerate() {
        for (i, s) in run.stages().iter().enumerate() {
            let module = s["module"].as_str().unwrap_or("?");
            lines.push(line(
                runs,
                r,
                i,
                &format!("{i} {module}"),
                run.rates(|l| l["stages"][i]["in"].as_f64()),
            ));
        }
    }
    svg::plot(&Plot {
        id: "run-objects".into(),
        title: "Objects per second into each stage".into(),
        x: Axis::linear("time since start (s)"),
        y: Axis::linear("objects per second"),
        lines,
    })
}

/// How many rows a breakdown chart shows (the most frequent).
const ROWS: usize = 15;

/// Bars of `counts(run)` over the runs: the `ROWS` largest by their sum.
fn bars(
    runs: &[Run],
    id: &str,
    title: &str,
    unit: &str,
    counts: impl Fn(&Run) -> BTreeMap<String, f64>,
) -> String {
    let per_run: Vec<BTreeMap<String, f64>> = runs.iter().map(&counts).collect();
    let mut total: BTreeMap<&str, f64> = BTreeMap::new();
    for m in &per_run {
        for (k, v) in m {
            *total.entry(k).or_default() += v;
        }
    }
    let mut categories: Vec<(&str, f64)> = total.into_iter().collect();
    categories.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    let categories: Vec<String> = categories
        .into_iter()
        .take(ROWS)
        .map(|(k, _)| k.to_string())
        .collect();
    let groups = per_run
        .iter()
        .enumerate()
        .map(|(r, m)| {
            let values = categories
                .iter()
                .map(|c| m.get(c).copied().unwrap_or(0.0))
                .collect();
            (runs[r].label.clone(), style(r, 0, runs.len()).0, values)
        })
        .collect();
    svg::bars(&Bars {
        id: id.into(),
        title: title.into(),
        unit: unit.into(),
        categories,
        groups,
    })
}

/// The final breakdown `name` of filter.dns.
fn breakdown(run: &Run, name: &str) -> BTreeMap<String, f64> {
    stage(run, &["filter.dns"])
        .and_then(|(_, s)| s["breakdowns"][name].as_object())
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_f64().unwrap_or(0.0)))
                .collect()
        })
        .unwrap_or_default()
}

/// Errors by kind of filter.layer and filter.dns (what was malformed).
fn malformed(run: &Run) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for s in run.stages() {
        if matches!(s["module"].as_str(), Some("filter.layer" | "filter.dns")) {
            for (k, v) in s["errors"].as_object().into_iter().flatten() {
                *out.entry(k.clone()).or_default() += v.as_f64().unwrap_or(0.0);
            }
        }
    }
    out
}

fn stages_table(runs: &[Run]) -> String {
    let mut rows = Vec::new();
    for (r, run) in runs.iter().enumerate() {
        for (i, s) in run.stats_stages().iter().enumerate() {
            let at = i.to_string();
            rows.push(vec![
                text_cell(&run.label),
                text_cell(&at),
                text_cell(s["module"].as_str().unwrap_or("?")),
                cell(r, run.stats(), &pointer(&["stages", &at, "in"])),
                cell(r, run.stats(), &pointer(&["stages", &at, "out"])),
            ]);
        }
    }
    table(
        "run-stages",
        "Stages (as --stats-json)",
        &["run", "#", "module", "in", "out"],
        &rows,
    )
}

/// A table of the counters or errors (`what`) of each stage whose keys `keep` accepts.
fn counters_table(
    runs: &[Run],
    id: &str,
    caption: &str,
    what: &str,
    keep: impl Fn(&str, &str) -> bool,
) -> String {
    let mut rows = Vec::new();
    for (r, run) in runs.iter().enumerate() {
        for (i, s) in run.stats_stages().iter().enumerate() {
            let module = s["module"].as_str().unwrap_or("?");
            for (key, _) in s[what].as_object().into_iter().flatten() {
                if keep(module, key) {
                    rows.push(vec![
                        text_cell(&run.label),
                        text_cell(module),
                        text_cell(key),
                        cell(
                            r,
                            run.stats(),
                            &pointer(&["stages", &i.to_string(), what, key]),
                        ),
                    ]);
                }
            }
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    table(id, caption, &["run", "stage", "counter", "count"], &rows)
}

fn top_tables(runs: &[Run]) -> String {
    let mut out = String::new();
    for list in ["qnames", "clients", "servers"] {
        let mut rows = Vec::new();
        let mut bound = Vec::new();
        for (r, run) in runs.iter().enumerate() {
            let Some((i, _)) = run
                .stats_stages()
                .iter()
                .enumerate()
                .find(|(_, s)| s["top"][list].is_object())
            else {
                continue;
            };
            let at = i.to_string();
            let top = &run.stats()["stages"][i]["top"][list];
            let counted = top["counted"].as_f64().unwrap_or(0.0).max(1.0);
            for (rank, e) in top["entries"].as_array().into_iter().flatten().enumerate() {
                let entry = rank.to_string();
                let count = e["count"].as_f64().unwrap_or(0.0);
                rows.push(vec![
                    text_cell(&run.label),
                    text_cell(&(rank + 1).to_string()),
                    text_cell(e["key"].as_str().unwrap_or("?")),
                    cell(
                        r,
                        run.stats(),
                        &pointer(&["stages", &at, "top", list, "entries", &entry, "count"]),
                    ),
                    cell(
                        r,
                        run.stats(),
                        &pointer(&["stages", &at, "top", list, "entries", &entry, "error"]),
                    ),
                    text_cell(&format!("{:.2} %", 100.0 * count / counted)),
                ]);
            }
            bound.push(format!(
                "{}: {} messages counted in {} counters: a count overstates by at most its ± (≤ N/m = {}); a key not listed was seen at most {} times",
                run.label,
                top["counted"],
                top["capacity"],
                top["counted"].as_u64().unwrap_or(0) / top["capacity"].as_u64().unwrap_or(1).max(1),
                top["unlisted_max"]
            ));
        }
        if rows.is_empty() {
            continue;
        }
        out.push_str(&table(
            &format!("run-top-{list}"),
            &format!("Top {list} (filter.top)"),
            &["run", "rank", list, "count", "±", "share"],
            &rows,
        ));
        out.push_str(&format!(
            "<p class=\"sub\">{}</p>",
            escape(&bound.join("; "))
        ));
    }
    if out.is_empty() {
        out.push_str("<p class=\"sub\">No top lists: add a <code>filter.top</code> stage to the pipeline for the top query names, clients and servers.</p>");
    }
    out
}

/// The run sections.
pub fn sections(runs: &[Run]) -> String {
    let charts = [
        messages(runs),
        objects(runs),
        bars(runs, "run-qtypes", "Messages by qtype", "messages", |r| {
            breakdown(r, "qtype")
        }),
        bars(runs, "run-rcodes", "Responses by rcode", "responses", |r| {
            breakdown(r, "rcode")
        }),
        bars(
            runs,
            "run-malformed",
            "Malformed by kind",
            "packets or messages",
            malformed,
        ),
    ];
    let reassembly =
        |m: &str, k: &str| m == "filter.dns" && (k.starts_with("tcp_") || k.starts_with("ip_"));
    let qtypes = |m: &str, k: &str| {
        m == "filter.dns" && (k.starts_with("qtype ") || k.starts_with("rcode "))
    };
    let tables = [
        stages_table(runs),
        counters_table(
            runs,
            "run-qtypes-table",
            "Most frequent qtypes and rcodes",
            "counters",
            qtypes,
        ),
        counters_table(
            runs,
            "run-malformed-table",
            "Malformed by kind",
            "errors",
            |_, _| true,
        ),
        counters_table(
            runs,
            "run-reassembly",
            "TCP reassembly and IP defragmentation",
            "counters",
            reassembly,
        ),
    ];
    format!(
        "<h2>Charts</h2><div class=\"charts\">{}</div><h2>Top lists</h2><div class=\"tables\">{}</div><h2>Tables</h2><div class=\"tables\">{}</div>",
        charts.concat(),
        top_tables(runs),
        tables.concat()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn capture_rate_is_messages_over_the_capture_span() {
        let run = Run::from_records(
            "a",
            vec![
                json!({"type": "start", "command": "run"}),
                json!({"type": "interval", "t0_s": 0.0, "t1_s": 1.0, "capture": {"first_ns": 1_000_000_000i64, "last_ns": 3_000_000_000i64},
                       "stages": [{"module": "input.mmpcap", "in": 10, "out": 10}, {"module": "filter.dns", "counters": {"messages": 8}}]}),
                json!({"type": "end", "t_s": 1.0, "stats": {}, "stages": [{"module": "input.mmpcap"}, {"module": "filter.dns"}]}),
            ],
        )
        .unwrap();
        let (points, end, what) = capture_points(&run).unwrap();
        // 8 messages over 2 s of capture: 4 per second, from capture time 0 to 2.
        assert_eq!((points, end, what), (vec![(0.0, 4.0)], 2.0, "DNS messages"));
    }
}

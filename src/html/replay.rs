//! The replay report: queries and answers per second, latency percentiles
//! (log scale) and histogram, latency over time, rcodes over time,
//! connections and TLS handshakes over time; the totals and rcodes tables.

use super::svg::{self, Axis, Plot, Scale};
use super::{cell, line, pointer, stage, style, table, text_cell, Run};
use crate::report::histogram_from;
use dnsluice_core::Histogram;
use std::collections::BTreeSet;

/// The client stage's final latency histogram (microseconds).
fn latency(run: &Run) -> Histogram {
    stage(run, &["output.dnscli", "output.udpcli"])
        .map(|(_, s)| histogram_from(&s["histograms"]["latency_us"]))
        .unwrap_or_default()
}

fn rates(runs: &[Run]) -> String {
    let mut lines = Vec::new();
    for (r, run) in runs.iter().enumerate() {
        for (i, (name, key)) in [
            ("sent", "sent"),
            ("answered", "answered"),
            ("timed out", "timeouts"),
            ("errors", "errors"),
        ]
        .iter()
        .enumerate()
        {
            lines.push(line(runs, r, i, name, run.rates(|l| l[key].as_f64())));
        }
    }
    svg::plot(&Plot {
        id: "replay-rates".into(),
        title: "Queries and answers per second".into(),
        x: Axis::linear("time since start (s)"),
        y: Axis::linear("queries per second"),
        lines,
    })
}

/// The percentile curve of `h`: latency (ms) held from the percentile
/// below each bucket to the one at its end (the last cut at 1 - 1/N).
fn percentile_points(h: &Histogram) -> Vec<(f64, f64)> {
    let n = h.count() as f64;
    let top = 100.0 * (1.0 - 1.0 / n.max(2.0));
    let mut seen = 0.0;
    let mut points = Vec::new();
    for (us, count) in h.buckets() {
        let ms = us as f64 / 1000.0;
        points.push((100.0 * seen / n, ms));
        seen += count as f64;
        points.push(((100.0 * seen / n).min(top), ms));
    }
    points
}

fn percentiles(runs: &[Run]) -> String {
    let lines = runs
        .iter()
        .enumerate()
        .map(|(r, run)| {
            let (color, _) = style(r, 0, runs.len());
            svg::Line {
                name: run.label.clone(),
                points: percentile_points(&latency(run)),
                step: None,
                color,
                dash: "",
            }
        })
        .collect();
    svg::plot(&Plot {
        id: "replay-latency-percentiles".into(),
        title: "Latency by percentile".into(),
        x: Axis {
            label: "percentile of answers".into(),
            scale: Scale::Nines,
        },
        y: Axis::log("latency (ms)"),
        lines,
    })
}

/// Bins per decade of the latency histogram.
const BINS_PER_DECADE: f64 = 10.0;

/// `h` in bins of a tenth of a decade: `(bin start in ms, % of answers)`, and the last bin's end.
fn histogram_points(h: &Histogram) -> (Vec<(f64, f64)>, f64) {
    let n = h.count() as f64;
    let bin = |us: u64| ((us as f64 / 1000.0).log10() * BINS_PER_DECADE).floor() as i32;
    let mut bins = std::collections::BTreeMap::new();
    for (us, count) in h.buckets() {
        *bins.entry(bin(us)).or_insert(0.0) += count as f64;
    }
    let (Some(&lo), Some(&hi)) = (bins.keys().next(), bins.keys().next_back()) else {
        return (Vec::new(), 0.0);
    };
    let at = |k: i32| 10f64.powf(f64::from(k) / BINS_PER_DECADE);
    let points = (lo..=hi)
        .map(|k| (at(k), 100.0 * bins.get(&k).copied().unwrap_or(0.0) / n))
        .collect();
    (points, at(hi + 1))
}

fn histogram(runs: &[Run]) -> String {
    let lines = runs
        .iter()
        .enumerate()
        .map(|(r, run)| {
            let (points, end) = histogram_points(&latency(run));
            let (color, _) = style(r, 0, runs.len());
            svg::Line {
                name: run.label.clone(),
                points,
                step: Some(end),
                color,
                dash: "",
            }
        })
        .collect();
    svg::plot(&Plot {
        id: "replay-latency-histogram".into(),
        title: "Latency histogram (10 bins a decade)".into(),
        x: Axis::log("latency (ms)"),
        y: Axis::linear("share of answers (%)"),
        lines,
    })
}

fn over_time(runs: &[Run]) -> String {
    let mut lines = Vec::new();
    for (r, run) in runs.iter().enumerate() {
        for (i, p) in ["p50", "p99", "max"].iter().enumerate() {
            let points = run.levels(|l| {
                l["latency_ms"][p]
                    .as_f64()
                    .filter(|_| l["answered"].as_u64() > Some(0))
            });
            lines.push(line(runs, r, i, p, points));
        }
    }
    svg::plot(&Plot {
        id: "replay-latency-over-time".into(),
        title: "Latency over time (per interval)".into(),
        x: Axis::linear("time since start (s)"),
        y: Axis::log("latency (ms)"),
        lines,
    })
}

/// Every rcode any run had, in order.
fn rcodes_seen(runs: &[Run]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    for run in runs {
        seen.extend(
            run.stats()["rcodes"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, _)| k.clone()),
        );
        for l in &run.intervals {
            seen.extend(
                l["rcodes"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, _)| k.clone()),
            );
        }
    }
    seen.into_iter().collect()
}

fn rcodes_over_time(runs: &[Run]) -> String {
    let rcodes = rcodes_seen(runs);
    let mut lines = Vec::new();
    for (r, run) in runs.iter().enumerate() {
        for (i, rcode) in rcodes.iter().enumerate() {
            let points = run.rates(|l| Some(l["rcodes"][rcode].as_f64().unwrap_or(0.0)));
            lines.push(line(runs, r, i, rcode, points));
        }
    }
    svg::plot(&Plot {
        id: "replay-rcodes".into(),
        title: "Answers per second by rcode".into(),
        x: Axis::linear("time since start (s)"),
        y: Axis::linear("answers per second"),
        lines,
    })
}

fn connections(runs: &[Run]) -> String {
    let mut lines = Vec::new();
    for (r, run) in runs.iter().enumerate() {
        lines.push(line(
            runs,
            r,
            0,
            "open",
            run.levels(|l| l["connections_active"].as_f64()),
        ));
        lines.push(line(
            runs,
            r,
            1,
            "opened in the interval",
            run.levels(|l| l["connections_opened"].as_f64()),
        ));
        lines.push(line(
            runs,
            r,
            2,
            "TLS handshakes in the interval",
            run.levels(|l| l["tls_handshakes"].as_f64()),
        ));
    }
    svg::plot(&Plot {
        id: "replay-connections".into(),
        title: "Connections and TLS handshakes".into(),
        x: Axis::linear("time since start (s)"),
        y: Axis::linear("connections"),
        lines,
    })
}

const TOTALS: [(&str, &[&str]); 13] = [
    ("sent", &["sent"]),
    ("answered", &["answered"]),
    ("timed out", &["timeouts"]),
    ("errors", &["errors"]),
    ("connections opened", &["connections_opened"]),
    ("TLS handshakes", &["tls_handshakes"]),
    ("answers/s", &["qps"]),
    ("elapsed (s)", &["elapsed_s"]),
    ("p50 (ms)", &["latency_ms", "p50"]),
    ("p90 (ms)", &["latency_ms", "p90"]),
    ("p99 (ms)", &["latency_ms", "p99"]),
    ("p99.9 (ms)", &["latency_ms", "p999"]),
    ("max (ms)", &["latency_ms", "max"]),
];

fn totals(runs: &[Run]) -> String {
    let mut headers = vec!["run", "server", "transport", "clients"];
    headers.extend(TOTALS.iter().map(|(h, _)| *h));
    let rows: Vec<Vec<String>> = runs
        .iter()
        .enumerate()
        .map(|(r, run)| {
            let s = run.stats();
            let mut row = vec![
                text_cell(&run.label),
                text_cell(s["server"].as_str().unwrap_or("?")),
                text_cell(s["transport"].as_str().unwrap_or("?")),
                cell(r, s, "/clients"),
            ];
            row.extend(TOTALS.iter().map(|(_, key)| cell(r, s, &pointer(key))));
            row
        })
        .collect();
    table("replay-totals", "Totals (as --stats-json)", &headers, &rows)
}

fn rcodes_table(runs: &[Run]) -> String {
    let mut headers = vec!["rcode"];
    headers.extend(runs.iter().map(|r| r.label.as_str()));
    let rows: Vec<Vec<String>> = rcodes_seen(runs)
        .iter()
        .map(|rcode| {
            let mut row = vec![text_cell(rcode)];
            row.extend(
                runs.iter()
                    .enumerate()
                    .map(|(r, run)| cell(r, run.stats(), &pointer(&["rcodes", rcode]))),
            );
            row
        })
        .collect();
    table("replay-rcodes-table", "Answers by rcode", &headers, &rows)
}

/// The replay sections.
pub fn sections(runs: &[Run]) -> String {
    let charts = [
        rates(runs),
        percentiles(runs),
        histogram(runs),
        over_time(runs),
        rcodes_over_time(runs),
        connections(runs),
    ];
    format!(
        "<h2>Charts</h2><div class=\"charts\">{}</div><h2>Tables</h2><div class=\"tables\">{}{}</div>",
        charts.concat(),
        totals(runs),
        rcodes_table(runs)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_percentile_curve_holds_each_bucket() {
        let mut h = Histogram::default();
        h.add(1000, 3);
        h.add(2000, 1);
        let points = percentile_points(&h);
        assert_eq!(
            points,
            vec![(0.0, 1.0), (75.0, 1.0), (75.0, 2.0), (75.0, 2.0)]
        );
    }

    #[test]
    fn histogram_bins_are_tenths_of_a_decade() {
        let mut h = Histogram::default();
        h.add(1000, 1); // 1 ms: bin 0
        h.add(1300, 1); // 1.3 ms: bin 1 (1.259..1.585)
        let (points, end) = histogram_points(&h);
        assert_eq!(points.len(), 2);
        assert!((points[0].0 - 1.0).abs() < 1e-9 && points[0].1 == 50.0);
        assert!((end - 10f64.powf(0.2)).abs() < 1e-9);
    }
}

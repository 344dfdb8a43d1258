//! The lookup report: names and queries per second, statuses, queries per
//! nameserver over time, connection reuse and steals; the totals,
//! statuses and per-nameserver tables.

use super::svg::{self, Axis, Bars, Plot};
use super::{cell, line, pointer, style, table, text_cell, Run};
use std::collections::BTreeSet;

fn rates(runs: &[Run]) -> String {
    let mut lines = Vec::new();
    for (r, run) in runs.iter().enumerate() {
        for (i, (name, key)) in [
            ("names", "names"),
            ("queries", "queries"),
            ("retries", "retries"),
            ("timeouts", "timeouts"),
        ]
        .iter()
        .enumerate()
        {
            lines.push(line(runs, r, i, name, run.rates(|l| l[key].as_f64())));
        }
    }
    svg::plot(&Plot {
        id: "lookup-rates".into(),
        title: "Names and queries per second".into(),
        x: Axis::linear("time since start (s)"),
        y: Axis::linear("per second"),
        lines,
    })
}

/// The keys of object `key` in any run's final statistics, in order.
fn keys_of(runs: &[Run], key: &str) -> Vec<String> {
    let mut seen = BTreeSet::new();
    for run in runs {
        seen.extend(
            run.stats()[key]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, _)| k.clone()),
        );
    }
    seen.into_iter().collect()
}

fn statuses(runs: &[Run]) -> String {
    let categories = keys_of(runs, "statuses");
    let groups = runs
        .iter()
        .enumerate()
        .map(|(r, run)| {
            let values = categories
                .iter()
                .map(|s| run.stats()["statuses"][s].as_f64().unwrap_or(0.0))
                .collect();
            (run.label.clone(), style(r, 0, runs.len()).0, values)
        })
        .collect();
    svg::bars(&Bars {
        id: "lookup-statuses".into(),
        title: "Names by status".into(),
        unit: "names".into(),
        categories,
        groups,
    })
}

/// A chart of one figure per nameserver over time: `levels` (a value at
/// each interval's end) or per second.
fn by_nameserver(
    runs: &[Run],
    key: &str,
    levels: bool,
    id: &str,
    title: &str,
    unit: &str,
) -> String {
    let nameservers = keys_of(runs, "per_nameserver");
    let mut lines = Vec::new();
    for (r, run) in runs.iter().enumerate() {
        for (i, ns) in nameservers.iter().enumerate() {
            let value =
                |l: &serde_json::Value| Some(l["per_nameserver"][ns][key].as_f64().unwrap_or(0.0));
            let points = if levels {
                run.levels(value)
            } else {
                run.rates(value)
            };
            lines.push(line(runs, r, i, ns, points));
        }
    }
    svg::plot(&Plot {
        id: id.into(),
        title: title.into(),
        x: Axis::linear("time since start (s)"),
        y: Axis::linear(unit),
        lines,
    })
}

fn connections(runs: &[Run]) -> String {
    let mut lines = Vec::new();
    for (r, run) in runs.iter().enumerate() {
        for (i, (name, key)) in [
            ("connections opened", "connections_opened"),
            ("queries on reused connections", "connections_reused"),
            ("jobs stolen", "steals"),
        ]
        .iter()
        .enumerate()
        {
            lines.push(line(runs, r, i, name, run.rates(|l| l[key].as_f64())));
        }
    }
    svg::plot(&Plot {
        id: "lookup-connections".into(),
        title: "Connection reuse and work stealing".into(),
        x: Axis::linear("time since start (s)"),
        y: Axis::linear("per second"),
        lines,
    })
}

const TOTALS: [(&str, &str); 13] = [
    ("names", "names"),
    ("queries", "queries"),
    ("connections opened", "connections_opened"),
    ("TLS handshakes", "tls_handshakes"),
    ("reused", "connections_reused"),
    ("retries", "retries"),
    ("resent (stale)", "stale_redials"),
    ("timeouts", "timeouts"),
    ("steals", "steals"),
    ("failed connects", "connect_failures"),
    ("unmatched", "unmatched_responses"),
    ("TCP fallbacks", "tcp_fallbacks"),
    ("elapsed (s)", "elapsed_s"),
];

fn tables(runs: &[Run]) -> String {
    let mut headers = vec!["run"];
    headers.extend(TOTALS.iter().map(|(h, _)| *h));
    let rows: Vec<Vec<String>> = runs
        .iter()
        .enumerate()
        .map(|(r, run)| {
            let mut row = vec![text_cell(&run.label)];
            row.extend(
                TOTALS
                    .iter()
                    .map(|(_, k)| cell(r, run.stats(), &pointer(&[k]))),
            );
            row
        })
        .collect();
    let totals = table("lookup-totals", "Totals (as --stats-json)", &headers, &rows);
    let mut headers = vec!["status"];
    headers.extend(runs.iter().map(|r| r.label.as_str()));
    let rows: Vec<Vec<String>> = keys_of(runs, "statuses")
        .iter()
        .map(|status| {
            let mut row = vec![text_cell(status)];
            row.extend(
                runs.iter()
                    .enumerate()
                    .map(|(r, run)| cell(r, run.stats(), &pointer(&["statuses", status]))),
            );
            row
        })
        .collect();
    let statuses = table("lookup-statuses-table", "Names by status", &headers, &rows);
    let mut rows = Vec::new();
    for ns in keys_of(runs, "per_nameserver") {
        for (r, run) in runs.iter().enumerate() {
            let mut row = vec![text_cell(&run.label), text_cell(&ns)];
            for key in [
                "queries",
                "connections_opened",
                "failures",
                "timeouts",
                "refusals",
                "rate",
                "in_flight",
                "srtt_ms",
                "p50_ms",
                "p99_ms",
            ] {
                row.push(cell(
                    r,
                    run.stats(),
                    &pointer(&["per_nameserver", &ns, key]),
                ));
            }
            rows.push(row);
        }
    }
    let nameservers = table(
        "lookup-nameservers-table",
        "Per nameserver",
        &[
            "run",
            "nameserver",
            "queries",
            "connections",
            "failures",
            "timeouts",
            "refusals",
            "rate (q/s, end)",
            "in flight (end)",
            "round trip (ms, end)",
            "p50 (ms)",
            "p99 (ms)",
        ],
        &rows,
    );
    format!("{totals}{statuses}{nameservers}")
}

/// The lookup sections.
pub fn sections(runs: &[Run]) -> String {
    let mut charts = vec![
        rates(runs),
        statuses(runs),
        by_nameserver(
            runs,
            "queries",
            false,
            "lookup-nameservers",
            "Queries per second by nameserver",
            "queries per second",
        ),
    ];
    // The UDP engine's pacing, when a run has it.
    let paced = runs.iter().any(|run| {
        let per = &run.stats()["per_nameserver"];
        per.as_object()
            .is_some_and(|m| m.values().any(|ns| ns["rate"].as_u64().unwrap_or(0) > 0))
    });
    if paced {
        charts.push(by_nameserver(
            runs,
            "rate",
            true,
            "lookup-pace",
            "Queries per second allowed by nameserver (the adaptive rate)",
            "queries per second",
        ));
        charts.push(by_nameserver(
            runs,
            "timeouts",
            false,
            "lookup-losses",
            "Timeouts per second by nameserver",
            "timeouts per second",
        ));
        charts.push(by_nameserver(
            runs,
            "srtt_ms",
            true,
            "lookup-rtt",
            "Smoothed round trip by nameserver",
            "ms",
        ));
    }
    charts.push(connections(runs));
    format!(
        "<h2>Charts</h2><div class=\"charts\">{}</div><h2>Tables</h2><div class=\"tables\">{}</div>",
        charts.concat(),
        tables(runs)
    )
}

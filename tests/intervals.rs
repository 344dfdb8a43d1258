//! `--stats-interval` / `--stats-jsonl` for `run`, `replay` and `lookup`: the
//! interval lines add up to what `--stats-json` says at the end, they tile
//! the run's time, and their own figures match independent truth (tshark's
//! view of a corpus capture, the zone generator's rule for a replay, the
//! names file written here for a lookup).

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use testkit::corpus::{corpus_dir, truth, truth_rows};
use testkit::{assert_ok, run_ok, temp_path};

/// The records of a `--stats-jsonl` file: start, intervals, end.
fn records(path: &Path) -> (Value, Vec<Value>, Value) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let end = lines.pop().expect("an end line");
    let start = lines.remove(0);
    assert_eq!(start["type"], "start", "{start}");
    assert_eq!(end["type"], "end", "{end}");
    assert!(lines.iter().all(|l| l["type"] == "interval"));
    (start, lines, end)
}

/// The intervals follow each other without gap or overlap, from 0, numbered in order.
fn check_tiling(intervals: &[Value]) {
    let mut t = 0.0;
    for (i, line) in intervals.iter().enumerate() {
        assert_eq!(line["index"], i, "{line}");
        assert_eq!(
            line["t0_s"].as_f64().unwrap(),
            t,
            "interval {i} starts where {} ended",
            i.max(1) - 1
        );
        t = line["t1_s"].as_f64().unwrap();
        assert!(t >= line["t0_s"].as_f64().unwrap());
    }
}

/// `key` of every interval added up.
fn sum(intervals: &[Value], key: &dyn Fn(&Value) -> &Value) -> u64 {
    intervals.iter().map(|l| key(l).as_u64().unwrap_or(0)).sum()
}

/// Each of `keys`, added up over the intervals, is its total in `stats`.
fn assert_sums_are_totals(intervals: &[Value], stats: &Value, keys: &[&str], what: &str) {
    for key in keys {
        assert_eq!(
            sum(intervals, &|l| &l[*key]),
            stats[*key].as_u64().unwrap(),
            "{what} {key}"
        );
    }
}

/// The counts of object `key` of every interval added up, by name.
fn sum_map(intervals: &[Value], key: &dyn Fn(&Value) -> &Value) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for l in intervals {
        for (k, v) in key(l).as_object().into_iter().flatten() {
            *out.entry(k.clone()).or_default() += v.as_u64().unwrap();
        }
    }
    out
}

fn as_counts(v: &Value) -> BTreeMap<String, u64> {
    v.as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect()
}

#[test]
fn run_intervals_add_up_to_the_stats_and_span_the_capture() {
    let capture = corpus_dir().join("live_mini_en10mb.pcap");
    let truth = truth("live_mini_en10mb.pcap");
    // Paced (1517 records at 3000/s: half a second), so there are several intervals.
    let pipeline = format!(
        "[[stage]]\nmodule = \"input.mmpcap\"\npath = \"{}\"\n[[stage]]\nmodule = \"filter.timing\"\nrate = 3000.0\n\
         [[stage]]\nmodule = \"filter.layer\"\n[[stage]]\nmodule = \"filter.dns\"\n[[stage]]\nmodule = \"filter.top\"\n\
         [[stage]]\nmodule = \"output.null\"\n",
        capture.display()
    );
    let (jsonl, stats) = (temp_path("run.jsonl"), temp_path("run-stats.json"));
    let out = testkit::run_pipeline(
        &pipeline,
        &[
            "-q",
            "--stats-interval",
            "50ms",
            "--stats-jsonl",
            jsonl.to_str().unwrap(),
            "--stats-json",
            stats.to_str().unwrap(),
        ],
    );
    assert_ok(&out, "dnsluice run");
    let stats: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let (start, intervals, end) = records(&jsonl);
    assert_eq!(start["command"], "run");
    assert!(intervals.len() >= 4, "{} intervals", intervals.len());
    check_tiling(&intervals);
    assert_eq!(
        end["stats"], stats,
        "the end line holds what --stats-json wrote"
    );
    let stages = stats["stages"].as_array().unwrap();
    for (i, stage) in stages.iter().enumerate() {
        let module = stage["module"].as_str().unwrap();
        for key in ["in", "out"] {
            assert_eq!(
                sum(&intervals, &|l| &l["stages"][i][key]),
                stage[key].as_u64().unwrap(),
                "{module} {key}"
            );
        }
        assert_eq!(
            sum_map(&intervals, &|l| &l["stages"][i]["errors"]),
            as_counts(&stage["errors"]),
            "{module} errors"
        );
        let summed = sum_map(&intervals, &|l| &l["stages"][i]["counters"]);
        for (key, total) in as_counts(&stage["counters"]) {
            if key.starts_with("qtype ") || key.starts_with("rcode ") {
                // The summary's top ten: the intervals have the whole breakdown.
                let (breakdown, name) = key.split_once(' ').unwrap();
                let by = sum_map(&intervals, &|l| &l["stages"][i]["breakdowns"][breakdown]);
                assert_eq!(by.get(name).copied(), Some(total), "{module} {key}");
            } else {
                assert_eq!(summed.get(&key).copied(), Some(total), "{module} {key}");
            }
        }
    }
    // Independent: tshark's counts of the capture.
    let counts = &truth["counts"];
    let dns = stages
        .iter()
        .position(|s| s["module"] == "filter.dns")
        .unwrap();
    assert_eq!(
        sum(&intervals, &|l| &l["stages"][0]["out"]),
        counts["records"].as_u64().unwrap()
    );
    assert_eq!(
        sum(&intervals, &|l| &l["stages"][dns]["counters"]["messages"]),
        counts["dns_messages"].as_u64().unwrap()
    );
    let qtypes = sum_map(&intervals, &|l| &l["stages"][dns]["breakdowns"]["qtype"]);
    assert_eq!(qtypes["A"], counts["qtypes"]["1"].as_u64().unwrap());
    assert_eq!(qtypes["CAA"], counts["qtypes"]["257"].as_u64().unwrap());
    assert_eq!(
        qtypes["TYPE65534"],
        counts["qtypes"]["65534"].as_u64().unwrap()
    );
    let rcodes = sum_map(&intervals, &|l| &l["stages"][dns]["breakdowns"]["rcode"]);
    assert_eq!(rcodes["NXDOMAIN"], counts["rcodes"]["3"].as_u64().unwrap());
    // Capture times: the intervals chain from the first record's to the last's (tshark's frame times).
    let frames = truth_rows(&truth["frames"]);
    let ns = |row: &serde_json::Map<String, Value>| -> i64 {
        let ts = row["ts"].as_str().unwrap();
        let (s, frac) = ts.split_once('.').unwrap();
        s.parse::<i64>().unwrap() * 1_000_000_000 + frac.parse::<i64>().unwrap()
    };
    let spans: Vec<(i64, i64)> = intervals
        .iter()
        .filter_map(|l| {
            Some((
                l["capture"]["first_ns"].as_i64()?,
                l["capture"]["last_ns"].as_i64()?,
            ))
        })
        .collect();
    assert_eq!(spans.len(), intervals.len());
    assert_eq!(spans[0].0, ns(&frames[0]));
    assert_eq!(spans.last().unwrap().1, ns(frames.last().unwrap()));
    for pair in spans.windows(2) {
        assert_eq!(
            pair[0].1, pair[1].0,
            "each interval's capture time starts where the last ended"
        );
    }
}

#[test]
fn replay_intervals_add_up_to_the_stats() {
    let capture = temp_path("intervals.pcap");
    let queries = testkit::replay::zone_queries(600, 6);
    testkit::replay::write_capture(&capture, &queries);
    let server = testkit::servers().knot.to_string();
    for (transport, clients) in [("udp", "1"), ("tcp", "3")] {
        let jsonl = temp_path(&format!("intervals-{transport}.jsonl"));
        let (stats, stderr) = testkit::replay::replay(
            &capture,
            &[
                "--server",
                &server,
                "--transport",
                transport,
                "--clients",
                clients,
                "--rate",
                "1500",
                "-q",
                "--stats-interval",
                "100ms",
                "--stats-jsonl",
                jsonl.to_str().unwrap(),
            ],
        );
        let (start, intervals, end) = records(&jsonl);
        assert_eq!(
            (start["command"].as_str(), start["transport"].as_str()),
            (Some("replay"), Some(transport)),
            "{stderr}"
        );
        assert!(
            intervals.len() >= 3,
            "{transport}: {} intervals",
            intervals.len()
        );
        check_tiling(&intervals);
        assert_eq!(end["stats"], stats);
        assert_sums_are_totals(&intervals, &stats, &testkit::replay::COUNTS, transport);
        assert_eq!(
            sum_map(&intervals, &|l| &l["rcodes"]),
            as_counts(&stats["rcodes"]),
            "{transport} rcodes"
        );
        // Each interval's histogram holds its answers.
        for l in &intervals {
            let in_histogram: u64 = l["latency_us"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b[1].as_u64().unwrap())
                .sum();
            assert_eq!(in_histogram, l["answered"].as_u64().unwrap(), "{l}");
        }
        // Independent: the generator's record (every fifth name is missing) and the clients asked for.
        let missing = queries
            .iter()
            .filter(|q| q.name.starts_with("missing"))
            .count() as u64;
        assert_eq!(stats["sent"], 600);
        assert_eq!(stats["rcodes"]["NXDOMAIN"].as_u64(), Some(missing));
        assert_eq!(stats["rcodes"]["NOERROR"].as_u64(), Some(600 - missing));
        let clients: u64 = clients.parse().unwrap();
        assert_eq!(stats["connections_opened"].as_u64(), Some(clients));
        let open: Vec<u64> = intervals
            .iter()
            .map(|l| l["connections_active"].as_u64().unwrap())
            .collect();
        assert_eq!(
            open.last(),
            Some(&clients),
            "{transport}: open connections {open:?}"
        );
    }
}

#[test]
fn lookup_intervals_add_up_to_the_stats() {
    let servers = testkit::servers();
    let names = temp_path("names.txt");
    let mut text = String::from("# a comment line: no name\n\n");
    for i in 0..1500 {
        text.push_str(&format!("n{i}.{}\n", servers.zone));
    }
    text.push_str(&format!("missing.{}\n", servers.zone));
    std::fs::write(&names, text).unwrap();
    let (jsonl, stats, records_out) = (
        temp_path("lookup.jsonl"),
        temp_path("lookup.json"),
        temp_path("records.jsonl"),
    );
    let nameservers: Vec<String> = servers
        .fast_dns
        .iter()
        .map(|a| a.to_string())
        .chain([servers.slow.to_string()])
        .collect();
    run_ok(
        testkit::dnsluice()
            .args([
                "lookup",
                "A",
                "--name-servers",
                &nameservers.join(","),
                "--input",
            ])
            .arg(&names)
            .arg("--output")
            .arg(&records_out)
            .args(["-q", "--stats-interval", "50ms", "--stats-jsonl"])
            .arg(&jsonl)
            .arg("--stats-json")
            .arg(&stats),
    );
    let stats: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let (start, intervals, end) = records(&jsonl);
    assert_eq!(start["command"], "lookup");
    assert!(intervals.len() >= 2, "{} intervals", intervals.len());
    check_tiling(&intervals);
    assert_eq!(end["stats"], stats);
    let keys = [
        "names",
        "queries",
        "retries",
        "timeouts",
        "steals",
        "connections_opened",
        "connections_reused",
    ];
    assert_sums_are_totals(&intervals, &stats, &keys, "lookup");
    assert_eq!(
        sum_map(&intervals, &|l| &l["statuses"]),
        as_counts(&stats["statuses"])
    );
    for (ns, totals) in stats["per_nameserver"].as_object().unwrap() {
        for key in ["queries", "failures"] {
            let summed = sum(&intervals, &|l| &l["per_nameserver"][ns][key]);
            assert_eq!(summed, totals[key].as_u64().unwrap(), "{ns} {key}");
        }
    }
    // Independent: the names written above, one record each.
    assert_eq!(stats["names"], 1501);
    assert_eq!(stats["statuses"]["NOERROR"], 1500);
    assert_eq!(stats["statuses"]["NXDOMAIN"], 1);
    let written = std::fs::read_to_string(&records_out).unwrap();
    assert_eq!(written.lines().count(), 1501);
}

#[test]
fn an_interval_without_a_file_or_report_is_an_error() {
    let run = |args: &[&str]| {
        testkit::dnsluice()
            .args(["run", "configs/quickstart.toml"])
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap()
    };
    let out = run(&["--stats-interval", "1s"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--stats-interval needs --stats-jsonl FILE or --report FILE.html"),
        "{stderr}"
    );
    let out = run(&["--stats-jsonl", "/dev/null", "--stats-interval", "5"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("a duration with a unit"), "{stderr}");
}

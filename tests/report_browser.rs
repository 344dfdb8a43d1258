//! The HTML reports in a real browser: headless Chromium (testkit::chromium,
//! over the DevTools protocol) opens each kind of report from disk — a
//! replay over DNS-over-TLS, a lookup over four nameservers, a `run` of a
//! corpus capture, and two replays compared on one report — and the test
//! checks what the browser saw: no console error or warning, no request but
//! the file itself, every chart drawn, and every number in the tables equal
//! to the value in the `--stats-json` file it names (`data-key`).
//!
//! A screenshot of each is saved under the target directory; with
//! `DNSLUICE_UPDATE_SCREENSHOTS=1` also as `docs/img/report-KIND.png` (what
//! the README shows).

mod common;
mod replay_kit;

use common::{corpus_dir, dnsluice, temp_path};
use serde_json::Value;
use std::path::{Path, PathBuf};
use testkit::chromium::Browser;

/// One report to check: where it is, the stats JSON of each of its runs,
/// the charts that must have data, those that must be there at all, and
/// table keys that must be shown.
struct Report {
    kind: &'static str,
    html: PathBuf,
    stats: Vec<Value>,
    charts: &'static [&'static str],
    present: &'static [&'static str],
    keys: Vec<String>,
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn ok(out: std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether the screenshots are for the docs (then the runs are longer, so
/// the charts have more to show).
fn for_docs() -> bool {
    std::env::var_os("DNSLUICE_UPDATE_SCREENSHOTS").is_some_and(|v| v == "1")
}

/// A replay of 1200 zone queries at 2000/s over `transport` (for the docs
/// 12000 at 4000/s); its report, interval file and stats.
fn replay(name: &str, transport: &str) -> (PathBuf, PathBuf, Value) {
    let s = testkit::servers();
    let capture = replay_kit::temp(&format!("{name}.pcap"));
    let (count, rate) = if for_docs() {
        (12_000, "4000")
    } else {
        (1200, "2000")
    };
    replay_kit::write_capture(&capture, &replay_kit::zone_queries(count, 8));
    let (html, jsonl, stats) = (
        temp_path(&format!("{name}.html")),
        temp_path(&format!("{name}.jsonl")),
        temp_path(&format!("{name}.json")),
    );
    let server = match transport {
        "tls" => s.dot.to_string(),
        _ => s.knot.to_string(),
    };
    let ca = s.ca_file.display().to_string();
    let mut args = vec!["replay", capture.to_str().unwrap(), "--server", &server];
    args.extend([
        "--transport",
        transport,
        "--clients",
        "4",
        "--rate",
        rate,
        "-q",
    ]);
    if transport == "tls" {
        args.extend(["--ca-file", &ca, "--tls-name", &s.tls_name]);
    }
    ok(dnsluice()
        .args(&args)
        .args(["--stats-interval", "100ms", "--report"])
        .arg(&html)
        .arg("--stats-jsonl")
        .arg(&jsonl)
        .arg("--stats-json")
        .arg(&stats)
        .output()
        .unwrap());
    (html, jsonl, read_json(&stats))
}

const REPLAY_KEYS: [&str; 14] = [
    "/sent",
    "/answered",
    "/timeouts",
    "/errors",
    "/connections_opened",
    "/tls_handshakes",
    "/qps",
    "/clients",
    "/latency_ms/p50",
    "/latency_ms/p99",
    "/latency_ms/p999",
    "/latency_ms/max",
    "/rcodes/NOERROR",
    "/rcodes/NXDOMAIN",
];

const REPLAY_CHARTS: &[&str] = &[
    "replay-rates",
    "replay-latency-percentiles",
    "replay-latency-histogram",
    "replay-latency-over-time",
    "replay-rcodes",
    "replay-connections",
];

fn replay_report() -> Report {
    let (html, _, stats) = replay("replay", "tls");
    assert_eq!(stats["tls_handshakes"], 4, "4 clients, 4 TLS connections");
    Report {
        kind: "replay",
        html,
        stats: vec![stats],
        charts: REPLAY_CHARTS,
        present: REPLAY_CHARTS,
        keys: REPLAY_KEYS.iter().map(|k| k.to_string()).collect(),
    }
}

fn compare_report() -> Report {
    let (_, udp, udp_stats) = replay("before", "udp");
    let (_, tcp, tcp_stats) = replay("after", "tcp");
    let html = temp_path("compare.html");
    ok(dnsluice()
        .arg("report")
        .arg(format!("udp={}", udp.display()))
        .arg(format!("tcp={}", tcp.display()))
        .args(["--title", "UDP against TCP", "-o"])
        .arg(&html)
        .output()
        .unwrap());
    Report {
        kind: "compare",
        html,
        stats: vec![udp_stats, tcp_stats],
        charts: REPLAY_CHARTS,
        present: REPLAY_CHARTS,
        keys: REPLAY_KEYS.iter().map(|k| k.to_string()).collect(),
    }
}

fn lookup_report() -> Report {
    let s = testkit::servers();
    let names = temp_path("names.txt");
    let mut text = String::new();
    let count = if for_docs() { 20_000 } else { 2000 };
    for i in 0..count {
        text.push_str(&format!("n{i}.{}\n", s.zone));
    }
    for i in 0..20 {
        text.push_str(&format!("missing{i}.{}\n", s.zone));
    }
    std::fs::write(&names, text).unwrap();
    let nameservers: Vec<String> = s
        .fast_dns
        .iter()
        .map(|a| a.to_string())
        .chain([s.slow.to_string()])
        .collect();
    let (html, stats, out) = (
        temp_path("lookup.html"),
        temp_path("lookup.json"),
        temp_path("lookup.out"),
    );
    ok(dnsluice()
        .args(["lookup", "A", "--name-servers", &nameservers.join(",")])
        .arg("--input")
        .arg(&names)
        .arg("--output")
        .arg(&out)
        .args(["-q", "--stats-interval", "50ms", "--report"])
        .arg(&html)
        .arg("--stats-json")
        .arg(&stats)
        .output()
        .unwrap());
    let stats = read_json(&stats);
    let mut keys: Vec<String> = ["/names", "/queries", "/connections_opened", "/steals"]
        .iter()
        .map(|k| k.to_string())
        .collect();
    keys.extend(["/statuses/NOERROR", "/statuses/NXDOMAIN"].map(String::from));
    for ns in &nameservers {
        for key in [
            "queries",
            "connections_opened",
            "failures",
            "p50_ms",
            "p99_ms",
        ] {
            keys.push(format!("/per_nameserver/{ns}/{key}"));
        }
    }
    let charts = &[
        "lookup-rates",
        "lookup-statuses",
        "lookup-nameservers",
        "lookup-connections",
    ];
    Report {
        kind: "lookup",
        html,
        stats: vec![stats],
        charts,
        present: charts,
        keys,
    }
}

fn run_report() -> Report {
    // Caplen 96: truncated messages, so the malformed chart has bars too.
    let capture = corpus_dir().join("live_mini_snaplen96.pcap");
    let pipeline = temp_path("report.toml");
    let rate = if for_docs() { 1000 } else { 3000 };
    std::fs::write(
        &pipeline,
        format!(
            "[[stage]]\nmodule = \"input.mmpcap\"\npath = \"{}\"\n[[stage]]\nmodule = \"filter.timing\"\nrate = {rate}.0\n\
             [[stage]]\nmodule = \"filter.layer\"\n[[stage]]\nmodule = \"filter.dns\"\n[[stage]]\nmodule = \"filter.top\"\n\
             [[stage]]\nmodule = \"output.null\"\n",
            capture.display()
        ),
    )
    .unwrap();
    let (html, stats) = (temp_path("run.html"), temp_path("run.json"));
    ok(dnsluice()
        .arg("run")
        .arg(&pipeline)
        .args(["-q", "--stats-interval", "50ms", "--report"])
        .arg(&html)
        .arg("--stats-json")
        .arg(&stats)
        .output()
        .unwrap());
    let stats = read_json(&stats);
    let mut keys = Vec::new();
    for i in 0..6 {
        keys.push(format!("/stages/{i}/in"));
        keys.push(format!("/stages/{i}/out"));
    }
    keys.extend(
        [
            "/stages/3/counters/qtype A",
            "/stages/3/counters/rcode NXDOMAIN",
            "/stages/3/errors/truncated_capture",
            "/stages/3/counters/tcp_segments",
            "/stages/4/top/qnames/entries/0/count",
            "/stages/4/top/qnames/entries/0/error",
            "/stages/4/top/clients/entries/1/count",
            "/stages/4/top/servers/entries/0/count",
        ]
        .map(String::from),
    );
    Report {
        kind: "run",
        html,
        stats: vec![stats],
        charts: &[
            "run-capture-rate",
            "run-objects",
            "run-qtypes",
            "run-rcodes",
            "run-malformed",
        ],
        present: &[
            "run-capture-rate",
            "run-objects",
            "run-qtypes",
            "run-rcodes",
            "run-malformed",
        ],
        keys,
    }
}

/// What the page shows: its charts and its table cells that name a value.
const SURVEY: &str = r#"JSON.stringify({
  charts: [...document.querySelectorAll('figure.chart')].map(f => ({
    id: f.id,
    points: Number(f.dataset.points),
    width: (f.querySelector('svg') || {getBoundingClientRect: () => ({width: 0})}).getBoundingClientRect().width,
    title: (f.querySelector('svg > title') || {}).textContent || '',
    marks: f.querySelectorAll('path.series, rect').length,
  })),
  cells: [...document.querySelectorAll('td[data-key]')].map(td => ({
    run: Number(td.dataset.run), key: td.dataset.key, text: td.textContent.trim(),
  })),
  version: document.body.textContent.includes('VERSION'),
})"#;

/// Whether `text` (as a table shows it) is `expected`: integers exactly
/// (grouped by commas), other numbers to the three decimals shown.
fn same_number(text: &str, expected: &Value) -> bool {
    let plain = text.replace(',', "");
    match (expected.as_u64(), expected.as_f64(), plain.parse::<f64>()) {
        (Some(n), _, _) => plain == n.to_string(),
        (None, Some(x), Ok(shown)) => (shown - x).abs() <= 0.0005 + x.abs() * 1e-12,
        _ => false,
    }
}

fn check(browser: &mut Browser, report: &Report) {
    let url = format!("file://{}", report.html.display());
    let visit = browser.open(&url);
    assert!(
        visit.errors.is_empty(),
        "{}: errors in the browser: {:#?}",
        report.kind,
        visit.errors
    );
    assert_eq!(
        visit.requests,
        vec![url.clone()],
        "{}: the page may load nothing but itself",
        report.kind
    );
    let survey = SURVEY.replace("VERSION", env!("CARGO_PKG_VERSION"));
    let seen: Value = serde_json::from_str(browser.evaluate(&survey).as_str().unwrap()).unwrap();
    assert_eq!(
        seen["version"], true,
        "{}: the version is shown",
        report.kind
    );
    let charts = seen["charts"].as_array().unwrap();
    for id in report.present {
        let chart = charts
            .iter()
            .find(|c| c["id"] == *id)
            .unwrap_or_else(|| panic!("{}: no chart {id} in {charts:#?}", report.kind));
        assert!(
            chart["width"].as_f64().unwrap() > 200.0,
            "{}: {id} is not drawn: {chart}",
            report.kind
        );
        assert!(
            !chart["title"].as_str().unwrap().is_empty(),
            "{id} has a title"
        );
        if report.charts.contains(id) {
            assert!(
                chart["points"].as_u64().unwrap() > 0 && chart["marks"].as_u64().unwrap() > 0,
                "{}: {id} has no data: {chart}",
                report.kind
            );
        }
    }
    let cells = seen["cells"].as_array().unwrap();
    for cell in cells {
        let run = cell["run"].as_u64().unwrap() as usize;
        let key = cell["key"].as_str().unwrap();
        let expected = report.stats[run]
            .pointer(key)
            .unwrap_or_else(|| panic!("{}: {key} is not in the stats of run {run}", report.kind));
        assert!(
            same_number(cell["text"].as_str().unwrap(), expected),
            "{}: run {run} {key} shows {} but --stats-json says {expected}",
            report.kind,
            cell["text"]
        );
    }
    for run in 0..report.stats.len() {
        for key in &report.keys {
            assert!(
                cells
                    .iter()
                    .any(|c| c["run"] == run && c["key"] == key.as_str()),
                "{}: run {run}: no table shows {key}",
                report.kind
            );
        }
    }
    let png = browser.screenshot(1400);
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 20_000,
        "{}: screenshot of {} bytes",
        report.kind,
        png.len()
    );
    let name = format!("report-{}.png", report.kind);
    std::fs::write(temp_path(&name), &png).unwrap();
    if for_docs() {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/img");
        std::fs::create_dir_all(&docs).unwrap();
        std::fs::write(docs.join(name), &png).unwrap();
    }
}

#[test]
fn every_kind_of_report_opens_from_disk_in_chromium() {
    let reports = [
        replay_report(),
        lookup_report(),
        run_report(),
        compare_report(),
    ];
    let scratch = temp_path("browser");
    let mut browser = Browser::start(&scratch);
    for report in &reports {
        check(&mut browser, report);
    }
}

#[test]
fn a_report_needs_runs_of_one_command_and_a_start_line() {
    let (_, replay_jsonl, _) = replay("mixed-replay", "udp");
    let not_ours = temp_path("not-ours.jsonl");
    std::fs::write(&not_ours, "{\"type\":\"interval\"}\n").unwrap();
    let out = dnsluice()
        .arg("report")
        .arg(&not_ours)
        .arg("-o")
        .arg(temp_path("x.html"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no start line"), "{stderr}");
    let run = temp_path("run.jsonl");
    ok(dnsluice()
        .args(["run", "configs/quickstart.toml", "-q", "--stats-jsonl"])
        .arg(&run)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap());
    let out = dnsluice()
        .arg("report")
        .arg(&replay_jsonl)
        .arg(&run)
        .arg("-o")
        .arg(temp_path("y.html"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("one report compares runs of one command"),
        "{stderr}"
    );
}

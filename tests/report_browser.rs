//! The HTML reports in a real browser: headless Chromium (testkit::chromium,
//! over the DevTools protocol) opens each kind of report from disk — a
//! replay over DNS-over-TLS, a lookup over four nameservers, a `run` of a
//! corpus capture, and two replays compared on one report — and the test
//! checks what the browser saw: no console error or warning, no request but
//! the file itself, every chart drawn, every number in the tables written as
//! the `--stats-json` value it names (`data-key`), and the numbers known
//! without dnsluice shown in the tables, the bars and under the lines: a
//! capture's queries as tshark counts them, answers by rcode as the test
//! zone has the names, a corpus capture's records, query types and rcodes
//! from its tshark truth file.
//!
//! A screenshot of each is saved under the target directory; with
//! `DNSLUICE_UPDATE_SCREENSHOTS=1` also as `docs/img/report-KIND.png` (what
//! the README shows).

use serde_json::Value;
use std::path::{Path, PathBuf};
use testkit::chromium::Browser;
use testkit::corpus::corpus_dir;
use testkit::{assert_ok, dnsluice, run_ok, temp_path};

/// One report to check: where it is, the stats JSON of each of its runs,
/// the charts that must have data, those that must be there at all, table
/// keys that must be shown, and what the page must show by independent
/// truth (tshark's count of a capture's queries, the zone's names).
struct Report {
    kind: &'static str,
    html: PathBuf,
    stats: Vec<Value>,
    charts: &'static [&'static str],
    present: &'static [&'static str],
    keys: Vec<String>,
    truth: Truth,
}

/// What a report must show, known without dnsluice: table cells `(run,
/// data-key, value)`; line series `(chart, series, total)` whose drawn
/// steps (rate × time, read back through the axes' ticks) add up to the
/// total; bars `(chart, category, value)`.
#[derive(Default)]
struct Truth {
    cells: Vec<(usize, String, u64)>,
    series: Vec<(&'static str, String, u64)>,
    bars: Vec<(&'static str, String, u64)>,
}

/// tshark's count of the queries in `capture`, and of those for names
/// that the test zone does not have (`missing*`: NXDOMAIN).
fn tshark_queries(capture: &Path) -> (u64, u64) {
    let out = std::process::Command::new("tshark")
        .args(["-n", "-r"])
        .arg(capture)
        .args([
            "-Y",
            "dns.flags.response == 0",
            "-T",
            "fields",
            "-e",
            "dns.qry.name",
        ])
        .output()
        .unwrap();
    assert_ok(&out, "tshark");
    let names = String::from_utf8(out.stdout).unwrap();
    let total = names.lines().count() as u64;
    let missing = names.lines().filter(|n| n.starts_with("missing")).count() as u64;
    (total, missing)
}

/// What a replay of `capture` to knot must show as run `run`: every query
/// tshark finds sent and answered, `n<i>` NOERROR and `missing<i>`
/// NXDOMAIN (the zone has `n0` .. `n99999`), in the tables and under the
/// rcode chart's lines.
fn replay_truth(truth: &mut Truth, run: usize, label: &str, capture: &Path) {
    let (queries, missing) = tshark_queries(capture);
    assert!(missing > 0 && queries > missing, "{queries} {missing}");
    for (key, value) in [
        ("/sent", queries),
        ("/answered", queries),
        ("/timeouts", 0),
        ("/rcodes/NOERROR", queries - missing),
        ("/rcodes/NXDOMAIN", missing),
    ] {
        truth.cells.push((run, key.to_string(), value));
    }
    let named = |rcode: &str| match label {
        "" => rcode.to_string(),
        label => format!("{label}: {rcode}"),
    };
    truth
        .series
        .push(("replay-rcodes", named("NOERROR"), queries - missing));
    truth
        .series
        .push(("replay-rcodes", named("NXDOMAIN"), missing));
}

/// `path` relative to the project, where [`here`] runs dnsluice: each
/// report's header shows its command line, so the screenshots in the
/// README show no machine's own paths.
fn rel(path: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    path.strip_prefix(root).unwrap_or(path).to_path_buf()
}

/// dnsluice, named by its path relative to the project and run in the
/// project's directory (where cargo runs the tests too).
fn here() -> std::process::Command {
    // spawns: (dnsluice, this workspace's binary, named relative to the project)
    let mut command = std::process::Command::new(rel(&testkit::dnsluice_exe()));
    command.current_dir(env!("CARGO_MANIFEST_DIR"));
    command
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Whether the screenshots are for the docs (then the runs are longer, so
/// the charts have more to show).
fn for_docs() -> bool {
    std::env::var_os("DNSLUICE_UPDATE_SCREENSHOTS").is_some_and(|v| v == "1")
}

/// A replay of 1200 zone queries at 2000/s over `transport` (for the docs
/// 12000 at 4000/s); its report, interval file, stats and capture.
fn replay(name: &str, transport: &str) -> (PathBuf, PathBuf, Value, PathBuf) {
    let s = testkit::servers();
    let capture = temp_path(&format!("{name}.pcap"));
    let (count, rate) = if for_docs() {
        (12_000, "4000")
    } else {
        (1200, "2000")
    };
    testkit::replay::write_capture(&capture, &testkit::replay::zone_queries(count, 8));
    let (html, jsonl, stats) = (
        temp_path(&format!("{name}.html")),
        temp_path(&format!("{name}.jsonl")),
        temp_path(&format!("{name}.json")),
    );
    let server = match transport {
        "tls" => s.dot.to_string(),
        _ => s.knot.to_string(),
    };
    let ca = rel(&s.ca_file).display().to_string();
    let relative = rel(&capture);
    let mut args = vec!["replay", relative.to_str().unwrap(), "--server", &server];
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
    run_ok(
        here()
            .args(&args)
            .args(["--stats-interval", "100ms", "--report"])
            .arg(rel(&html))
            .arg("--stats-jsonl")
            .arg(rel(&jsonl))
            .arg("--stats-json")
            .arg(rel(&stats)),
    );
    (html, jsonl, read_json(&stats), capture)
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
    let (html, _, stats, capture) = replay("replay", "tls");
    assert_eq!(stats["tls_handshakes"], 4, "4 clients, 4 TLS connections");
    let mut truth = Truth::default();
    replay_truth(&mut truth, 0, "", &capture);
    truth.cells.push((0, "/tls_handshakes".into(), 4));
    Report {
        truth,
        kind: "replay",
        html,
        stats: vec![stats],
        charts: REPLAY_CHARTS,
        present: REPLAY_CHARTS,
        keys: REPLAY_KEYS.iter().map(|k| k.to_string()).collect(),
    }
}

fn compare_report() -> Report {
    let (_, udp, udp_stats, udp_capture) = replay("before", "udp");
    let (_, tcp, tcp_stats, tcp_capture) = replay("after", "tcp");
    let mut truth = Truth::default();
    replay_truth(&mut truth, 0, "udp", &udp_capture);
    replay_truth(&mut truth, 1, "tcp", &tcp_capture);
    let html = temp_path("compare.html");
    run_ok(
        here()
            .arg("report")
            .arg(format!("udp={}", rel(&udp).display()))
            .arg(format!("tcp={}", rel(&tcp).display()))
            .args(["--title", "UDP against TCP", "-o"])
            .arg(rel(&html)),
    );
    Report {
        truth,
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
    let count: u64 = if for_docs() { 20_000 } else { 2000 };
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
    run_ok(
        here()
            .args(["lookup", "A", "--name-servers", &nameservers.join(",")])
            .arg("--input")
            .arg(rel(&names))
            .arg("--output")
            .arg(rel(&out))
            .args(["-q", "--stats-interval", "50ms", "--report"])
            .arg(rel(&html))
            .arg("--stats-json")
            .arg(rel(&stats)),
    );
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
    // The zone has n0 .. n99999: every n<i> is NOERROR, every missing<i> NXDOMAIN.
    let (names, missing) = (count + 20, 20);
    let truth = Truth {
        cells: vec![
            (0, "/names".into(), names),
            (0, "/statuses/NOERROR".into(), count),
            (0, "/statuses/NXDOMAIN".into(), missing),
        ],
        series: vec![("lookup-rates", "names".into(), names)],
        bars: vec![
            ("lookup-statuses", "NOERROR".into(), count),
            ("lookup-statuses", "NXDOMAIN".into(), missing),
        ],
    };
    let charts = &[
        "lookup-rates",
        "lookup-statuses",
        "lookup-nameservers",
        "lookup-connections",
    ];
    Report {
        truth,
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
    run_ok(
        here()
            .arg("run")
            .arg(rel(&pipeline))
            .args(["-q", "--stats-interval", "50ms", "--report"])
            .arg(rel(&html))
            .arg("--stats-json")
            .arg(rel(&stats)),
    );
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
    // tshark's dissection of the capture (its truth file): every record
    // read, and the queries' types and answers' rcodes filter.dns counts
    // (AAAA: one A query, frame 1265, is in two TCP segments cut at 96
    // bytes, which we reassemble and tshark does not: tests/corpus_dns.rs).
    let tshark = testkit::corpus::truth("live_mini_snaplen96.pcap");
    let counts = &tshark["counts"];
    let records = counts["records"].as_u64().unwrap();
    let qtype_aaaa = counts["qtypes"]["28"].as_u64().unwrap();
    let nxdomain = counts["rcodes"]["3"].as_u64().unwrap();
    let truth = Truth {
        cells: vec![
            (0, "/stages/0/out".into(), records),
            (0, "/stages/1/in".into(), records),
            (0, "/stages/3/counters/qtype AAAA".into(), qtype_aaaa),
            (0, "/stages/3/counters/rcode NXDOMAIN".into(), nxdomain),
        ],
        series: vec![("run-objects", "0 input.mmpcap".into(), records)],
        bars: vec![
            ("run-qtypes", "AAAA".into(), qtype_aaaa),
            ("run-rcodes", "NXDOMAIN".into(), nxdomain),
        ],
    };
    Report {
        truth,
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
    ticks: [...f.querySelectorAll('text.tick')].map(t => ({
      x: Number(t.getAttribute('x')), y: Number(t.getAttribute('y')),
      anchor: t.getAttribute('text-anchor'), text: t.textContent,
    })),
    series: [...f.querySelectorAll('path.series')].map(p => ({
      name: p.querySelector('title').textContent, d: p.getAttribute('d'),
    })),
    values: [...f.querySelectorAll('text.value')].map(t => t.textContent),
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

/// The number a chart's label shows (`1500`, `15k`, `2.5M`, `0.25`).
fn label_value(text: &str) -> f64 {
    let (digits, scale) = match text.chars().last() {
        Some('k') => (&text[..text.len() - 1], 1e3),
        Some('M') => (&text[..text.len() - 1], 1e6),
        Some('G') => (&text[..text.len() - 1], 1e9),
        _ => (text, 1.0),
    };
    digits
        .parse::<f64>()
        .unwrap_or_else(|_| panic!("label {text:?}"))
        * scale
}

/// A linear axis read back from two of its ticks: pixel -> value.
fn axis(ticks: &[(f64, f64)]) -> impl Fn(f64) -> f64 {
    assert!(ticks.len() >= 2, "an axis with {} ticks", ticks.len());
    let ((p0, v0), (p1, v1)) = (ticks[0], ticks[ticks.len() - 1]);
    move |p| v0 + (p - p0) * (v1 - v0) / (p1 - p0)
}

/// The area under series `name` of a line chart as drawn, in the axes'
/// units (rate × seconds: the count the rate is of), read from the path's
/// points and the ticks' positions and labels.
fn area_under(chart: &Value, name: &str) -> f64 {
    let ticks = chart["ticks"].as_array().unwrap();
    let on = |anchor: &str, coordinate: &str, shift: f64| -> Vec<(f64, f64)> {
        ticks
            .iter()
            .filter(|t| t["anchor"] == anchor)
            .map(|t| {
                let at = t[coordinate].as_f64().unwrap() - shift;
                (at, label_value(t["text"].as_str().unwrap()))
            })
            .collect()
    };
    // x ticks sit at their grid line; y tick labels 4 px below theirs.
    let (time, value) = (axis(&on("middle", "x", 0.0)), axis(&on("end", "y", 4.0)));
    let d = chart["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no series {name:?} in {}", chart["id"]))["d"]
        .as_str()
        .unwrap()
        .to_string();
    let mut area = 0.0;
    for part in d.split('M').filter(|p| !p.is_empty()) {
        let points: Vec<(f64, f64)> = part
            .split('L')
            .map(|xy| {
                let (x, y) = xy.split_once(',').unwrap();
                (x.parse().unwrap(), y.parse().unwrap())
            })
            .collect();
        for pair in points.windows(2) {
            let ((x0, y0), (x1, y1)) = (pair[0], pair[1]);
            area += (value(y0) + value(y1)) / 2.0 * (time(x1) - time(x0));
        }
    }
    area
}

/// The report shows what `report.truth` says, known without dnsluice:
/// table cells exactly, bars by their labels, and under each line the
/// total its rate is of, to within what pixels drawn to 0.1 can carry (1%).
fn check_truth(report: &Report, cells: &[Value], charts: &[Value]) {
    let kind = report.kind;
    for (run, key, value) in &report.truth.cells {
        let cell = cells
            .iter()
            .find(|c| c["run"] == *run && c["key"] == key.as_str())
            .unwrap_or_else(|| panic!("{kind}: run {run}: no cell shows {key}"));
        let shown = cell["text"].as_str().unwrap().replace(',', "");
        assert_eq!(shown, value.to_string(), "{kind}: run {run} {key}");
    }
    let chart = |id: &str| {
        charts
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("{kind}: no chart {id}"))
    };
    for (id, series, total) in &report.truth.series {
        let area = area_under(chart(id), series);
        let total = *total as f64;
        assert!(
            (area - total).abs() <= 0.01 * total,
            "{kind}: {id}: {series} adds up to {area:.1}, not {total}"
        );
    }
    for (id, category, value) in &report.truth.bars {
        let chart = chart(id);
        let categories: Vec<&Value> = chart["ticks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["anchor"] == "end")
            .map(|t| &t["text"])
            .collect();
        let row = categories
            .iter()
            .position(|c| *c == category.as_str())
            .unwrap_or_else(|| panic!("{kind}: {id} has no bar {category}: {categories:?}"));
        let shown = label_value(chart["values"][row].as_str().unwrap());
        // Labels keep four figures (`20.02k`): exact below 10,000.
        let value = *value as f64;
        assert!(
            (shown - value).abs() <= value * 0.0005,
            "{kind}: {id}: the {category} bar says {shown}, not {value}"
        );
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
    // Each cell shows the statistic its data-key names, as the tables
    // write numbers (grouping, three decimals). Both come from one look-up,
    // so this checks the writing only; what the numbers must be is
    // `report.truth`, known without dnsluice (below).
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
    check_truth(report, cells, charts);
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
    let (_, replay_jsonl, _, _) = replay("mixed-replay", "udp");
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
    run_ok(
        dnsluice()
            .args(["run", "configs/quickstart.toml", "-q", "--stats-jsonl"])
            .arg(&run)
            .current_dir(env!("CARGO_MANIFEST_DIR")),
    );
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

//! `--metrics-listen` of a diff and of a queue worker, read by the real
//! programs on loopback. A diff of the test servers' knot and its slow
//! copy (dnsluice-netem, delaying every answer by the servers' configured
//! delay) is scraped every 200 ms by Debian's `prometheus`: each server's
//! latency histogram counts as many answers as tshark counts queries in
//! the capture, and the slow server's has none under its delay. `promtool
//! check metrics` passes on a diff's final scrape. A worker taking items
//! from a broker of the test's own (`input.nats` → `output.null`, which
//! never stores a result, so nothing is acknowledged) holds what the
//! consumer's `max_ack_pending` lets it: Prometheus reads the held items
//! and lines the test's configuration sets, and the broker's own
//! monitoring endpoint says as many are unacknowledged.

use serde_json::Value;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use testkit::prometheus::{check_final_scrape, finished, get, spawn, total, Prometheus};
use testkit::queue::{free_port, put, url, OwnBroker};
use testkit::readers::tshark_frames;
use testkit::replay::{write_capture, zone_queries};
use testkit::{dnsluice, servers, temp_dir};

/// Queries in the diff's capture.
const COUNT: usize = 2000;
/// Queries outstanding per server: with the slow server's delay (20 ms),
/// a run of over a second, so several scrapes fall in it.
const INFLIGHT: &str = "25";

/// Writes the capture of [`zone_queries`]; its path and how many queries
/// tshark reads in it.
fn capture(dir: &Path) -> (String, f64) {
    let capture = dir.join("queries.pcap");
    write_capture(&capture, &zone_queries(COUNT, 8));
    let queries = tshark_frames(&capture).len();
    assert_eq!(queries, COUNT, "tshark reads the capture");
    (capture.display().to_string(), queries as f64)
}

#[test]
fn prometheus_scrapes_a_diff_and_its_latency_histograms_are_the_truth() {
    let dir = temp_dir("metrics-diff");
    let (path, queries) = capture(&dir);
    let (knot, slow) = (servers().knot.to_string(), servers().slow.to_string());
    let port = free_port();
    let prometheus = Prometheus::start(port, &dir);
    let args = [
        "diff",
        &path,
        "--server",
        &knot,
        "--server",
        &slow,
        "--inflight",
        INFLIGHT,
    ];
    finished(spawn(&args, port), "diff");
    prometheus.wait_final();
    let family = "dnsluice_diff_latency_seconds";
    let mut counts = prometheus.query(&total(&format!("{family}_count")), "server");
    counts.sort_by(|a, b| a.0.cmp(&b.0));
    let mut expected = vec![(knot.clone(), queries), (slow.clone(), queries)];
    expected.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(counts, expected);
    let slow_bucket = |le: &str| {
        prometheus.one(&total(&format!(
            "{family}_bucket{{server=\"{slow}\",le=\"{le}\"}}"
        )))
    };
    // Every answer of the slow server came after its delay: none in a
    // bucket below it, all under +Inf.
    let delay = servers().slow_delay.as_secs_f64();
    assert!(delay > 0.01, "the slow server's delay: {delay} s");
    assert_eq!(slow_bucket("0.01"), 0.0);
    assert_eq!(slow_bucket("+Inf"), queries);
    let sum = prometheus.one(&total(&format!("{family}_sum{{server=\"{slow}\"}}")));
    assert!(sum >= delay * queries, "{sum} s");
    // Scraped while it ran, not only at its end.
    assert_eq!(
        prometheus.one("min_over_time(dnsluice_run_finished[1m])"),
        0.0
    );
}

#[test]
fn promtool_passes_the_final_scrape_of_a_diff() {
    let dir = temp_dir("metrics-diff-promtool");
    let (path, _) = capture(&dir);
    let (knot, fast) = (servers().knot, servers().fast_dns[1]);
    let port = free_port();
    let (knot, fast) = (knot.to_string(), fast.to_string());
    let args = ["diff", &path, "--server", &knot, "--server", &fast];
    let body = check_final_scrape(spawn(&args, port), port, "diff");
    for server in [&knot, &fast] {
        let line = format!(
            "dnsluice_diff_latency_seconds_bucket{{stage=\"3\",module=\"output.diff\",server=\"{server}\",le=\"+Inf\"}} {COUNT}\n"
        );
        assert!(body.contains(&line), "{line}{body}");
    }
}

/// The consumer `name` of the broker's monitoring page `/jsz`.
fn consumer_info(monitor: u16, name: &str) -> Value {
    let (status, body) = get(monitor, "/jsz?consumers=true").expect("nats-server monitors");
    assert!(status.contains(" 200 "), "{status}: {body}");
    let jsz: Value = serde_json::from_str(&body).unwrap();
    let mut consumers = jsz["account_details"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|a| a["stream_detail"].as_array().into_iter().flatten())
        .flat_map(|s| s["consumer_detail"].as_array().into_iter().flatten());
    consumers
        .find(|c| c["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no consumer {name}: {jsz}"))
}

#[test]
fn prometheus_reads_the_items_a_queue_worker_holds() {
    const ITEMS: u64 = 10;
    const LINES_PER_ITEM: u64 = 3;
    const MAX_ACK_PENDING: u64 = 4;
    let dir = temp_dir("metrics-queue");
    let monitor = free_port();
    let broker = OwnBroker::start_with(&dir, &["-m".into(), monitor.to_string()]);
    let work = url(
        format!("127.0.0.1:{}", broker.port).parse().unwrap(),
        "held",
    );
    let names = dir.join("names.txt");
    let text: String = (0..ITEMS * LINES_PER_ITEM)
        .map(|i| format!("n{i}.lookup.test\n"))
        .collect();
    std::fs::write(&names, text).unwrap();
    put(&work, &names, &["--batch", &LINES_PER_ITEM.to_string()]);
    let pipeline = dir.join("worker.toml");
    std::fs::write(
        &pipeline,
        format!(
            "[[stage]]\nmodule = \"input.nats\"\nurl = \"{work}\"\nconsumer = \"held\"\n\
             max_ack_pending = {MAX_ACK_PENDING}\n\n[[stage]]\nmodule = \"output.null\"\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let prometheus = Prometheus::start(port, &dir);
    let mut worker = dnsluice()
        .args(["run", &pipeline.display().to_string(), "-q"])
        .args(["--metrics-listen", &format!("127.0.0.1:{port}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("worker.err")).unwrap())
        .spawn()
        .expect("dnsluice runs");
    // The worker never acknowledges: it takes what the broker lets it have.
    let held = |family: &str| prometheus.one(&format!("{family}{{module=\"input.nats\"}}"));
    let deadline = Instant::now() + Duration::from_secs(20);
    while held("dnsluice_nats_held_items") != MAX_ACK_PENDING as f64 {
        if let Some(status) = worker.try_wait().unwrap() {
            let err = std::fs::read_to_string(dir.join("worker.err")).unwrap_or_default();
            panic!("the worker ended early ({status}): {err}");
        }
        assert!(
            Instant::now() < deadline,
            "held items: {}",
            held("dnsluice_nats_held_items")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Still so a few scrapes later, lines included, and the broker agrees.
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(held("dnsluice_nats_held_items"), MAX_ACK_PENDING as f64);
    assert_eq!(
        held("dnsluice_nats_held_lines"),
        (MAX_ACK_PENDING * LINES_PER_ITEM) as f64
    );
    let consumer = consumer_info(monitor, "held");
    assert_eq!(consumer["num_ack_pending"], MAX_ACK_PENDING, "{consumer}");
    assert_eq!(
        consumer["num_pending"],
        ITEMS - MAX_ACK_PENDING,
        "{consumer}"
    );
    let _ = worker.kill();
    let _ = worker.wait();
}

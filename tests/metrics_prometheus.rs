//! `--metrics-listen` read by the real programs, on loopback: Debian's
//! `prometheus` server scrapes a replay and a lookup every 200 ms against
//! the test servers (tests/servers/up.sh), and its HTTP query API gives,
//! after the run, totals equal to independent truths: the queries sent are
//! the capture's packets as tshark counts them, the answers by rcode (and
//! the lookup statuses) what the zone generator's rule predicts (n<i>
//! exists, missing<i> does not). `promtool check metrics` passes on a
//! final scrape of each.

use std::path::Path;
use std::process::Child;
use testkit::prometheus::{check_final_scrape, finished, spawn, total, Prometheus};
use testkit::queue::free_port;
use testkit::readers::tshark_frames;
use testkit::replay::{write_capture, zone_queries};
use testkit::{servers, temp_dir};

/// Queries in the capture, and names looked up.
const COUNT: usize = 2000;
/// Sent at this rate: a run of about a second, so several scrapes fall in it.
const RATE: &str = "2000";

/// The zone generator's rule: every fifth name is `missing<i>` (NXDOMAIN),
/// the others `n<i>` (NOERROR); (NOERROR, NXDOMAIN).
fn predicted() -> (u64, u64) {
    let missing = (0..COUNT).filter(|i| i % 5 == 4).count() as u64;
    (COUNT as u64 - missing, missing)
}

/// Spawns the lookup of [`names`] over the test servers' fast nameservers.
fn spawn_lookup(dir: &Path, port: u16) -> Child {
    let names = dir.join("names.txt");
    std::fs::write(&names, names_text()).unwrap();
    let ns: Vec<String> = servers().fast_dns.iter().map(|a| a.to_string()).collect();
    let input = names.display().to_string();
    let args = [
        "lookup",
        "A",
        "--name-servers",
        &ns.join(","),
        "--input",
        &input,
        "--rate",
        RATE,
    ];
    spawn(&args, port)
}

/// The names: `n<i>.lookup.test`, every fifth `missing<i>.lookup.test`.
fn names_text() -> String {
    zone_queries(COUNT, 1)
        .iter()
        .map(|q| format!("{}\n", q.name))
        .collect()
}

/// Writes the capture of [`zone_queries`] and spawns its replay to knot.
fn spawn_replay(dir: &Path, port: u16) -> (Child, std::path::PathBuf) {
    let capture = dir.join("queries.pcap");
    write_capture(&capture, &zone_queries(COUNT, 8));
    let knot = servers().knot.to_string();
    let path = capture.display().to_string();
    let args = ["replay", &path, "--server", &knot, "--rate", RATE];
    (spawn(&args, port), capture)
}

#[test]
fn prometheus_scrapes_a_replay_and_its_totals_are_the_truth() {
    let dir = temp_dir("metrics-replay");
    let port = free_port();
    let prometheus = Prometheus::start(port, &dir);
    let (child, capture) = spawn_replay(&dir, port);
    finished(child, "replay");
    prometheus.wait_final();
    let sent = tshark_frames(&capture).len() as f64;
    assert_eq!(sent, COUNT as f64, "tshark reads the capture");
    let client = "module=\"output.dnscli\"";
    let events = |counter: &str| {
        prometheus.one(&total(&format!(
            "dnsluice_stage_events_total{{{client},counter=\"{counter}\"}}"
        )))
    };
    assert_eq!(events("sent"), sent);
    let (noerror, nxdomain) = predicted();
    assert_eq!(events("rcode.NOERROR"), noerror as f64);
    assert_eq!(events("rcode.NXDOMAIN"), nxdomain as f64);
    assert_eq!(
        prometheus.one(&total(&format!(
            "dnsluice_latency_seconds_count{{{client}}}"
        ))),
        sent
    );
    assert_eq!(
        prometheus.one(&total("dnsluice_stage_in_total{stage=\"0\"}")),
        sent
    );
    // Scraped while it ran, not only at its end.
    assert_eq!(
        prometheus.one("min_over_time(dnsluice_run_finished[1m])"),
        0.0
    );
}

#[test]
fn prometheus_scrapes_a_lookup_and_its_totals_are_the_truth() {
    let dir = temp_dir("metrics-lookup");
    let port = free_port();
    let prometheus = Prometheus::start(port, &dir);
    finished(spawn_lookup(&dir, port), "lookup");
    prometheus.wait_final();
    let statuses = prometheus.query(
        &total("dnsluice_stage_breakdown_total{module=\"lookup.dns\",breakdown=\"status\"}"),
        "key",
    );
    let (noerror, nxdomain) = predicted();
    let mut statuses: Vec<(String, u64)> =
        statuses.into_iter().map(|(k, v)| (k, v as u64)).collect();
    statuses.sort();
    assert_eq!(
        statuses,
        [
            ("NOERROR".to_string(), noerror),
            ("NXDOMAIN".to_string(), nxdomain)
        ]
    );
    // Per nameserver: each of the three was asked, and they add up to the queries.
    let per_ns = prometheus.query(
        &total("dnsluice_lookup_nameserver_queries_total"),
        "nameserver",
    );
    assert_eq!(per_ns.len(), servers().fast_dns.len(), "{per_ns:?}");
    assert!(per_ns.iter().all(|(_, n)| *n > 0.0), "{per_ns:?}");
    let queries = prometheus.one(&total(
        "dnsluice_stage_events_total{module=\"lookup.dns\",counter=\"queries\"}",
    ));
    assert_eq!(per_ns.iter().map(|(_, n)| n).sum::<f64>(), queries);
    assert!(queries >= COUNT as f64);
    assert_eq!(
        prometheus.one("min_over_time(dnsluice_run_finished[1m])"),
        0.0
    );
}

#[test]
fn promtool_passes_the_final_scrapes_of_a_replay_and_a_lookup() {
    let dir = temp_dir("metrics-promtool");
    let port = free_port();
    let (child, _) = spawn_replay(&dir, port);
    let body = check_final_scrape(child, port, "replay");
    assert!(body.contains("dnsluice_latency_seconds_bucket{stage=\"5\",module=\"output.dnscli\",le=\"+Inf\"} 2000\n"), "{body}");
    let port = free_port();
    let body = check_final_scrape(spawn_lookup(&dir, port), port, "lookup");
    assert!(
        body.contains("dnsluice_lookup_nameserver_latency_seconds_bucket{"),
        "{body}"
    );
    assert!(body.contains("dnsluice_build_info{version=\""), "{body}");
}

/// SIGTERM while the endpoint lingers after a finished run ends the wait
/// at once, and the run keeps its exit code, 0 (the signal was not looked
/// at: the process waited out its linger, then exited 143).
#[test]
fn sigterm_ends_the_linger_of_a_finished_run() {
    use std::io::BufRead;
    let dir = temp_dir("metrics-linger-term");
    let names = dir.join("names.txt");
    std::fs::write(&names, names_text()).unwrap();
    let ns = servers().knot.to_string();
    let port = free_port();
    let mut child = testkit::dnsluice()
        .args(["lookup", "A", "--name-servers", &ns, "--input"])
        .arg(&names)
        .args(["--metrics-listen", &format!("127.0.0.1:{port}")])
        .args(["--metrics-linger", "5m"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The summary is written when the run is over, before the linger;
    // stderr is read to its end meanwhile (a write to a closed pipe fails).
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let (lines, seen) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let mut said = String::new();
    while let Ok(line) = seen.recv_timeout(std::time::Duration::from_secs(30)) {
        said.push_str(&line);
        said.push('\n');
        if line.starts_with("lookup: ") {
            break;
        }
    }
    assert!(said.contains("lookup: "), "{said}");
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(child.try_wait().unwrap().is_none(), "no linger: {said}");
    let signalled = std::time::Instant::now();
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = child.wait().unwrap();
    let took = signalled.elapsed();
    assert!(took < std::time::Duration::from_secs(2), "{took:?}");
    assert_eq!(status.code(), Some(0), "{status:?}");
}

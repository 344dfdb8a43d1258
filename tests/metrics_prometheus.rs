//! `--metrics-listen` read by the real programs, on loopback: Debian's
//! `prometheus` server scrapes a replay and a lookup every 200 ms against
//! the test servers (tests/servers/up.sh), and its HTTP query API gives,
//! after the run, totals equal to independent truths: the queries sent are
//! the capture's packets as tshark counts them, the answers by rcode (and
//! the lookup statuses) what the zone generator's rule predicts (n<i>
//! exists, missing<i> does not). `promtool check metrics` passes on a
//! final scrape of each.

use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use testkit::daemon::{start, Daemon};
use testkit::queue::free_port;
use testkit::readers::tshark_frames;
use testkit::replay::{write_capture, zone_queries};
use testkit::{dnsluice, servers, temp_dir};

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

/// An HTTP GET to 127.0.0.1:`port` (`Connection: close`); the status line
/// and the body.
fn get(port: u16, target: &str) -> Option<(String, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let request = format!("GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    s.write_all(request.as_bytes()).ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    Some((head.lines().next()?.to_string(), body.to_string()))
}

/// `text` percent-encoded for a query string.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A Prometheus server of the test's own, scraping 127.0.0.1:`target`
/// every 200 ms, storing under `dir`.
struct Prometheus {
    port: u16,
    _daemon: Daemon,
}

impl Prometheus {
    fn start(target: u16, dir: &Path) -> Prometheus {
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 200ms\n  scrape_timeout: 150ms\n\
                 scrape_configs:\n  - job_name: dnsluice\n    static_configs:\n      \
                 - targets: ['127.0.0.1:{target}']\n"
            ),
        )
        .unwrap();
        let port = free_port();
        let daemon = start(
            "prometheus",
            "prometheus",
            &[
                &format!("--config.file={}", config.display()),
                &format!("--storage.tsdb.path={}", dir.join("tsdb").display()),
                &format!("--web.listen-address=127.0.0.1:{port}"),
            ],
            dir,
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        while get(port, "/-/ready").is_none_or(|(status, _)| !status.contains(" 200 ")) {
            let log = std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default();
            assert!(Instant::now() < deadline, "prometheus never ready: {log}");
            std::thread::sleep(Duration::from_millis(50));
        }
        let prometheus = Prometheus {
            port,
            _daemon: daemon,
        };
        // Its first scrape comes up to 5 s after it is ready (target
        // discovery sends its updates at most that often): from then on
        // the target is scraped every 200 ms (down, until dnsluice listens).
        while prometheus.query("up", "job").is_empty() {
            assert!(Instant::now() < deadline, "prometheus never scraped");
            std::thread::sleep(Duration::from_millis(50));
        }
        prometheus
    }

    /// The value of instant query `promql`, one number per series, by the
    /// value of `label`.
    fn query(&self, promql: &str, label: &str) -> Vec<(String, f64)> {
        let target = format!("/api/v1/query?query={}", encode(promql));
        let (status, body) = get(self.port, &target).expect("prometheus answers");
        let start = body.find('{').unwrap_or(0);
        let end = body.rfind('}').map_or(body.len(), |e| e + 1);
        let v: Value = serde_json::from_str(&body[start..end])
            .unwrap_or_else(|e| panic!("{status}: {e}: {body}"));
        assert_eq!(v["status"], "success", "{promql}: {v}");
        let series = v["data"]["result"].as_array().cloned().unwrap_or_default();
        series
            .iter()
            .map(|s| {
                let key = s["metric"][label].as_str().unwrap_or("").to_string();
                (key, s["value"][1].as_str().unwrap().parse().unwrap())
            })
            .collect()
    }

    /// The one value of `promql` (0 when it has no series).
    fn one(&self, promql: &str) -> f64 {
        let values = self.query(promql, "");
        assert!(values.len() <= 1, "{promql}: {values:?}");
        values.first().map_or(0.0, |v| v.1)
    }

    /// Waits until Prometheus holds the run's final values (a sample of
    /// `dnsluice_run_finished` at 1).
    fn wait_final(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.one("max_over_time(dnsluice_run_finished[1m])") != 1.0 {
            assert!(Instant::now() < deadline, "no final scrape stored");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A total as Prometheus has it after the run: the largest sample in the
/// last minute (counters only grow; the series is stale once the run ended).
fn total(selector: &str) -> String {
    format!("max_over_time({selector}[1m])")
}

/// Spawns `dnsluice ARGS --metrics-listen 127.0.0.1:PORT --metrics-linger 10s -q`.
fn spawn(args: &[&str], port: u16, stdin: Stdio) -> Child {
    dnsluice()
        .args(args)
        .args(["--metrics-listen", &format!("127.0.0.1:{port}")])
        .args(["--metrics-linger", "10s", "-q"])
        .stdin(stdin)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dnsluice runs")
}

/// Waits for `child`, which must succeed.
fn finished(child: Child, what: &str) {
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what}: {stderr}");
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
    spawn(&args, port, Stdio::null())
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
    (spawn(&args, port, Stdio::null()), capture)
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

/// The endpoint's last scrape, taken by the test after the run (which
/// ends the linger at once), checked by `promtool check metrics`.
fn check_final_scrape(mut child: Child, port: u16, what: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    let body = loop {
        if let Some((_, body)) = get(port, "/metrics") {
            if body.contains("\ndnsluice_run_finished 1\n") {
                break body;
            }
        }
        if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{what}: no final scrape: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let scraped = Instant::now();
    finished(child, what);
    assert!(
        scraped.elapsed() < Duration::from_secs(3),
        "{what}: lingered after the final scrape"
    );
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (installed by .ci/run)");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = promtool.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{what}: promtool check metrics: {}{}\n{body}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    body
}

#[test]
fn promtool_passes_the_final_scrapes_of_a_replay_and_a_lookup() {
    let dir = temp_dir("metrics-promtool");
    let port = free_port();
    let (child, _) = spawn_replay(&dir, port);
    let body = check_final_scrape(child, port, "replay");
    assert!(body.contains("dnsluice_latency_seconds_bucket{stage=\"4\",module=\"output.dnscli\",le=\"+Inf\"} 2000\n"), "{body}");
    let port = free_port();
    let body = check_final_scrape(spawn_lookup(&dir, port), port, "lookup");
    assert!(
        body.contains("dnsluice_lookup_nameserver_latency_seconds_bucket{"),
        "{body}"
    );
    assert!(body.contains("dnsluice_build_info{version=\""), "{body}");
}

//! The real Prometheus programs against `--metrics-listen`, for the
//! `tests/metrics_*.rs` files: a `prometheus` server of the test's own
//! scraping an endpoint every 200 ms (its HTTP query API read after the
//! run), a plain HTTP GET, dnsluice serving its metrics, and `promtool
//! check metrics` on its final scrape.

use crate::daemon::{start, Daemon};
use crate::dnsluice;
use crate::queue::free_port;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// An HTTP/1.0 GET to 127.0.0.1:`port` (so the body comes whole, never
/// chunked, and the connection closes); the status line and the body.
pub fn get(port: u16, target: &str) -> Option<(String, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let request = format!("GET {target} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
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

/// A total as Prometheus has it after the run: the largest sample in the
/// last minute (counters only grow; the series is stale once the run ended).
pub fn total(selector: &str) -> String {
    format!("max_over_time({selector}[1m])")
}

/// A Prometheus server of the test's own, scraping 127.0.0.1:`target`
/// every 200 ms, storing under `dir`.
pub struct Prometheus {
    port: u16,
    _daemon: Daemon,
}

impl Prometheus {
    /// Starts it and waits for its first scrape of the target (down until
    /// dnsluice listens).
    pub fn start(target: u16, dir: &Path) -> Prometheus {
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
    pub fn query(&self, promql: &str, label: &str) -> Vec<(String, f64)> {
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
    pub fn one(&self, promql: &str) -> f64 {
        let values = self.query(promql, "");
        assert!(values.len() <= 1, "{promql}: {values:?}");
        values.first().map_or(0.0, |v| v.1)
    }

    /// Waits until Prometheus holds the run's final values (a sample of
    /// `dnsluice_run_finished` at 1).
    pub fn wait_final(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.one("max_over_time(dnsluice_run_finished[1m])") != 1.0 {
            assert!(Instant::now() < deadline, "no final scrape stored");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// `promtool check metrics` of `body` (a scrape): its complaints, or
/// `None` when it passes.
pub fn promtool_check(body: &str) -> Option<String> {
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
    (!out.status.success()).then(|| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Spawns `dnsluice ARGS --metrics-listen 127.0.0.1:PORT --metrics-linger 10s -q`.
pub fn spawn(args: &[&str], port: u16) -> Child {
    dnsluice()
        .args(args)
        .args(["--metrics-listen", &format!("127.0.0.1:{port}")])
        .args(["--metrics-linger", "10s", "-q"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dnsluice runs")
}

/// Waits for `child`, which must succeed.
pub fn finished(child: Child, what: &str) {
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what}: {stderr}");
}

/// The endpoint's last scrape, taken by the test after the run (which
/// ends the linger at once), checked by `promtool check metrics`.
pub fn check_final_scrape(mut child: Child, port: u16, what: &str) -> String {
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
    if let Some(complaints) = promtool_check(&body) {
        panic!("{what}: promtool check metrics: {complaints}\n{body}");
    }
    body
}

//! `dnsluice run` says where its processor time went: the summary's `cpu`
//! line and `cpu_s` / `threads` in `--stats-json` (each thread the run
//! started, by name, and the process's total); and the same, live, in its
//! Prometheus endpoint (`process_cpu_seconds_total`,
//! `dnsluice_thread_cpu_seconds_total`, scraped by Debian's `prometheus`).
//! Checked against the kernel's own account of the child process (`wait4`'s
//! resource usage), not against anything dnsluice reports of itself.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use testkit::generated::udp_queries;
use testkit::prometheus::{total, Prometheus};
use testkit::queue::free_port;
use testkit::{dnsluice, run_ok, temp_dir, wait_usage};

/// [`udp_queries`] compressed by `zstd`.
fn zstd_capture(dir: &Path, count: u32) -> PathBuf {
    let capture = udp_queries(dir, count);
    run_ok(
        // spawns: zstd (compresses the capture)
        Command::new("zstd")
            .args(["-q", "-f", "--rm"])
            .arg(&capture),
    );
    capture.with_extension("pcap.zst")
}

/// What a run said and what the kernel counted for it.
struct Measured {
    stats: Value,
    stderr: String,
    /// User and system time of the child, from `wait4`.
    kernel_cpu: Duration,
}

/// `dnsluice run configs/dump.toml` on `capture` with `args`.
fn dump_args(capture: &Path, args: &[&str]) -> Vec<String> {
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/dump.toml");
    let mut all = vec![config.display().to_string(), "--set".into()];
    all.push(format!("0.path={}", capture.display()));
    all.extend(args.iter().map(|a| a.to_string()));
    all
}

/// Runs `dnsluice run` with `args`, its output to /dev/null, and takes its
/// resource usage from the kernel.
fn run_measured(dir: &Path, args: &[String]) -> Measured {
    let stats_path = dir.join("stats.json");
    let child = dnsluice()
        .arg("run")
        .args(args)
        .arg("--stats-json")
        .arg(&stats_path)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start dnsluice");
    let usage = wait_usage(child);
    assert!(usage.success, "dnsluice failed: {}", usage.stderr);
    let stats = serde_json::from_str(&std::fs::read_to_string(&stats_path).unwrap()).unwrap();
    Measured {
        stats,
        stderr: usage.stderr,
        kernel_cpu: usage.cpu,
    }
}

/// The threads of `--stats-json` as (name, count, seconds), in its order.
fn threads(stats: &Value) -> Vec<(String, u64, f64)> {
    stats["threads"]
        .as_array()
        .expect("a threads list")
        .iter()
        .map(|t| {
            let name = t["name"].as_str().unwrap().to_string();
            (
                name,
                t["count"].as_u64().unwrap(),
                t["cpu_s"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// The threads' times add up to what the kernel counted for the process,
/// less only what it spent outside them (starting and tearing down), and the
/// process's own total is no more than the kernel's.
fn accounts_for_the_process(run: &Measured) {
    let kernel = run.kernel_cpu.as_secs_f64();
    let sum: f64 = threads(&run.stats).iter().map(|t| t.2).sum();
    let total = run.stats["cpu_s"].as_f64().unwrap();
    assert!(kernel > 0.05, "a run long enough to measure: {kernel} s");
    assert!(
        sum <= kernel + 0.002 && sum >= 0.9 * kernel,
        "threads {sum} s against the kernel's {kernel} s: {:?}",
        threads(&run.stats)
    );
    assert!(
        total <= kernel + 0.002 && total >= sum - 0.002,
        "total {total}, threads {sum}, kernel {kernel}"
    );
    // The summary line says the same total.
    let line = format!("  cpu {total:.3} s: ");
    assert!(
        run.stderr.contains(&line),
        "no {line:?} in:\n{}",
        run.stderr
    );
}

#[test]
fn a_run_on_two_threads_says_what_each_thread_used() {
    let dir = temp_dir("thread-cpu-two");
    let capture = udp_queries(&dir, 400_000);
    let run = run_measured(&dir, &dump_args(&capture, &["--threads", "2"]));
    let mut names: Vec<(String, u64)> = threads(&run.stats)
        .into_iter()
        .map(|(name, count, _)| (name, count))
        .collect();
    names.sort();
    let expected = ["main", "mmpcap-helper", "split-0", "split-1", "split-merge"];
    let expected: Vec<(String, u64)> = expected.iter().map(|n| (n.to_string(), 1)).collect();
    assert_eq!(names, expected, "{}", run.stderr);
    // The two threads that ran the chain did most of the work, and the
    // list comes busiest first.
    let listed = threads(&run.stats);
    assert!(
        listed[0].0.starts_with("split-") && listed[1].0.starts_with("split-"),
        "{listed:?}"
    );
    assert!(listed.windows(2).all(|w| w[0].2 >= w[1].2), "{listed:?}");
    accounts_for_the_process(&run);
}

/// The cores this test's child sees (the rule of
/// `dnsluice_modules::input::decoder_thread`: a decoder has a thread of its
/// own when each run going at once can have two).
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[test]
fn a_compressed_capture_on_one_thread_counts_its_decompressing_thread() {
    let dir = temp_dir("thread-cpu-zstd");
    let compressed = zstd_capture(&dir, 300_000);
    let run = run_measured(&dir, &dump_args(&compressed, &["--threads", "1"]));
    let mut names: Vec<String> = threads(&run.stats).into_iter().map(|t| t.0).collect();
    names.sort();
    let expected: &[&str] = if cores() >= 2 {
        &["decompress", "main"]
    } else {
        &["main"]
    };
    assert_eq!(names, expected, "{}", run.stderr);
    accounts_for_the_process(&run);
}

#[test]
fn a_file_set_on_two_jobs_counts_both_jobs_and_their_threads() {
    let dir = temp_dir("thread-cpu-jobs");
    let first = zstd_capture(&dir, 200_000);
    let second_dir = dir.join("second");
    std::fs::create_dir(&second_dir).unwrap();
    let second = zstd_capture(&second_dir, 200_000);
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/qtype-stats.toml");
    let args: Vec<String> = vec![
        config.display().to_string(),
        "--files".into(),
        first.display().to_string(),
        second.display().to_string(),
        "--jobs".into(),
        "2".into(),
    ];
    let run = run_measured(&dir, &args);
    let mut names: Vec<(String, u64)> = threads(&run.stats)
        .into_iter()
        .map(|(name, count, _)| (name, count))
        .collect();
    names.sort();
    // Two jobs: each decoder on a thread of its own only when the machine
    // has two cores a job; on fewer, the jobs decode on their own threads.
    let expected: &[(&str, u64)] = if cores() >= 4 {
        &[("decompress", 2), ("job", 2), ("main", 1)]
    } else {
        &[("job", 2), ("main", 1)]
    };
    let expected: Vec<(String, u64)> = expected.iter().map(|(n, c)| (n.to_string(), *c)).collect();
    assert_eq!(names, expected, "{}", run.stderr);
    assert!(run.stderr.contains("job ×2 "), "{}", run.stderr);
    accounts_for_the_process(&run);
    // The two files' 400,000 generated packets and queries, decoded either
    // way: the same counts as one job at a time (a decoder thread each on
    // two cores or more).
    let one_at_a_time = run_measured(&dir, &args[..args.len() - 2]);
    for stats in [&run.stats, &one_at_a_time.stats] {
        let stages = stats["stages"].as_array().unwrap();
        assert_eq!(stages[0]["out"], 400_000, "{stats}");
        assert_eq!(stages[2]["out"], 400_000, "{stats}");
    }
    assert_eq!(run.stats["stages"], one_at_a_time.stats["stages"]);
}

#[test]
fn prometheus_sees_each_threads_time_while_a_capture_runs_on_two_threads() {
    let dir = temp_dir("thread-cpu-prometheus");
    let capture = udp_queries(&dir, 400_000);
    let port = free_port();
    let prometheus = Prometheus::start(port, &dir);
    let args = dump_args(&capture, &["--threads", "2"]);
    let mut command: Vec<&str> = vec!["run"];
    command.extend(args.iter().map(String::as_str));
    let usage = wait_usage(testkit::prometheus::spawn(&command, port));
    assert!(usage.success, "dnsluice failed: {}", usage.stderr);
    prometheus.wait_final();
    let kernel = usage.cpu.as_secs_f64();
    // The last scrape took the final values: the process's time then is
    // the kernel's, less what the process spent after it (its exit).
    let process = prometheus.one(&total("process_cpu_seconds_total"));
    assert!(
        process <= kernel + 0.002 && process >= 0.9 * kernel,
        "process {process} s, kernel {kernel} s"
    );
    // The two threads that ran the chain, sampled while they lived (every
    // 200 ms): most of the run's time, and more than one sample each.
    let thread = |name: &str| format!("dnsluice_thread_cpu_seconds_total{{thread=\"{name}\"}}");
    let split: f64 = ["split-0", "split-1"]
        .iter()
        .map(|name| prometheus.one(&total(&thread(name))))
        .sum();
    assert!(
        split >= 0.5 * kernel && split <= kernel + 0.02,
        "split threads {split} s, kernel {kernel} s"
    );
    let samples = prometheus.one(&format!("count_over_time({}[1m])", thread("split-0")));
    assert!(samples >= 3.0, "{samples} samples of split-0");
    // Resident memory: never above the kernel's peak for the process, but
    // for the kernel's own slack: it keeps a process's resident pages in
    // per-CPU counters, read without summing them exactly (each CPU may
    // hold up to 32 pages or more not yet added: a scrape once read 86 KB
    // above the peak `wait4` gave).
    let resident = prometheus.one(&total("process_resident_memory_bytes"));
    assert!(
        resident > 10e6 && resident <= usage.max_rss_bytes as f64 + 1024.0 * 1024.0,
        "resident {resident} B, peak {} B",
        usage.max_rss_bytes
    );
}

//! What a file set (`run --files A B ...`) writes: each file's run builds
//! its chain anew, yet the set's JSON lines are every file's, in file
//! order, as one run over all of them would write (the runs after the
//! first append); an output whose file another run cannot go on with (a
//! pcap file's header) is refused before anything runs. Counted against
//! tshark's truth of each corpus capture.

use std::path::{Path, PathBuf};
use testkit::corpus::{corpus_dir, truth};
use testkit::{dnsluice, temp_dir};

/// `configs/dump.toml`: layers → DNS → JSON lines.
fn dump() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/dump.toml")
}

/// tshark's count of DNS messages in the corpus capture `name`.
fn messages(name: &str) -> usize {
    truth(name)["counts"]["dns_messages"].as_u64().unwrap() as usize
}

#[test]
fn a_file_sets_json_lines_hold_every_files_messages() {
    let dir = temp_dir("files-json");
    let names = ["live_mini_en10mb.pcap", "dns_edns_compression.pcap"];
    let files: Vec<PathBuf> = names.iter().map(|n| corpus_dir().join(n)).collect();
    let out = dir.join("out.jsonl");
    for jobs_and_threads in [
        ["--jobs", "1", "--threads", "1"],
        ["--jobs", "1", "--threads", "2"],
    ] {
        // What an earlier run left there is replaced, not added to.
        std::fs::write(&out, "{\"stale\":true}\n").unwrap();
        let run = dnsluice()
            .args(["run", "-q"])
            .arg(dump())
            .arg("--set")
            .arg(format!("3.path={}", out.display()))
            .arg("--files")
            .args(&files)
            .args(jobs_and_threads)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.success(), "{jobs_and_threads:?}: {stderr}");
        let text = std::fs::read_to_string(&out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let (first, second) = (messages(names[0]), messages(names[1]));
        assert_eq!(lines.len(), first + second, "{jobs_and_threads:?}");
        assert!(!text.contains("stale"), "{jobs_and_threads:?}");
        // File order: the second file's first message follows the first's last.
        assert!(lines[0].starts_with("{\"frame\":1,"), "{}", lines[0]);
        assert!(
            lines[first].starts_with("{\"frame\":1,"),
            "{}",
            lines[first]
        );
    }
}

#[test]
fn a_file_set_refuses_a_pcap_file_it_would_write_anew_per_file() {
    let dir = temp_dir("files-pcap");
    let files = [
        corpus_dir().join("live_mini_en10mb.pcap"),
        corpus_dir().join("dns_edns_compression.pcap"),
    ];
    let out = dir.join("out.pcap");
    let run = dnsluice()
        .args(["run", "-q"])
        .arg(dump())
        .args(["--set", "3.module=output.pcap", "--set"])
        .arg(format!("3.path={}", out.display()))
        .arg("--files")
        .args(&files)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--files: output.pcap's path") && stderr.contains("only the last"),
        "{stderr}"
    );
    assert!(!out.exists(), "nothing ran");
}

/// The flags that record one run over time are refused with a file set
/// (each file is a run of its own): they wrote nothing, and said nothing.
#[test]
fn a_file_set_refuses_the_flags_of_one_runs_record() {
    let dir = temp_dir("files-record");
    let capture = corpus_dir().join("live_mini_en10mb.pcap");
    for (flag, value) in [("--report", "r.html"), ("--stats-jsonl", "i.jsonl")] {
        let written = dir.join(value);
        let run = dnsluice()
            .args(["run", "-q"])
            .arg(dump())
            .args(["--set", "3.path=/dev/null", "--files"])
            .args([&capture, &capture])
            .arg(flag)
            .arg(&written)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(1), "{flag}: {stderr}");
        assert!(
            stderr.contains(&format!("{flag} records one run")),
            "{stderr}"
        );
        assert!(!written.exists(), "{flag}");
    }
}

/// A set's `elapsed_s` is its wall time, so its rates are too (with
/// `--jobs 2` the runs overlap, and their times added up came to more
/// than the set took); the runs' own times add up in `runs_elapsed_s`.
#[test]
fn a_file_sets_time_is_its_wall_time() {
    let dir = temp_dir("files-time");
    let capture = testkit::generated::udp_queries(&dir, 100_000);
    let stats = dir.join("stats.json");
    let started = std::time::Instant::now();
    let run = dnsluice()
        .args(["run", "-q"])
        .arg(dump())
        .args(["--set", "3.path=/dev/null", "--jobs", "2", "--files"])
        .args([&capture, &capture, &capture, &capture])
        .arg("--stats-json")
        .arg(&stats)
        .output()
        .unwrap();
    let wall = started.elapsed().as_secs_f64();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let elapsed = stats["elapsed_s"].as_f64().unwrap();
    assert!(
        elapsed > 0.0 && elapsed <= wall,
        "elapsed_s {elapsed} s, the process took {wall} s"
    );
    let runs = stats["runs_elapsed_s"].as_f64().unwrap();
    assert!(runs >= elapsed * 0.9, "runs {runs} s, elapsed {elapsed} s");
}

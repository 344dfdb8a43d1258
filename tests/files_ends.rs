//! How a run over a file set (`run --files ... [--jobs N]`) ends when it
//! does not simply end: the reader of its output goes away (`| head`), a
//! file is cut off, a signal stops it. Each as one run over one file ends:
//! quietly with status 0, with the warning naming the file (even with
//! `-q`), and with status 143 after the file the signal cut short, no
//! further file started.

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use testkit::corpus::corpus_dir;
use testkit::generated::udp_queries;
use testkit::{dnsluice, stopped_by_sigterm, temp_dir, wait_within};

/// `configs/dump.toml`: layers → DNS → JSON lines on standard output.
fn dump() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/dump.toml")
}

#[test]
fn a_closed_pipe_ends_a_file_set_quietly() {
    let dir = temp_dir("files-pipe");
    let files = [udp_queries(&dir, 50_000), udp_queries(&dir, 60_000)];
    for jobs in ["1", "2"] {
        let mut child = dnsluice()
            .args(["run", "-q"])
            .arg(dump())
            .arg("--files")
            .args(&files)
            .args(["--jobs", jobs])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // What `| head -1` does: one line, then the pipe is closed.
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert!(first.starts_with("{\"frame\":1,"), "--jobs {jobs}: {first}");
        let status = wait_within(&mut child, Duration::from_secs(60))
            .unwrap_or_else(|| panic!("--jobs {jobs}: still running after its reader went away"));
        let stderr = std::io::read_to_string(child.stderr.take().unwrap()).unwrap();
        assert_eq!(status.code(), Some(0), "--jobs {jobs}: {stderr}");
        assert!(!stderr.contains("error"), "--jobs {jobs}: {stderr}");
    }
}

#[test]
fn a_cut_off_file_in_a_set_is_named_in_a_warning() {
    let dir = temp_dir("files-cut");
    let whole = corpus_dir().join("dns_edns_compression.pcap");
    let bytes = std::fs::read(&whole).unwrap();
    // Cut inside the last record: 24 bytes of file header, then records.
    let cut = dir.join("cut-off.pcap");
    std::fs::write(&cut, &bytes[..bytes.len() - 5]).unwrap();
    for jobs in ["1", "2"] {
        let out = dnsluice()
            .args(["run", "-q"])
            .arg(dump())
            .args(["--set", "3.path=/dev/null", "--files"])
            .args([&whole, &cut])
            .args(["--jobs", jobs])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "--jobs {jobs}: {stderr}");
        let warnings: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("dnsluice: warning: "))
            .collect();
        assert_eq!(warnings.len(), 1, "--jobs {jobs}: {stderr}");
        assert!(
            warnings[0].contains(&cut.display().to_string()),
            "--jobs {jobs}: the warning names the cut-off file: {stderr}"
        );
    }
}

#[test]
fn a_signal_ends_a_file_set_after_the_file_it_cut_short() {
    let dir = temp_dir("files-signal");
    // Four files of 200,000 queries: a debug build takes seconds over each.
    let files: Vec<PathBuf> = (0..4)
        .map(|k| {
            let file = udp_queries(&dir, 200_000);
            let copy = dir.join(format!("file{k}.pcap"));
            std::fs::rename(&file, &copy).unwrap();
            copy
        })
        .collect();
    let stats = dir.join("stats.json");
    let (status, stderr) = stopped_by_sigterm(
        dnsluice()
            .arg("run")
            .arg(dump())
            .args([
                "--set",
                "3.path=/dev/null",
                "--threads",
                "1",
                "--stats-json",
            ])
            .arg(&stats)
            .arg("--files")
            .args(&files),
        Duration::from_secs(1),
    );
    assert_eq!(status.code(), Some(143), "{stderr}");
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(summary["files"], 1, "files run after the signal: {stderr}");
    let read = summary["stages"][0]["out"].as_u64().unwrap();
    assert!(read < 200_000, "the first file was cut short: {read}");
    assert!(
        stderr.contains("dnsluice: 1 of 4 files (stopped by a signal"),
        "{stderr}"
    );
}

#[test]
fn a_failing_file_stops_the_runs_beside_it() {
    let dir = temp_dir("files-fail");
    let long = udp_queries(&dir, 200_000);
    let not_a_capture = dir.join("notes.pcap");
    std::fs::write(&not_a_capture, "these are notes, not a capture\n").unwrap();
    // Two jobs: one reads the long file, the other fails at once; the
    // third file is not started.
    let out = dnsluice()
        .args(["run", "-q"])
        .arg(dump())
        .arg("--files")
        .args([&long, &not_a_capture, &long])
        .args(["--jobs", "2"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&not_a_capture.display().to_string()),
        "the failing file is named: {stderr}"
    );
    let lines = out
        .stdout
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .count();
    assert!(
        lines < 100_000,
        "{lines} lines: the long file's run went on after the other failed"
    );
}

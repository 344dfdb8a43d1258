//! SIGTERM stops a run on several threads as it stops a run on one: soon,
//! with exit status 143, and with every message the run took written, in
//! capture order. A mapped capture read in parts by the threads themselves
//! (`input.mmpcap`) once went on to the end of the file, the input's thread
//! waiting for the parts without looking for the stop; the buffered input
//! (`input.fpcap`, read by the input's thread for the others) is checked
//! the same way. No watcher runs (`-q`, stderr not a terminal): the stop is
//! seen by the driver alone.

use serde_json::Value;
use std::path::Path;
use std::time::Duration;
use testkit::generated::udp_queries;
use testkit::{dnsluice, number_before, stopped_by_sigterm, temp_dir};

/// Queries in the capture (`benches/gen-pcap.py`, one a record): long enough that a debug build on two threads
/// is still reading it a second in (several seconds in all), and a stop
/// then ends the run well before its end (the threads finish the parts
/// they have taken: a few MiB).
const PACKETS: u32 = 200_000;

/// Runs layers → DNS → JSON lines on `input` (the module) over `capture`
/// on two threads, sends SIGTERM a second in, and checks how it ended.
fn stopped_on_two_threads(input: &str, capture: &Path, dir: &Path) {
    let lines = dir.join(format!("{input}.jsonl"));
    let stats = dir.join(format!("{input}-stats.json"));
    let pipeline = dir.join(format!("{input}.toml"));
    std::fs::write(
        &pipeline,
        format!(
            "[[stage]]\nmodule = {input:?}\npath = {:?}\n\
             [[stage]]\nmodule = \"filter.layer\"\n\
             [[stage]]\nmodule = \"filter.dns\"\n\
             [[stage]]\nmodule = \"output.json\"\npath = {:?}\n",
            capture.display().to_string(),
            lines.display().to_string(),
        ),
    )
    .unwrap();
    let (status, stderr) = stopped_by_sigterm(
        dnsluice()
            .args(["run", "-q", "--threads", "2", "--stats-json"])
            .arg(&stats)
            .arg(&pipeline),
        Duration::from_secs(1),
    );
    assert_eq!(status.code(), Some(143), "{input}: {status:?}\n{stderr}");

    // It stopped before the end of the capture...
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap())
        .unwrap_or_else(|e| panic!("{input}: no summary ({e})\n{stderr}"));
    let stages = summary["stages"].as_array().unwrap();
    let read = stages[0]["out"].as_u64().unwrap();
    assert!(
        read < u64::from(PACKETS) * 3 / 4,
        "{input}: {read} of {PACKETS} packets read after the stop; stderr:\n{stderr}"
    );
    // ...and wrote every message it took, in capture order: one query a
    // record, so the frames 1, 2, 3, ... with none missing.
    let written = stages.last().unwrap()["out"].as_u64().unwrap();
    let text = std::fs::read_to_string(&lines).unwrap();
    let frames: Vec<u64> = text
        .lines()
        .map(|line| {
            let line: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{input}: a line that is not JSON ({e}): {line}"));
            line["frame"].as_u64().unwrap()
        })
        .collect();
    assert!(written > 0, "{input}: nothing written before the stop");
    assert_eq!(
        frames.len() as u64,
        written,
        "{input}: lines against the summary"
    );
    assert!(
        frames.iter().copied().eq(1..=written),
        "{input}: the frames written are not 1 to {written} in order"
    );
}

#[test]
fn sigterm_stops_two_threads_reading_a_mapped_capture_in_parts() {
    let dir = temp_dir("threads-stop-mapped");
    stopped_on_two_threads("input.mmpcap", &udp_queries(&dir, PACKETS), &dir);
}

#[test]
fn sigterm_stops_two_threads_fed_by_the_buffered_input() {
    let dir = temp_dir("threads-stop-buffered");
    stopped_on_two_threads("input.fpcap", &udp_queries(&dir, PACKETS), &dir);
}

/// One thread's own output (`{thread}` in its path) fails (`/dev/full`)
/// while the input's thread reads for both: the run stops soon, not at the
/// end of the capture, and its error says how many of the objects handed
/// to the failed thread it never ran.
#[test]
fn a_thread_whose_output_fails_stops_the_run_soon() {
    let dir = temp_dir("threads-output-fails");
    let capture = udp_queries(&dir, PACKETS);
    std::os::unix::fs::symlink("/dev/full", dir.join("out-1.jsonl")).unwrap();
    let stats = dir.join("stats.json");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = dnsluice()
        .arg("run")
        .arg(root.join("configs/dump.toml"))
        .args(["--set", "0.module=input.fpcap", "--set"])
        .arg(format!("0.path={}", capture.display()))
        .arg("--set")
        .arg(format!("3.path={}/out-{{thread}}.jsonl", dir.display()))
        .args(["--threads", "2", "-q", "--stats-json"])
        .arg(&stats)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("worker 1: ") && stderr.contains("No space left on device"),
        "{stderr}"
    );
    let not_run = number_before(&stderr, " objects handed to it were not run");
    assert!(not_run > 0, "{stderr}");
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let read = summary["stages"][0]["out"].as_u64().unwrap();
    assert!(
        read < u64::from(PACKETS) / 2,
        "{read} of {PACKETS} packets read after a thread's output failed: {stderr}"
    );
    // Every packet read was run by a thread's chain (the failed thread's up
    // to the one it failed on) or is in the error's count.
    let layer = summary["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["module"] == "filter.layer")
        .expect("filter.layer in the summary");
    let ran = layer["in"].as_u64().unwrap();
    assert_eq!(ran + not_run, read, "{stderr}\n{summary}");
}

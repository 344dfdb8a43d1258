//! A run of `output.parquet` stopped by SIGTERM mid-run leaves a file DuckDB
//! opens, holding every message the run took before the signal: the
//! capture comes on standard input, the first part, then (after the
//! signal) a little more, with the pipe left open, so the run can only end
//! because of the signal.

use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};
use testkit::corpus::{corpus_dir, truth, truth_rows};
use testkit::duckdb::try_queries;
use testkit::{dnsluice, temp_path};

/// The capture's bytes cut after `records` records (classic pcap).
fn records_end(capture: &[u8], records: usize) -> usize {
    let mut at = 24;
    for _ in 0..records {
        let caplen = u32::from_le_bytes(capture[at + 8..at + 12].try_into().unwrap()) as usize;
        at += 16 + caplen;
    }
    at
}

#[test]
fn a_file_closed_by_sigterm_opens_and_holds_every_message_before_it() {
    let capture = std::fs::read(corpus_dir().join("live_mini_en10mb.pcap")).unwrap();
    let truth = truth("live_mini_en10mb.pcap");
    let (first, more) = (400, 100);
    let out = temp_path("stopped.parquet");
    let stats = temp_path("stopped-stats.json");
    let pipeline = temp_path("stopped.toml");
    std::fs::write(
        &pipeline,
        format!(
            "[[stage]]\nmodule = \"input.mmpcap\"\npath = \"-\"\n[[stage]]\nmodule = \"filter.layer\"\n[[stage]]\nmodule = \"filter.dns\"\n[[stage]]\nmodule = \"output.parquet\"\npath = \"{}\"\nrow_group_rows = 64\n",
            out.display()
        ),
    )
    .unwrap();
    let mut child = dnsluice()
        .args(["run", "-q", pipeline.to_str().unwrap(), "--stats-json"])
        .arg(&stats)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(&capture[..records_end(&capture, first)])
        .unwrap();
    stdin.flush().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "still running on an open pipe"
    );
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    std::thread::sleep(Duration::from_millis(300));
    // More bytes after the signal, the pipe left open: the run stops
    // before their end (and without them: see replay_faults'
    // a_replay_from_a_quiet_pipe_stops_on_sigterm).
    let _ = stdin
        .write_all(&capture[records_end(&capture, first)..records_end(&capture, first + more)]);
    let _ = stdin.flush();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the run did not stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(stdin);
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{status:?}");
    let file = out.display().to_string();
    let results = try_queries(&[
        format!("SELECT count(*) AS n, max(frame) AS last FROM '{file}'"),
        format!("SELECT frame, id FROM read_parquet('{file}', file_row_number = true) ORDER BY file_row_number"),
    ])
    .unwrap_or_else(|e| panic!("DuckDB cannot open the stopped run's file: {e}"));
    // tshark's messages of the first records, in order: ours begin with exactly them.
    let before: Vec<(u64, u64)> = truth_rows(&truth["dns_messages"])
        .iter()
        .filter(|m| m["frame"].as_u64().unwrap() <= first as u64)
        .map(|m| (m["frame"].as_u64().unwrap(), m["id"].as_u64().unwrap()))
        .collect();
    let ours: Vec<(u64, u64)> = results[1]
        .iter()
        .map(|r| (r["frame"].as_u64().unwrap(), r["id"].as_u64().unwrap()))
        .collect();
    assert!(
        before.len() > 250,
        "{} messages before the signal",
        before.len()
    );
    assert!(
        ours.len() >= before.len(),
        "{} rows, {} messages before",
        ours.len(),
        before.len()
    );
    assert_eq!(&ours[..before.len()], &before[..]);
    assert!(
        results[0][0]["last"].as_u64().unwrap() < (first + more) as u64,
        "stopped before the end of what it was given: {}",
        results[0][0]
    );
    // The summary was written too, and counts the rows in the file.
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let output = stats["stages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(output["out"], results[0][0]["n"], "{output}");
}

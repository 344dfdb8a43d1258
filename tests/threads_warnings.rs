//! The lines naming IP datagrams `filter.dns` gave up on are the first ten
//! by frame, on one thread as on several: each thread's lines merge into
//! the first ten of them all (they were each thread's first ten, one
//! thread's after another's, up to ten a thread).

use serde_json::Value;
use std::path::Path;
use testkit::replay::pcap_header;
use testkit::{dnsluice, output_within, temp_dir};

/// First fragments (more fragments follow, offset 0) that never complete.
const DATAGRAMS: u8 = 40;

/// The IP id of the datagram whose first fragment is frame `frame` (1-based):
/// not in frame order, so neither ids nor a table's order sorts them.
fn id_of(frame: u8) -> u16 {
    (u32::from(frame) * 7919 % 1000 + 1) as u16
}

/// A raw-IP pcap of [`DATAGRAMS`] first fragments, frame `f` from 10.0.0.`f`
/// to 192.0.2.53, 24 bytes each (a UDP header and 16 bytes), 1 ms apart.
fn write_fragments(path: &Path) {
    let mut f = pcap_header(101);
    for frame in 1..=DATAGRAMS {
        let mut p = vec![0x45, 0, 0, 44];
        p.extend_from_slice(&id_of(frame).to_be_bytes());
        p.extend_from_slice(&[0x20, 0, 64, 17, 0, 0]);
        p.extend_from_slice(&[10, 0, 0, frame, 192, 0, 2, 53]);
        p.extend_from_slice(&[0x9c, 0x40, 0, 53, 0, 100, 0, 0]);
        p.extend_from_slice(&[0; 16]);
        f.extend_from_slice(&1_700_000_000u32.to_le_bytes());
        f.extend_from_slice(&(u32::from(frame) * 1000).to_le_bytes());
        f.extend_from_slice(&(p.len() as u32).to_le_bytes());
        f.extend_from_slice(&(p.len() as u32).to_le_bytes());
        f.extend_from_slice(&p);
    }
    std::fs::write(path, f).unwrap();
}

/// `filter.dns`'s warnings and counters, and the summary printed, on `threads`.
fn run(dir: &Path, capture: &Path, threads: &str) -> (Vec<String>, Value, String) {
    let pipeline = dir.join("fragments.toml");
    let stats = dir.join(format!("stats-{threads}.json"));
    std::fs::write(
        &pipeline,
        format!(
            "[[stage]]\nmodule = \"input.mmpcap\"\npath = \"{}\"\n[[stage]]\nmodule = \"filter.dns\"\n[[stage]]\nmodule = \"output.null\"\n",
            capture.display()
        ),
    )
    .unwrap();
    let mut command = dnsluice();
    command
        .arg("run")
        .arg(&pipeline)
        .args(["--threads", threads, "--stats-json"])
        .arg(&stats);
    let out = output_within(&mut command, std::time::Duration::from_secs(60));
    let summary = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{summary}");
    let stats: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let dns = stats["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["module"] == "filter.dns")
        .expect("filter.dns in the statistics")
        .clone();
    let warnings = dns["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect();
    (warnings, dns["counters"].clone(), summary)
}

#[test]
fn the_lost_datagrams_named_are_the_first_ten_by_frame_on_any_number_of_threads() {
    let dir = temp_dir("threads-warnings");
    let capture = dir.join("fragments.pcap");
    write_fragments(&capture);
    for threads in ["1", "2", "3"] {
        let (warnings, counters, summary) = run(&dir, &capture, threads);
        assert_eq!(
            counters["ip_datagrams_incomplete"],
            u64::from(DATAGRAMS),
            "{threads} threads: {counters}"
        );
        assert_eq!(warnings.len(), 10, "{threads} threads: {warnings:#?}");
        for (line, frame) in warnings.iter().zip(1u8..) {
            let named = format!(
                "id {} 10.0.0.{frame} → 192.0.2.53 (first fragment in frame {frame})",
                id_of(frame)
            );
            assert!(
                line.contains(&named) && summary.contains(line.as_str()),
                "{threads} threads: line {frame} should name {named:?}: {warnings:#?}\n{summary}"
            );
        }
    }
}

//! A zstd capture with a corrupt block in its middle: the run fails saying
//! the stream is corrupt, after handing on the records before the block:
//! at least those the zstd tool writes (`zstd -dc` writes what it decoded
//! before the error, but its last buffer), but for the last 64 KiB (a
//! decoder drops what it decoded in the call that met the error; it is
//! asked for no more than that at a time), and none past the block's start.
//! Asked for a megabyte at a time, it lost up to a megabyte of good
//! records.

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use testkit::generated::udp_queries;
use testkit::{dnsluice, run_ok, temp_dir};

/// What a decoder may drop before a corrupt block, at most.
const PIECE: usize = 64 << 10;

/// Where each block header of the one zstd frame in `zst` starts (RFC 8878,
/// section 3.1.1): after the magic number and the frame header.
fn block_headers(zst: &[u8]) -> Vec<usize> {
    assert_eq!(zst[..4], [0x28, 0xb5, 0x2f, 0xfd], "a zstd frame");
    let descriptor = zst[4];
    let single_segment = descriptor & 0x20 != 0;
    let dictionary = [0, 1, 2, 4][usize::from(descriptor & 3)];
    let content_size = match descriptor >> 6 {
        0 => usize::from(single_segment),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let mut at = 5 + usize::from(!single_segment) + dictionary + content_size;
    let mut headers = Vec::new();
    loop {
        let header = u32::from_le_bytes([zst[at], zst[at + 1], zst[at + 2], 0]);
        headers.push(at);
        let size = (header >> 3) as usize;
        // Raw and compressed blocks hold `size` bytes, RLE blocks one.
        let body = if (header >> 1) & 3 == 1 { 1 } else { size };
        at += 3 + body;
        if header & 1 == 1 {
            return headers;
        }
    }
}

/// The ends of the whole records of the classic pcap `bytes` (which may
/// be cut off anywhere).
fn record_ends(bytes: &[u8]) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut at = 24;
    while at + 16 <= bytes.len() {
        let caplen = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        if at + 16 + caplen > bytes.len() {
            break;
        }
        at += 16 + caplen;
        ends.push(at);
    }
    ends
}

#[test]
fn a_corrupt_zstd_block_keeps_the_records_before_it() {
    let dir = temp_dir("compressed-corrupt");
    let capture = udp_queries(&dir, 60_000);
    let zst = dir.join("capture.pcap.zst");
    run_ok(
        // spawns: zstd (compresses at its default level: blocks of 128 KiB)
        Command::new("zstd")
            .args(["-q", "-f", "-k", "-o"])
            .arg(&zst)
            .arg(&capture),
    );
    // The 13th block gets the reserved block type: the data before it,
    // 1.5 MiB, ends half-way through a megabyte.
    let mut bytes = std::fs::read(&zst).unwrap();
    let headers = block_headers(&bytes);
    assert!(headers.len() > 20, "{} blocks", headers.len());
    bytes[headers[12]] |= 0b110;
    let corrupt = dir.join("corrupt.pcap.zst");
    std::fs::write(&corrupt, &bytes).unwrap();

    // The truth: what the zstd tool decodes before the corrupt block.
    // spawns: zstd (decodes until the corrupt block, writing what it decoded)
    let decoded = Command::new("zstd")
        .arg("-dc")
        .arg(&corrupt)
        .output()
        .unwrap();
    assert!(!decoded.status.success(), "zstd finds the corrupt block");
    let prefix = decoded.stdout;
    assert!(
        prefix.len() > 1 << 20,
        "{} bytes before the block",
        prefix.len()
    );
    let ends = record_ends(&prefix);
    let surely_kept = ends
        .iter()
        .filter(|&&end| end + PIECE <= prefix.len())
        .count();
    // At most: the records within the 12 blocks before it (a block holds
    // 128 KiB of content at most). The zstd tool writes a little less than
    // it decoded (about a block: it had not written its last buffer yet).
    let original = std::fs::read(&capture).unwrap();
    let at_most = record_ends(&original)
        .iter()
        .filter(|&&end| end <= 12 * (128 << 10))
        .count();

    for threads in ["1", "2"] {
        let stats = dir.join(format!("stats-{threads}.json"));
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let out = dnsluice()
            .args(["run", "-q"])
            .arg(root.join("configs/dump.toml"))
            .arg("--set")
            .arg(format!("0.path={}", corrupt.display()))
            .args([
                "--set",
                "3.path=/dev/null",
                "--threads",
                threads,
                "--stats-json",
            ])
            .arg(&stats)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{threads} threads: {stderr}");
        assert!(
            stderr.contains("corrupt zstd stream"),
            "{threads} threads: {stderr}"
        );
        let summary: Value =
            serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
        let read = summary["stages"][0]["out"].as_u64().unwrap() as usize;
        assert!(
            (surely_kept..=at_most).contains(&read),
            "{threads} threads: {read} records read; zstd -dc wrote {} whole records, \
             {surely_kept} of them ending 64 KiB or more before its end; the 12 blocks \
             before the corrupt one hold {at_most} at most",
            ends.len()
        );
    }
}

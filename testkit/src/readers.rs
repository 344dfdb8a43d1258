//! Independent readers of capture files: tshark and capinfos (Wireshark's
//! wiretap) and tcpdump (libpcap), for tests that check what we write.

use std::path::Path;
use std::process::Command;

use crate::assert_ok;

/// One packet record as tshark reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// `frame.time_epoch` (9 decimals; empty when the record has no timestamp).
    pub ts: String,
    /// `frame.len`: the length on the wire.
    pub len: u64,
    /// `frame.cap_len`: the bytes captured.
    pub caplen: u64,
    /// `frame.encap_type`: Wireshark's encapsulation number (the link type).
    pub encap: String,
    /// `frame.md5_hash`: MD5 of the captured bytes.
    pub md5: String,
    /// `null.family`: the address family of a LINKTYPE_NULL/LOOP header.
    pub family: String,
}

fn run(program: &str, args: &[&str], path: &Path) -> String {
    // spawns: tshark capinfos (the callers' `program`)
    let out = Command::new(program)
        .args(args)
        .arg(path)
        .output()
        .unwrap_or_else(|e| panic!("{program} (installed by .ci/run) could not run: {e}"));
    assert_ok(&out, format_args!("{program} {args:?} {}", path.display()));
    String::from_utf8(out.stdout).unwrap()
}

/// tshark's packet records of `path`, in order. pcapng blocks that tshark
/// shows as frames but that hold no packet (custom blocks: no
/// encapsulation) are left out.
pub fn tshark_frames(path: &Path) -> Vec<Frame> {
    let fields = [
        "frame.time_epoch",
        "frame.len",
        "frame.cap_len",
        "frame.encap_type",
        "frame.md5_hash",
        "null.family",
    ];
    let mut args = vec!["-n", "-o", "frame.generate_md5_hash:TRUE", "-T", "fields"];
    args.extend(fields.iter().flat_map(|f| ["-e", f]).collect::<Vec<_>>());
    args.push("-r");
    run("tshark", &args, path)
        .lines()
        .map(|line| {
            let cols: Vec<&str> = line.split('\t').collect();
            assert_eq!(cols.len(), fields.len(), "{line}");
            Frame {
                ts: cols[0].to_string(),
                len: cols[1].parse().unwrap(),
                caplen: cols[2].parse().unwrap(),
                encap: cols[3].to_string(),
                md5: cols[4].to_string(),
                family: cols[5].to_string(),
            }
        })
        .filter(|f| !f.encap.is_empty())
        .collect()
}

/// capinfos' packet count of `path`.
pub fn capinfos_packets(path: &Path) -> u64 {
    let text = run("capinfos", &["-M", "-c"], path);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("Number of packets:"))
        .unwrap_or_else(|| panic!("no packet count in capinfos' output: {text}"));
    line.trim().parse().unwrap()
}

/// tcpdump's view of the packets of `path` that the libpcap `filter`
/// selects (`""`: all), one string each: time (µs), link header (`-e`) and
/// decode, and the bytes after the link header in hex (`-x`).
pub fn tcpdump(path: &Path, filter: &str) -> Vec<String> {
    let mut command = Command::new("tcpdump");
    command.args(["-n", "-tt", "-e", "-x", "-r"]).arg(path);
    if !filter.is_empty() {
        command.arg(filter);
    }
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("tcpdump (installed by .ci/run) could not run: {e}"));
    assert_ok(&out, format_args!("tcpdump {} {filter}", path.display()));
    packets(&String::from_utf8(out.stdout).unwrap())
}

/// tcpdump's output cut into packets: a line that does not start with
/// whitespace starts a packet, the indented hex lines belong to it.
fn packets(text: &str) -> Vec<String> {
    let mut packets: Vec<String> = Vec::new();
    for line in text.lines() {
        match packets.last_mut() {
            Some(p) if line.starts_with(char::is_whitespace) => {
                p.push('\n');
                p.push_str(line);
            }
            _ => packets.push(line.to_string()),
        }
    }
    packets
}

/// The bytes after the link header of each packet of `path`, as tcpdump
/// prints them in hex (`-x`).
pub fn tcpdump_bytes(path: &Path) -> Vec<Vec<u8>> {
    tcpdump(path, "")
        .iter()
        .map(|packet| {
            packet
                .lines()
                .skip(1)
                .flat_map(|line| {
                    let hex = line.trim().split_once(':').map_or("", |(_, h)| h);
                    hex.split_whitespace()
                        .flat_map(|group| {
                            (0..group.len())
                                .step_by(2)
                                .map(|i| u8::from_str_radix(&group[i..i + 2], 16).unwrap())
                                .collect::<Vec<_>>()
                        })
                        .collect::<Vec<_>>()
                })
                .collect()
        })
        .collect()
}

//! Link and tunnel headers the corpus has no capture of, written as hex by
//! the test, made into captures by text2pcap and read by tshark beside us:
//! a VLAN tag left in a Linux cooked v2 frame, GTP-U with a sequence number
//! but no extension header, and a PKTAP header cut by the snaplen.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use testkit::pipeline::{dns_run, layer_json};
use testkit::{assert_ok, run_ok, temp_path};

/// An IPv4 datagram 10.0.0.1:12345 → 10.0.0.2:53 holding a query for
/// `example.com` A, as hex.
const QUERY_IN_IPV4: &str = "45 00 00 39 00 01 00 00 40 11 00 00 0a 00 00 01 0a 00 00 02 \
     30 39 00 35 00 25 00 00 \
     12 34 01 00 00 01 00 00 00 00 00 00 07 65 78 61 6d 70 6c 65 03 63 6f 6d 00 00 01 00 01";

/// One frame of link type `link` made of `hex`, written by text2pcap.
fn capture(name: &str, link: u32, hex: &str) -> PathBuf {
    let text = temp_path(&format!("{name}.txt"));
    let mut dump = String::new();
    let bytes: Vec<&str> = hex.split_whitespace().collect();
    for (line, chunk) in bytes.chunks(16).enumerate() {
        dump.push_str(&format!("{:06x} {}\n", line * 16, chunk.join(" ")));
    }
    std::fs::write(&text, dump).unwrap();
    let pcap = temp_path(&format!("{name}.pcap"));
    // spawns: text2pcap
    run_ok(
        Command::new("text2pcap")
            .args(["-q", "-l", &link.to_string()])
            .arg(&text)
            .arg(&pcap),
    );
    pcap
}

/// tshark's fields `fields` of the capture's one frame, tab-separated.
fn tshark(capture: &Path, fields: &[&str]) -> String {
    let mut command = Command::new("tshark");
    command
        .args(["-n", "-r"])
        .arg(capture)
        .args(["-T", "fields"]);
    for field in fields {
        command.args(["-e", field]);
    }
    let out = command.output().unwrap();
    assert!(out.status.success(), "tshark on {}", capture.display());
    String::from_utf8_lossy(&out.stdout).trim_end().to_string()
}

/// The DNS messages dnsluice finds, as `qname` per message, and its layer row.
fn ours(capture: &Path) -> (Vec<String>, Value) {
    let (rows, _stats, out) = dns_run("input.fpcap", capture);
    assert_ok(&out, format_args!("{}", capture.display()));
    let names = rows
        .iter()
        .filter_map(|r| r["dns"]["question"][0]["name"].as_str().map(String::from))
        .collect();
    let (layers, out) = layer_json("input.fpcap", capture);
    assert_ok(&out, "layers");
    (names, layers[0].clone())
}

/// Linux cooked v2 (`tcpdump -i any`, LINKTYPE 276) whose protocol field is
/// 802.1Q: the kernel left the tag in (VLAN offload off), so the payload
/// starts with the TCI and the inner type. It was counted as non-IP.
#[test]
fn a_vlan_tag_in_a_linux_cooked_v2_frame_is_walked() {
    let hex = format!(
        "81 00 00 00 00 00 00 02 00 01 00 06 02 00 00 00 00 01 00 00 \
         00 64 08 00 {QUERY_IN_IPV4}"
    );
    let pcap = capture("sll2-vlan", 276, &hex);
    assert_eq!(
        tshark(&pcap, &["vlan.id", "ip.dst", "dns.qry.name"]),
        "100\t10.0.0.2\texample.com"
    );
    let (names, row) = ours(&pcap);
    assert_eq!(names, ["example.com."], "{row}");
    assert_eq!(row["vlan"], serde_json::json!([100]), "{row}");
    assert_eq!(row["dst"], "10.0.0.2", "{row}");
}

/// GTP-U with only the S flag (a sequence number): the four optional bytes
/// are there, but their next-extension type is read only with E set (TS
/// 29.281 §5.1). A non-zero byte there was walked as an extension header
/// chain and the tunnel dropped.
#[test]
fn gtp_u_without_the_e_flag_has_no_extension_headers() {
    // Outer IPv4 192.0.2.1 → 192.0.2.2, UDP 2152 → 2152, GTP-U flags 0x32
    // (version 1, GTP, S), G-PDU, length 61, TEID 0x00001234, sequence
    // 0x0001, N-PDU 0, next type 0x85 (ignored), then the user's packet.
    let hex = format!(
        "00 00 00 00 00 02 00 00 00 00 00 01 08 00 \
         45 00 00 61 00 02 00 00 40 11 00 00 c0 00 02 01 c0 00 02 02 \
         08 68 08 68 00 4d 00 00 \
         32 ff 00 3d 00 00 12 34 00 01 00 85 {QUERY_IN_IPV4}"
    );
    let pcap = capture("gtp-s", 1, &hex);
    assert_eq!(
        tshark(&pcap, &["gtp.teid", "ip.dst", "dns.qry.name"]),
        "0x00001234\t192.0.2.2,10.0.0.2\texample.com"
    );
    let (names, row) = ours(&pcap);
    assert_eq!(names, ["example.com."], "{row}");
    assert_eq!(row["dst"], "10.0.0.2", "{row}");
}

/// A PKTAP header (LINKTYPE 258) that says it is longer than the frame
/// captured is a truncated link header, counted as such, not a link type
/// we do not read.
#[test]
fn a_cut_pktap_header_is_a_truncated_link() {
    // Length 108, record type 1, inner link type 1: only 20 bytes of it.
    let pcap = capture(
        "pktap-cut",
        258,
        "6c 00 00 00 01 00 00 00 01 00 00 00 00 00 00 00 00 00 00 00",
    );
    let said = tshark(&pcap, &["pktap.hdrlen", "_ws.malformed"]);
    assert!(
        said.starts_with("108\t") && said.contains("Malformed Packet: PKTAP"),
        "tshark: {said}"
    );
    let (_, stats, out) = dns_run("input.fpcap", &pcap);
    assert_ok(&out, "pktap");
    let layer = &stats["stages"][1];
    assert_eq!(layer["module"], "filter.layer", "{stats}");
    assert_eq!(layer["errors"]["truncated_link"], 1, "{layer}");
    assert_eq!(layer["counters"].get("unsupported_link"), None, "{layer}");
}

//! The field corpus (`tests/data/field`, see its README): captures from
//! other projects' test suites and a few made here with the real tools,
//! read by both native inputs and compared with tshark's dissection of the
//! same files (`*.truth.json`, made by `truth.py`):
//!
//! - every record, and per frame the IP headers outermost first (our
//!   tunnels' outer addresses, then the packet's own), the innermost
//!   transport and ports, VLAN ids and tunnel ids;
//! - every DNS message: frame, id, flags, counts, the QNAME's wire bytes,
//!   QTYPE, transport, addresses and ports.
//!
//! Where we and tshark differ, the difference is listed below with its
//! cause, file by file, and the test checks that exactly those differ: a
//! new difference fails, and so does one that went away.

use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use testkit::assert_ok;
use testkit::corpus::{truth_rows, unescape, wire_hex};
use testkit::pipeline::{dns_run, layer_json};

fn field_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/field")
}

/// Every capture with a truth file, with the truth.
fn field() -> Vec<(PathBuf, Value)> {
    let mut out: Vec<(PathBuf, Value)> = std::fs::read_dir(field_dir())
        .unwrap()
        .filter_map(|e| {
            let path = e.unwrap().path();
            let name = path
                .file_name()?
                .to_str()?
                .strip_suffix(".truth.json")?
                .to_string();
            let truth = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            Some((field_dir().join(name), truth))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(out.len() >= 100, "field corpus incomplete: {}", out.len());
    out
}

/// Captures with a corrupt record length part way: we stop with an error,
/// every packet before it written. (file, records we read, cause of any
/// difference with tshark's frame count.)
const CORRUPT: [(&str, usize, &str); 1] = [(
    "suricata-bug-6875-01.pcap",
    1,
    "the second record's caplen field reads 0x53fe6000: we stop there; tshark shows a 1 MiB \
     second frame (of a 385-byte file) before it stops at the third",
)];

fn corrupt(name: &str) -> Option<usize> {
    CORRUPT.iter().find(|c| c.0 == name).map(|c| c.1)
}

/// Layer differences: (file, frame, cause).
const LAYER_DIFFERENCES: &[(&str, u64, &str)] = &[
    (
        "pcapplusplus-gtp.pcap",
        1,
        "GTP-C (UDP 2123) is signalling, not a tunnel: tshark shows its TEID; \
         dnsluice decapsulates GTP-U (2152) only and leaves this as UDP",
    ),
    (
        "pcapplusplus-gtp.pcap",
        6,
        "GTP-U from port 2152 to port 1024: dnsluice knows UDP tunnels by their \
         destination port (TS 29.281 sends G-PDUs to 2152; checking the source port \
         too cost 4 instructions a packet on the common path); tshark by either",
    ),
    ("pcapplusplus-gtp.pcap", 7, "the same as frame 6"),
    (
        "suricata-bug-6875-01.pcap",
        1,
        "a fuzzed file: tshark's pcap-variant heuristics read its records 14 bytes \
         further on (its frame 1 is Ethernet from 45:00:00:ae:11:16); dnsluice reads \
         the plain pcap layout",
    ),
];

/// DNS differences: (file, messages only tshark has, messages only we have, cause),
/// messages named by frame.
const DNS_DIFFERENCES: &[(&str, &[u64], &[u64], &str)] = &[
    (
        "dnscap-dnso1tcp-bighole.pcap",
        &[],
        &[
            25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 75, 80, 85, 90, 95, 100, 105, 110, 115, 120,
            125, 130, 135, 140, 145, 150, 155, 160, 165, 170, 175, 180, 185, 190, 195,
        ],
        "after the client's lost segment, frame 20 is a query without its length prefix: \
         tshark reads the query's id (0x5803) as a length and waits for 22,531 bytes, so \
         every later query on the connection is swallowed; dnsluice sees frame 20 start no \
         plausible message, skips it and picks up at frame 23's length prefix",
    ),
    (
        "dnscap-do1t-nosyn-1nolen.pcap",
        &[],
        &[7],
        "the capture starts mid-connection with a query whose length prefix is in an \
         earlier, uncaptured segment: tshark takes the id as a length and misses the next \
         query (frames 5 and 7); dnsluice skips frame 1 and picks up at frame 5",
    ),
    (
        "pcapplusplus-gtp.pcap",
        &[6, 7],
        &[],
        "a DNS response inside GTP-U sent from port 2152 to port 1024: see the layer \
         difference of frames 6 and 7",
    ),
    (
        "suricata-dns-incomplete.pcap",
        &[5, 7, 11, 13],
        &[],
        "DNS over TCP on port 5353: tshark dissects that port as DNS; dnsluice's filter.dns \
         watches port 53 unless `ports` says otherwise",
    ),
];

fn name_of(capture: &Path) -> String {
    capture.file_name().unwrap().to_string_lossy().to_string()
}

/// Our frame row as tshark's columns: IP chain, transport, ports, VLANs, tunnel ids.
fn our_layers(row: &Value) -> Value {
    let mut ips: Vec<Value> = Vec::new();
    let mut ids: Vec<Value> = Vec::new();
    for t in row["tunnel"].as_array().into_iter().flatten() {
        if let (Some(src), Some(dst)) = (t["src"].as_str(), t["dst"].as_str()) {
            ips.push(json!([version(src), src, dst]));
        }
        for key in ["key", "vni", "teid", "label", "session"] {
            if let Some(id) = t[key].as_u64() {
                let kind = t["type"].as_str().unwrap();
                ids.push(json!([kind, id]));
            }
        }
    }
    if let (Some(src), Some(dst)) = (row["src"].as_str(), row["dst"].as_str()) {
        ips.push(json!([version(src), src, dst]));
    }
    let transport = row["transport"]
        .as_str()
        .filter(|t| matches!(*t, "udp" | "tcp"));
    json!({
        "ips": ips,
        "l4": transport,
        "sport": transport.map(|_| row["sport"].clone()),
        "dport": transport.map(|_| row["dport"].clone()),
        "vlan": row.get("vlan").cloned().unwrap_or(Value::Null),
        "tunnel_ids": if ids.is_empty() { Value::Null } else { json!(ids) },
    })
}

fn version(address: &str) -> u64 {
    if address.contains(':') {
        6
    } else {
        4
    }
}

/// tshark's frame row in the same shape; `None` for frames not compared
/// (ICMP, whose quoted headers tshark dissects too; IP fragments).
fn tshark_layers(t: &Map<String, Value>) -> Option<Value> {
    let l4 = t["l4"].as_str();
    if matches!(l4, Some("icmp" | "icmpv6")) || !t["ip_fragment"].is_null() {
        return None;
    }
    let ports = matches!(l4, Some("udp" | "tcp"));
    Some(json!({
        "ips": t["ips"],
        "l4": if ports { json!(l4) } else { Value::Null },
        "sport": if ports { t["sport"].clone() } else { Value::Null },
        "dport": if ports { t["dport"].clone() } else { Value::Null },
        "vlan": t["vlan_ids"],
        "tunnel_ids": t["tunnel_ids"],
    }))
}

#[test]
fn every_frame_has_tsharks_layers_and_tunnels() {
    let mut differences = Vec::new();
    let mut compared = 0;
    let mut tunneled = 0;
    for (capture, truth) in field() {
        let name = name_of(&capture);
        let frames = truth_rows(&truth["frames"]);
        for input in ["input.mmpcap", "input.fpcap"] {
            let (rows, out) = layer_json(input, &capture);
            let records = corrupt(&name);
            assert_eq!(
                out.status.success(),
                records.is_none(),
                "{input} {name}: exit status"
            );
            assert_eq!(
                rows.len(),
                records.unwrap_or(frames.len()),
                "{input} {name}: frames"
            );
            for (t, row) in frames.iter().zip(&rows) {
                assert_eq!(row["frame"], t["frame"], "{input} {name}");
                let Some(want) = tshark_layers(t) else {
                    continue;
                };
                let got = our_layers(row);
                compared += 1;
                tunneled += usize::from(row.get("tunnel").is_some());
                if got != want {
                    let frame = t["frame"].as_u64().unwrap();
                    differences.push((input, name.clone(), frame, got, want));
                }
            }
        }
    }
    let report: Vec<String> = differences
        .iter()
        .map(|(i, f, n, got, want)| format!("{i} {f} frame {n}:\n  ours   {got}\n  tshark {want}"))
        .collect();
    let mut found: Vec<(&str, &str, u64)> = differences
        .iter()
        .map(|(i, f, n, _, _)| (*i, f.as_str(), *n))
        .collect();
    // Both inputs read every frame alike: the same known differences, each.
    let mut known: Vec<(&str, &str, u64)> = Vec::new();
    for (f, n, _) in LAYER_DIFFERENCES {
        known.extend(["input.mmpcap", "input.fpcap"].map(|i| (i, *f, *n)));
    }
    found.sort();
    known.sort();
    assert_eq!(found, known, "layer differences:\n{}", report.join("\n"));
    // 2,821 frames (627 of them in tunnels) per input, when this was written.
    assert!(compared > 2 * 2_800, "only {compared} frames compared");
    assert!(tunneled > 2 * 600, "only {tunneled} tunneled frames");
}

/// One DNS message as a comparable line: frame, id, QR, opcode, 4-bit
/// RCODE, the four counts, QNAME wire bytes, QTYPE, transport, addresses, ports.
fn line(frame: &Value, dns: [&Value; 9], qname_hex: String, flow: [&Value; 5]) -> String {
    let text = |v: &Value| match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut fields = vec![text(frame)];
    fields.extend(dns.iter().map(|v| text(v)));
    fields.push(qname_hex);
    fields.extend(flow.iter().map(|v| text(v)));
    fields.join("\t")
}

/// Our JSON message in [`line`]'s form.
fn our_line(row: &Value) -> String {
    let d = &row["dns"];
    let question = d["question"].as_array().and_then(|q| q.first());
    let hex = question
        .and_then(|q| q["name"].as_str())
        .map(|n| wire_hex(&unescape(n)))
        .unwrap_or_default();
    let qtype = question
        .and_then(|q| q["type"].as_str())
        .and_then(dnsluice::core::dns::mnemonic::rtype_from_str)
        .map_or(Value::Null, |t| json!(t));
    let opcode = d["opcode"]
        .as_str()
        .and_then(dnsluice::core::dns::mnemonic::opcode_from_str)
        .map_or(Value::Null, |o| json!(o));
    let rcode = d["rcode"]
        .as_str()
        .and_then(dnsluice::core::dns::mnemonic::rcode_from_str)
        .map_or(Value::Null, |r| json!(r & 0xf));
    let qr = d["qr"]
        .as_bool()
        .map_or(Value::Null, |q| json!(u8::from(q)));
    line(
        &row["frame"],
        [
            &d["id"],
            &qr,
            &opcode,
            &rcode,
            &d["qdcount"],
            &d["ancount"],
            &d["nscount"],
            &d["arcount"],
            &qtype,
        ],
        hex,
        [
            &row["transport"],
            &row["src"],
            &row["sport"],
            &row["dst"],
            &row["dport"],
        ],
    )
}

/// tshark's message in [`line`]'s form. Its QNAME bytes are the field's
/// bytes on the wire: compared when the name is uncompressed (no pointer).
fn tshark_line(t: &Map<String, Value>) -> String {
    let hex = t["qname_hex"].as_str().unwrap_or_default().to_string();
    line(
        &t["frame"],
        [
            &t["id"],
            &t["qr"],
            &t["opcode"],
            &t["rcode"],
            &t["qdcount"],
            &t["ancount"],
            &t["nscount"],
            &t["arcount"],
            &t["qtype"],
        ],
        hex,
        [
            &t["transport"],
            &t["src"],
            &t["sport"],
            &t["dst"],
            &t["dport"],
        ],
    )
}

#[test]
fn every_dns_message_matches_tsharks() {
    let mut report = Vec::new();
    let mut found: Vec<(String, Vec<u64>, Vec<u64>)> = Vec::new();
    let (mut files, mut agree, mut messages, mut matched) = (0, 0, 0, 0);
    for (capture, truth) in field() {
        let name = name_of(&capture);
        let mut want: Vec<String> = truth_rows(&truth["dns_messages"])
            .iter()
            .map(tshark_line)
            .collect();
        let mut per_input = Vec::new();
        for input in ["input.mmpcap", "input.fpcap"] {
            let (rows, _, out) = dns_run(input, &capture);
            let success = corrupt(&name).is_none();
            assert_eq!(
                out.status.success(),
                success,
                "{input} {name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            per_input.push(rows.iter().map(our_line).collect::<Vec<_>>());
        }
        assert_eq!(per_input[0], per_input[1], "{name}: the two inputs differ");
        let mut got = per_input.swap_remove(0);
        got.sort();
        want.sort();
        files += 1;
        messages += want.len();
        let only_tshark: Vec<&String> = want.iter().filter(|l| !got.contains(l)).collect();
        let only_ours: Vec<&String> = got.iter().filter(|l| !want.contains(l)).collect();
        matched += want.len() - only_tshark.len();
        if only_tshark.is_empty() && only_ours.is_empty() {
            agree += 1;
            continue;
        }
        let frames = |lines: &[&String]| -> Vec<u64> {
            let mut frames: Vec<u64> = lines
                .iter()
                .map(|l| l.split('\t').next().unwrap().parse().unwrap())
                .collect();
            frames.sort_unstable();
            frames
        };
        report.push(format!(
            "{name}:\n  only tshark: {only_tshark:#?}\n  only ours: {only_ours:#?}"
        ));
        found.push((name, frames(&only_tshark), frames(&only_ours)));
    }
    let known: Vec<(String, Vec<u64>, Vec<u64>)> = DNS_DIFFERENCES
        .iter()
        .map(|(f, t, o, _)| (f.to_string(), t.to_vec(), o.to_vec()))
        .collect();
    eprintln!("field corpus: {agree} of {files} captures agree with tshark; {matched} of {messages} of its DNS messages matched");
    assert_eq!(found, known, "DNS differences:\n{}", report.join("\n"));
    assert_eq!(
        (agree, files),
        (files - DNS_DIFFERENCES.len(), field().len())
    );
    assert!(messages > 1_500, "only {messages} messages compared");
}

/// The three public captures with a lost TCP segment give every message
/// tshark gives, and the gaps are counted.
#[test]
fn tcp_gap_captures_give_every_message_tshark_gives() {
    for file in [
        "dnscap-dnso1tcp-midmiss.pcap",
        "dnscap-dnso1tcp-bighole.pcap",
        "suricata-dns-tcp-ts-gap.pcap",
    ] {
        let capture = field_dir().join(file);
        let truth: Value = serde_json::from_str(
            &std::fs::read_to_string(field_dir().join(format!("{file}.truth.json"))).unwrap(),
        )
        .unwrap();
        let (rows, stats, out) = dns_run("input.mmpcap", &capture);
        assert_ok(&out, format_args!("{file}"));
        let ours: Vec<String> = rows.iter().map(our_line).collect();
        let tsharks: Vec<String> = truth_rows(&truth["dns_messages"])
            .iter()
            .map(tshark_line)
            .collect();
        let missing: Vec<&String> = tsharks.iter().filter(|l| !ours.contains(l)).collect();
        assert!(missing.is_empty(), "{file}: {missing:#?}");
        assert!(tsharks.len() >= 5, "{file}");
        let counters = &stats["stages"][2]["counters"];
        assert!(
            counters["tcp_gaps"].as_u64().unwrap_or(0) >= 1,
            "{file}: {counters}"
        );
    }
}

/// Each link type and tunnel the layer parser learned is in the corpus,
/// in a capture whose DNS messages tshark and we agree on (or, for the
/// kinds no public capture carries DNS in, whose layers we agree on).
#[test]
fn every_new_link_type_and_tunnel_has_a_capture() {
    let links = [
        ("made-nflog.pcap", "NFLOG"),
        ("tcpdump-nflog.pcap", "NFLOG"),
        ("tcpdump-LINKTYPE_PKTAP.pcap", "PKTAP"),
        ("tcpdump-LINKTYPE_USER2_PKTAP.pcap", "USER2"),
        ("zeek-wlanmon.pcap", "IEEE802_11"),
        ("zeek-radiotap.pcap", "IEEE802_11_RADIOTAP"),
        ("tcpdump-mpls-traceroute.pcap", "PPP"),
        ("made-ppp-ether.pcap", "PPP_ETHER"),
        ("made-null-ethertype.pcap", "NULL"),
        ("zeek-dns-inverse-query.pcap", "FDDI"),
    ];
    let tunnels = [
        ("made-gre-key.pcap", "gre"),
        ("zeek-gre-sample.pcap", "gre"),
        ("zeek-gre-pptp.pcap", "gre"),
        ("zeek-gre-over-udp-4754.pcap", "gre"),
        ("made-gre-ipv6.pcap", "gre"),
        ("made-vxlan.pcap", "vxlan"),
        ("zeek-vxlan-triple-v2.pcap", "vxlan"),
        ("zeek-geneve-vxlan-dns-truncated.pcap", "geneve"),
        ("pcapplusplus-gtp.pcap", "gtp-u"),
        ("made-ipip.pcap", "ip-in-ip"),
        ("made-6in4.pcap", "ip-in-ip"),
        ("zeek-6in4.pcap", "ip-in-ip"),
        ("suricata-ip_in_ip.pcap", "ip-in-ip"),
        ("made-mpls.pcap", "mpls"),
        ("zeek-mpls-in-vlan.pcap", "mpls"),
    ];
    for (file, link) in links {
        let (rows, _) = layer_json("input.mmpcap", &field_dir().join(file));
        assert!(
            rows.iter().all(|r| r["link"] == json!(link)),
            "{file}: {link}"
        );
        assert!(
            rows.iter()
                .any(|r| matches!(r["transport"].as_str(), Some("udp" | "tcp"))),
            "{file}: no UDP or TCP parsed"
        );
    }
    for (file, kind) in tunnels {
        let (rows, _) = layer_json("input.mmpcap", &field_dir().join(file));
        let inside = rows
            .iter()
            .filter(|r| {
                r["tunnel"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|t| t["type"] == json!(kind))
            })
            .count();
        assert!(inside > 0, "{file}: no {kind} tunnel");
    }
    // PPPoE sessions on Ethernet: the inner IP packet is parsed.
    for file in [
        "made-pppoe.pcap",
        "zeek-pppoe-over-qinq.pcap",
        "pcapplusplus-PPPoESession.pcap",
    ] {
        let (rows, _) = layer_json("input.mmpcap", &field_dir().join(file));
        assert!(rows.iter().any(|r| r["ip"].is_u64()), "{file}");
    }
}

/// zeek's `dns-edns-bad-length.pcap`: an OPT record with 1 byte of options
/// (tshark: "Data length: 1", then Malformed Packet). dnsluice flags it
/// (`edns_malformed`, counted) instead of showing `options []` silently.
#[test]
fn an_opt_record_with_one_byte_of_options_is_flagged() {
    let file = "zeek-dns-edns-bad-length.pcap";
    let truth: Value = serde_json::from_str(
        &std::fs::read_to_string(field_dir().join(format!("{file}.truth.json"))).unwrap(),
    )
    .unwrap();
    let tshark = truth_rows(&truth["dns_messages"]);
    assert_eq!(tshark.len(), 1);
    assert_eq!(tshark[0]["malformed"], json!(true));
    assert_eq!(tshark[0]["edns"], json!(true));
    let (rows, stats, out) = dns_run("input.mmpcap", &field_dir().join(file));
    assert_ok(&out, "dnsluice");
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0]["dns_error"]["kind"],
        json!("edns_malformed"),
        "{}",
        rows[0]
    );
    assert_eq!(
        stats["stages"][2]["errors"]["edns_malformed"],
        json!(1),
        "{stats}"
    );
}

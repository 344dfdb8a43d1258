//! The Lua examples (`examples/lua/`) on corpus captures, checked against
//! tshark's truth files and, where dnsjit prints the same information,
//! against Debian's dnsjit running its own examples on the same captures.

use dnsluice_core::dns::mnemonic;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use testkit::corpus::{corpus_dir, truth, truth_rows};
use testkit::{dnsluice, run_ok, temp_path};

type Row = Map<String, Value>;

const DNSJIT: &str = "/usr/bin/dnsjit";
const DNSJIT_EXAMPLES: &str = "/usr/share/doc/dnsjit/examples";

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/lua")
        .join(name)
}

fn capture(name: &str) -> PathBuf {
    corpus_dir().join(name)
}

/// Runs `examples/lua/NAME` with `args`; its stdout (the run must succeed).
fn run_example(name: &str, args: &[&Path]) -> String {
    let out = run_ok(dnsluice().arg("script").arg(example(name)).args(args));
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// Runs dnsjit's own example NAME on `args`; fails clearly when dnsjit is missing.
fn run_dnsjit(name: &str, args: &[&str]) -> String {
    assert!(
        Path::new(DNSJIT).exists(),
        "{DNSJIT} is missing: this test compares with Debian's dnsjit (apt-get install dnsjit)"
    );
    let script = Path::new(DNSJIT_EXAMPLES).join(name);
    assert!(
        script.exists(),
        "{} is missing (package dnsjit)",
        script.display()
    );
    let out = run_ok(Command::new(DNSJIT).arg(&script).args(args));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// tshark's DNS messages of a capture (the table must be complete).
fn messages(name: &str) -> Vec<Row> {
    let t = truth(name);
    assert_eq!(
        t["dns_messages"]["complete"], true,
        "{name}: truth table incomplete"
    );
    truth_rows(&t["dns_messages"])
}

fn s(row: &Row, key: &str) -> String {
    match &row[key] {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn n(row: &Row, key: &str) -> u64 {
    row[key].as_u64().unwrap_or(0)
}

/// The full RCODE (header bits extended by EDNS).
fn full_rcode(row: &Row) -> u64 {
    let ext = row["edns"]
        .get("ext_rcode")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    (ext << 4) | n(row, "rcode")
}

fn tcp(row: &Row) -> bool {
    row["transport"] == "tcp"
}

/// A multiset of lines.
fn bag<I: IntoIterator<Item = String>>(lines: I) -> BTreeMap<String, usize> {
    let mut bag = BTreeMap::new();
    for line in lines {
        *bag.entry(line).or_default() += 1;
    }
    bag
}

/// What `a` has more of than `b`.
fn minus(a: &BTreeMap<String, usize>, b: &BTreeMap<String, usize>) -> BTreeMap<String, usize> {
    a.iter()
        .filter_map(|(k, &x)| {
            let y = b.get(k).copied().unwrap_or(0);
            (x > y).then(|| (k.clone(), x - y))
        })
        .collect()
}

fn total(b: &BTreeMap<String, usize>) -> usize {
    b.values().sum()
}

/// Frames whose TCP segment carries payload: what dnsjit, which reads any
/// payload as one DNS message without reassembly or the 2-byte length
/// prefix, may misread.
fn tcp_payload_frames(name: &str) -> usize {
    truth_rows(&truth(name)["frames"])
        .iter()
        .filter(|f| f["l4"] == "tcp" && f["n_dns"].as_u64().unwrap_or(0) > 0)
        .count()
}

#[test]
fn readme_prints_every_message_id_in_order() {
    for name in [
        "live_mini_en10mb.pcap",
        "vlan_qinq.pcap",
        "ipv4_fragments.pcap",
    ] {
        let ours: Vec<String> = run_example("readme.lua", &[&capture(name)])
            .lines()
            .map(str::to_string)
            .collect();
        let want: Vec<String> = messages(name).iter().map(|r| s(r, "id")).collect();
        assert_eq!(ours, want, "{name}");
    }
}

#[test]
fn dumpdns_prints_every_message_with_its_flow_and_question() {
    let name = "live_mini_en10mb.pcap";
    let text = run_example("dumpdns.lua", &[&capture(name)]);
    let flows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("udp ") || l.starts_with("tcp "))
        .collect();
    let rows = messages(name);
    let want: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{} {}:{} -> {}:{}",
                s(r, "transport"),
                s(r, "src"),
                n(r, "sport"),
                s(r, "dst"),
                n(r, "dport")
            )
        })
        .collect();
    assert_eq!(flows, want);
    // The first question of each message (tshark's table has the first only).
    let mut questions = Vec::new();
    let mut first = false;
    for line in text.lines() {
        if line.starts_with("udp ") || line.starts_with("tcp ") {
            first = true;
        } else if let Some(q) = line.strip_prefix("  question: ").filter(|_| first) {
            questions.push(q.split(' ').next().unwrap_or_default().to_string());
            first = false;
        }
    }
    let questions = bag(questions);
    let want = bag(rows
        .iter()
        .filter(|r| n(r, "qdcount") > 0 && !r["qname"].is_null())
        .map(|r| format!("{}.", s(r, "qname"))));
    assert_eq!(questions, want);
}

/// Query/response pairs from tshark's table, as dumpdns-qr.lua matches them:
/// (line without latency, latency in ms, query was over TCP).
fn truth_pairs(name: &str) -> Vec<(String, f64, bool)> {
    let rows = messages(name);
    let mut out = Vec::new();
    for q in rows
        .iter()
        .filter(|r| n(r, "qr") == 0 && !r["qname"].is_null())
    {
        for r in rows.iter().filter(|r| {
            n(r, "qr") == 1
                && n(r, "id") == n(q, "id")
                && s(r, "src") == s(q, "dst")
                && s(r, "dst") == s(q, "src")
                && n(r, "sport") == n(q, "dport")
                && n(r, "dport") == n(q, "sport")
        }) {
            let line = format!(
                "{}\t{}\t{}\t{}\t{}.\t{}",
                s(q, "src"),
                s(q, "dst"),
                n(q, "id"),
                mnemonic::rcode(full_rcode(r) as u16),
                s(q, "qname"),
                mnemonic::rtype(n(q, "qtype") as u16)
            );
            let ts = |row: &Row| s(row, "ts").parse::<f64>().unwrap();
            out.push((line, (ts(r) - ts(q)) * 1000.0, tcp(q)));
        }
    }
    out
}

/// An address as we print it (dnsjit writes IPv6 uncompressed).
fn addr(text: &str) -> String {
    text.parse::<std::net::IpAddr>()
        .map_or_else(|_| text.to_string(), |a| a.to_string())
}

/// Columns src, dst, id, rcode, qtype of a dumpdns-qr line (either tool), in
/// common terms: addresses as we print them, dnsjit's `UNKNOWN(N)` as
/// `TYPEN`, and the 4-bit header RCODE (dnsjit does not extend it with EDNS:
/// ours says BADVERS where the header says NOERROR).
fn qr_key(line: &str) -> String {
    let c: Vec<&str> = line.split('\t').collect();
    let rcode = mnemonic::rcode_from_str(c[3])
        .map_or(c[3].to_string(), |r| mnemonic::rcode(r & 0xf).into_owned());
    let qtype = match c[5].strip_prefix("UNKNOWN(") {
        Some(n) => format!("TYPE{}", n.trim_end_matches(')')),
        None => c[5].to_string(),
    };
    format!("{}\t{}\t{}\t{rcode}\t{qtype}", addr(c[0]), addr(c[1]), c[2])
}

/// A filter_rcode line (`id\tsrc -> dst`) with addresses as we print them.
fn rcode_key(line: &str) -> String {
    let (id, flow) = line.split_once('\t').unwrap_or((line, ""));
    let (src, dst) = flow.split_once(" -> ").unwrap_or((flow, ""));
    format!("{id}\t{} -> {}", addr(src), addr(dst))
}

#[test]
fn dumpdns_qr_matches_queries_and_responses_with_latency() {
    let name = "live_mini_en10mb.pcap";
    let text = run_example("dumpdns-qr.lua", &[&capture(name)]);
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("src\tdst\tid\trcode\tqname\tqtype\tlatency_ms")
    );
    let ours: Vec<(String, f64)> = lines
        .map(|l| {
            let (line, latency) = l.rsplit_once('\t').unwrap();
            (line.to_string(), latency.parse().unwrap())
        })
        .collect();
    let want = truth_pairs(name);
    assert_eq!(ours.len(), want.len());
    for ((line, latency), (want_line, want_latency, _)) in ours.iter().zip(&want) {
        assert_eq!(line, want_line);
        assert!(
            (latency - want_latency).abs() < 0.002,
            "{line}: latency {latency} ms, tshark's timestamps say {want_latency}"
        );
    }
}

#[test]
fn dumpdns_qr_agrees_with_dnsjit_except_over_tcp() {
    let name = "live_mini_en10mb.pcap";
    let path = capture(name);
    let ours = bag(run_example("dumpdns-qr.lua", &[&path])
        .lines()
        .skip(1)
        .map(qr_key));
    let theirs = bag(run_dnsjit("dumpdns-qr.lua", &[path.to_str().unwrap()])
        .lines()
        .skip(1)
        .map(qr_key));
    let pairs = truth_pairs(name);
    let udp = bag(pairs
        .iter()
        .filter(|p| !p.2)
        .map(|p| qr_key(&format!("{}\t-", p.0))));
    let tcp = bag(pairs
        .iter()
        .filter(|p| p.2)
        .map(|p| qr_key(&format!("{}\t-", p.0))));
    // Over UDP both print the same pairs.
    assert!(total(&udp) > 0);
    assert_eq!(
        minus(&udp, &theirs),
        BTreeMap::new(),
        "UDP pairs dnsjit misses"
    );
    // What only we print are pairs over TCP: dnsjit does not reassemble
    // streams and reads the 2-byte length prefix as the start of the header.
    let only_ours = minus(&ours, &theirs);
    assert_eq!(
        minus(&only_ours, &tcp),
        BTreeMap::new(),
        "pairs only we print, not over TCP"
    );
    // What only dnsjit prints comes from those misread TCP payloads.
    let only_theirs = minus(&theirs, &ours);
    assert!(
        total(&only_theirs) <= tcp_payload_frames(name),
        "dnsjit prints {} pairs we do not, more than there are TCP segments with DNS: {only_theirs:?}",
        total(&only_theirs)
    );
}

fn rcode_lines(rows: &[Row], rcode: u64) -> BTreeMap<String, usize> {
    bag(rows
        .iter()
        .filter(|r| full_rcode(r) == rcode)
        .map(|r| format!("{}\t{} -> {}", n(r, "id"), s(r, "src"), s(r, "dst"))))
}

#[test]
fn filter_rcode_prints_the_messages_with_that_rcode() {
    for (name, rcode) in [
        ("live_mini_en10mb.pcap", 3),
        ("live_mini_en10mb.pcap", 0),
        ("dns_edns_compression.pcap", 3),
    ] {
        let path = capture(name);
        let arg = rcode.to_string();
        let ours = bag(run_example("filter_rcode.lua", &[&path, Path::new(&arg)])
            .lines()
            .map(str::to_string));
        assert_eq!(
            ours,
            rcode_lines(&messages(name), rcode),
            "{name} rcode {rcode}"
        );
    }
    // An extended RCODE (BADVERS = 16 lives in EDNS): tshark's table gives it too.
    let rows = messages("dns_edns_compression.pcap");
    if let Some(ext) = rows.iter().map(full_rcode).find(|&r| r > 15) {
        let path = capture("dns_edns_compression.pcap");
        let arg = ext.to_string();
        let ours = bag(run_example("filter_rcode.lua", &[&path, Path::new(&arg)])
            .lines()
            .map(str::to_string));
        assert_eq!(ours, rcode_lines(&rows, ext));
    }
}

#[test]
fn filter_rcode_agrees_with_dnsjit_except_over_tcp() {
    let name = "live_mini_en10mb.pcap";
    let path = capture(name);
    let ours = bag(run_example("filter_rcode.lua", &[&path, Path::new("3")])
        .lines()
        .map(str::to_string));
    let theirs = bag(
        run_dnsjit("filter_rcode.lua", &[path.to_str().unwrap(), "3"])
            .lines()
            .map(rcode_key),
    );
    let rows = messages(name);
    let udp: Vec<Row> = rows.iter().filter(|r| !tcp(r)).cloned().collect();
    let tcp_rows: Vec<Row> = rows.iter().filter(|r| tcp(r)).cloned().collect();
    // Every NXDOMAIN over UDP: both print it.
    let udp_lines = rcode_lines(&udp, 3);
    assert!(total(&udp_lines) > 0);
    assert_eq!(
        minus(&udp_lines, &theirs),
        BTreeMap::new(),
        "UDP lines dnsjit misses"
    );
    // Only we print NXDOMAIN answers over TCP (dnsjit reads the length prefix as the id).
    assert_eq!(
        minus(&minus(&ours, &theirs), &rcode_lines(&tcp_rows, 3)),
        BTreeMap::new(),
        "lines only we print that are not over TCP"
    );
    let only_theirs = minus(&theirs, &ours);
    assert!(
        total(&only_theirs) <= tcp_payload_frames(name),
        "dnsjit lines not explained by misread TCP payloads: {only_theirs:?}"
    );
}

#[test]
fn count_pkts_per_ip_counts_source_and_destination() {
    for name in [
        "live_mini_en10mb.pcap",
        "ipv6_exthdr.pcap",
        "vlan_qinq.pcap",
    ] {
        let ours: BTreeMap<String, usize> = run_example("count-pkts-per-ip.lua", &[&capture(name)])
            .lines()
            .map(|l| {
                let (ip, count) = l.split_once('\t').unwrap();
                (ip.to_string(), count.parse().unwrap())
            })
            .collect();
        let frames = truth_rows(&truth(name)["frames"]);
        let want = bag(frames
            .iter()
            .filter(|f| !f["src"].is_null())
            .flat_map(|f| [s(f, "src"), s(f, "dst")]));
        assert_eq!(ours, want, "{name}");
    }
}

#[test]
fn dumpdns2pcap_writes_one_packet_per_message() {
    let name = "live_mini_en10mb.pcap";
    let out = temp_path("dns.pcap");
    let text = run_example("dumpdns2pcap.lua", &[&capture(name), &out]);
    let count = messages(name).len();
    assert_eq!(text.trim(), format!("{count} DNS messages dumped"));
    // The file reads back with as many records.
    let counter = temp_path("count.lua");
    std::fs::write(
        &counter,
        "local i = require('dnsluice.input.fpcap').new{path = arg[1]}\n\
         local n = 0\nfor _ in i:iter() do n = n + 1 end\nprint(n)\n",
    )
    .unwrap();
    let out_count = dnsluice()
        .arg("script")
        .arg(&counter)
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out_count.stdout).trim(),
        count.to_string()
    );
    let _ = std::fs::remove_file(out);
    let _ = std::fs::remove_file(counter);
}

#[cfg(not(feature = "libpcap"))]
#[test]
fn capture_needs_the_libpcap_feature_and_says_so() {
    let out = dnsluice()
        .arg("script")
        .arg(example("capture.lua"))
        .arg("lo")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("capture.lua:") && err.contains("built without libpcap"),
        "{err}"
    );
}

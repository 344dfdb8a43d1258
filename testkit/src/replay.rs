//! Helpers of the replay tests: captures of queries built in the test, the
//! test servers' addresses (`tests/servers/up.sh` writes them), and running
//! `dnsluice replay` with its statistics read back.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

use crate::{dnsluice, run_ok, temp_path};

/// One query of a capture: its source (10.0.0.N), name and type.
#[derive(Clone, Debug)]
pub struct Q {
    /// The last byte of the source address 10.0.0.N.
    pub source: u8,
    /// The query name.
    pub name: String,
    /// The query type (1: A).
    pub qtype: u16,
    /// Capture time in microseconds from the first packet.
    pub at_us: u64,
}

/// `count` A queries for n0.., n1.. of the test zone, from `sources` sources,
/// 100 µs apart; every fifth asks for a name that does not exist.
pub fn zone_queries(count: usize, sources: u8) -> Vec<Q> {
    (0..count)
        .map(|i| Q {
            source: (i % usize::from(sources)) as u8 + 1,
            name: if i % 5 == 4 {
                format!("missing{i}.lookup.test")
            } else {
                format!("n{i}.lookup.test")
            },
            qtype: 1,
            at_us: i as u64 * 100,
        })
        .collect()
}

/// A DNS query message (RD set, no EDNS).
pub fn query(id: u16, name: &str, qtype: u16) -> Vec<u8> {
    crate::wire::query(id, name, qtype, None)
}

/// The file header of a classic pcap (little-endian, microseconds, version
/// 2.4, snaplen 65,535) whose records are of `link_type` (101: raw IP).
pub fn pcap_header(link_type: u32) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&0xa1b2c3d4u32.to_le_bytes());
    f.extend_from_slice(&2u16.to_le_bytes());
    f.extend_from_slice(&4u16.to_le_bytes());
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(&65535u32.to_le_bytes());
    f.extend_from_slice(&link_type.to_le_bytes());
    f
}

/// Writes a classic pcap (LINKTYPE_RAW) with one IPv4/UDP query per packet
/// from 10.0.0.SOURCE to 192.0.2.53:53.
pub fn write_capture(path: &Path, queries: &[Q]) {
    let messages: Vec<(u8, u64, Vec<u8>)> = queries
        .iter()
        .enumerate()
        .map(|(i, q)| (q.source, q.at_us, query(i as u16, &q.name, q.qtype)))
        .collect();
    write_messages(path, &messages);
}

/// Writes a classic pcap (LINKTYPE_RAW) of DNS messages over IPv4/UDP,
/// each (source, time in µs from the first, message) from 10.0.0.SOURCE
/// to 192.0.2.53:53.
pub fn write_messages(path: &Path, messages: &[(u8, u64, Vec<u8>)]) {
    let mut f = pcap_header(101);
    for (i, (source, at_us, dns)) in messages.iter().enumerate() {
        let udp_len = 8 + dns.len();
        let ip_len = 20 + udp_len;
        let mut p = Vec::with_capacity(ip_len);
        p.extend_from_slice(&[0x45, 0]);
        p.extend_from_slice(&(ip_len as u16).to_be_bytes());
        p.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0]);
        p.extend_from_slice(&[10, 0, 0, *source]);
        p.extend_from_slice(&[192, 0, 2, 53]);
        p.extend_from_slice(&(40000 + i as u16 % 20000).to_be_bytes());
        p.extend_from_slice(&53u16.to_be_bytes());
        p.extend_from_slice(&(udp_len as u16).to_be_bytes());
        p.extend_from_slice(&[0, 0]);
        p.extend_from_slice(dns);
        let ts = 1_700_000_000_000_000u64 + at_us;
        f.extend_from_slice(&((ts / 1_000_000) as u32).to_le_bytes());
        f.extend_from_slice(&((ts % 1_000_000) as u32).to_le_bytes());
        f.extend_from_slice(&(p.len() as u32).to_le_bytes());
        f.extend_from_slice(&(p.len() as u32).to_le_bytes());
        f.extend_from_slice(&p);
    }
    std::fs::write(path, f).unwrap();
}

/// The test servers (`tests/servers/up.sh`, read by `crate::servers()`),
/// by their `servers.env` keys.
pub fn servers() -> BTreeMap<String, String> {
    let s = crate::servers();
    [
        ("KNOT", s.knot.to_string()),
        ("DNSDIST", s.dnsdist.to_string()),
        ("DOT", s.dot.to_string()),
        ("DOH", s.doh.clone()),
        ("CA_FILE", s.ca_file.display().to_string()),
        ("TLS_NAME", s.tls_name.clone()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The address the test zone gives n<i>.lookup.test.
pub fn address_of(i: u32) -> String {
    crate::lookup_address(i).to_string()
}

/// Runs `dnsluice replay CAPTURE ARGS --stats-json ...`, checks it succeeded,
/// and returns the statistics and stderr.
pub fn replay(capture: &Path, args: &[&str]) -> (Value, String) {
    let stats = temp_path("stats.json");
    let out = run_ok(
        dnsluice()
            .arg("replay")
            .arg(capture)
            .args(args)
            .arg("--stats-json")
            .arg(&stats),
    );
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let text = std::fs::read_to_string(&stats).unwrap();
    (serde_json::from_str(&text).unwrap(), stderr)
}

/// The counts of the replay statistics' contract (with `rcodes`,
/// `latency_ms` and `elapsed_s`).
pub const COUNTS: [&str; 6] = [
    "sent",
    "answered",
    "timeouts",
    "errors",
    "connections_opened",
    "tls_handshakes",
];

/// The contract keys of the replay statistics, checked present and typed.
pub fn check_contract(stats: &Value) {
    for key in COUNTS {
        assert!(
            stats[key].is_u64(),
            "`{key}` missing or not a count: {stats}"
        );
    }
    assert!(stats["rcodes"].is_object(), "{stats}");
    for key in ["p50", "p90", "p99", "p999", "max"] {
        assert!(
            stats["latency_ms"][key].is_f64(),
            "latency_ms.{key}: {stats}"
        );
    }
    assert!(stats["elapsed_s"].as_f64().unwrap() > 0.0, "{stats}");
}

/// `stats[key]` as a number.
pub fn n(stats: &Value, key: &str) -> u64 {
    stats[key]
        .as_u64()
        .unwrap_or_else(|| panic!("`{key}`: {stats}"))
}

/// Runs `capture → filter.dns → filter.dnscli → output.json` with `drive`
/// (`push` or `pull`) and the `filter.dnscli` options `dnscli` (TOML lines),
/// checks it succeeded, and returns the responses written and stderr.
pub fn run_dnscli_chain(capture: &Path, drive: &str, dnscli: &str) -> (String, String) {
    let name = capture.file_stem().unwrap().to_string_lossy().to_string();
    let responses = temp_path(&format!("{name}-{drive}.jsonl"));
    let pipeline = temp_path(&format!("{name}-{drive}.toml"));
    std::fs::write(
        &pipeline,
        format!(
            "drive = \"{drive}\"\n\
             [[stage]]\nmodule = \"input.mmpcap\"\npath = \"{}\"\n\
             [[stage]]\nmodule = \"filter.dns\"\n\
             [[stage]]\nmodule = \"filter.dnscli\"\n{dnscli}\n\
             [[stage]]\nmodule = \"output.json\"\npath = \"{}\"\n",
            capture.display(),
            responses.display()
        ),
    )
    .unwrap();
    let out = run_ok(dnsluice().arg("run").arg(&pipeline));
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    (std::fs::read_to_string(&responses).unwrap(), stderr)
}

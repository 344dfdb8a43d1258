//! `dnsluice diff` on two real servers serving deliberately different
//! versions of one zone: knot serves tests/data/diff-a.zone, nsd
//! tests/data/diff-b.zone. Every planted difference must be reported under
//! the fields it changes, and nothing else: not the records the files list
//! in another order, not a TTL, not the names the two versions agree on.
//! From a names file, from a capture of the queries, and comparing a
//! capture's recorded answers (knot's) with nsd's.

use serde_json::Value;
use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::Duration;
use testkit::daemon::{port, start, wait_answering, Daemon};
use testkit::{dnsluice, run_ok, temp_path};

/// Every query, with the fields its answers differ in (the plant), empty
/// where the versions agree.
const PLAN: [(&str, &str, &[&str]); 13] = [
    ("same.diff.test.", "A", &[]),
    ("multi.diff.test.", "A", &[]), // same records, other order
    ("ttl.diff.test.", "A", &[]),   // other TTL
    ("ns1.diff.test.", "A", &[]),
    ("diff.test.", "SOA", &[]),
    ("nx.diff.test.", "A", &[]),              // NXDOMAIN in both
    ("same.diff.test.", "MX", &[]),           // NODATA in both
    ("changed.diff.test.", "A", &["answer"]), // other address
    ("gone.diff.test.", "A", &["rcode", "answer", "authority"]), // only in a: NXDOMAIN in b
    ("extra.diff.test.", "AAAA", &["answer", "authority"]), // only in b: NODATA in a
    ("txt.diff.test.", "TXT", &["answer"]),   // other text
    ("host.sub.diff.test.", "A", &["additional"]), // a referral with other glue
    // delegated only in b: NXDOMAIN (authoritative) in a, a referral in b
    (
        "www.deleg.diff.test.",
        "A",
        &["rcode", "flags", "authority", "additional"],
    ),
];

struct Servers {
    knot: SocketAddr,
    nsd: SocketAddr,
    dir: PathBuf,
    _daemons: (Daemon, Daemon),
}

impl Servers {
    /// `--server KNOT --server NSD`.
    fn args(&self) -> Vec<String> {
        [
            "--server",
            &self.knot.to_string(),
            "--server",
            &self.nsd.to_string(),
        ]
        .map(String::from)
        .to_vec()
    }
}

fn servers(name: &str) -> Servers {
    let dir = temp_path(name);
    std::fs::create_dir_all(dir.join("db")).unwrap();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    std::fs::copy(data.join("diff-a.zone"), dir.join("a.zone")).unwrap();
    std::fs::copy(data.join("diff-b.zone"), dir.join("b.zone")).unwrap();
    // Two tests may run at once: each its own pair of ports.
    let k = if name == "names" { 6 } else { 8 };
    let (knot, nsd): (SocketAddr, SocketAddr) = (
        format!("127.0.0.1:{}", port(k)).parse().unwrap(),
        format!("127.0.0.1:{}", port(k + 1)).parse().unwrap(),
    );
    let d = dir.display();
    std::fs::write(
        dir.join("knot.conf"),
        format!("server:\n    rundir: \"{d}\"\n    listen: {}@{}\nlog:\n  - target: stderr\n    any: warning\ndatabase:\n    storage: \"{d}/db\"\ntemplate:\n  - id: default\n    storage: \"{d}\"\n    file: \"a.zone\"\nzone:\n  - domain: diff.test.\n", knot.ip(), knot.port()),
    )
    .unwrap();
    // minimal-responses: like knot, no NS records in the authority section
    // of positive answers (that would be a difference of the servers, not
    // of the zones).
    std::fs::write(
        dir.join("nsd.conf"),
        format!("server:\n    ip-address: {}@{}\n    port: {}\n    username: \"\"\n    chroot: \"\"\n    zonesdir: \"{d}\"\n    database: \"\"\n    pidfile: \"{d}/nsd.pid\"\n    xfrdfile: \"{d}/xfrd.state\"\n    xfrdir: \"{d}\"\n    zonelistfile: \"{d}/zone.list\"\n    server-count: 1\n    minimal-responses: yes\nremote-control:\n    control-enable: no\nzone:\n    name: diff.test.\n    zonefile: b.zone\n", nsd.ip(), nsd.port(), nsd.port()),
    )
    .unwrap();
    let knot_d = start(
        "knot",
        "knotd",
        &["-c", &dir.join("knot.conf").display().to_string()],
        &dir,
    );
    let nsd_d = start(
        "nsd",
        "nsd",
        &["-d", "-c", &dir.join("nsd.conf").display().to_string()],
        &dir,
    );
    wait_answering(knot, "diff.test.", &dir, "knot");
    wait_answering(nsd, "diff.test.", &dir, "nsd");
    Servers {
        knot,
        nsd,
        dir,
        _daemons: (knot_d, nsd_d),
    }
}

/// Runs `dnsluice diff INPUT ARGS... --output D --summary S`; the lines and the summary.
fn diff(input: &Path, args: &[String]) -> (Vec<Value>, Value) {
    let (lines, summary) = (temp_path("diffs.jsonl"), temp_path("summary.json"));
    run_ok(
        dnsluice()
            .arg("diff")
            .arg(input)
            .args(args)
            .arg("--output")
            .arg(&lines)
            .arg("--summary")
            .arg(&summary),
    );
    let lines = std::fs::read_to_string(&lines)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let summary = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    (lines, summary)
}

/// The report must be the plan: the planted queries under their fields,
/// nothing else; the summary counts them.
fn check(lines: &[Value], summary: &Value, names: [&str; 2]) {
    let mut got: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for l in lines {
        let fields = l["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap().to_string())
            .collect();
        got.insert(
            (
                l["qname"].as_str().unwrap().into(),
                l["qtype"].as_str().unwrap().into(),
            ),
            fields,
        );
        let answers = l["answers"].as_object().unwrap();
        let mut keys: Vec<&str> = answers.keys().map(|k| k.as_str()).collect();
        let mut want = names.to_vec();
        keys.sort();
        want.sort();
        assert_eq!(keys, want, "{l}");
        // Both answers as the zone files have them (a first, then b).
        if l["qname"] == "changed.diff.test." {
            for (name, ip) in names.iter().zip(["192.0.2.30", "192.0.2.31"]) {
                assert_eq!(answers[*name]["dns"]["answer"][0]["data"], ip, "{l}");
            }
        }
    }
    let want: BTreeMap<(String, String), Vec<String>> = PLAN
        .iter()
        .filter(|(_, _, f)| !f.is_empty())
        .map(|(n, t, f)| {
            (
                (n.to_string(), t.to_string()),
                f.iter().map(|s| s.to_string()).collect(),
            )
        })
        .collect();
    assert_eq!(got, want);
    assert_eq!(summary["queries"], PLAN.len());
    assert_eq!(summary["differing"], want.len());
    let mut by_field: BTreeMap<String, u64> = BTreeMap::new();
    for fields in want.values() {
        for f in fields {
            *by_field.entry(f.clone()).or_insert(0) += 1;
        }
    }
    assert_eq!(
        summary["by_field"],
        serde_json::to_value(&by_field).unwrap()
    );
    // The most common differences carry both values (a's, then b's, as
    // the zone files have them).
    let common = summary["most_common"].as_array().unwrap();
    for (field, a, b) in [
        (
            "answer",
            "changed.diff.test. A 192.0.2.30",
            "changed.diff.test. A 192.0.2.31",
        ),
        ("rcode", "NOERROR", "NXDOMAIN"),
        ("rcode", "NXDOMAIN", "NOERROR"),
        ("flags", "aa rd", "rd"),
    ] {
        let want = serde_json::json!({"field": field, "values": [a, b], "count": 1});
        assert!(common.contains(&want), "{want} not in {common:?}");
    }
}

fn qtype(name: &str) -> u16 {
    match name {
        "A" => 1,
        "SOA" => 6,
        "MX" => 15,
        "TXT" => 16,
        "AAAA" => 28,
        _ => unreachable!(),
    }
}

/// A capture of the plan's queries to `server` and its answers, as raw IP
/// packets (the test's own socket's exchanges; the server's port written
/// as 53, where `filter.dns` looks for DNS).
fn capture(server: SocketAddr) -> PathBuf {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let client = socket.local_addr().unwrap();
    let mut file = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    file.extend_from_slice(&65535u32.to_le_bytes());
    file.extend_from_slice(&101u32.to_le_bytes()); // LINKTYPE_RAW
    let mut packet = Vec::new();
    let server_53 = SocketAddr::new(server.ip(), 53);
    let mut record = |packet: &[u8], n: u32| {
        for field in [
            1_700_000_000 + n,
            0,
            packet.len() as u32,
            packet.len() as u32,
        ] {
            file.extend_from_slice(&field.to_le_bytes());
        }
        file.extend_from_slice(packet);
    };
    for (i, (name, t, _)) in PLAN.iter().enumerate() {
        let query = testkit::wire::query(100 + i as u16, name, qtype(t), Some(1232));
        socket.send_to(&query, server).unwrap();
        let mut buf = vec![0u8; 65535];
        let n = socket.recv(&mut buf).unwrap();
        dnsluice::modules::synth::udp_packet(client, server_53, &query, &mut packet);
        record(&packet, 2 * i as u32);
        dnsluice::modules::synth::udp_packet(server_53, client, &buf[..n], &mut packet);
        record(&packet, 2 * i as u32 + 1);
    }
    let path = temp_path("plan.pcap");
    std::fs::write(&path, file).unwrap();
    path
}

#[test]
fn a_names_file_two_servers() {
    let s = servers("names");
    let names = s.dir.join("names.txt");
    let mut text: String = PLAN.iter().map(|(n, t, _)| format!("{n} {t}\n")).collect();
    // Two lines that are no query: counted, not asked.
    text.push_str("three words here\nname.diff.test. NOSUCHTYPE\n");
    std::fs::write(&names, text).unwrap();
    let args = s.args();
    let (lines, summary) = diff(&names, &args);
    check(&lines, &summary, [&s.knot.to_string(), &s.nsd.to_string()]);
    assert_eq!(summary["skipped"]["bad_lines"], 2);
    // The differences are stable: asked again, every one stays.
    let mut again = args.clone();
    again.extend([
        "--reask".to_string(),
        "2".into(),
        "--transport".into(),
        "tcp".into(),
    ]);
    let (lines, summary) = diff(&names, &again);
    check(&lines, &summary, [&s.knot.to_string(), &s.nsd.to_string()]);
    assert_eq!(summary["unstable"], 0);
}

#[test]
fn a_capture_and_its_recorded_answers() {
    let s = servers("capture");
    let capture = capture(s.knot);
    let args = s.args();
    let (lines, summary) = diff(&capture, &args);
    check(&lines, &summary, [&s.knot.to_string(), &s.nsd.to_string()]);
    // The capture's own answers (knot's) against nsd's.
    let args = [
        "--recorded".to_string(),
        "--server".into(),
        s.nsd.to_string(),
    ];
    let (lines, summary) = diff(&capture, &args);
    check(&lines, &summary, ["capture", &s.nsd.to_string()]);
    // Compressed, the same.
    let packed = temp_path("plan.pcap.zst");
    run_ok(
        std::process::Command::new("zstd")
            .args(["-q", "-f", "-o"])
            .arg(&packed)
            .arg(&capture),
    );
    let (lines, summary) = diff(&packed, &args);
    check(&lines, &summary, ["capture", &s.nsd.to_string()]);
}

#[test]
fn bad_arguments_are_clear_errors() {
    let names = temp_path("one-name.txt");
    std::fs::write(&names, "www.diff.test.\n").unwrap();
    let one = dnsluice()
        .arg("diff")
        .arg(&names)
        .args(["--server", "127.0.0.1:9"])
        .output()
        .unwrap();
    assert!(!one.status.success());
    let stderr = String::from_utf8_lossy(&one.stderr);
    assert!(
        stderr.contains("needs at least 2 servers to compare (got 1)"),
        "{stderr}"
    );
    let missing = temp_path("no-such-input");
    let out = dnsluice()
        .arg("diff")
        .arg(&missing)
        .args(["--server", "127.0.0.1:9", "--server", "127.0.0.1:10"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot open") && stderr.contains("no-such-input"),
        "{stderr}"
    );
}

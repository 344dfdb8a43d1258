//! `filter.select` criterion by criterion, and `output.pcap` round trips,
//! both judged against tshark's view of the corpus.

use dnsluice::core::{Object, Producer};
use dnsluice::modules::input::mmpcap;
use serde_json::{Map, Value};
use std::path::Path;
use testkit::corpus::{corpus_dir, truth, truth_rows};
use testkit::{assert_ok, run_pipeline, temp_path};

/// Messages of `file` that `select` (TOML lines for filter.select) keeps.
fn selected(file: &str, select: &str) -> Vec<Value> {
    let json = temp_path("select.jsonl");
    let text = format!(
        "[[stage]]\nmodule = \"input.mmpcap\"\npath = \"{}\"\n[[stage]]\nmodule = \"filter.dns\"\n[[stage]]\nmodule = \"filter.select\"\n{select}\n[[stage]]\nmodule = \"output.json\"\npath = \"{}\"\n",
        corpus_dir().join(file).display(),
        json.display()
    );
    let out = run_pipeline(&text, &["-q"]);
    assert_ok(&out, format_args!("{select}"));
    std::fs::read_to_string(&json)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The (frame, first QNAME) of each of tshark's messages of `file` for which
/// `keep` holds, in order.
fn tshark_kept(file: &str, keep: impl Fn(&Map<String, Value>) -> bool) -> Vec<(u64, String)> {
    let t = truth(file);
    assert!(t["dns_messages"]["complete"].as_bool().unwrap());
    truth_rows(&t["dns_messages"])
        .iter()
        .filter(|d| keep(d))
        .map(|d| (d["frame"].as_u64().unwrap(), qname(d)))
        .collect()
}

/// How many of tshark's messages of `file` `keep` holds for.
fn tshark_count(file: &str, keep: impl Fn(&Map<String, Value>) -> bool) -> usize {
    tshark_kept(file, keep).len()
}

/// The (frame, first QNAME) of each message `select` keeps, in order.
fn kept(file: &str, select: &str) -> Vec<(u64, String)> {
    selected(file, select)
        .iter()
        .map(|m| {
            let name = m["dns"]["question"][0]["name"].as_str().unwrap_or_default();
            let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
            (m["frame"].as_u64().unwrap(), name)
        })
        .collect()
}

fn qname(d: &Map<String, Value>) -> String {
    d["qname"].as_str().unwrap_or_default().to_ascii_lowercase()
}

#[test]
fn each_criterion_keeps_the_messages_tshark_finds() {
    let f = "live_mini_en10mb.pcap";
    let cases: Vec<(&str, Vec<(u64, String)>)> = vec![
        ("qr = \"response\"", tshark_kept(f, |d| d["qr"] == 1)),
        (
            "qr = \"query\"\ninvert = true",
            tshark_kept(f, |d| d["qr"] == 1),
        ),
        (
            "qtype = [\"AAAA\", \"mx\"]",
            tshark_kept(f, |d| matches!(d["qtype"].as_u64(), Some(28 | 15))),
        ),
        (
            "qname = [\"WWW.corpus.test.\"]",
            tshark_kept(f, |d| qname(d) == "www.corpus.test"),
        ),
        (
            "qname_suffix = [\"sub.corpus.test\"]",
            tshark_kept(f, |d| {
                qname(d).ends_with(".sub.corpus.test") || qname(d) == "sub.corpus.test"
            }),
        ),
        (
            "rcode = [\"NXDOMAIN\"]",
            tshark_kept(f, |d| d["rcode"] == 3),
        ),
        (
            "rcode = [\"REFUSED\", \"NXDOMAIN\"]",
            tshark_kept(f, |d| matches!(d["rcode"].as_u64(), Some(3 | 5))),
        ),
        (
            "transport = \"tcp\"",
            tshark_kept(f, |d| d["transport"] == "tcp"),
        ),
        ("src = [\"::/0\"]", tshark_kept(f, |d| d["ip"] == 6)),
        ("dst = [\"127.0.0.0/8\"]", tshark_kept(f, |d| d["ip"] == 4)),
        ("address = [\"::1\"]", tshark_kept(f, |d| d["ip"] == 6)),
        (
            "qr = \"response\"\nrcode = [\"NXDOMAIN\"]\ntransport = \"udp\"",
            tshark_kept(f, |d| {
                d["qr"] == 1 && d["rcode"] == 3 && d["transport"] == "udp"
            }),
        ),
    ];
    for (select, want) in cases {
        assert!(
            !want.is_empty(),
            "a criterion that selects nothing proves nothing: {select}"
        );
        assert_eq!(kept(f, select), want, "{select}");
    }
    let g = "dns_edns_compression.pcap";
    let notify_update = tshark_kept(g, |d| matches!(d["opcode"].as_u64(), Some(4 | 5)));
    assert!(!notify_update.is_empty());
    assert_eq!(kept(g, "opcode = [\"NOTIFY\", \"update\"]"), notify_update);
    // Extended RCODE (EDNS): BADVERS is 16 = ext 1 << 4 | 0 (frame 26 of the corpus file).
    let badvers = tshark_kept(g, |d| d["edns"]["ext_rcode"] == 1 && d["rcode"] == 0);
    assert_eq!(
        badvers.iter().map(|m| m.0).collect::<Vec<_>>(),
        [26],
        "the corpus' BADVERS response"
    );
    assert_eq!(kept(g, "rcode = [\"BADVERS\"]"), badvers);
}

#[test]
fn select_errors_name_the_key() {
    let text = "[[stage]]\nmodule = \"input.mmpcap\"\npath = \"x\"\n[[stage]]\nmodule = \"filter.select\"\nqtype = [\"A\", \"BOGUS\"]\n[[stage]]\nmodule = \"output.null\"\n";
    let out = run_pipeline(text, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains(":6: key `qtype`") && err.contains("BOGUS"),
        "{err}"
    );
}

/// (ts, len, link, bytes) of every record, read with our own reader.
fn records(path: &Path) -> Vec<(Option<i64>, u32, u32, Vec<u8>)> {
    let mut reader = mmpcap::open(path.to_path_buf()).unwrap();
    let mut out = Vec::new();
    while let Some(obj) = reader.produce().unwrap() {
        if let Object::Packet(p) = obj {
            out.push((p.meta.ts_ns, p.meta.len, p.meta.link.0, p.data.to_vec()));
        }
    }
    out
}

/// The records as a little-endian file holds them: a LINKTYPE_NULL
/// packet's 4-byte address family (written in the capturing host's byte
/// order, the file's) in little-endian order. Families are small numbers,
/// so the smaller reading is the family.
fn little_endian_families(
    mut records: Vec<(Option<i64>, u32, u32, Vec<u8>)>,
) -> Vec<(Option<i64>, u32, u32, Vec<u8>)> {
    for (_, _, link, data) in &mut records {
        if *link == 0 && data.len() >= 4 {
            let family: [u8; 4] = data[..4].try_into().unwrap();
            let family = u32::from_le_bytes(family).min(u32::from_be_bytes(family));
            data[..4].copy_from_slice(&family.to_le_bytes());
        }
    }
    records
}

fn write(file: &str, format: &str, resolution: &str) -> (std::path::PathBuf, Value) {
    let written = temp_path(&format!("out.{format}"));
    let stats = temp_path("stats.json");
    let text = format!(
        "[[stage]]\nmodule = \"input.fpcap\"\npath = \"{}\"\n[[stage]]\nmodule = \"output.pcap\"\npath = \"{}\"\nformat = \"{format}\"\nresolution = \"{resolution}\"\n",
        corpus_dir().join(file).display(),
        written.display()
    );
    let out = run_pipeline(&text, &["-q", "--stats-json", &stats.display().to_string()]);
    assert_ok(&out, "dnsluice run");
    (
        written,
        serde_json::from_str(&std::fs::read_to_string(stats).unwrap()).unwrap(),
    )
}

#[test]
fn pcap_round_trip_keeps_bytes_and_timestamps() {
    for file in [
        "live_mini_en10mb.pcap",
        "live_any_linux_sll2_nsec.pcap",
        "live_mini_bigendian_nsec_null.pcap",
        "vlan_qinq.pcap",
        "pcapng_bigendian.pcapng",
    ] {
        let original = little_endian_families(records(&corpus_dir().join(file)));
        for format in ["pcap", "pcapng"] {
            let (written, _) = write(file, format, "ns");
            let copy = records(&written);
            assert_eq!(copy.len(), original.len(), "{file} → {format}");
            for (i, (c, o)) in copy.iter().zip(&original).enumerate() {
                assert!(c == o, "{file} → {format}: record {} differs", i + 1);
            }
        }
        // The copy's per-record view is tshark's view of the original.
        let t = truth(file);
        let (written, _) = write(file, "pcap", "ns");
        let copy = records(&written);
        assert_eq!(copy.len() as u64, t["counts"]["records"].as_u64().unwrap());
        for row in truth_rows(&t["frames"]).iter().take(50) {
            let (ts, len, _, data) = &copy[row["record"].as_u64().unwrap() as usize - 1];
            let secs = ts.unwrap().div_euclid(1_000_000_000);
            let nanos = ts.unwrap().rem_euclid(1_000_000_000);
            assert_eq!(
                format!("{secs}.{nanos:09}"),
                row["ts"].as_str().unwrap(),
                "{file}"
            );
            assert_eq!(
                (data.len() as u64, u64::from(*len)),
                (
                    row["caplen"].as_u64().unwrap(),
                    row["len"].as_u64().unwrap()
                )
            );
        }
    }
}

#[test]
fn pcap_round_trip_of_several_link_types_needs_pcapng() {
    let file = "pcapng_multi_if.pcapng";
    let original = records(&corpus_dir().join(file));
    let (written, _) = write(file, "pcapng", "ns");
    assert_eq!(records(&written), original);
    // Classic pcap has one link type: the others are counted and reported, not written.
    let (written, stats) = write(file, "pcap", "ns");
    let kept = records(&written);
    let first_link = original[0].2;
    // (A classic pcap record always has a timestamp: the Simple Packet Blocks' none becomes 0.)
    let want: Vec<_> = original
        .iter()
        .filter(|r| r.2 == first_link)
        .map(|r| (r.0.or(Some(0)), r.1, r.2, r.3.clone()))
        .collect();
    assert_eq!(kept, want);
    let out = &stats["stages"][1];
    assert_eq!(
        out["errors"]["link_type_differs_from_file"]
            .as_u64()
            .unwrap() as usize,
        original.len() - kept.len()
    );
    assert!(!out["warnings"].as_array().unwrap().is_empty());
}

#[test]
fn microsecond_pcap_truncates_nanoseconds() {
    let file = "live_any_linux_sll2_nsec.pcap";
    let original = records(&corpus_dir().join(file));
    let (written, _) = write(file, "pcap", "us");
    let copy = records(&written);
    assert_eq!(copy.len(), original.len());
    for (a, b) in copy.iter().zip(&original) {
        assert_eq!(a.0, b.0.map(|t| t - t.rem_euclid(1000)));
        assert_eq!(a.3, b.3);
    }
}

#[test]
fn selected_dns_messages_to_pcap() {
    // dumpdns2pcap's job: the packets of the NXDOMAIN responses, to a file.
    let written = temp_path("nx.pcap");
    let text = format!(
        "[[stage]]\nmodule = \"input.mmpcap\"\npath = \"{}\"\n[[stage]]\nmodule = \"filter.dns\"\n[[stage]]\nmodule = \"filter.select\"\nrcode = [\"NXDOMAIN\"]\nqr = \"response\"\ntransport = \"udp\"\n[[stage]]\nmodule = \"output.pcap\"\npath = \"{}\"\n",
        corpus_dir().join("live_mini_en10mb.pcap").display(),
        written.display()
    );
    assert_ok(&run_pipeline(&text, &["-q"]), "dnsluice run");
    let want = tshark_count("live_mini_en10mb.pcap", |d| {
        d["qr"] == 1 && d["rcode"] == 3 && d["transport"] == "udp"
    });
    assert_eq!(records(&written).len(), want);
}

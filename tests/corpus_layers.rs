//! Every capture of the corpus, read by every input, against tshark's truth:
//! record counts, per-frame timestamps and lengths, and for every frame tshark
//! decodes as IPv4/IPv6 + UDP/TCP: ip, src, dst, transport, ports and VLAN ids.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use testkit::assert_ok;
use testkit::corpus::{corpus, rfc3339_to_epoch, truth_rows};
use testkit::pipeline::layer_json;

/// Inputs that read every capture natively.
const NATIVE_INPUTS: [&str; 2] = ["input.mmpcap", "input.fpcap"];

/// Files libpcap cannot read (see the corpus README): multi-link-type and multi-section pcapng.
#[cfg(feature = "libpcap")]
const LIBPCAP_REJECTS: [&str; 2] = ["pcapng_multi_if.pcapng", "pcapng_two_sections.pcapng"];

fn inputs_for(capture: &std::path::Path) -> Vec<&'static str> {
    #[cfg_attr(not(feature = "libpcap"), allow(unused_mut))]
    let mut inputs = NATIVE_INPUTS.to_vec();
    #[cfg(feature = "libpcap")]
    {
        let name = capture.file_name().unwrap().to_string_lossy();
        if !LIBPCAP_REJECTS.contains(&name.as_ref()) {
            inputs.push("input.pcap");
        }
    }
    let _ = capture;
    inputs
}

#[test]
fn every_capture_has_tsharks_record_count_and_layers() {
    let mut checked_frames = 0;
    for (capture, truth) in corpus() {
        let name = capture.file_name().unwrap().to_string_lossy().to_string();
        let records = truth["counts"]["records"].as_u64().unwrap() as usize;
        for input in inputs_for(&capture) {
            let (rows, out) = layer_json(input, &capture);
            assert_ok(&out, format_args!("{input} {name}"));
            assert_eq!(rows.len(), records, "{input} {name}: record count");
            for (i, row) in rows.iter().enumerate() {
                assert_eq!(
                    row["frame"],
                    json!(i + 1),
                    "{input} {name}: frames numbered 1.."
                );
            }
            if !truth["frames"]["complete"].as_bool().unwrap() {
                continue;
            }
            for t in truth_rows(&truth["frames"]) {
                let l4 = t["l4"].as_str().unwrap_or_default();
                let protocols = t["protocols"].as_str().unwrap_or_default();
                if t["record"].is_null()
                    || !t["ip_fragment"].is_null()
                    || !matches!(t["ip"].as_u64(), Some(4 | 6))
                    || protocols.contains("icmp")
                    || !matches!(l4, "udp" | "tcp")
                {
                    continue;
                }
                let row = &rows[t["record"].as_u64().unwrap() as usize - 1];
                let mut want = json!({"ip": t["ip"], "src": t["src"], "dst": t["dst"], "transport": l4,
                                      "sport": t["sport"], "dport": t["dport"]});
                let mut got = json!({"ip": row["ip"], "src": row["src"], "dst": row["dst"],
                                     "transport": row["transport"], "sport": row["sport"], "dport": row["dport"]});
                if !t["vlan_ids"].is_null() {
                    want["vlan"] = t["vlan_ids"].clone();
                    got["vlan"] = row["vlan"].clone();
                } else {
                    assert!(
                        row.get("vlan").is_none(),
                        "{input} {name} frame {}: vlan where tshark has none",
                        t["record"]
                    );
                }
                assert_eq!(got, want, "{input} {name} frame {}", t["record"]);
                checked_frames += 1;
            }
        }
    }
    // The corpus has thousands of such frames; a filter that skipped them all would pass vacuously.
    assert!(
        checked_frames > 10_000,
        "only {checked_frames} frames compared"
    );
}

/// `frame\tts\tcaplen\tlen` per record, as the truth files hash them (`ts` empty when absent).
fn frame_line(frame: impl std::fmt::Display, row: &Value) -> String {
    let ts = row["ts"].as_str().map(rfc3339_to_epoch).unwrap_or_default();
    format!("{}\t{ts}\t{}\t{}\n", frame, row["caplen"], row["len"])
}

#[test]
fn timestamps_and_lengths_match_tshark_for_every_record() {
    for (capture, truth) in corpus() {
        let name = capture.file_name().unwrap().to_string_lossy().to_string();
        let frames = &truth["frames"];
        for input in NATIVE_INPUTS {
            let (rows, _) = layer_json(input, &capture);
            if frames["complete"].as_bool().unwrap() {
                for t in truth_rows(frames) {
                    let Some(record) = t["record"].as_u64() else {
                        continue;
                    };
                    let row = &rows[record as usize - 1];
                    let want = format!(
                        "{record}\t{}\t{}\t{}\n",
                        t["ts"].as_str().unwrap_or_default(),
                        t["caplen"],
                        t["len"]
                    );
                    assert_eq!(frame_line(record, row), want, "{input} {name}");
                }
            } else {
                // Large captures list only a hash; frame numbers equal record numbers there (plain pcap).
                let mut hash = Sha256::new();
                for row in &rows {
                    hash.update(frame_line(&row["frame"], row).as_bytes());
                }
                let got = format!("{:x}", hash.finalize());
                assert_eq!(
                    got,
                    frames["sha256_of_canonical_lines"].as_str().unwrap(),
                    "{input} {name}"
                );
            }
        }
    }
}

#[test]
fn link_names_follow_the_capture() {
    let expect = [
        ("live_mini_null.pcap", "NULL"),
        ("live_mini_loop.pcap", "LOOP"),
        ("live_mini_raw.pcap", "RAW"),
        ("live_mini_dlt_raw12.pcap", "RAW"),
        ("live_mini_linktype_ipv4.pcap", "IPV4"),
        ("live_mini_linktype_ipv6.pcap", "IPV6"),
        ("live_any_linux_sll.pcap", "LINUX_SLL"),
        ("live_any_linux_sll2_nsec.pcap", "LINUX_SLL2"),
        ("vlan_qinq.pcap", "EN10MB"),
    ];
    for (file, link) in expect {
        let (rows, _) = layer_json("input.mmpcap", &testkit::corpus::corpus_dir().join(file));
        assert!(
            !rows.is_empty() && rows.iter().all(|r| r["link"] == json!(link)),
            "{file}: {link}"
        );
    }
    let (rows, _) = layer_json(
        "input.mmpcap",
        &testkit::corpus::corpus_dir().join("pcapng_multi_if.pcapng"),
    );
    let links: Vec<&str> = rows[..4]
        .iter()
        .map(|r| r["link"].as_str().unwrap())
        .collect();
    assert_eq!(links, ["EN10MB", "LINUX_SLL", "RAW", "LINUX_SLL2"]);
}

#[test]
fn fragments_are_marked_with_tsharks_offsets() {
    for file in ["ipv4_fragments.pcap", "ipv6_exthdr.pcap"] {
        let (capture, truth) = corpus()
            .into_iter()
            .find(|(p, _)| p.ends_with(file))
            .unwrap();
        let (rows, _) = layer_json("input.mmpcap", &capture);
        let mut seen = 0;
        for t in truth_rows(&truth["frames"]) {
            let row = &rows[t["record"].as_u64().unwrap() as usize - 1];
            let fragment = &t["ip_fragment"];
            if fragment.is_null() || fragment["atomic"] == json!(true) {
                assert!(
                    row.get("fragment")
                        .is_none_or(|f| f["atomic"] == json!(true)),
                    "{file} {}",
                    t["record"]
                );
                continue;
            }
            seen += 1;
            assert_eq!(
                row["fragment"]["offset"], fragment["offset_bytes"],
                "{file} {}",
                t["record"]
            );
            assert_eq!(
                row["fragment"]["more"],
                json!(fragment["mf"] == json!(1)),
                "{file} {}",
                t["record"]
            );
            assert_eq!(
                row["fragment"]["id"], fragment["id"],
                "{file} {}",
                t["record"]
            );
            assert!(
                row.get("transport").is_none(),
                "{file} {}: a fragment has no transport",
                t["record"]
            );
        }
        assert!(seen > 3, "{file}: only {seen} fragments");
    }
}

//! The captures we write, read back by readers that are not ours: tshark
//! and capinfos (Wireshark's wiretap) and tcpdump (libpcap). For each copy
//! of a corpus capture made by `output.pcap` (classic pcap in ns and µs,
//! pcapng, several link types) and by `examples/lua/dumpdns2pcap.lua`:
//! the same number of records, the same timestamps (µs copies: cut to the
//! µs), the same lengths, link types and bytes (frame MD5), and libpcap's
//! `ip` and `ip6` filters select the same packets, decoded the same.

use std::path::{Path, PathBuf};
use testkit::corpus::{corpus_dir, truth, truth_rows};
use testkit::readers::{capinfos_packets, tcpdump, tshark_frames, Frame};
use testkit::{assert_ok, run_ok, temp_path};

/// Copies corpus `file` through `input.fpcap → output.pcap` with `format`
/// and `resolution`.
fn copy(file: &str, format: &str, resolution: &str) -> PathBuf {
    let written = temp_path(&format!("copy.{format}"));
    let text = format!(
        "[[stage]]\nmodule = \"input.fpcap\"\npath = \"{}\"\n[[stage]]\nmodule = \"output.pcap\"\npath = \"{}\"\nformat = \"{format}\"\nresolution = \"{resolution}\"\n",
        corpus_dir().join(file).display(),
        written.display()
    );
    let out = testkit::run_pipeline(&text, &["-q"]);
    assert_ok(&out, "dnsluice run");
    written
}

/// tshark's records of the original with the timestamps a copy in
/// `resolution` holds (µs: the last three of the nine decimals are zeros).
fn expected(original: &[Frame], resolution: &str) -> Vec<Frame> {
    original
        .iter()
        .map(|f| {
            let mut f = f.clone();
            if resolution == "us" && !f.ts.is_empty() {
                f.ts.replace_range(f.ts.len() - 3.., "000");
            }
            f
        })
        .collect()
}

/// The checks every copy gets; `same_bytes` is false when the copy's bytes
/// differ on purpose (a big-endian LINKTYPE_NULL family, turned around).
fn check_copy(file: &str, copy: &Path, resolution: &str, same_bytes: bool, libpcap: bool) {
    let what = format!("{file} → {}", copy.display());
    let original = corpus_dir().join(file);
    let want = expected(&tshark_frames(&original), resolution);
    let got = tshark_frames(copy);
    let records = truth(file)["counts"]["records"].as_u64().unwrap();
    assert_eq!(
        want.len() as u64,
        records,
        "{what}: tshark's view of the original"
    );
    assert_eq!(got.len() as u64, records, "{what}: records tshark reads");
    assert_eq!(capinfos_packets(copy), records, "{what}: capinfos");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let frame = i + 1;
        assert_eq!(g.ts, w.ts, "{what}: timestamp of record {frame}");
        assert_eq!(
            (g.len, g.caplen),
            (w.len, w.caplen),
            "{what}: lengths of record {frame}"
        );
        assert_eq!(g.encap, w.encap, "{what}: link type of record {frame}");
        assert_eq!(
            g.family, w.family,
            "{what}: address family of record {frame}"
        );
        if same_bytes {
            assert_eq!(g.md5, w.md5, "{what}: bytes of record {frame}");
        }
    }
    if !libpcap {
        return;
    }
    // libpcap compiles `ip` for the file's link type and byte order: the
    // same packets must match, with the same decode and bytes.
    // (libpcap's `ip` does not look inside VLAN tags: `vlan` does, on Ethernet.)
    let filters: &[&str] = if file.starts_with("vlan") {
        &["ip", "ip6", "vlan", ""]
    } else {
        &["ip", "ip6", ""]
    };
    let mut matched = 0;
    for &filter in filters {
        let want = tcpdump(&original, filter);
        let got = tcpdump(copy, filter);
        assert_eq!(got.len(), want.len(), "{what}: packets matching `{filter}`");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g, w, "{what}: `{filter}`");
        }
        if !filter.is_empty() {
            matched += want.len();
        }
    }
    assert!(
        matched > 0,
        "{what}: the filters select something in the original"
    );
}

#[test]
fn pcap_copies_read_the_same_in_tshark_capinfos_and_tcpdump() {
    for file in [
        "live_mini_en10mb.pcap",
        "live_any_linux_sll2_nsec.pcap",
        "live_mini_null.pcap",
        "live_mini_loop.pcap",
        "live_mini_raw.pcap",
        "vlan_qinq.pcap",
        "pcapng_bigendian.pcapng",
    ] {
        for resolution in ["ns", "us"] {
            check_copy(
                file,
                &copy(file, "pcap", resolution),
                resolution,
                true,
                true,
            );
        }
        check_copy(file, &copy(file, "pcapng", "ns"), "ns", true, true);
    }
}

/// A big-endian file's LINKTYPE_NULL family header is written in the copy's
/// (little-endian) byte order: libpcap's `ip` then matches what it matched
/// in the original, and tshark reads the same family.
#[test]
fn a_big_endian_null_capture_keeps_its_families() {
    let file = "live_mini_bigendian_nsec_null.pcap";
    for resolution in ["ns", "us"] {
        check_copy(
            file,
            &copy(file, "pcap", resolution),
            resolution,
            false,
            true,
        );
    }
    check_copy(file, &copy(file, "pcapng", "ns"), "ns", false, true);
}

/// Four link types in one pcapng (libpcap reads one per file: tshark alone),
/// Simple Packet Blocks without a timestamp kept as such.
#[test]
fn pcapng_copies_keep_several_link_types() {
    let file = "pcapng_multi_if.pcapng";
    let copied = copy(file, "pcapng", "ns");
    check_copy(file, &copied, "ns", true, false);
    let encaps: std::collections::BTreeSet<String> = tshark_frames(&copied)
        .into_iter()
        .map(|f| f.encap)
        .collect();
    assert_eq!(encaps.len(), 4, "{encaps:?}");
}

/// `examples/lua/dumpdns2pcap.lua` writes, for each DNS message tshark
/// finds, the packet that carried it (for a message over several TCP
/// segments, the one that completed it): tshark's frames of the copy are
/// the original's frames of the truth's messages, in order.
#[test]
fn dumpdns2pcap_writes_the_packet_of_each_message() {
    let file = "live_mini_en10mb.pcap";
    let original = corpus_dir().join(file);
    let written = temp_path("dumpdns2pcap.pcap");
    run_ok(
        testkit::dnsluice()
            .arg("script")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/lua/dumpdns2pcap.lua"))
            .arg(&original)
            .arg(&written),
    );
    let frames = tshark_frames(&original);
    let t = truth(file);
    assert!(t["dns_messages"]["complete"].as_bool().unwrap());
    let want: Vec<Frame> = truth_rows(&t["dns_messages"])
        .iter()
        .map(|m| frames[m["frame"].as_u64().unwrap() as usize - 1].clone())
        .collect();
    let got = tshark_frames(&written);
    assert_eq!(got.len(), want.len(), "one record per message");
    assert_eq!(capinfos_packets(&written), want.len() as u64);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "record {}", i + 1);
    }
    // The messages' timestamps are the truth's too.
    for (g, m) in got.iter().zip(truth_rows(&t["dns_messages"])) {
        assert_eq!(g.ts, m["ts"].as_str().unwrap());
    }
}

//! Replays what the fuzzers found (`fuzz/regressions/*`) and a few hostile
//! inputs built here through both native readers and the layer parser: no
//! panic, no hang, and both readers agree packet for packet.

mod common;

use dnsluice::core::wire::parse_layers;
use dnsluice::core::{Object, Producer};
use dnsluice::modules::input::fpcap::BufferedStream;
use dnsluice::modules::input::{mmpcap, CaptureReader};
use std::path::Path;

/// What a reader made of some bytes: each packet's (frame, ts, len, link, bytes), then the outcome.
type Outcome = (
    Vec<(u64, Option<i64>, u32, u32, Vec<u8>)>,
    Result<(), String>,
);

fn drain<P: Producer>(reader: Result<P, dnsluice::core::StageError>) -> Outcome {
    let mut reader = match reader {
        Ok(r) => r,
        Err(e) => return (Vec::new(), Err(e.to_string())),
    };
    let mut packets = Vec::new();
    loop {
        match reader.produce() {
            Ok(Some(Object::Packet(p))) => {
                let layers = parse_layers(p.meta.link, p.data, p.meta.len);
                let end = layers.payload_offset as usize + layers.payload_len as usize;
                assert!(
                    layers.payload_len == 0 || end <= p.data.len(),
                    "payload past the packet"
                );
                let _ = (p.src(), p.dst(), p.payload());
                packets.push((
                    p.meta.frame,
                    p.meta.ts_ns,
                    p.meta.len,
                    p.meta.link.0,
                    p.data.to_vec(),
                ));
            }
            Ok(Some(_)) => {}
            Ok(None) => return (packets, Ok(())),
            Err(e) => return (packets, Err(e.to_string())),
        }
    }
}

/// Both readers on the same bytes must agree (the error texts name different paths, so compare kinds).
fn check(bytes: &[u8], label: &str) {
    let file = common::temp_path("fuzz.pcap");
    std::fs::write(&file, bytes).unwrap();
    let mapped = drain(mmpcap::open(file.clone()));
    let stream = BufferedStream::new(Box::new(std::io::Cursor::new(bytes.to_vec())), 4096);
    let read = drain(CaptureReader::new("input.fpcap", "fuzz".into(), stream));
    let _ = std::fs::remove_file(&file);
    assert_eq!(
        mapped.0, read.0,
        "{label}: packets differ between mmpcap and fpcap"
    );
    assert_eq!(
        mapped.1.is_ok(),
        read.1.is_ok(),
        "{label}: {:?} vs {:?}",
        mapped.1,
        read.1
    );
}

#[test]
fn fuzzer_findings_stay_fixed() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions");
    let mut replayed = 0;
    for entry in std::fs::read_dir(&dir).expect("fuzz/regressions") {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "bin") {
            let bytes = std::fs::read(&path).unwrap();
            let name = path.file_name().unwrap().to_string_lossy();
            // Files are named after the target that found them.
            if name.starts_with("dns_message-") {
                dnsluice::modules::fuzzing::dns_message(&bytes);
            } else if name.starts_with("reassembly-") {
                dnsluice::modules::fuzzing::reassembly(&bytes);
            } else {
                check(&bytes, &path.display().to_string());
            }
            replayed += 1;
        }
    }
    assert!(
        replayed >= 3,
        "fuzz/regressions holds at least the hand-made hostile inputs"
    );
}

#[test]
fn every_prefix_and_a_flipped_byte_of_small_captures_reads_cleanly() {
    for name in [
        "pcapng_multi_if.pcapng",
        "pcapng_two_sections.pcapng",
        "malformed.pcap",
        "vlan_qinq.pcap",
    ] {
        let bytes = std::fs::read(common::corpus_dir().join(name)).unwrap();
        for cut in (0..bytes.len()).step_by(7) {
            check(&bytes[..cut], &format!("{name}[..{cut}]"));
        }
        for at in (0..bytes.len()).step_by(13) {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0xff;
            check(&flipped, &format!("{name} with byte {at} flipped"));
        }
    }
}

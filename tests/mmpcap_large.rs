//! `input.mmpcap` on a file larger than what its helper thread works on at
//! a time (pages faulted in up to 64 MiB ahead of the walk, the map
//! released 64 MiB behind it): every record comes out whole and in order,
//! with the helper and without, and a reader dropped early stops the helper
//! (the test would hang).

use dnsluice::core::{Object, Producer};
use dnsluice::modules::input::mmpcap;
use std::path::PathBuf;

/// Records in the file: 100 000 of 1 000 bytes, about 100 MB, so that the
/// helper releases the first 16 to 32 MB while the walk goes on.
const RECORDS: u32 = 100_000;
const CAPLEN: usize = 1000;

/// A classic pcap whose record `i` (0-based) holds `i` in its first 4 bytes
/// and its last 4 bytes, and `i` as its timestamp's seconds.
fn write_numbered_pcap() -> PathBuf {
    let mut bytes = Vec::with_capacity(24 + RECORDS as usize * (16 + CAPLEN));
    // File header: magic (microseconds), version 2.4, zone, sigfigs, snaplen, Ethernet.
    bytes.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    bytes.extend_from_slice(&[2, 0, 4, 0]);
    for field in [0u32, 0, 65535, 1] {
        bytes.extend_from_slice(&field.to_le_bytes());
    }
    for i in 0..RECORDS {
        for field in [i, 0, CAPLEN as u32, CAPLEN as u32] {
            bytes.extend_from_slice(&field.to_le_bytes());
        }
        let mut data = vec![0x5a; CAPLEN];
        data[..4].copy_from_slice(&i.to_le_bytes());
        data[CAPLEN - 4..].copy_from_slice(&i.to_le_bytes());
        bytes.extend_from_slice(&data);
    }
    let path = testkit::temp_path("numbered.pcap");
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn every_record_of_a_file_larger_than_the_populated_chunks_comes_out_in_order() {
    let path = write_numbered_pcap();
    for helper in [true, false] {
        let mut reader = mmpcap::open_with(path.clone(), helper).unwrap();
        let mut seen = 0u32;
        while let Some(obj) = reader.produce().unwrap() {
            let Object::Packet(p) = obj else {
                panic!("not a packet")
            };
            let first = u32::from_le_bytes(p.data[..4].try_into().unwrap());
            let last = u32::from_le_bytes(p.data[CAPLEN - 4..].try_into().unwrap());
            assert_eq!((first, last, p.data.len()), (seen, seen, CAPLEN));
            assert_eq!(p.meta.frame, u64::from(seen) + 1);
            assert_eq!(p.meta.ts_ns, Some(i64::from(seen) * 1_000_000_000));
            seen += 1;
        }
        assert_eq!(seen, RECORDS, "helper {helper}");
    }

    // Dropped after one record: its thread is told to stop and joined.
    let mut reader = mmpcap::open(path.clone()).unwrap();
    assert!(reader.produce().unwrap().is_some());
    drop(reader);
    std::fs::remove_file(path).unwrap();
}

//! Format tests on hand-built files. The byte layouts follow the pcap file
//! format and the pcapng specification (draft-ietf-opsawg-pcapng): header
//! fields are written at the offsets those documents give.

use super::*;

pub(crate) fn pcap_header(big: bool, nanos: bool, link: u32) -> Vec<u8> {
    let magic: u32 = if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
    let fields: [u32; 6] = [magic, 0, 0, 0, 65535, link]; // magic, version, thiszone, sigfigs, snaplen, link
    let mut v = Vec::new();
    for (i, f) in fields.iter().enumerate() {
        let bytes = if big {
            f.to_be_bytes()
        } else {
            f.to_le_bytes()
        };
        if i == 1 {
            // version 2.4 as two u16
            let (major, minor) = (2u16, 4u16);
            if big {
                v.extend_from_slice(&major.to_be_bytes());
                v.extend_from_slice(&minor.to_be_bytes());
            } else {
                v.extend_from_slice(&major.to_le_bytes());
                v.extend_from_slice(&minor.to_le_bytes());
            }
        } else {
            v.extend_from_slice(&bytes);
        }
    }
    v
}

pub(crate) fn pcap_record(big: bool, secs: u32, frac: u32, data: &[u8], len: u32) -> Vec<u8> {
    let mut v = Vec::new();
    for f in [secs, frac, data.len() as u32, len] {
        v.extend_from_slice(&if big {
            f.to_be_bytes()
        } else {
            f.to_le_bytes()
        });
    }
    v.extend_from_slice(data);
    v
}

/// A packet as the tests compare it: timestamp, original length, link, bytes.
type Walked = (Option<i64>, u32, LinkType, Vec<u8>);

/// Walks a whole buffer: the packets and how it ended. At every position
/// the fast path ([`CaptureFormat::record`]) gives nothing or the record the
/// general reading gives.
fn walk(buf: &[u8]) -> (Vec<Walked>, Result<usize, String>) {
    walk_counting_fast(buf).0
}

/// [`walk`], and how many packets the fast path read.
fn walk_counting_fast(buf: &[u8]) -> ((Vec<Walked>, Result<usize, String>), usize) {
    let mut fast = 0;
    let walked = walk_checking(buf, &mut fast);
    (walked, fast)
}

fn walk_checking(buf: &[u8], fast: &mut usize) -> (Vec<Walked>, Result<usize, String>) {
    let (mut format, mut pos) = match CaptureFormat::detect(buf) {
        Ok(found) => found,
        Err(e) => return (Vec::new(), Err(format!("{e:?}"))),
    };
    let mut packets = Vec::new();
    loop {
        let quick = format.record(&buf[pos..]);
        let step = format.next(&buf[pos..]);
        if let Some(record) = quick {
            assert_eq!(step, Ok(Step::Packet(record)), "at {pos}");
            *fast += 1;
        }
        match step {
            Ok(Step::Packet(r)) => {
                let start = pos + r.data_at;
                packets.push((
                    r.ts_ns,
                    r.len,
                    r.link,
                    buf[start..start + r.caplen].to_vec(),
                ));
                pos += r.consumed;
            }
            Ok(Step::Skip { consumed }) => pos += consumed,
            Ok(Step::NeedMore { .. }) => return (packets, Ok(buf.len() - pos)),
            Err(e) => return (packets, Err(e)),
        }
    }
}

#[test]
fn classic_pcap_all_byte_orders_and_resolutions() {
    for big in [false, true] {
        for nanos in [false, true] {
            let mut file = pcap_header(big, nanos, 1);
            file.extend(pcap_record(big, 1_704_067_200, 123_456, b"abcd", 60));
            file.extend(pcap_record(big, 1_704_067_201, 999_999, b"xyz", 3));
            let (packets, end) = walk(&file);
            assert_eq!(end, Ok(0));
            let scale = if nanos { 1 } else { 1000 };
            assert_eq!(
                packets,
                vec![
                    (
                        Some(1_704_067_200_000_000_000 + 123_456 * scale),
                        60,
                        LinkType::EN10MB,
                        b"abcd".to_vec()
                    ),
                    (
                        Some(1_704_067_201_000_000_000 + 999_999 * scale),
                        3,
                        LinkType::EN10MB,
                        b"xyz".to_vec()
                    ),
                ]
            );
        }
    }
}

#[test]
fn pcap_link_type_ignores_fcs_bits() {
    let file = pcap_header(false, false, 0x1000_0000 | 113);
    let (CaptureFormat::Pcap(p), 24) = CaptureFormat::detect(&file).unwrap() else {
        panic!("not pcap")
    };
    assert_eq!(
        p.record(&pcap_record(false, 0, 0, b"x", 1)).unwrap().link,
        LinkType::LINUX_SLL
    );
}

#[test]
fn pcap_cut_off_inside_header_and_data() {
    let mut file = pcap_header(false, false, 1);
    file.extend(pcap_record(false, 1, 0, b"complete", 8));
    let whole = file.len();
    file.extend(pcap_record(false, 2, 0, b"cut in the data", 15));
    let (packets, end) = walk(&file[..file.len() - 5]);
    assert_eq!((packets.len(), end), (1, Ok(file.len() - 5 - whole)));
    let (packets, end) = walk(&file[..whole + 10]);
    assert_eq!((packets.len(), end), (1, Ok(10)));
}

#[test]
fn pcap_absurd_caplen_is_an_error() {
    let mut file = pcap_header(false, false, 1);
    let mut record = pcap_record(false, 1, 0, b"", 0);
    record[8..12].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
    file.extend(record);
    let (_, end) = walk(&file);
    assert!(end.unwrap_err().contains("corrupt"));
}

#[test]
fn not_a_capture_and_short_headers() {
    assert!(
        matches!(CaptureFormat::detect(b"GET / HTTP/1.1\r\n\r\n........"), Err(FormatError::Invalid(m)) if m.contains("not a pcap"))
    );
    assert_eq!(
        CaptureFormat::detect(b"\xd4\xc3").unwrap_err(),
        FormatError::NeedMore(4)
    );
    assert_eq!(
        CaptureFormat::detect(&pcap_header(false, false, 1)[..10]).unwrap_err(),
        FormatError::NeedMore(24)
    );
}

// ---- pcapng ----
// Block builders, for the inputs' tests too.

fn put32(v: &mut Vec<u8>, big: bool, x: u32) {
    v.extend_from_slice(&if big {
        x.to_be_bytes()
    } else {
        x.to_le_bytes()
    });
}

fn put16(v: &mut Vec<u8>, big: bool, x: u16) {
    v.extend_from_slice(&if big {
        x.to_be_bytes()
    } else {
        x.to_le_bytes()
    });
}

pub(crate) fn block(big: bool, kind: u32, body: &[u8]) -> Vec<u8> {
    let mut padded = body.to_vec();
    padded.resize(body.len().div_ceil(4) * 4, 0);
    let total = 12 + padded.len() as u32;
    let mut v = Vec::new();
    put32(&mut v, big, kind);
    put32(&mut v, big, total);
    v.extend_from_slice(&padded);
    put32(&mut v, big, total);
    v
}

pub(crate) fn shb(big: bool) -> Vec<u8> {
    let mut body = Vec::new();
    put32(&mut body, big, 0x1a2b_3c4d);
    put16(&mut body, big, 1);
    put16(&mut body, big, 0);
    body.extend_from_slice(&[0xff; 8]); // section length: unknown
    block(big, 0x0a0d_0d0a, &body)
}

pub(crate) fn option(big: bool, code: u16, value: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    put16(&mut v, big, code);
    put16(&mut v, big, value.len() as u16);
    v.extend_from_slice(value);
    v.resize(4 + value.len().div_ceil(4) * 4, 0);
    v
}

pub(crate) fn idb(big: bool, link: u16, snaplen: u32, options: &[Vec<u8>]) -> Vec<u8> {
    let mut body = Vec::new();
    put16(&mut body, big, link);
    put16(&mut body, big, 0);
    put32(&mut body, big, snaplen);
    for o in options {
        body.extend_from_slice(o);
    }
    if !options.is_empty() {
        body.extend_from_slice(&[0; 4]); // opt_endofopt
    }
    block(big, 1, &body)
}

pub(crate) fn epb(big: bool, interface: u32, units: u64, data: &[u8], len: u32) -> Vec<u8> {
    let mut body = Vec::new();
    put32(&mut body, big, interface);
    put32(&mut body, big, (units >> 32) as u32);
    put32(&mut body, big, units as u32);
    put32(&mut body, big, data.len() as u32);
    put32(&mut body, big, len);
    body.extend_from_slice(data);
    body.resize(20 + data.len().div_ceil(4) * 4, 0);
    body.extend(option(big, 1, b"a comment"));
    body.extend_from_slice(&[0; 4]);
    block(big, 6, &body)
}

pub(crate) fn spb(big: bool, data: &[u8], len: u32) -> Vec<u8> {
    let mut body = Vec::new();
    put32(&mut body, big, len);
    body.extend_from_slice(data);
    block(big, 3, &body)
}

fn opb(big: bool, interface: u16, units: u64, data: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    put16(&mut body, big, interface);
    put16(&mut body, big, 0);
    put32(&mut body, big, (units >> 32) as u32);
    put32(&mut body, big, units as u32);
    put32(&mut body, big, data.len() as u32);
    put32(&mut body, big, data.len() as u32);
    body.extend_from_slice(data);
    block(big, 2, &body)
}

/// A little-endian section with four interfaces: Ethernet in microseconds
/// (the default), Linux SLL in nanoseconds, raw IP in 2^-20 s, and link
/// type 276 in milliseconds, 100 s later (`if_tsoffset`).
fn four_interfaces() -> Vec<u8> {
    let big = false;
    let mut file = shb(big);
    file.extend(idb(big, 1, 0, &[]));
    file.extend(idb(big, 113, 0, &[option(big, 9, &[9])]));
    file.extend(idb(big, 101, 0, &[option(big, 9, &[0x80 | 20])]));
    file.extend(idb(
        big,
        276,
        0,
        &[option(big, 9, &[3]), option(big, 14, &100i64.to_le_bytes())],
    ));
    file
}

#[test]
fn pcapng_interfaces_resolutions_and_block_kinds() {
    let big = false;
    let mut file = four_interfaces();
    file.extend(block(big, 4, &[0; 8])); // name resolution block: skipped
    file.extend(epb(big, 0, 1_704_067_200_123_456, b"us", 2));
    file.extend(epb(big, 1, 1_704_067_200_124_457_790, b"ns", 2));
    file.extend(epb(big, 2, 1_786_843_968_438_753, b"2^-20", 5));
    file.extend(epb(big, 3, 1_704_067_200_126, b"ms+offset", 9));
    file.extend(block(big, 0x0000_0bad, &[1, 2, 3, 4])); // custom block: skipped
    file.extend(spb(big, b"simple", 6));
    file.extend(opb(big, 1, 5, b"old"));
    let (packets, end) = walk(&file);
    assert_eq!(end, Ok(0));
    let got: Vec<_> = packets
        .iter()
        .map(|(ts, len, link, data)| (*ts, *len, link.0, data.as_slice()))
        .collect();
    assert_eq!(
        got,
        vec![
            (Some(1_704_067_200_123_456_000), 2, 1, &b"us"[..]),
            (Some(1_704_067_200_124_457_790), 2, 113, &b"ns"[..]),
            // 1786843968438753 / 2^20 s = 1704067200.125458717... s (truncated to ns)
            (Some(1_704_067_200_125_458_717), 5, 101, &b"2^-20"[..]),
            (Some(1_704_067_300_126_000_000), 9, 276, &b"ms+offset"[..]),
            (None, 6, 1, &b"simple"[..]),
            (Some(5), 3, 113, &b"old"[..]),
        ]
    );
}

#[test]
fn pcapng_fast_path_reads_enhanced_packets_in_whole_nanoseconds() {
    // Microseconds, nanoseconds, milliseconds with an offset: the fast
    // path; 2^-20 s and the simple and obsolete blocks: the general path
    // (both checked equal by `walk`).
    let big = false;
    let mut file = four_interfaces();
    file.extend(epb(big, 0, 1_704_067_200_123_456, b"us", 2));
    file.extend(epb(big, 1, 1_704_067_200_124_457_790, b"ns", 2));
    file.extend(epb(big, 2, 1_786_843_968_438_753, b"2^-20", 5));
    file.extend(epb(big, 3, 1_704_067_200_126, b"ms+offset", 9));
    file.extend(epb(big, 1, u64::MAX, b"too late", 8));
    file.extend(spb(big, b"simple", 6));
    file.extend(opb(big, 1, 5, b"old"));
    let ((packets, end), fast) = walk_counting_fast(&file);
    assert_eq!((packets.len(), end, fast), (7, Ok(0), 4));
    // A time past what 64 bits of nanoseconds hold has none, either way.
    assert_eq!(packets[4].0, None);
    // Big-endian, and blocks the fast path must refuse: a trailing length
    // that differs, a packet longer than its block, an unknown interface.
    let mut other = shb(true);
    other.extend(idb(true, 1, 0, &[]));
    other.extend(epb(true, 0, 7, b"be", 2));
    let ((packets, _), fast) = walk_counting_fast(&other);
    assert_eq!((packets.len(), fast), (1, 1));
    for (at, value) in [(-4isize, 999u32), (20, 1000), (8, 1)] {
        let mut broken = shb(false);
        broken.extend(idb(false, 1, 0, &[]));
        let mut block = epb(false, 0, 1, b"data", 4);
        let at = at.rem_euclid(block.len() as isize) as usize;
        block[at..at + 4].copy_from_slice(&value.to_le_bytes());
        broken.extend(block);
        let ((packets, end), fast) = walk_counting_fast(&broken);
        assert_eq!((packets.len(), fast), (0, 0), "{at}");
        assert!(end.is_err(), "{at}: {end:?}");
    }
}

#[test]
fn pcapng_sections_of_both_byte_orders_reset_interfaces() {
    let mut file = shb(false);
    file.extend(idb(false, 1, 0, &[]));
    file.extend(epb(false, 0, 1, b"le", 2));
    file.extend(shb(true));
    file.extend(idb(true, 101, 0, &[option(true, 9, &[9])]));
    file.extend(epb(true, 0, 7, b"be", 2));
    let (packets, end) = walk(&file);
    assert_eq!(end, Ok(0));
    assert_eq!(
        packets,
        vec![
            (Some(1000), 2, LinkType::EN10MB, b"le".to_vec()),
            (Some(7), 2, LinkType::RAW, b"be".to_vec())
        ]
    );
    // In the new section, interface 1 of the old one no longer exists.
    let mut bad = shb(false);
    bad.extend(idb(false, 1, 0, &[]));
    bad.extend(idb(false, 1, 0, &[]));
    bad.extend(shb(true));
    bad.extend(idb(true, 1, 0, &[]));
    bad.extend(epb(true, 1, 0, b"x", 1));
    assert!(walk(&bad).1.unwrap_err().contains("interface 1"));
}

#[test]
fn pcapng_snaplen_bounds_simple_packets() {
    let mut file = shb(false);
    file.extend(idb(false, 1, 4, &[]));
    file.extend(spb(false, b"abcdefgh", 100));
    let (packets, _) = walk(&file);
    assert_eq!(
        packets,
        vec![(None, 100, LinkType::EN10MB, b"abcd".to_vec())]
    );
}

#[test]
fn pcapng_corrupt_blocks_are_errors() {
    let mut file = shb(false);
    file.extend(idb(false, 1, 0, &[]));
    let mut b = epb(false, 0, 1, b"data", 4);
    let n = b.len();
    b[n - 4..].copy_from_slice(&999u32.to_le_bytes());
    file.extend(b);
    assert!(walk(&file).1.unwrap_err().contains("trailing length"));

    let mut short = shb(false);
    short.extend_from_slice(&6u32.to_le_bytes());
    short.extend_from_slice(&8u32.to_le_bytes());
    short.extend_from_slice(&8u32.to_le_bytes());
    assert!(walk(&short).1.unwrap_err().contains("invalid length"));

    let mut bad_magic = shb(false);
    bad_magic[8..12].copy_from_slice(&[1, 2, 3, 4]);
    assert!(walk(&bad_magic).1.unwrap_err().contains("byte-order magic"));

    let mut overlong = shb(false);
    overlong.extend(idb(false, 1, 0, &[]));
    let mut claim = epb(false, 0, 1, b"data", 4);
    claim[20..24].copy_from_slice(&1000u32.to_le_bytes()); // caplen beyond the block
    overlong.extend(claim);
    assert!(walk(&overlong).1.unwrap_err().contains("holds"));
}

#[test]
fn pcapng_cut_off_block_needs_more() {
    let mut file = shb(false);
    file.extend(idb(false, 1, 0, &[]));
    let whole = file.len();
    file.extend(epb(false, 0, 1, b"data", 4));
    let (packets, end) = walk(&file[..file.len() - 3]);
    assert_eq!((packets.len(), end), (0, Ok(file.len() - 3 - whole)));
}

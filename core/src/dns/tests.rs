//! DNS tests on hand-built messages (RFC 1035 §4 layouts, RFC 6891 OPT).

use super::*;

/// Encodes a presentation-free name (labels given as byte strings).
fn wire_name(labels: &[&[u8]]) -> Vec<u8> {
    let mut v = Vec::new();
    for l in labels {
        v.push(l.len() as u8);
        v.extend_from_slice(l);
    }
    v.push(0);
    v
}

fn header(id: u16, flags: u16, counts: [u16; 4]) -> Vec<u8> {
    let mut v = Vec::new();
    for w in [id, flags, counts[0], counts[1], counts[2], counts[3]] {
        v.extend_from_slice(&w.to_be_bytes());
    }
    v
}

fn query(name: &[&[u8]], qtype: u16) -> Vec<u8> {
    let mut m = header(0x1234, 0x0100, [1, 0, 0, 0]);
    m.extend(wire_name(name));
    m.extend_from_slice(&qtype.to_be_bytes());
    m.extend_from_slice(&1u16.to_be_bytes());
    m
}

/// Appends a record: owner (raw wire bytes), type, class, ttl, rdata.
fn rr(m: &mut Vec<u8>, owner: &[u8], rtype: u16, class: u16, ttl: u32, rdata: &[u8]) {
    m.extend_from_slice(owner);
    m.extend_from_slice(&rtype.to_be_bytes());
    m.extend_from_slice(&class.to_be_bytes());
    m.extend_from_slice(&ttl.to_be_bytes());
    m.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
    m.extend_from_slice(rdata);
}

const PTR_QNAME: [u8; 2] = [0xc0, 12];

/// The RDATA of every record of `m` in presentation form.
fn rdata_strings(m: &[u8]) -> Vec<String> {
    records(m)
        .map(|r| {
            let mut o = Vec::new();
            rdata::write(m, &r, &mut o);
            String::from_utf8(o).unwrap()
        })
        .collect()
}

#[test]
fn header_and_question() {
    let m = query(&[b"www", b"example", b"com"], 28);
    let info = scan(&m, false);
    let h = info.header.unwrap();
    assert_eq!(
        (h.id, h.qr(), h.opcode(), h.rd(), h.qdcount),
        (0x1234, false, 0, true, 1)
    );
    let q = info.question.unwrap();
    assert_eq!((q.name, q.qtype, q.qclass), (12, 28, 1));
    assert_eq!(name::to_string(&m, 12).unwrap(), "www.example.com.");
    assert_eq!(info.error, None);
}

#[test]
fn flags_decode() {
    // QR, opcode 5 (UPDATE), AA, TC, RD, RA, AD, CD, rcode 3
    let h = Header::parse(&header(
        1,
        0x8000 | (5 << 11) | 0x0400 | 0x0200 | 0x0100 | 0x0080 | 0x0020 | 0x0010 | 3,
        [0; 4],
    ))
    .unwrap();
    assert!(h.qr() && h.aa() && h.tc() && h.rd() && h.ra() && h.ad() && h.cd());
    assert_eq!((h.opcode(), h.rcode()), (5, 3));
}

#[test]
fn presentation_escapes_and_root() {
    let m = query(&[b"a.b", b"sp ace", b"bin\0\xff", b"x\\y"], 1);
    assert_eq!(
        name::to_string(&m, 12).unwrap(),
        "a\\.b.sp\\032ace.bin\\000\\255.x\\\\y."
    );
    let root = query(&[], 2);
    assert_eq!(name::to_string(&root, 12).unwrap(), ".");
}

/// A name's presentation form as RFC 4343 §2.1 and zone files write it,
/// byte by byte: `.` and `\` after a backslash, bytes outside `!`..`~` as
/// `\DDD`, a dot after every label, `.` for the root.
fn presentation(labels: &[&[u8]]) -> String {
    let mut out = String::new();
    for label in labels {
        for &b in *label {
            match b {
                b'.' | b'\\' => out.extend(['\\', char::from(b)]),
                0x21..=0x7e => out.push(char::from(b)),
                _ => out.push_str(&format!("\\{b:03}")),
            }
        }
        out.push('.');
    }
    if out.is_empty() {
        out.push('.');
    }
    out
}

#[test]
fn every_byte_at_every_place_of_a_name_prints_as_rfc_4343_says() {
    // Labels of 1 to 19 bytes after a first label of 1 to 8 bytes, every
    // byte value at every position: the fast path (plain labels, copied
    // whole) and the walk (anything to escape) against the RFC's rule.
    let mut checked = 0;
    for shift in 1..=8usize {
        let lead = vec![b'x'; shift];
        for len in 1..=19usize {
            for at in 0..len {
                for b in 0..=255u8 {
                    let mut label = vec![b'k'; len];
                    label[at] = b;
                    let labels: [&[u8]; 3] = [&lead, &label, b"example"];
                    let m = query(&labels, 1);
                    let mut text = b"before ".to_vec();
                    let end = name::write(&m, 12, &mut text).unwrap();
                    assert_eq!(end, m.len() - 4, "{labels:?}");
                    let want = format!("before {}", presentation(&labels));
                    assert_eq!(String::from_utf8_lossy(&text), want, "{labels:?}");
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 8 * (19 * 20 / 2) * 256);
}

#[test]
fn long_plain_names_and_names_of_many_labels_print_whole() {
    let long = [b'a'; 63];
    let labels: [&[u8]; 4] = [&long, &long, &long, &[b'z'; 61]];
    let m = query(&labels, 1);
    assert_eq!(m.len() - 12 - 4, 255);
    assert_eq!(name::to_string(&m, 12).unwrap(), presentation(&labels));
    let many: Vec<&[u8]> = (0..127).map(|_| &b"q"[..]).collect();
    let m = query(&many, 1);
    assert_eq!(name::to_string(&m, 12).unwrap(), presentation(&many));
    // One byte over 255: an error, from the fast path as from the walk.
    let labels: [&[u8]; 4] = [&long, &long, &long, &[b'z'; 62]];
    let m = query(&labels, 1);
    assert_eq!(
        name::to_string(&m, 12).unwrap_err().0,
        DnsError::NameTooLong
    );
}

#[test]
fn names_of_0_to_12_labels_whole_cut_or_broken_agree_with_the_full_walk() {
    // The fast walk (`name::plain_root`) is unrolled for the first 8 labels
    // and loops after: names on both sides of that, whole, cut at every
    // byte, and with each length byte turned into a reserved label type
    // (0x40) or a pointer (0xc0).
    for count in 0..=12usize {
        let labels: Vec<Vec<u8>> = (0..count)
            .map(|i| vec![b'a' + i as u8; 1 + i % 5])
            .collect();
        let refs: Vec<&[u8]> = labels.iter().map(|l| &l[..]).collect();
        let m = query(&refs, 28);
        assert_eq!(name::to_string(&m, 12).unwrap(), presentation(&refs));
        let fast = scan::scan_query(&m).expect("a plain query takes the fast path");
        let question = fast.question.unwrap();
        assert_eq!(question.qtype_at as usize, m.len() - 4, "{count} labels");
        assert_eq!(question.qtype, 28);
        assert_eq!(fast, scan::scan_without_fast_path(&m, false));
        for cut in 12..m.len() {
            let c = &m[..cut];
            assert_eq!(scan(c, true), scan::scan_without_fast_path(c, true));
            if cut < m.len() - 4 {
                assert!(
                    scan::scan_query(c).is_none(),
                    "{count} labels, cut at {cut}"
                );
                assert!(
                    name::to_string(c, 12).is_err(),
                    "{count} labels, cut at {cut}"
                );
            }
        }
        let mut length_byte = 12;
        for label in &labels {
            for kind in [0x40u8, 0xc0] {
                let mut changed = m.clone();
                changed[length_byte] = kind;
                assert!(
                    scan::scan_query(&changed).is_none(),
                    "{count}: {kind:#x} at {length_byte}"
                );
                assert_eq!(
                    scan(&changed, false),
                    scan::scan_without_fast_path(&changed, false)
                );
            }
            let mut reserved = m.clone();
            reserved[length_byte] = 0x40;
            assert_eq!(
                name::to_string(&reserved, 12).unwrap_err(),
                (DnsError::ReservedLabelType, length_byte)
            );
            length_byte += 1 + label.len();
        }
        assert_eq!(length_byte, m.len() - 5, "the root label's place");
        assert_eq!(name::plain_root(&m, 12), Some((length_byte, count)));
    }
    // A length of 64 or more after 0 to 11 plain labels, with 64 bytes and a
    // root label after it: were its length taken, the name would end there.
    for before in 0..12 {
        let mut wire = Vec::new();
        for _ in 0..before {
            wire.extend_from_slice(&[1, b'q']);
        }
        let plain = name::plain_root(&[&wire[..], &[0]].concat(), 0);
        assert_eq!(plain, Some((wire.len(), before)), "{before} plain labels");
        for kind in [64u8, 0x80, 0xc0] {
            let mut bad = wire.clone();
            bad.push(kind);
            bad.extend_from_slice(&[b'x'; 64]);
            bad.push(0);
            assert_eq!(
                name::plain_root(&bad, 0),
                None,
                "{kind:#x} after {before} labels"
            );
        }
    }
}

#[test]
fn answers_with_compression_and_rdata() {
    let mut m = header(7, 0x8180, [1, 7, 0, 0]);
    m.extend(wire_name(&[b"www", b"example", b"com"]));
    m.extend_from_slice(&[0, 1, 0, 1]);
    rr(&mut m, &PTR_QNAME, 1, 1, 300, &[192, 0, 2, 1]);
    rr(
        &mut m,
        &PTR_QNAME,
        28,
        1,
        300,
        &[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    );
    // MX 10 mail.<example.com> via a pointer to offset 16 ("example")
    rr(
        &mut m,
        &PTR_QNAME,
        15,
        1,
        60,
        &[0, 10, 4, b'm', b'a', b'i', b'l', 0xc0, 16],
    );
    rr(
        &mut m,
        &PTR_QNAME,
        16,
        1,
        60,
        b"\x05hello\x0asay \"hi\"\\\x01",
    );
    rr(
        &mut m,
        &PTR_QNAME,
        33,
        1,
        60,
        &[0, 1, 0, 2, 0x01, 0xbb, 0xc0, 12],
    );
    rr(&mut m, &PTR_QNAME, 257, 1, 60, b"\x00\x05issueca.example");
    rr(&mut m, &PTR_QNAME, 65534, 1, 60, &[0xde, 0xad]);
    let info = scan(&m, false);
    assert_eq!((info.error, info.records), (None, [7, 0, 0]));
    let mut printed = Vec::new();
    for r in records(&m) {
        let mut out = Vec::new();
        rdata::write(&m, &r, &mut out);
        printed.push((
            mnemonic::rtype(r.rtype).to_string(),
            String::from_utf8(out).unwrap(),
        ));
    }
    let expect = [
        ("A", "192.0.2.1"),
        ("AAAA", "2001:db8::1"),
        ("MX", "10 mail.example.com."),
        ("TXT", "\"hello\" \"say \\\"hi\\\"\\\\\\001\""),
        ("SRV", "1 2 443 www.example.com."),
        ("CAA", "0 issue \"ca.example\""),
        ("TYPE65534", "\\# 2 dead"),
    ];
    let got: Vec<(&str, &str)> = printed
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    assert_eq!(got, expect);
}

#[test]
fn soa_and_malformed_rdata_fall_back_to_generic() {
    let mut m = header(7, 0x8180, [1, 0, 2, 0]);
    m.extend(wire_name(&[b"example"]));
    m.extend_from_slice(&[0, 6, 0, 1]);
    let mut soa = wire_name(&[b"ns"]);
    soa.extend(wire_name(&[b"host"]));
    for n in [2024010101u32, 7200, 3600, 1209600, 300] {
        soa.extend_from_slice(&n.to_be_bytes());
    }
    rr(&mut m, &PTR_QNAME, 6, 1, 3600, &soa);
    rr(&mut m, &PTR_QNAME, 1, 1, 3600, &[1, 2, 3]); // an A record of 3 bytes
    let out = rdata_strings(&m);
    assert_eq!(
        out,
        ["ns. host. 2024010101 7200 3600 1209600 300", "\\# 3 010203"]
    );
}

#[test]
fn svcb_and_https_parameters() {
    // RFC 9460 Appendix D.2's ServiceMode example, built from §2.2's wire
    // format: priority 16, target foo.example.org., mandatory=alpn,ipv4hint,
    // alpn=h2,h3-19, ipv4hint=192.0.2.1; then AliasMode (priority 0), the
    // other keys, an unknown key, and a malformed port that falls back.
    let mut service = vec![0, 16];
    service.extend(wire_name(&[b"foo", b"example", b"org"]));
    service.extend_from_slice(&[0, 0, 0, 4, 0, 1, 0, 4]);
    service.extend_from_slice(&[0, 1, 0, 9, 2, b'h', b'2', 5, b'h', b'3', b'-', b'1', b'9']);
    service.extend_from_slice(&[0, 4, 0, 4, 192, 0, 2, 1]);
    let mut alias = vec![0, 0];
    alias.extend(wire_name(&[b"svc", b"example"]));
    let mut others = vec![0, 1, 0];
    others.extend_from_slice(&[0, 2, 0, 0]);
    others.extend_from_slice(&[0, 3, 0, 2, 0x20, 0xfb]);
    others.extend_from_slice(&[0, 5, 0, 4, b'a', b'b', b'c', b'd']);
    others.extend_from_slice(&[
        0, 6, 0, 16, 0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
    ]);
    others.extend_from_slice(&[0xff, 0xa4, 0, 2, b'h', b'i']);
    others.extend_from_slice(&[0, 1, 0, 3, 2, b'a', b',']);
    let bad_port = [0, 1, 0, 0, 3, 0, 1, 7];
    let owner = wire_name(&[b"x"]);
    let mut m = header(7, 0x8180, [0, 4, 0, 0]);
    rr(&mut m, &owner, 65, 1, 300, &service);
    rr(&mut m, &owner, 64, 1, 300, &alias);
    rr(&mut m, &owner, 65, 1, 300, &others);
    rr(&mut m, &owner, 65, 1, 300, &bad_port);
    let out = rdata_strings(&m);
    assert_eq!(
        out,
        [
            "16 foo.example.org. mandatory=alpn,ipv4hint alpn=h2,h3-19 ipv4hint=192.0.2.1",
            "0 svc.example.",
            "1 . no-default-alpn port=8443 ech=YWJjZA== ipv6hint=2001:db8::1 key65444=\"hi\" alpn=a\\,",
            "\\# 8 0001000003000107",
        ]
    );
}

#[test]
fn edns_summary_and_extended_rcode() {
    let mut m = header(9, 0x8000 | 0x0001, [0, 0, 0, 1]);
    // OPT: root owner, class = udp size 1232, ttl = ext rcode 1, version 0, DO
    rr(
        &mut m,
        &[0],
        41,
        1232,
        (1 << 24) | 0x8000,
        &[0, 10, 0, 2, 0xab, 0xcd],
    );
    let info = scan(&m, false);
    let edns = info.edns.unwrap();
    assert_eq!(
        (
            edns.udp_size,
            edns.ext_rcode,
            edns.version,
            edns.dnssec_ok()
        ),
        (1232, 1, 0, true)
    );
    assert_eq!(info.rcode(), 17); // BADVERS/BADSIG range: (1 << 4) | 1
    assert_eq!(mnemonic::rcode(info.rcode()), "BADKEY");
    assert_eq!((edns.options_at, edns.options_len), (23, 6));
}

#[test]
fn compression_errors() {
    // Self loop: the QNAME is a pointer to itself.
    let mut m = header(1, 0, [1, 0, 0, 0]);
    m.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1]);
    assert_eq!(
        (scan(&m, false).error, scan(&m, false).error_offset),
        (Some(DnsError::PointerLoop), 12)
    );

    // A → B → A between two owner names.
    let mut m = query(&[b"q"], 1);
    m[7] = 1; // ancount 1
    let at = m.len();
    m.extend_from_slice(&[0xc0, (at + 2) as u8, 0xc0, at as u8]);
    m.extend_from_slice(&[0, 1, 0, 1, 0, 0, 0, 0, 0, 0]);
    assert_eq!(scan(&m, false).error, Some(DnsError::PointerLoop));

    // Labels then a pointer back to their own start.
    let mut m = query(&[b"q"], 1);
    m[7] = 1;
    let at = m.len() as u8;
    m.extend_from_slice(&[3, b'a', b'b', b'c', 3, b'd', b'e', b'f', 0xc0, at]);
    m.extend_from_slice(&[0, 1, 0, 1, 0, 0, 0, 0, 0, 0]);
    assert_eq!(scan(&m, false).error, Some(DnsError::PointerLoop));

    // Pointer past the end.
    let mut m = query(&[b"q"], 1);
    m[7] = 1;
    m.extend_from_slice(&[0xc1, 0xf4, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0]);
    assert_eq!(scan(&m, false).error, Some(DnsError::PointerOutOfBounds));

    // Reserved label types 0x40 and 0x80.
    for first in [0x41u8, 0x81] {
        let mut m = header(1, 0, [1, 0, 0, 0]);
        m.extend_from_slice(&[first, b'x', 0, 0, 1, 0, 1]);
        assert_eq!(scan(&m, false).error, Some(DnsError::ReservedLabelType));
    }
}

#[test]
fn forward_pointer_is_followed_and_long_chains_are_cut() {
    let mut m = header(1, 0, [1, 0, 0, 0]);
    m.extend_from_slice(&[0xc0, 18, 0, 1, 0, 1]); // QNAME → offset 18, after the question
    m.extend(wire_name(&[b"fwd", b"test"]));
    let info = scan(&m, false);
    assert_eq!(info.error, None);
    assert_eq!(name::to_string(&m, 12).unwrap(), "fwd.test.");

    // 151 pointers, each to the one before it, ending at the QNAME.
    let mut m = query(&[b"www"], 1);
    let mut previous = 12u16;
    let mut chain = Vec::new();
    for _ in 0..151 {
        let at = (m.len() + chain.len()) as u16;
        chain.extend_from_slice(&(0xc000 | previous).to_be_bytes());
        previous = at;
    }
    m.extend_from_slice(&chain);
    assert!(name::skip(&m, previous as usize).is_err_and(|(k, _)| k == DnsError::PointerLoop));
}

#[test]
fn length_errors() {
    let mut m = header(1, 0, [1, 0, 0, 0]);
    m.extend_from_slice(&[63, b'a', b'b']);
    assert_eq!(scan(&m, false).error, Some(DnsError::LabelPastEnd));
    assert_eq!(scan(&m, true).error, Some(DnsError::TruncatedCapture));

    let long: Vec<&[u8]> = vec![&[b'x'; 63]; 5];
    assert_eq!(
        scan(&query(&long, 1), false).error,
        Some(DnsError::NameTooLong)
    );
    let just_fits: Vec<&[u8]> = vec![&[b'x'; 63], &[b'x'; 63], &[b'x'; 63], &[b'x'; 61]];
    assert_eq!(
        scan(&query(&just_fits, 1), false).error,
        None,
        "255 octets is the limit"
    );

    let mut m = query(&[b"q"], 1);
    m[5] = 3; // qdcount 3, one present
    let info = scan(&m, false);
    assert_eq!(
        (info.error, info.questions),
        (Some(DnsError::CountExceedsMessage), 1)
    );

    let mut m = query(&[b"q"], 1);
    m[7] = 1;
    rr(&mut m, &PTR_QNAME, 1, 1, 0, &[1, 2, 3, 4]);
    let n = m.len();
    m[n - 6..n - 4].copy_from_slice(&200u16.to_be_bytes());
    assert_eq!(scan(&m, false).error, Some(DnsError::RdataPastEnd));

    assert_eq!(scan(&[0; 7], false).error, Some(DnsError::ShortHeader));
    assert_eq!(scan(&[], false).header, None);
}

#[test]
fn mnemonics_and_unknowns() {
    assert_eq!(mnemonic::rtype(65), "HTTPS");
    assert_eq!(mnemonic::rtype(65534), "TYPE65534");
    assert_eq!(mnemonic::class(1), "IN");
    assert_eq!(mnemonic::class(32), "CLASS32");
    assert_eq!(mnemonic::rcode(3), "NXDOMAIN");
    assert_eq!(mnemonic::rcode(99), "RCODE99");
    assert_eq!(mnemonic::opcode(5), "UPDATE");
    assert_eq!(mnemonic::rtype_from_str("aaaa"), Some(28));
    assert_eq!(mnemonic::rtype_from_str("TYPE999"), Some(999));
    assert_eq!(mnemonic::rcode_from_str("nxdomain"), Some(3));
    assert_eq!(mnemonic::opcode_from_str("notify"), Some(4));
}

#[test]
fn every_prefix_of_a_response_scans_without_panic() {
    let mut m = header(7, 0x8180, [1, 2, 0, 1]);
    m.extend(wire_name(&[b"www", b"example", b"com"]));
    m.extend_from_slice(&[0, 1, 0, 1]);
    rr(
        &mut m,
        &PTR_QNAME,
        5,
        1,
        300,
        &[3, b'w', b'e', b'b', 0xc0, 16],
    );
    rr(&mut m, &[0xc0, 12], 15, 1, 60, &[0, 10, 0xc0, 16]);
    rr(&mut m, &[0], 41, 1232, 0, &[0, 10, 0, 2, 1, 2]);
    for cut in 0..=m.len() {
        let info = scan(&m[..cut], true);
        assert_eq!(info.error.is_none(), cut == m.len(), "cut {cut}");
        for r in records(&m[..cut]) {
            rdata::write(&m[..cut], &r, &mut Vec::new());
        }
    }
}

/// The query fast path must agree with the general scan on every UDP DNS
/// payload of the corpus, and on prefixes and single-byte changes of some.
#[test]
fn fast_path_agrees_with_the_general_scan() {
    use crate::wire::{parse_layers, Transport};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/corpus");
    let mut messages: Vec<Vec<u8>> = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        if bytes.len() < 24 || bytes[..4] != [0xd4, 0xc3, 0xb2, 0xa1] {
            continue;
        }
        let link = crate::LinkType(u32::from_le_bytes(bytes[20..24].try_into().unwrap()));
        let mut pos = 24;
        while pos + 16 <= bytes.len() {
            let caplen = u32::from_le_bytes(bytes[pos + 8..pos + 12].try_into().unwrap()) as usize;
            let Some(data) = bytes.get(pos + 16..pos + 16 + caplen) else {
                break;
            };
            let l = parse_layers(link, data, caplen as u32);
            if l.transport == Transport::Udp && (l.sport == 53 || l.dport == 53) {
                let start = l.payload_offset as usize;
                messages.push(data[start..start + l.payload_len as usize].to_vec());
            }
            pos += 16 + caplen;
        }
    }
    assert!(messages.len() > 10_000);
    let mut fast = 0;
    let mut check = |m: &[u8]| {
        assert_eq!(
            scan(m, false),
            scan::scan_without_fast_path(m, false),
            "{m:02x?}"
        );
        // The compact form a message object keeps expands to the same summary.
        for cut in [false, true] {
            assert_eq!(scan::check(m, cut).expand(m), scan(m, cut), "{m:02x?}");
        }
        fast += usize::from(scan::scan_query(m).is_some());
    };
    for m in &messages {
        check(m);
    }
    for m in messages.iter().take(60) {
        for cut in 0..m.len() {
            check(&m[..cut]);
        }
        for at in 0..m.len() {
            for flip in [0x01u8, 0x40, 0x80, 0xff] {
                let mut changed = m.clone();
                changed[at] ^= flip;
                check(&changed);
            }
        }
    }
    assert!(fast > 10_000);
}

#[test]
fn error_kinds_index_their_place_in_all() {
    for (i, kind) in DnsError::ALL.iter().enumerate() {
        assert_eq!(kind.index(), i);
    }
    for (i, kind) in crate::wire::LayerError::ALL.iter().enumerate() {
        assert_eq!(kind.index(), i);
    }
}

#[test]
fn pointers_forward_then_back_above_the_first_target_are_fine() {
    // QNAME at 12 → 20 (forward); at 20 "a" then → 29 (forward); at 29 "b" then → 24
    // (back, yet above the first target): a.b.tld. — no loop, every pointer lands on a label.
    let mut m = header(1, 0, [1, 0, 0, 0]);
    m.extend_from_slice(&[0xc0, 20, 0, 1, 0, 1, 0, 0]); // 12: pointer, qtype, qclass, 2 spare bytes
    m.extend_from_slice(&[1, b'a', 0xc0, 29]); // 20: "a" → 29
    m.extend_from_slice(&[3, b't', b'l', b'd', 0]); // 24: "tld", root
    m.extend_from_slice(&[1, b'b', 0xc0, 24]); // 29: "b" → 24
    assert_eq!(name::to_string(&m, 12).unwrap(), "a.b.tld.");
    assert_eq!(scan(&m, false).error, None);
}

#[test]
fn an_opt_record_whose_options_do_not_parse_is_flagged() {
    // RFC 6891 §6.1.2: options are code, length, data; here the OPT RDATA is
    // 1 byte (no room for an option header), in a query (fast path shape) and
    // in a response; a second option whose length runs past the RDATA; and
    // a well-formed pair of options, which passes.
    let opt = |rdata: &[u8]| {
        let mut m = query(&[b"example"], 1);
        m[11] = 1; // ARCOUNT 1
        rr(&mut m, &[0], 41, 1232, 0, rdata);
        m
    };
    for rdata in [&[0u8][..], &[0, 10, 0, 2, 0xab, 0xcd, 0, 8, 0, 9, 1]] {
        let m = opt(rdata);
        let info = scan(&m, false);
        assert_eq!(info.error, Some(DnsError::EdnsMalformed), "{rdata:?}");
        assert_eq!(info.error_offset as usize, m.len() - rdata.len());
        assert!(
            info.edns.is_some(),
            "the OPT record itself is still reported"
        );
        let mut response = m.clone();
        response[2] |= 0x80;
        response[7] = 1; // ANCOUNT 1, the answer before the OPT record
        let opt_start = m.len() - rdata.len() - 11;
        let mut answer = Vec::new();
        rr(&mut answer, &[0xc0, 12], 1, 1, 60, &[192, 0, 2, 1]);
        response.splice(opt_start..opt_start, answer);
        assert_eq!(scan(&response, false).error, Some(DnsError::EdnsMalformed));
        assert_eq!(scan(&response, false).records, [1, 0, 1]);
    }
    let fine = opt(&[0, 10, 0, 2, 0xab, 0xcd, 0, 8, 0, 0]);
    assert_eq!(scan(&fine, false).error, None);
}

#[test]
fn ipv4_addresses_print_as_std_prints_them() {
    for octets in [
        [0, 0, 0, 0],
        [10, 0, 48, 57],
        [255, 255, 255, 255],
        [1, 20, 100, 199],
    ] {
        let mut m = header(1, 0x8180, [0, 1, 0, 0]);
        rr(&mut m, &[0], 1, 1, 60, &octets);
        assert_eq!(
            rdata_strings(&m),
            [std::net::Ipv4Addr::from(octets).to_string()]
        );
    }
}

//! Layer parser tests on hand-built packets. Each builder writes the header
//! fields RFC 791/8200/768/793 define at the offsets those RFCs give, so the
//! expected values are the ones written, not ones read back from the parser.

use super::*;

pub(super) const SRC4: [u8; 4] = [192, 0, 2, 1];
pub(super) const DST4: [u8; 4] = [198, 51, 100, 53];
pub(super) const SRC6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
pub(super) const DST6: [u8; 16] = [
    0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x53,
];

pub(super) fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&sport.to_be_bytes());
    v.extend_from_slice(&dport.to_be_bytes());
    v.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    v.extend_from_slice(&[0, 0]);
    v.extend_from_slice(payload);
    v
}

pub(super) fn tcp(sport: u16, dport: u16, options: &[u8], payload: &[u8]) -> Vec<u8> {
    assert_eq!(options.len() % 4, 0);
    let mut v = Vec::new();
    v.extend_from_slice(&sport.to_be_bytes());
    v.extend_from_slice(&dport.to_be_bytes());
    v.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0]); // seq, ack
    v.push((((20 + options.len()) / 4) << 4) as u8);
    v.extend_from_slice(&[0x18, 0xff, 0xff, 0, 0, 0, 0]); // flags, window, csum, urg
    v.extend_from_slice(options);
    v.extend_from_slice(payload);
    v
}

pub(super) fn ipv4_with(
    protocol: u8,
    options: &[u8],
    flags_offset: u16,
    payload: &[u8],
) -> Vec<u8> {
    let header = 20 + options.len();
    let mut v = vec![0x40 | (header / 4) as u8, 0];
    v.extend_from_slice(&((header + payload.len()) as u16).to_be_bytes());
    v.extend_from_slice(&0x1234u16.to_be_bytes());
    v.extend_from_slice(&flags_offset.to_be_bytes());
    v.extend_from_slice(&[64, protocol, 0, 0]);
    v.extend_from_slice(&SRC4);
    v.extend_from_slice(&DST4);
    v.extend_from_slice(options);
    v.extend_from_slice(payload);
    v
}

pub(super) fn ipv4(protocol: u8, payload: &[u8]) -> Vec<u8> {
    ipv4_with(protocol, &[], 0x4000, payload)
}

/// IPv6 with `next` as the first next-header value and `rest` (extension headers + upper layer).
pub(super) fn ipv6(next: u8, rest: &[u8]) -> Vec<u8> {
    let mut v = vec![0x60, 0, 0, 0];
    v.extend_from_slice(&(rest.len() as u16).to_be_bytes());
    v.extend_from_slice(&[next, 64]);
    v.extend_from_slice(&SRC6);
    v.extend_from_slice(&DST6);
    v.extend_from_slice(rest);
    v
}

/// An 8-octet-unit extension header (HBH, routing, destination options) of `units` extra units.
fn ext(next: u8, units: u8) -> Vec<u8> {
    let mut v = vec![next, units];
    v.resize(8 * (usize::from(units) + 1), 1);
    v
}

pub(super) fn ether(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    v.extend_from_slice(&ethertype.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

fn ether_tagged(tags: &[(u16, u16)], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    for (tpid, tci) in tags {
        v.extend_from_slice(&tpid.to_be_bytes());
        v.extend_from_slice(&tci.to_be_bytes());
    }
    v.extend_from_slice(&ethertype.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

pub(super) fn parse(link: LinkType, data: &[u8]) -> Layers {
    parse_layers(link, data, data.len() as u32)
}

fn v4_udp_frame() -> Vec<u8> {
    ether(0x0800, &ipv4(17, &udp(40000, 53, b"hello dns")))
}

pub(super) fn assert_udp_v4(l: &Layers, data: &[u8], payload_at: usize) {
    assert_eq!(l.error, None);
    assert_eq!(l.network, Network::Ipv4);
    assert_eq!(l.transport, Transport::Udp);
    assert_eq!((l.sport, l.dport), (40000, 53));
    assert_eq!(l.src_addr(data), Some(IpAddr::from(SRC4)));
    assert_eq!(l.dst_addr(data), Some(IpAddr::from(DST4)));
    assert_eq!(l.payload_offset as usize, payload_at);
    assert_eq!(
        &data[payload_at..payload_at + l.payload_len as usize],
        b"hello dns"
    );
}

#[test]
fn ethernet_ipv4_udp() {
    let f = v4_udp_frame();
    let l = parse(LinkType::EN10MB, &f);
    assert_udp_v4(&l, &f, 14 + 20 + 8);
    assert_eq!(l.vlan_count, 0);
    assert!(!l.truncated);
}

#[test]
fn ethernet_padding_is_trimmed_by_ipv4_total_length() {
    let mut f = v4_udp_frame();
    f.extend_from_slice(&[0; 12]); // padding / trailer after the datagram
    let l = parse(LinkType::EN10MB, &f);
    assert_udp_v4(&l, &f, 42);
    assert_eq!(l.ip_end as usize, f.len() - 12);
}

#[test]
fn vlan_tags_at_any_depth() {
    let inner = ipv4(17, &udp(40000, 53, b"hello dns"));
    type Tags<'a> = &'a [(u16, u16)];
    let cases: [(Tags, &[u16]); 4] = [
        (&[(0x8100, 0x2064)], &[100]),
        (&[(0x88a8, 0x00c8), (0x8100, 0x0064)], &[200, 100]),
        (
            &[(0x9100, 0x0005), (0x8100, 0x0006), (0x8100, 0x0007)],
            &[5, 6, 7],
        ),
        (&[(0x8100, 0xe000)], &[0]), // priority tag: VLAN 0 with PCP 7
    ];
    for (tags, ids) in cases {
        let f = ether_tagged(tags, 0x0800, &inner);
        let l = parse(LinkType::EN10MB, &f);
        assert_eq!(l.vlans(), ids);
        assert_udp_v4(&l, &f, 14 + 4 * tags.len() + 28);
    }
}

#[test]
fn more_vlan_tags_than_kept_are_walked() {
    let tags: Vec<(u16, u16)> = (1..=10).map(|i| (0x8100, i)).collect();
    let f = ether_tagged(&tags, 0x86dd, &ipv6(17, &udp(40000, 53, b"x")));
    let l = parse(LinkType::EN10MB, &f);
    assert_eq!(l.vlan_count, 10);
    assert_eq!(l.vlans(), &[1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(l.network, Network::Ipv6);
    assert_eq!(l.transport, Transport::Udp);
}

#[test]
fn truncated_vlan_tag() {
    let f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x81, 0x00, 0x00];
    assert_eq!(
        parse(LinkType::EN10MB, &f).error,
        Some(LayerError::TruncatedVlan)
    );
}

#[test]
fn non_ip_and_llc_frames_pass_marked() {
    let arp = ether(0x0806, &[0; 28]);
    let l = parse(LinkType::EN10MB, &arp);
    assert_eq!(
        (l.network, l.error, l.transport),
        (Network::NonIp(0x0806), None, Transport::None)
    );
    let llc = ether(46, &[0x42, 0x42, 0x03]);
    assert_eq!(parse(LinkType::EN10MB, &llc).network, Network::Llc);
}

#[test]
fn null_and_loop_families_in_both_byte_orders() {
    let v4 = ipv4(17, &udp(40000, 53, b"hello dns"));
    let v6 = ipv6(17, &udp(40000, 53, b"hello dns"));
    let with_family = |family: [u8; 4], ip: &[u8]| [family.as_slice(), ip].concat();
    for link in [LinkType::NULL, LinkType::LOOP] {
        for family in [2u32.to_le_bytes(), 2u32.to_be_bytes()] {
            let f = with_family(family, &v4);
            assert_udp_v4(&parse(link, &f), &f, 4 + 28);
        }
        for value in [24u32, 28, 30] {
            for family in [value.to_le_bytes(), value.to_be_bytes()] {
                let f = with_family(family, &v6);
                let l = parse(link, &f);
                assert_eq!(
                    (l.network, l.transport, l.dport),
                    (Network::Ipv6, Transport::Udp, 53),
                    "{link} {value}"
                );
                assert_eq!(l.src_addr(&f), Some(IpAddr::from(SRC6)));
            }
        }
        let f = with_family(7u32.to_le_bytes(), &v4);
        assert_eq!(parse(link, &f).network, Network::NonIp(7));
    }
}

#[test]
fn raw_ip_link_types() {
    let v4 = ipv4(17, &udp(40000, 53, b"hello dns"));
    let v6 = ipv6(17, &udp(40000, 53, b"hello dns"));
    for link in [LinkType::RAW, LinkType::RAW12, LinkType::RAW14] {
        assert_udp_v4(&parse(link, &v4), &v4, 28);
        assert_eq!(parse(link, &v6).network, Network::Ipv6);
        assert_eq!(
            parse(link, &[0x50, 0, 0]).error,
            Some(LayerError::BadIpVersion)
        );
    }
    assert_udp_v4(&parse(LinkType::IPV4, &v4), &v4, 28);
    assert_eq!(parse(LinkType::IPV6, &v6).transport, Transport::Udp);
    assert_eq!(
        parse(LinkType::IPV4, &v6).error,
        Some(LayerError::BadIpVersion)
    );
    assert_eq!(
        parse(LinkType::IPV6, &v4).error,
        Some(LayerError::BadIpVersion)
    );
}

#[test]
fn linux_cooked_v1_and_v2() {
    let v4 = ipv4(17, &udp(40000, 53, b"hello dns"));
    // SLL: packet type, ARPHRD (772 loopback), address length, 8 address bytes, protocol.
    let mut sll = vec![0, 0, 0x03, 0x04, 0, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x00];
    sll.extend_from_slice(&v4);
    assert_udp_v4(&parse(LinkType::LINUX_SLL, &sll), &sll, 16 + 28);
    // SLL2: protocol, reserved, ifindex, ARPHRD, packet type, address length, 8 address bytes.
    let mut sll2 = vec![
        0x08, 0x00, 0, 0, 0, 0, 0, 1, 0x03, 0x04, 0, 6, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    sll2.extend_from_slice(&v4);
    assert_udp_v4(&parse(LinkType::LINUX_SLL2, &sll2), &sll2, 20 + 28);
    assert_eq!(
        parse(LinkType::LINUX_SLL2, &sll2[..10]).error,
        Some(LayerError::TruncatedLink)
    );
}

#[test]
fn unsupported_link_type_is_marked() {
    let l = parse(LinkType(147), &[1, 2, 3]);
    assert_eq!((l.network, l.error), (Network::UnsupportedLink, None));
}

#[test]
fn ipv4_options_move_the_transport_header() {
    // Router Alert (4 bytes) + 4 NOPs: IHL 7.
    let ip = ipv4_with(
        17,
        &[0x94, 0x04, 0, 0, 1, 1, 1, 1],
        0,
        &udp(40000, 53, b"hello dns"),
    );
    let f = ether(0x0800, &ip);
    assert_udp_v4(&parse(LinkType::EN10MB, &f), &f, 14 + 28 + 8);
}

#[test]
fn ipv4_bad_header_length_and_version() {
    let mut ip = ipv4(17, &udp(40000, 53, b"hello dns"));
    ip[0] = 0x44;
    assert_eq!(
        parse(LinkType::IPV4, &ip).error,
        Some(LayerError::BadIpv4HeaderLength)
    );
    ip[0] = 0x65;
    assert_eq!(
        parse(LinkType::IPV4, &ip).error,
        Some(LayerError::BadIpVersion)
    );
}

#[test]
fn ipv4_total_length_beyond_frame_is_noted_and_bounded() {
    let mut ip = ipv4(17, &udp(40000, 53, b"hello dns"));
    ip[2..4].copy_from_slice(&1000u16.to_be_bytes());
    let l = parse(LinkType::IPV4, &ip);
    assert_eq!(l.error, Some(LayerError::BadIpv4TotalLength));
    assert_eq!(l.transport, Transport::Udp);
    assert_eq!(l.payload_len, 9);
    ip[2..4].copy_from_slice(&10u16.to_be_bytes()); // shorter than its own header
    let l = parse(LinkType::IPV4, &ip);
    assert_eq!(
        (l.error, l.transport),
        (Some(LayerError::BadIpv4TotalLength), Transport::None)
    );
}

#[test]
fn udp_length_errors() {
    let mut ip = ipv4(17, &udp(40000, 53, b"hello dns"));
    ip[24..26].copy_from_slice(&200u16.to_be_bytes());
    let l = parse(LinkType::IPV4, &ip);
    assert_eq!(
        (l.error, l.transport, l.payload_len),
        (Some(LayerError::BadUdpLength), Transport::Udp, 9)
    );
    ip[24..26].copy_from_slice(&4u16.to_be_bytes());
    let l = parse(LinkType::IPV4, &ip);
    assert_eq!(
        (l.error, l.transport),
        (Some(LayerError::BadUdpLength), Transport::None)
    );
}

#[test]
fn ipv4_fragments_are_marked_not_parsed() {
    let first = ipv4_with(17, &[], 0x2000, &udp(40000, 53, &[7; 64]));
    let l = parse(LinkType::IPV4, &first);
    assert_eq!(
        l.fragment,
        Some(Fragment {
            id: 0x1234,
            offset: 0,
            more: true,
            protocol: 17,
            atomic: false
        })
    );
    assert_eq!(l.transport, Transport::None);
    let later = ipv4_with(17, &[], 185, &[7; 40]); // offset 185 * 8 = 1480, last fragment
    let l = parse(LinkType::IPV4, &later);
    assert_eq!(l.fragment.map(|f| (f.offset, f.more)), Some((1480, false)));
    assert_eq!(l.src_addr(&later), Some(IpAddr::from(SRC4)));
}

#[test]
fn ipv6_extension_headers_are_walked() {
    let upper = udp(40000, 53, b"hello dns");
    let rest = [ext(43, 0), ext(60, 1), ext(17, 0), upper].concat(); // HBH → Routing → DestOpts → UDP
    let f = ether(0x86dd, &ipv6(0, &rest));
    let l = parse(LinkType::EN10MB, &f);
    assert_eq!(
        (l.error, l.transport, l.sport, l.dport),
        (None, Transport::Udp, 40000, 53)
    );
    assert_eq!(l.payload_offset as usize, 14 + 40 + 8 + 16 + 8 + 8);
    assert_eq!(l.dst_addr(&f), Some(IpAddr::from(DST6)));
}

#[test]
fn ipv6_authentication_header_uses_4_octet_units() {
    let mut ah = vec![17, 4]; // (4 + 2) * 4 = 24 bytes
    ah.resize(24, 0);
    let ip = ipv6(51, &[ah, udp(40000, 53, b"x")].concat());
    let l = parse(LinkType::IPV6, &ip);
    assert_eq!((l.transport, l.l4_offset), (Transport::Udp, 64));
}

#[test]
fn ipv6_fragment_header() {
    let frag = |offset_flags: u16, next: u8| {
        let mut v = vec![next, 0];
        v.extend_from_slice(&offset_flags.to_be_bytes());
        v.extend_from_slice(&0xdead_beefu32.to_be_bytes());
        v
    };
    let first = ipv6(44, &[frag(0x0001, 17), udp(40000, 53, &[1; 32])].concat());
    let l = parse(LinkType::IPV6, &first);
    assert_eq!(
        l.fragment,
        Some(Fragment {
            id: 0xdead_beef,
            offset: 0,
            more: true,
            protocol: 17,
            atomic: false
        })
    );
    assert_eq!(l.transport, Transport::None);
    let last = ipv6(44, &[frag(1232, 17), vec![1; 16]].concat());
    assert_eq!(
        parse(LinkType::IPV6, &last)
            .fragment
            .map(|f| (f.offset, f.more)),
        Some((1232, false))
    );
    // Atomic fragment (RFC 6946): offset 0, M = 0: the whole packet, parsed on.
    let atomic = ipv6(0, &[ext(44, 0), frag(0, 17), udp(40000, 53, b"x")].concat());
    let l = parse(LinkType::IPV6, &atomic);
    assert_eq!(l.fragment.map(|f| f.atomic), Some(true));
    assert_eq!((l.transport, l.dport), (Transport::Udp, 53));
}

#[test]
fn ipv6_extension_header_past_the_end_and_loops() {
    let mut hbh = ext(17, 0);
    hbh[1] = 20; // claims 168 bytes
    let ip = ipv6(0, &hbh);
    assert_eq!(
        parse(LinkType::IPV6, &ip).error,
        Some(LayerError::TruncatedExtensionHeader)
    );
    let chain: Vec<u8> = (0..20).flat_map(|_| ext(0, 0)).collect();
    assert_eq!(
        parse(LinkType::IPV6, &ipv6(0, &chain)).error,
        Some(LayerError::TooManyExtensionHeaders)
    );
}

#[test]
fn tcp_with_options_and_bad_offset() {
    let mss = [2, 4, 0x05, 0xb4, 1, 1, 4, 2, 1, 1, 1, 0]; // 12 bytes of options
    let ip = ipv4(6, &tcp(40000, 53, &mss, b"\x00\x05hello"));
    let l = parse(LinkType::IPV4, &ip);
    assert_eq!(
        (
            l.transport,
            l.sport,
            l.dport,
            l.payload_offset,
            l.payload_len
        ),
        (Transport::Tcp, 40000, 53, 52, 7)
    );
    let mut bad = ip.clone();
    bad[32] = 0x40; // data offset 4 words
    assert_eq!(
        parse(LinkType::IPV4, &bad).error,
        Some(LayerError::BadTcpDataOffset)
    );
}

#[test]
fn snaplen_cut_marks_truncation() {
    let f = v4_udp_frame();
    // Cut inside the payload: transport parsed, payload shortened, marked truncated.
    let l = parse_layers(LinkType::EN10MB, &f[..46], f.len() as u32);
    assert_eq!(
        (l.transport, l.payload_len, l.truncated, l.error),
        (Transport::Udp, 4, true, None)
    );
    // Cut inside the UDP header.
    let l = parse_layers(LinkType::EN10MB, &f[..38], f.len() as u32);
    assert_eq!(l.error, Some(LayerError::TruncatedUdp));
    // Cut inside the IPv4 header.
    let l = parse_layers(LinkType::EN10MB, &f[..20], f.len() as u32);
    assert_eq!(l.error, Some(LayerError::TruncatedIpv4));
    assert_eq!(
        parse(LinkType::EN10MB, &f[..10]).error,
        Some(LayerError::TruncatedLink)
    );
}

#[test]
fn every_prefix_of_every_packet_parses_without_panic() {
    let packets = [
        (LinkType::EN10MB, v4_udp_frame()),
        (
            LinkType::EN10MB,
            ether_tagged(
                &[(0x88a8, 1), (0x8100, 2)],
                0x86dd,
                &ipv6(
                    0,
                    &[ext(44, 0), vec![17, 0, 0, 1, 0, 0, 0, 1], udp(1, 53, b"q")].concat(),
                ),
            ),
        ),
        (LinkType::IPV4, ipv4(6, &tcp(1, 53, &[1, 1, 1, 1], b"abc"))),
        (
            LinkType::NULL,
            [
                vec![30, 0, 0, 0],
                ipv6(60, &[ext(6, 0), tcp(1, 53, &[], b"x")].concat()),
            ]
            .concat(),
        ),
    ];
    for (link, p) in packets {
        for cut in 0..=p.len() {
            for wire in [cut as u32, p.len() as u32, 0, u32::MAX] {
                let l = parse_layers(link, &p[..cut], wire);
                assert!(
                    l.payload_offset as usize + l.payload_len as usize
                        <= cut.max(l.payload_offset as usize)
                );
            }
        }
    }
}

/// Every packet of the corpus and the field corpus (classic pcap files):
/// link type, captured bytes, length on the wire.
fn corpus_packets() -> Vec<(LinkType, Vec<u8>, u32)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data");
    let mut packets: Vec<(LinkType, Vec<u8>, u32)> = Vec::new();
    // The corpus, and the field corpus with its tunnels (UDP on tunnel ports
    // must leave the fast path).
    let entries = ["corpus", "field"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(root.join(dir)).unwrap());
    for entry in entries {
        let path = entry.unwrap().path();
        if !path.is_file() {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        // Classic little-endian pcap files only: walk records by hand.
        if bytes.len() < 24
            || bytes[..4] != [0xd4, 0xc3, 0xb2, 0xa1] && bytes[..4] != [0x4d, 0x3c, 0xb2, 0xa1]
        {
            continue;
        }
        let link = LinkType(u32::from_le_bytes(bytes[20..24].try_into().unwrap()));
        let mut pos = 24;
        while pos + 16 <= bytes.len() {
            let caplen = u32::from_le_bytes(bytes[pos + 8..pos + 12].try_into().unwrap()) as usize;
            let len = u32::from_le_bytes(bytes[pos + 12..pos + 16].try_into().unwrap());
            let Some(data) = bytes.get(pos + 16..pos + 16 + caplen) else {
                break;
            };
            packets.push((link, data.to_vec(), len.max(caplen as u32)));
            pos += 16 + caplen;
        }
    }
    packets
}

/// The fast path must agree with the general parser wherever it is taken:
/// on every packet of the corpus and the field corpus, and on every prefix
/// and single-byte change of a few packets.
#[test]
fn fast_path_agrees_with_the_general_parser() {
    let packets = corpus_packets();
    assert!(packets.len() > 20_000);
    let mut fast = 0;
    let mut check = |link: LinkType, data: &[u8], wire: u32| {
        let general = parse_layers_general(link, data, wire);
        assert_eq!(
            parse_layers(link, data, wire),
            general,
            "{link} {data:02x?}"
        );
        // The fast path assigns every field: a struct full of junk comes out
        // equal to the general path's result.
        let mut junk = Layers {
            network: Network::NonIp(0xdead),
            vlan_count: 9,
            vlan_ids: [0xfff; MAX_VLAN],
            l3_offset: 1,
            ip_end: 2,
            protocol: 3,
            transport: Transport::Tcp,
            l4_offset: 4,
            sport: 5,
            dport: 6,
            payload_offset: 7,
            payload_len: 8,
            wire_payload_len: 9,
            truncated: true,
            fragment: Some(Fragment {
                id: 1,
                offset: 2,
                more: true,
                protocol: 17,
                atomic: true,
            }),
            error: Some(LayerError::TruncatedTcp),
            tunnels: 9,
        };
        if parse_common(link, data, wire, &mut junk) {
            assert_eq!(junk, general, "fast path {link} {data:02x?}");
            fast += 1;
        }
        // `true` promises the common kind, which filter.layer counts blind.
        let mut layers = Layers::EMPTY;
        if parse_layers_into(link, data, wire, &mut layers) {
            assert_eq!(layers.network, Network::Ipv4);
            assert!(matches!(layers.transport, Transport::Udp | Transport::Tcp));
            assert_eq!(layers.fragment, None);
            assert_eq!(layers.error, None);
            assert!(!layers.truncated);
        }
        assert_eq!(layers, general);
    };
    for (link, data, wire) in &packets {
        check(*link, data, *wire);
    }
    for (link, data, wire) in packets
        .iter()
        .filter(|(l, _, _)| *l == LinkType::EN10MB)
        .take(40)
    {
        for cut in 0..data.len() {
            check(*link, &data[..cut], *wire);
        }
        for at in 0..data.len().min(80) {
            for flip in [0x01u8, 0x10, 0x80, 0xff] {
                let mut changed = data.clone();
                changed[at] ^= flip;
                check(*link, &changed, *wire);
                check(*link, &changed, changed.len() as u32);
            }
        }
    }
    assert!(fast > 10_000, "the fast path was taken {fast} times");
}

/// `is_empty` agrees with `== Layers::EMPTY` for the empty layers and for
/// every field set on its own.
#[test]
fn layers_are_empty_only_when_nothing_was_parsed() {
    assert!(Layers::EMPTY.is_empty());
    assert!(Layers::default().is_empty());
    let changes: [fn(&mut Layers); 17] = [
        |l| l.network = Network::Ipv4,
        |l| l.vlan_count = 1,
        |l| l.vlan_ids[7] = 5,
        |l| l.l3_offset = 14,
        |l| l.ip_end = 1,
        |l| l.protocol = 17,
        |l| l.transport = Transport::Udp,
        |l| l.l4_offset = 1,
        |l| l.sport = 53,
        |l| l.dport = 53,
        |l| l.payload_offset = 1,
        |l| l.payload_len = 1,
        |l| l.wire_payload_len = 1,
        |l| l.truncated = true,
        |l| {
            l.fragment = Some(Fragment {
                id: 0,
                offset: 0,
                more: false,
                protocol: 0,
                atomic: false,
            })
        },
        |l| l.error = Some(LayerError::TruncatedLink),
        |l| l.tunnels = 1,
    ];
    for (i, change) in changes.iter().enumerate() {
        let mut layers = Layers::EMPTY;
        change(&mut layers);
        assert_ne!(layers, Layers::EMPTY, "change {i} changed nothing");
        assert!(!layers.is_empty(), "change {i} went unseen");
    }
}

/// The parser never leaves layers looking unparsed ([`Layers::is_unparsed`],
/// what lets a thread crossing test two fields instead of all): on every
/// prefix (up to 96 bytes) of every corpus packet read as its own link
/// type, and every whole packet read as each link type number 0 to 299.
#[test]
fn parsed_layers_never_look_unparsed() {
    let links: Vec<LinkType> = (0..300).map(LinkType).collect();
    for (own, data, wire) in corpus_packets() {
        for cut in 0..=data.len().min(96) {
            let layers = parse_layers(own, &data[..cut], wire);
            assert!(!layers.is_unparsed(), "{own} {:02x?}", &data[..cut]);
        }
        for &link in &links {
            let layers = parse_layers(link, &data, wire);
            assert!(!layers.is_unparsed(), "{link} {data:02x?}");
        }
    }
    assert!(Layers::EMPTY.is_unparsed());
}

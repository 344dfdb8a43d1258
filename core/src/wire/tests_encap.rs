//! Tunnels and the link types that wrap a frame, on hand-built packets:
//! each builder writes the fields its RFC (or the format's documentation)
//! defines, so the expected values are the ones written. Captures of the
//! same encapsulations checked against tshark are in `tests/corpus_field.rs`.

use super::tests::{assert_udp_v4, ether, ipv4, ipv6, parse, udp, DST4, SRC4, SRC6};
use super::*;

/// The DNS-looking datagram every tunnel below carries.
fn inner_v4() -> Vec<u8> {
    ipv4(17, &udp(40000, 53, b"hello dns"))
}

/// An IPv4 header around `payload` with other addresses than the inner one.
fn outer_v4(protocol: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = ipv4(protocol, payload);
    v[12..20].copy_from_slice(&[203, 0, 113, 1, 203, 0, 113, 2]);
    v
}

/// The tunnels of `f` as (kind, id, outer src).
fn hops(link: LinkType, f: &[u8]) -> Vec<(TunnelKind, Option<u32>, Option<IpAddr>)> {
    tunnels(link, f, f.len() as u32)
        .iter()
        .map(|t| (t.kind, t.id, t.src(f)))
        .collect()
}

fn outer_src() -> Option<IpAddr> {
    Some(IpAddr::from([203, 0, 113, 1]))
}

/// Where `needle` starts in `haystack` (the inner datagram's payload).
fn find(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap()
}

fn assert_inner(link: LinkType, f: &[u8], tunnels: u8) {
    let l = parse(link, f);
    assert_udp_v4(&l, f, find(f, b"hello dns"));
    assert_eq!(l.tunnels, tunnels, "{link} {f:02x?}");
}

#[test]
fn gre_with_key_checksum_and_sequence() {
    // RFC 2784/2890: C, K and S set: checksum+reserved, key, sequence number.
    let mut gre = vec![0xb0, 0x00, 0x08, 0x00, 0, 0, 0, 0];
    gre.extend_from_slice(&0xdead_beefu32.to_be_bytes());
    gre.extend_from_slice(&7u32.to_be_bytes());
    gre.extend(inner_v4());
    let f = ether(0x0800, &outer_v4(47, &gre));
    assert_inner(LinkType::EN10MB, &f, 1);
    assert_eq!(
        hops(LinkType::EN10MB, &f),
        [(TunnelKind::Gre, Some(0xdead_beef), outer_src())]
    );
    // Transparent Ethernet bridging (0x6558): an Ethernet frame inside.
    let teb = [vec![0, 0, 0x65, 0x58], ether(0x0800, &inner_v4())].concat();
    let f = ether(0x86dd, &ipv6(47, &teb));
    assert_inner(LinkType::EN10MB, &f, 1);
    assert_eq!(
        hops(LinkType::EN10MB, &f),
        [(TunnelKind::Gre, None, Some(IpAddr::from(SRC6)))]
    );
}

#[test]
fn pptp_gre_carries_ppp() {
    // RFC 2637: version 1, K and S set, payload length, call id, sequence; PPP inside.
    let mut gre = vec![0x30, 0x01, 0x88, 0x0b];
    gre.extend_from_slice(&(4 + 28 + 9u16).to_be_bytes());
    gre.extend_from_slice(&0x1234u16.to_be_bytes());
    gre.extend_from_slice(&1u32.to_be_bytes());
    gre.extend_from_slice(&[0xff, 0x03, 0x00, 0x21]);
    gre.extend(inner_v4());
    let f = ether(0x0800, &outer_v4(47, &gre));
    assert_inner(LinkType::EN10MB, &f, 1);
    assert_eq!(hops(LinkType::EN10MB, &f)[0].1, Some(0x1234));
}

#[test]
fn erspan_type_two_after_gre() {
    // GRE with S set, protocol 0x88be; ERSPAN II: version 1, VLAN, session id 0x155.
    let mut gre = vec![0x10, 0x00, 0x88, 0xbe, 0, 0, 0, 1];
    gre.extend_from_slice(&[0x10, 0x00, 0x01, 0x55, 0, 0, 0, 0]);
    gre.extend(ether(0x0800, &inner_v4()));
    let f = ether(0x0800, &outer_v4(47, &gre));
    assert_inner(LinkType::EN10MB, &f, 1);
    assert_eq!(
        hops(LinkType::EN10MB, &f),
        [(TunnelKind::Erspan, Some(0x155), outer_src())]
    );
}

#[test]
fn ip_in_ip_and_6in4() {
    let f = ether(0x0800, &outer_v4(4, &inner_v4()));
    assert_inner(LinkType::EN10MB, &f, 1);
    assert_eq!(
        hops(LinkType::EN10MB, &f),
        [(TunnelKind::IpInIp, None, outer_src())]
    );
    // IPv6 inside IPv4 (protocol 41).
    let f = ether(0x0800, &outer_v4(41, &ipv6(17, &udp(1, 53, b"v6"))));
    let l = parse(LinkType::EN10MB, &f);
    assert_eq!((l.network, l.dport, l.tunnels), (Network::Ipv6, 53, 1));
    assert_eq!(l.src_addr(&f), Some(IpAddr::from(SRC6)));
}

#[test]
fn vxlan_geneve_and_gtp_u_on_their_ports() {
    // VXLAN: I flag, VNI 0x123456.
    let vxlan = [
        vec![0x08, 0, 0, 0, 0x12, 0x34, 0x56, 0],
        ether(0x0800, &inner_v4()),
    ]
    .concat();
    let f = ether(0x0800, &outer_v4(17, &udp(50000, 4789, &vxlan)));
    assert_inner(LinkType::EN10MB, &f, 1);
    assert_eq!(
        hops(LinkType::EN10MB, &f),
        [(TunnelKind::Vxlan, Some(0x123456), outer_src())]
    );
    // Geneve: version 0, one 4-byte option, protocol Ethernet, VNI 7.
    let geneve = [
        vec![0x01, 0, 0x65, 0x58, 0, 0, 7, 0, 1, 2, 3, 4],
        ether(0x0800, &inner_v4()),
    ]
    .concat();
    let f = ether(0x0800, &outer_v4(17, &udp(50000, 6081, &geneve)));
    assert_inner(LinkType::EN10MB, &f, 1);
    assert_eq!(hops(LinkType::EN10MB, &f)[0].1, Some(7));
    // GTP-U: version 1, PT, E set; G-PDU; TEID; seq, N-PDU, next type 0x85;
    // one 4-byte extension (PDU session container) ending the chain.
    let mut gtp = vec![0x34, 0xff, 0, 0];
    gtp.extend_from_slice(&0x0a0b_0c0du32.to_be_bytes());
    gtp.extend_from_slice(&[0, 0, 0, 0x85, 1, 0x10, 0x09, 0]);
    gtp.extend(inner_v4());
    let f = ether(0x0800, &outer_v4(17, &udp(2152, 2152, &gtp)));
    assert_inner(LinkType::EN10MB, &f, 1);
    assert_eq!(hops(LinkType::EN10MB, &f)[0].1, Some(0x0a0b_0c0d));
}

#[test]
fn a_port_that_only_matches_is_not_a_tunnel() {
    // Flags without the VXLAN I bit: plain UDP.
    let f = ether(0x0800, &outer_v4(17, &udp(50000, 4789, &[0; 20])));
    let l = parse(LinkType::EN10MB, &f);
    assert_eq!((l.transport, l.dport, l.tunnels), (Transport::Udp, 4789, 0));
    // The registered port must be the destination; from port 53 is DNS.
    let vxlan = [vec![0x08, 0, 0, 0, 0, 0, 1, 0], ether(0x0800, &inner_v4())].concat();
    let f = ether(0x0800, &outer_v4(17, &udp(4789, 53, &vxlan)));
    let l = parse(LinkType::EN10MB, &f);
    assert_eq!((l.sport, l.dport, l.tunnels), (4789, 53, 0));
    let f = ether(0x0800, &outer_v4(17, &udp(53, 4789, &vxlan)));
    let l = parse(LinkType::EN10MB, &f);
    assert_eq!((l.sport, l.dport, l.tunnels), (53, 4789, 0));
}

#[test]
fn mpls_labels_then_ip_or_a_pseudowire() {
    // Two labels (16, then 17 with the bottom-of-stack bit), then IPv4.
    let mut f = ether(0x8847, &[]);
    f.extend_from_slice(&((16u32 << 12) | 64).to_be_bytes());
    f.extend_from_slice(&((17u32 << 12) | 0x100 | 64).to_be_bytes());
    f.extend(inner_v4());
    assert_inner(LinkType::EN10MB, &f, 2);
    let labels: Vec<_> = hops(LinkType::EN10MB, &f).iter().map(|h| h.1).collect();
    assert_eq!(labels, [Some(16), Some(17)]);
    // A pseudowire: control word (first nibble 0), then Ethernet.
    let mut pw = ether(0x8847, &((20u32 << 12) | 0x100).to_be_bytes());
    pw.extend_from_slice(&[0, 0, 0, 0]);
    pw.extend(ether(0x0800, &inner_v4()));
    assert_inner(LinkType::EN10MB, &pw, 1);
    // A stack cut short is an error, not a panic.
    let cut = ether(0x8847, &[0, 1]);
    assert_eq!(
        parse(LinkType::EN10MB, &cut).error,
        Some(LayerError::TruncatedTunnel)
    );
}

#[test]
fn nesting_is_bounded() {
    let mut packet = inner_v4();
    for _ in 0..MAX_TUNNELS + 2 {
        packet = outer_v4(4, &packet);
    }
    let l = parse(LinkType::IPV4, &packet);
    assert_eq!(l.error, Some(LayerError::TooManyTunnels));
    assert_eq!(usize::from(l.tunnels), MAX_TUNNELS);
    assert_eq!(
        tunnels(LinkType::IPV4, &packet, packet.len() as u32).len(),
        MAX_TUNNELS
    );
}

#[test]
fn ppp_pppoe_and_hdlc_framing() {
    // PPP with and without address/control, and with a compressed protocol.
    for header in [vec![0xff, 0x03, 0x00, 0x21], vec![0x00, 0x21], vec![0x21]] {
        let f = [header.clone(), inner_v4()].concat();
        assert_inner(LinkType::PPP, &f, 0);
        assert_inner(LinkType::PPP_HDLC, &f, 0);
    }
    // PPPoE session (RFC 2516): ver/type 0x11, code 0, session id, length, PPP protocol.
    let session = [vec![0x11, 0, 0x12, 0x34, 0, 30, 0x00, 0x21], inner_v4()].concat();
    assert_inner(LinkType::PPP_ETHER, &session, 0);
    assert_inner(LinkType::EN10MB, &ether(0x8864, &session), 0);
}

#[test]
fn null_header_with_an_ethertype_or_ppp() {
    // `0f 00 08 00`: Wireshark reads the Ethertype 0x0800 in it.
    let f = [vec![0x0f, 0x00, 0x08, 0x00], inner_v4()].concat();
    assert_inner(LinkType::NULL, &f, 0);
    // IRIX: the family in the upper half.
    let f = [vec![0x00, 0x02, 0x00, 0x00], inner_v4()].concat();
    assert_inner(LinkType::NULL, &f, 0);
    // `ff 03`: PPP in HDLC framing.
    let f = [vec![0xff, 0x03, 0x00, 0x21], inner_v4()].concat();
    assert_inner(LinkType::NULL, &f, 0);
}

#[test]
fn nflog_tlvs_in_either_byte_order() {
    let tlv = |little: bool, kind: u16, value: &[u8]| {
        let len = (4 + value.len()) as u16;
        let mut v = Vec::new();
        if little {
            v.extend_from_slice(&len.to_le_bytes());
            v.extend_from_slice(&kind.to_le_bytes());
        } else {
            v.extend_from_slice(&len.to_be_bytes());
            v.extend_from_slice(&kind.to_be_bytes());
        }
        v.extend_from_slice(value);
        v.resize((v.len() + 3) & !3, 0);
        v
    };
    for little in [true, false] {
        let f = [
            vec![2, 0, 0, 5],
            tlv(little, 1, &[0x08, 0x00, 1, 0]), // NFULA_PACKET_HDR
            tlv(little, 10, b"prefix!"),         // NFULA_PREFIX (padded)
            tlv(little, 9, &inner_v4()),         // NFULA_PAYLOAD
        ]
        .concat();
        assert_inner(LinkType::NFLOG, &f, 0);
    }
    // No payload TLV: not IP. A zero TLV length: an error, no loop.
    let f = [vec![2, 0, 0, 5], tlv(true, 1, &[0; 4])].concat();
    assert!(
        matches!(parse(LinkType::NFLOG, &f).network, Network::NonIp(2))
            || parse(LinkType::NFLOG, &f).error.is_some()
    );
    let f = [vec![2, 0, 0, 5], vec![0; 8]].concat();
    assert_eq!(
        parse(LinkType::NFLOG, &f).error,
        Some(LayerError::TruncatedLink)
    );
}

#[test]
fn pktap_names_the_inner_link_type() {
    // Header length 108, record type 1 (packet), inner DLT 1 (Ethernet).
    let mut header = vec![0u8; 108];
    header[..4].copy_from_slice(&108u32.to_le_bytes());
    header[4..8].copy_from_slice(&1u32.to_le_bytes());
    header[8..12].copy_from_slice(&1u32.to_le_bytes());
    let f = [header.clone(), ether(0x0800, &inner_v4())].concat();
    assert_inner(LinkType::PKTAP, &f, 0);
    assert_inner(LinkType::USER2, &f, 0);
    // A PKTAP inside PKTAP is not followed.
    header[8..12].copy_from_slice(&258u32.to_le_bytes());
    let f = [header.clone(), header, ether(0x0800, &inner_v4())].concat();
    assert_eq!(parse(LinkType::PKTAP, &f).network, Network::UnsupportedLink);
}

#[test]
fn wifi_data_frames_with_llc_snap() {
    let snap = [0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00];
    // Data frame (type 2, subtype 0), FromDS: 24-byte header.
    let mut data = vec![0x08, 0x02];
    data.resize(24, 0);
    let f = [data.clone(), snap.to_vec(), inner_v4()].concat();
    assert_inner(LinkType::IEEE802_11, &f, 0);
    // QoS data (subtype 8) with a 2-byte QoS control field, after radiotap.
    let mut qos = vec![0x88, 0x01];
    qos.resize(26, 0);
    let radiotap = vec![0, 0, 12, 0, 0x04, 0, 0, 0, 0x02, 0, 0, 0];
    let f = [radiotap.clone(), qos, snap.to_vec(), inner_v4()].concat();
    assert_inner(LinkType::IEEE802_11_RADIOTAP, &f, 0);
    // Protected and management frames are not IP.
    let mut protected = data.clone();
    protected[1] |= 0x40;
    let f = [protected, snap.to_vec(), inner_v4()].concat();
    assert_eq!(parse(LinkType::IEEE802_11, &f).network, Network::NonIp(0));
    let beacon = [vec![0x80, 0x00], vec![0; 30]].concat();
    assert_eq!(
        parse(LinkType::IEEE802_11, &beacon).network,
        Network::NonIp(0)
    );
}

#[test]
fn every_prefix_of_every_tunnel_parses_without_panic() {
    let vxlan = [
        vec![0x08, 0, 0, 0, 0, 0, 1, 0],
        ether(0x8847, &[0, 1, 0x11, 0]),
        inner_v4(),
    ]
    .concat();
    let packets = [
        (
            LinkType::EN10MB,
            ether(0x0800, &outer_v4(17, &udp(1, 4789, &vxlan))),
        ),
        (
            LinkType::EN10MB,
            ether(
                0x0800,
                &outer_v4(
                    47,
                    &[
                        vec![
                            0x30, 0x81, 0x88, 0x0b, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0x21,
                        ],
                        inner_v4(),
                    ]
                    .concat(),
                ),
            ),
        ),
        (
            LinkType::IPV4,
            outer_v4(
                17,
                &udp(
                    2152,
                    2152,
                    &[
                        vec![
                            0x34, 0xff, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0x85, 2, 0, 0, 0, 0, 0, 0, 0,
                        ],
                        inner_v4(),
                    ]
                    .concat(),
                ),
            ),
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
                let _ = tunnels(link, &p[..cut], wire);
            }
        }
    }
    let _ = (SRC4, DST4);
}

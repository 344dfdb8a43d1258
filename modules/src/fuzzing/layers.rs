//! The `layers` target: the layer parser on one packet (link → VLAN →
//! IPv4/IPv6 → UDP/TCP), and [`check_layers`], the parser's invariants,
//! which the `capture_reader` target runs on every packet too.

use dnsluice_core::wire::{
    parse_layers, parse_layers_into, LayerError, Layers, Network, Transport,
};
use dnsluice_core::{CaptureMeta, LinkType, Packet};

/// The link types a selector picks from.
pub const LINKS: [u32; 19] = [
    0, 1, 9, 10, 12, 14, 50, 51, 101, 105, 108, 113, 127, 149, 228, 229, 239, 258, 276,
];

/// The `layers` target. Input: 2 bytes (LE) choose the link type (`n % 20`
/// indexes [`LINKS`], 19 = the raw `u16`), 4 bytes (LE) the wire length,
/// the rest is the captured packet. The parser's promises hold, it is
/// deterministic, `parse_layers_into` agrees, and for Ethernet/IPv4 the
/// fast path agrees with the general parser.
pub fn layers(input: &[u8]) {
    if input.len() < 6 {
        return;
    }
    let sel = u16::from_le_bytes([input[0], input[1]]);
    let link = match LINKS.get(usize::from(sel % 20)) {
        Some(&l) => LinkType(l),
        None => LinkType(u32::from(sel)), // any u16, mostly unsupported
    };
    let wire_len = u32::from_le_bytes([input[2], input[3], input[4], input[5]]);
    let data = &input[6..];
    let first = check_layers(link, data, wire_len);
    // Deterministic: the same bytes give the same layers.
    assert_eq!(first, parse_layers(link, data, wire_len));
    if link == LinkType::EN10MB {
        fast_path_matches_general(first, data, wire_len);
    }
    // `true` from parse_layers_into promises the common kind, which
    // filter.layer counts without looking.
    let mut layers = Layers::EMPTY;
    if parse_layers_into(link, data, wire_len, &mut layers) {
        assert_eq!(layers.network, Network::Ipv4);
        assert!(matches!(layers.transport, Transport::Udp | Transport::Tcp));
        assert!(layers.fragment.is_none() && layers.error.is_none() && !layers.truncated);
    }
    assert_eq!(layers, first);
    // Parsed layers never look unparsed: a thread crossing relies on it.
    assert!(
        !first.is_unparsed(),
        "parsed layers look unparsed: {first:?}"
    );
}

/// Ethernet/IPv4/UDP|TCP takes a one-pass fast path inside `parse_layers`; the
/// general parser alone is not public, but the same IPv4 datagram as a
/// LINKTYPE_RAW packet (14 bytes further on) always takes the general path.
/// Whenever either side finds UDP or TCP (which covers every fast-path
/// result), both must agree field for field, offsets shifted by 14.
fn fast_path_matches_general(ethernet: Layers, data: &[u8], wire_len: u32) {
    const ETH: usize = 14;
    if data.len() <= ETH
        || data[12..14] != [0x08, 0x00]
        || data[ETH] >> 4 != 4
        || (wire_len as usize) < ETH
    {
        return;
    }
    let raw = check_layers(LinkType::RAW, &data[ETH..], wire_len - ETH as u32);
    let is_l4 = |l: &Layers| matches!(l.transport, Transport::Udp | Transport::Tcp);
    if !is_l4(&ethernet) && !is_l4(&raw) {
        return;
    }
    let mut expected = raw;
    for offset in [
        &mut expected.l3_offset,
        &mut expected.ip_end,
        &mut expected.l4_offset,
        &mut expected.payload_offset,
    ] {
        *offset += ETH as u32;
    }
    assert_eq!(
        ethernet, expected,
        "EN10MB (fast path) and RAW (general path) disagree on the same IPv4 datagram"
    );
}

/// Parses `data` as a packet of `link` with original length `wire_len`, checks
/// every invariant the parser promises, and returns the layers. Panics (so the
/// fuzzer reports a crash) on any violation.
pub fn check_layers(link: LinkType, data: &[u8], wire_len: u32) -> Layers {
    let l = parse_layers(link, data, wire_len);
    let n = data.len();
    let payload_end = l.payload_offset as usize + l.payload_len as usize;

    // The promised invariants.
    assert!(
        payload_end <= n,
        "payload {}+{} past the {n} captured bytes: {l:?}",
        l.payload_offset,
        l.payload_len
    );
    if matches!(l.transport, Transport::Udp | Transport::Tcp) {
        assert!(
            (l.l4_offset as usize) < n,
            "l4_offset {} >= caplen {n}: {l:?}",
            l.l4_offset
        );
    }
    let src = l.src_addr(data);
    let dst = l.dst_addr(data);
    // The tunnels listed are the ones the parser walked through.
    let tunnels = dnsluice_core::wire::tunnels(link, data, wire_len);
    assert_eq!(tunnels.len(), usize::from(l.tunnels), "{l:?}");
    for t in tunnels.iter() {
        let _ = (t.src(data), t.dst(data));
    }

    // Consistency between the fields.
    match l.network {
        Network::Ipv4 | Network::Ipv6 => {
            assert!(
                (l.l3_offset as usize) < n,
                "l3_offset {} >= caplen {n}: {l:?}",
                l.l3_offset
            );
            assert!(
                (l.ip_end as usize) <= n,
                "ip_end {} > caplen {n}: {l:?}",
                l.ip_end
            );
            // The network kind is only set once the whole fixed header is captured.
            assert!(
                src.is_some() && dst.is_some(),
                "IP packet without addresses: {l:?}"
            );
            let same_family = match l.network {
                Network::Ipv4 => src.is_some_and(|a| a.is_ipv4()),
                _ => src.is_some_and(|a| a.is_ipv6()),
            };
            assert!(same_family, "address family differs from network: {l:?}");
        }
        _ => {
            assert!(
                src.is_none() && dst.is_none(),
                "addresses on a non-IP packet: {l:?}"
            );
            assert_eq!(l.transport, Transport::None, "transport without IP: {l:?}");
        }
    }
    // A payload is a transport's data or, for an IP fragment, the fragment's
    // data (an atomic IPv6 fragment is whole: its payload is the transport's).
    let has_payload = l.transport != Transport::None || l.fragment.is_some_and(|f| !f.atomic);
    if l.payload_len > 0 {
        assert!(
            has_payload,
            "payload without a transport or fragment: {l:?}"
        );
    }
    assert!(
        l.wire_payload_len >= l.payload_len,
        "more payload captured ({}) than on the wire ({}): {l:?}",
        l.payload_len,
        l.wire_payload_len
    );
    // Readers always give wire_len >= caplen; in that regime the layers nest.
    if wire_len as usize >= n && has_payload {
        assert!(
            l.l3_offset <= l.payload_offset,
            "payload before the IP header: {l:?}"
        );
        if l.transport != Transport::None {
            assert!(
                l.l3_offset <= l.l4_offset && l.l4_offset <= l.payload_offset,
                "offsets out of order: {l:?}"
            );
        }
        assert!(
            payload_end <= l.ip_end as usize,
            "payload ends past ip_end: {l:?}"
        );
    }
    if let Some(e) = l.error {
        assert_eq!(LayerError::ALL[e.index()], e);
        assert!(!e.as_str().is_empty());
    }
    assert!(l.vlans().len() <= usize::from(l.vlan_count));
    let _ = l.ip_version();
    let _ = l.transport.name();

    // The same through the Packet accessors.
    let mut p = Packet::new(
        data,
        CaptureMeta {
            frame: 1,
            ts_ns: None,
            len: wire_len,
            link,
        },
    );
    p.layers = l;
    assert_eq!(p.payload().len(), l.payload_len as usize);
    assert_eq!(p.src(), src);
    assert_eq!(p.dst(), dst);
    l
}

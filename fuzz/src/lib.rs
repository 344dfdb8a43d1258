//! Helpers shared by the fuzz targets: the layer-parser invariants.

use dnsluice_core::wire::{parse_layers, LayerError, Layers, Network, Transport};
use dnsluice_core::{CaptureMeta, LinkType, Packet};

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

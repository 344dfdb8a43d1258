//! The layer parser on one packet: link → VLAN → IPv4/IPv6 (→ tunnels) → UDP/TCP.
//!
//! Input: 2 bytes (LE) choose the link type, 4 bytes (LE) the wire length,
//! the rest is the captured packet.
#![no_main]

use dnsluice_core::wire::{parse_layers, parse_layers_into, Layers, Network, Transport};
use dnsluice_core::LinkType;
use dnsluice_fuzz::check_layers;
use libfuzzer_sys::fuzz_target;

const LINKS: [u32; 19] = [
    0, 1, 9, 10, 12, 14, 50, 51, 101, 105, 108, 113, 127, 149, 228, 229, 239, 258, 276,
];

fuzz_target!(|input: &[u8]| {
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
});

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

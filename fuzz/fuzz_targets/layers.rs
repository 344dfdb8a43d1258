//! The layer parser on one packet: link → VLAN → IPv4/IPv6 → UDP/TCP.
//!
//! Input: 2 bytes (LE) choose the link type, 4 bytes (LE) the wire length,
//! the rest is the captured packet.
#![no_main]

use dnsluice_core::LinkType;
use dnsluice_fuzz::check_layers;
use libfuzzer_sys::fuzz_target;

const LINKS: [u32; 10] = [0, 1, 12, 14, 101, 108, 113, 228, 229, 276];

fuzz_target!(|input: &[u8]| {
    if input.len() < 6 {
        return;
    }
    let sel = u16::from_le_bytes([input[0], input[1]]);
    let link = match LINKS.get(usize::from(sel % 11)) {
        Some(&l) => LinkType(l),
        None => LinkType(u32::from(sel)), // any u16, mostly unsupported
    };
    let wire_len = u32::from_le_bytes([input[2], input[3], input[4], input[5]]);
    let data = &input[6..];
    let first = check_layers(link, data, wire_len);
    // Deterministic: the same bytes give the same layers.
    assert_eq!(first, dnsluice_core::wire::parse_layers(link, data, wire_len));
});

//! The layer parser on one packet: link → VLAN → IPv4/IPv6 → UDP/TCP.
//!
//! Input: 2 bytes (LE) choose the link type, 4 bytes (LE) the wire length,
//! the rest is the captured packet.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| dnsluice_modules::fuzzing::layers(data));

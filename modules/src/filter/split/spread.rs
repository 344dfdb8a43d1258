//! Where the split sends an object: the client's address (`by = "client"`)
//! or the flow's addresses (`by = "flow"`), read from the packet.

use dnsluice_core::wire::{parse_layers, Network};
use dnsluice_core::{LinkType, Object};
use std::net::IpAddr;

/// The client's address of a packet: its source, unless it comes from a DNS
/// server port (53, 853, 443, 5353) to another port, then its destination. So
/// queries and their answers, and both directions of a TCP connection, meet
/// on one thread.
pub(super) fn client_address(obj: &Object<'_>) -> Option<IpAddr> {
    let packet = obj.packet()?;
    let src = packet.src()?;
    let server_port = |port: u16| matches!(port, 53 | 853 | 443 | 5353);
    let layers = &packet.layers;
    if server_port(layers.sport) && !server_port(layers.dport) {
        return packet.dst().or(Some(src));
    }
    Some(src)
}

/// Where a packet goes when flows must stay together: `None` for a DNS
/// datagram that stands alone (UDP to or from port 53, not a fragment: most
/// of a capture), which any thread may take; else a hash of its two
/// addresses, the same both ways (the innermost ones, through tunnels: an
/// inner flow may change tunnels). Fragments after the first carry no ports,
/// so ports are left out: a datagram's fragments meet on one thread.
/// Untagged Ethernet carrying DNS straight over IPv4 or IPv6 is read in
/// place; anything else has its layers parsed here when no stage before did.
pub(super) fn flow_hash(obj: &Object<'_>) -> Option<u32> {
    let packet = obj.packet()?;
    let data = packet.data;
    let dns_port = |at: usize| {
        let port = |i: usize| data.get(i..i + 2).map(|p| u16::from_be_bytes([p[0], p[1]]));
        port(at) == Some(53) || port(at + 2) == Some(53)
    };
    if packet.meta.link == LinkType::EN10MB && data.len() >= 14 {
        let (v4, v6) = (data[12..14] == [0x08, 0x00], data[12..14] == [0x86, 0xdd]);
        if v4 && data.len() >= 34 {
            let header = usize::from(data[14] & 0x0f) * 4;
            let fragment = u16::from_be_bytes([data[20], data[21]]) & 0x3fff != 0;
            let protocol = data[23];
            let direct_dns = matches!(protocol, 6 | 17) && dns_port(14 + header);
            if protocol == 17 && !fragment && direct_dns {
                return None;
            }
            if fragment || direct_dns {
                return Some(symmetric_hash(&data[26..30], &data[30..34]));
            }
        }
        if v6 && data.len() >= 54 {
            // UDP or TCP right after the fixed header; a fragment header.
            let next = data[20];
            if next == 17 && dns_port(54) {
                return None;
            }
            if next == 44 || (next == 6 && dns_port(54)) {
                return Some(symmetric_hash(&data[22..38], &data[38..54]));
            }
        }
    }
    let parsed;
    let layers = if packet.layers.network == Network::Unparsed {
        parsed = parse_layers(packet.meta.link, data, packet.meta.len);
        &parsed
    } else {
        &packet.layers
    };
    let (src, dst) = (layers.src_addr(data)?, layers.dst_addr(data)?);
    Some(match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => symmetric_hash(&s.octets(), &d.octets()),
        (s, d) => symmetric_hash(&sixteen(s), &sixteen(d)),
    })
}

/// An address as 16 bytes (IPv4 mapped into IPv6).
fn sixteen(address: IpAddr) -> [u8; 16] {
    match address {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

/// FNV-1a of the lower of two addresses, then the higher: the same both ways.
fn symmetric_hash(a: &[u8], b: &[u8]) -> u32 {
    let (low, high) = if a <= b { (a, b) } else { (b, a) };
    let mut h: u32 = 0x811c_9dc5;
    for byte in low.iter().chain(high) {
        h ^= u32::from(*byte);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

//! Tunnels: GRE (RFC 2784/2890, and PPTP's enhanced GRE, RFC 2637), ERSPAN
//! types I-III inside GRE, IP-in-IP (IPv4 or IPv6 inside IPv4 or IPv6, as
//! in 6in4), VXLAN (UDP 4789), Geneve (UDP 6081), GTP-U (UDP 2152), GRE
//! in UDP (UDP 4754) and MPLS label stacks. UDP tunnels are recognised by
//! their destination port. Each function reads one
//! encapsulation header and says where the inner packet starts; the
//! parser's loop in `mod.rs` records the hop and goes on.
//!
//! A header that does not check out (wrong version, a UDP port that merely
//! matches) is not an error: the packet stays what its outer headers say.

use super::{be16, be32, LayerError, Next, TunnelKind};

/// UDP ports that announce a tunnel.
const PORT_GTP_U: u16 = 2152;
const PORT_GRE_UDP: u16 = 4754;
const PORT_VXLAN: u16 = 4789;
const PORT_GENEVE: u16 = 6081;
/// DNS's own port: a datagram from it is DNS, never a tunnel.
const PORT_DNS: u16 = 53;

const PROTO_IPIP: u8 = 4;
const PROTO_IPV6: u8 = 41;
const PROTO_GRE: u8 = 47;

/// GTP-U extension headers followed at most (loop guard).
const MAX_GTP_EXTENSIONS: usize = 16;

/// An encapsulation found: its kind, its id (GRE key, VNI, TEID, ...) and
/// where the inner packet starts.
pub(super) struct Found {
    pub kind: TunnelKind,
    pub id: Option<u32>,
    pub next: Next,
}

/// Is `dport` a tunnel's port, so that [`udp`] looks behind it? The
/// registered port is always the destination (VXLAN, Geneve and GRE-in-UDP
/// senders put a flow hash in the source port, and GTP-U's user packets go
/// to 2152), so the source port is not looked at. The fast path leaves such
/// datagrams to the general parser: every tunnel port lies in 2152..=6081,
/// so one comparison rules most datagrams out (measured: four exact
/// comparisons on both ports cost 17 instructions a packet).
#[inline(always)]
pub(super) fn is_tunnel_port(dport: u16) -> bool {
    dport.wrapping_sub(PORT_GTP_U) <= PORT_GENEVE - PORT_GTP_U
        && matches!(dport, PORT_GTP_U | PORT_GRE_UDP | PORT_VXLAN | PORT_GENEVE)
}

/// An IP payload of `protocol` at `at` (captured up to `end`) that is a
/// tunnel: IP-in-IP or GRE.
pub(super) fn ip(data: &[u8], protocol: u8, at: usize, end: usize) -> Option<Found> {
    let ip_in_ip = |next| Found {
        kind: TunnelKind::IpInIp,
        id: None,
        next,
    };
    match protocol {
        PROTO_IPIP => Some(ip_in_ip(Next::Ipv4(at))),
        PROTO_IPV6 => Some(ip_in_ip(Next::Ipv6(at))),
        PROTO_GRE => gre(data, at, end),
        _ => None,
    }
}

/// A UDP payload at `at` (captured up to `end`) from `sport` to `dport`
/// that is a tunnel on its registered (destination) port.
pub(super) fn udp(data: &[u8], sport: u16, dport: u16, at: usize, end: usize) -> Option<Found> {
    if sport == PORT_DNS || !is_tunnel_port(dport) {
        return None;
    }
    match dport {
        PORT_VXLAN => vxlan(data, at, end),
        PORT_GENEVE => geneve(data, at, end),
        PORT_GTP_U => gtp_u(data, at, end),
        _ => gre(data, at, end),
    }
}

/// A GRE header at `at`. Version 0 with optional checksum, key and sequence
/// number (source routing is not followed); version 1 (PPTP) carries PPP
/// and a call id. The inner protocol must be one the parser reads on.
fn gre(data: &[u8], at: usize, end: usize) -> Option<Found> {
    const CHECKSUM: u16 = 0x8000;
    const ROUTING: u16 = 0x4000;
    const KEY: u16 = 0x2000;
    const SEQUENCE: u16 = 0x1000;
    const ACK: u16 = 0x0080;
    const PROTO_PPP: u16 = 0x880b;
    let flags = be16(data, at)?;
    let protocol = be16(data, at + 2)?;
    let mut pos = at + 4;
    let id = match flags & 0x7 {
        0 => {
            if flags & ROUTING != 0 {
                return None;
            }
            if flags & CHECKSUM != 0 {
                pos += 4;
            }
            let key = if flags & KEY != 0 {
                pos += 4;
                Some(be32(data, pos - 4)?)
            } else {
                None
            };
            if flags & SEQUENCE != 0 {
                pos += 4;
            }
            key
        }
        1 => {
            if protocol != PROTO_PPP || flags & KEY == 0 {
                return None;
            }
            let call_id = be16(data, pos + 2)?;
            pos += 4;
            if flags & SEQUENCE != 0 {
                pos += 4;
            }
            if flags & ACK != 0 {
                pos += 4;
            }
            Some(u32::from(call_id))
        }
        _ => return None,
    };
    if pos > end {
        return None;
    }
    let gre = |next| Found {
        kind: TunnelKind::Gre,
        id,
        next,
    };
    match protocol {
        0x0800 => Some(gre(Next::Ipv4(pos))),
        0x86dd => Some(gre(Next::Ipv6(pos))),
        0x6558 => Some(gre(Next::Ethernet(pos))),
        0x8847 | 0x8848 => Some(gre(Next::Mpls(pos))),
        PROTO_PPP => Some(gre(Next::Ppp(pos))),
        0x88be | 0x22eb => erspan(data, protocol, flags & SEQUENCE != 0, pos, end),
        _ => None,
    }
}

/// ERSPAN after a GRE header: type I (0x88be without a sequence number)
/// is the mirrored frame itself; type II (0x88be with one) has an 8-byte
/// header, type III (0x22eb) 12 bytes and an optional 8-byte platform
/// sub-header. The id is the session id.
fn erspan(data: &[u8], protocol: u16, sequenced: bool, at: usize, end: usize) -> Option<Found> {
    let (header, session) = match (protocol, sequenced) {
        (0x88be, false) => (0, None),
        (0x88be, true) => (8, Some(be16(data, at + 2)? & 0x3ff)),
        _ => {
            let optional = data.get(at + 11)? & 0x01 != 0;
            (
                12 + if optional { 8 } else { 0 },
                Some(be16(data, at + 2)? & 0x3ff),
            )
        }
    };
    if at + header > end {
        return None;
    }
    Some(Found {
        kind: TunnelKind::Erspan,
        id: session.map(u32::from),
        next: Next::Ethernet(at + header),
    })
}

/// VXLAN (RFC 7348): flags with the I bit, a 24-bit VNI, then Ethernet.
fn vxlan(data: &[u8], at: usize, end: usize) -> Option<Found> {
    let flags = *data.get(at)?;
    if flags & 0x08 == 0 || at + 8 > end {
        return None;
    }
    Some(Found {
        kind: TunnelKind::Vxlan,
        id: Some(be32(data, at + 4)? >> 8),
        next: Next::Ethernet(at + 8),
    })
}

/// Geneve (RFC 8926): version 0, options length in 4-byte units, the
/// protocol type (Ethernet or IP), a 24-bit VNI, then the options.
fn geneve(data: &[u8], at: usize, end: usize) -> Option<Found> {
    let first = *data.get(at)?;
    if first >> 6 != 0 {
        return None;
    }
    let inner = at + 8 + usize::from(first & 0x3f) * 4;
    if inner > end {
        return None;
    }
    let next = match be16(data, at + 2)? {
        0x6558 => Next::Ethernet(inner),
        0x0800 => Next::Ipv4(inner),
        0x86dd => Next::Ipv6(inner),
        _ => return None,
    };
    Some(Found {
        kind: TunnelKind::Geneve,
        id: Some(be32(data, at + 4)? >> 8),
        next,
    })
}

/// GTP-U (3GPP TS 29.281): version 1, protocol type GTP, message type
/// G-PDU (0xff), the TEID; with any of E, S, PN set, four more bytes, and
/// with E set a chain of extension headers (length in 4-byte units, next
/// type last; the next type in the four bytes is read only with E set,
/// §5.1). The user's IP packet follows.
fn gtp_u(data: &[u8], at: usize, end: usize) -> Option<Found> {
    const G_PDU: u8 = 0xff;
    let flags = *data.get(at)?;
    if flags >> 5 != 1 || flags & 0x10 == 0 || *data.get(at + 1)? != G_PDU {
        return None;
    }
    let teid = be32(data, at + 4)?;
    let mut pos = at + 8;
    if flags & 0x07 != 0 {
        const E: u8 = 0x04;
        let mut next_type = if flags & E != 0 {
            *data.get(at + 11)?
        } else {
            0
        };
        pos = at + 12;
        for _ in 0..MAX_GTP_EXTENSIONS {
            if next_type == 0 {
                break;
            }
            let length = usize::from(*data.get(pos)?) * 4;
            if length == 0 {
                return None;
            }
            next_type = *data.get(pos + length - 1)?;
            pos += length;
        }
        if next_type != 0 {
            return None;
        }
    }
    if pos >= end {
        return None;
    }
    let next = match data.get(pos)? >> 4 {
        4 => Next::Ipv4(pos),
        6 => Next::Ipv6(pos),
        _ => return None,
    };
    Some(Found {
        kind: TunnelKind::GtpU,
        id: Some(teid),
        next,
    })
}

/// One MPLS label stack entry at `at`: its label and what follows. After
/// the bottom of the stack the payload's first nibble says IPv4 or IPv6;
/// 0 is a pseudowire control word before an Ethernet frame.
pub(super) fn mpls(data: &[u8], at: usize) -> Result<(u32, Next), LayerError> {
    let entry = be32(data, at).ok_or(LayerError::TruncatedTunnel)?;
    let label = entry >> 12;
    if entry & 0x100 == 0 {
        return Ok((label, Next::Mpls(at + 4)));
    }
    let inner = at + 4;
    let first = *data.get(inner).ok_or(LayerError::TruncatedTunnel)?;
    let next = match first >> 4 {
        4 => Next::Ipv4(inner),
        6 => Next::Ipv6(inner),
        0 => Next::Ethernet(inner + 4),
        _ => Next::Stop(super::Network::NonIp(0x8847)),
    };
    Ok((label, next))
}

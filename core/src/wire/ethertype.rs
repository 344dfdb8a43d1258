//! Where a type field leads: Ethertypes (and SNAP protocol ids), the IP
//! version nibble, LLC/SNAP headers. Shared by the link layers (`link.rs`)
//! and the headers that wrap a frame (`wrapped.rs`), which import it and
//! not each other.

use super::{LayerError, Network, Next};

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
/// MPLS unicast and multicast label stacks.
const ETHERTYPE_MPLS: [u16; 2] = [0x8847, 0x8848];
/// A PPPoE session frame (RFC 2516): a 6-byte header, then the PPP protocol.
pub(super) const ETHERTYPE_PPPOE_SESSION: u16 = 0x8864;

/// Where an Ethertype (or a SNAP protocol id) leads, its payload at `payload_at`.
pub(super) fn by_ethertype(ethertype: u16, payload_at: usize) -> Next {
    match ethertype {
        ETHERTYPE_IPV4 => Next::Ipv4(payload_at),
        ETHERTYPE_IPV6 => Next::Ipv6(payload_at),
        t if ETHERTYPE_MPLS.contains(&t) => Next::Mpls(payload_at),
        ETHERTYPE_PPPOE_SESSION => Next::Ppp(payload_at + 6),
        other => Next::Stop(Network::NonIp(other.into())),
    }
}

/// The IP version nibble at `at` says which.
pub(super) fn by_version_nibble(data: &[u8], at: usize) -> Result<Next, LayerError> {
    let first = *data.get(at).ok_or(LayerError::TruncatedLink)?;
    Ok(match first >> 4 {
        4 => Next::Ipv4(at),
        6 => Next::Ipv6(at),
        _ => return Err(LayerError::BadIpVersion),
    })
}

/// An LLC/SNAP header at `at` (`aa aa 03`, an OUI, the Ethertype), as
/// FDDI and 802.11 carry it; another LLC header is not IP.
pub(super) fn llc_snap(data: &[u8], at: usize) -> Result<Next, LayerError> {
    let snap = data.get(at..at + 8).ok_or(LayerError::TruncatedLink)?;
    if snap[..3] != [0xaa, 0xaa, 0x03] {
        return Ok(Next::Stop(Network::Llc));
    }
    Ok(by_ethertype(u16::from_be_bytes([snap[6], snap[7]]), at + 8))
}

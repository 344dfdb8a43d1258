//! Link layers: Ethernet (with VLAN tags), NULL/LOOP, raw IP, Linux cooked v1/v2.

use super::{be16, LayerError, Layers, Network, MAX_VLAN};
use crate::object::LinkType;

/// Where the link layer leads.
pub(super) enum Next {
    /// IPv4 header at this offset.
    Ipv4(usize),
    /// IPv6 header at this offset.
    Ipv6(usize),
    /// Not IP: parsing stops with this network kind.
    Stop(Network),
}

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
/// 802.1Q, 802.1ad (QinQ outer), and the pre-standard 0x9100/0x9200 QinQ tags.
const VLAN_TPIDS: [u16; 4] = [0x8100, 0x88a8, 0x9100, 0x9200];

/// BSD address families that mean IPv6 (NetBSD/OpenBSD 24, FreeBSD 28, Darwin 30).
const AF_INET6_VALUES: [u32; 3] = [24, 28, 30];

pub(super) fn parse(link: LinkType, data: &[u8], layers: &mut Layers) -> Result<Next, LayerError> {
    match link {
        LinkType::EN10MB => ethertype_chain(data, 12, layers),
        LinkType::LINUX_SLL => ethertype_chain(data, 14, layers),
        LinkType::LINUX_SLL2 => {
            let ethertype = be16(data, 0).ok_or(LayerError::TruncatedLink)?;
            if data.len() < 20 {
                return Err(LayerError::TruncatedLink);
            }
            Ok(by_ethertype(ethertype, 20))
        }
        LinkType::NULL | LinkType::LOOP => address_family(data),
        LinkType::RAW | LinkType::RAW12 | LinkType::RAW14 => by_version_nibble(data),
        LinkType::IPV4 => Ok(Next::Ipv4(0)),
        LinkType::IPV6 => Ok(Next::Ipv6(0)),
        _ => Ok(Next::Stop(Network::UnsupportedLink)),
    }
}

/// Reads the type field at `type_at`, walking any number of VLAN tags.
fn ethertype_chain(
    data: &[u8],
    mut type_at: usize,
    layers: &mut Layers,
) -> Result<Next, LayerError> {
    loop {
        let ethertype = be16(data, type_at).ok_or(LayerError::TruncatedLink)?;
        if VLAN_TPIDS.contains(&ethertype) {
            let tci = be16(data, type_at + 2).ok_or(LayerError::TruncatedVlan)?;
            if (layers.vlan_count as usize) < MAX_VLAN {
                layers.vlan_ids[layers.vlan_count as usize] = tci & 0x0fff;
            }
            layers.vlan_count = layers.vlan_count.saturating_add(1);
            type_at += 4;
            continue;
        }
        if ethertype <= 1500 {
            // IEEE 802.3 length field: an LLC/SNAP frame, not a type.
            return Ok(Next::Stop(Network::Llc));
        }
        return Ok(by_ethertype(ethertype, type_at + 2));
    }
}

fn by_ethertype(ethertype: u16, payload_at: usize) -> Next {
    match ethertype {
        ETHERTYPE_IPV4 => Next::Ipv4(payload_at),
        ETHERTYPE_IPV6 => Next::Ipv6(payload_at),
        other => Next::Stop(Network::NonIp(other.into())),
    }
}

/// NULL and LOOP: a 4-byte family. NULL's is in the capturing host's byte order,
/// LOOP's in network order, but writers get this wrong, so accept either: the
/// family is a small number, so the byte order with the small value is right.
fn address_family(data: &[u8]) -> Result<Next, LayerError> {
    let bytes: [u8; 4] = data
        .get(..4)
        .ok_or(LayerError::TruncatedLink)?
        .try_into()
        .map_err(|_| LayerError::TruncatedLink)?;
    let le = u32::from_le_bytes(bytes);
    let be = u32::from_be_bytes(bytes);
    let family = le.min(be);
    Ok(match family {
        2 => Next::Ipv4(4),
        f if AF_INET6_VALUES.contains(&f) => Next::Ipv6(4),
        f => Next::Stop(Network::NonIp(f)),
    })
}

fn by_version_nibble(data: &[u8]) -> Result<Next, LayerError> {
    let first = *data.first().ok_or(LayerError::TruncatedLink)?;
    Ok(match first >> 4 {
        4 => Next::Ipv4(0),
        6 => Next::Ipv6(0),
        _ => return Err(LayerError::BadIpVersion),
    })
}

//! Link layers: Ethernet (with VLAN tags, MPLS and PPPoE ethertypes),
//! NULL/LOOP, raw IP, Linux cooked v1/v2, PPP (plain, HDLC-framed, over
//! Ethernet). The headers that wrap another frame (NFLOG, PKTAP, 802.11,
//! radiotap) are in `wrapped.rs`.

use super::ethertype::{by_ethertype, by_version_nibble, llc_snap, ETHERTYPE_PPPOE_SESSION};
use super::{be16, wrapped, LayerError, Layers, LinkType, Network, Next, MAX_VLAN};

/// 802.1Q, 802.1ad (QinQ outer), and the pre-standard 0x9100/0x9200 QinQ tags.
const VLAN_TPIDS: [u16; 4] = [0x8100, 0x88a8, 0x9100, 0x9200];
/// The largest IEEE 802.3 length field; a type field is above it.
const MAX_8023_LENGTH: u32 = 1500;

/// BSD address families that mean IPv6 (NetBSD/OpenBSD 24, FreeBSD 28, Darwin 30).
const AF_INET6_VALUES: [u32; 3] = [24, 28, 30];

/// The link header of type `link` starting at `at`.
pub(super) fn parse(
    link: LinkType,
    data: &[u8],
    at: usize,
    layers: &mut Layers,
) -> Result<Next, LayerError> {
    match link {
        LinkType::EN10MB => ethertype_chain(data, at + 12, layers),
        LinkType::LINUX_SLL => ethertype_chain(data, at + 14, layers),
        LinkType::LINUX_SLL2 => {
            let ethertype = be16(data, at).ok_or(LayerError::TruncatedLink)?;
            if data.len() < at + 20 {
                return Err(LayerError::TruncatedLink);
            }
            if VLAN_TPIDS.contains(&ethertype) {
                // A tag the kernel did not take off (VLAN offload off):
                // its TCI, then the next type, start the payload.
                let tci = be16(data, at + 20).ok_or(LayerError::TruncatedVlan)?;
                note_vlan(layers, tci);
                return ethertype_chain(data, at + 22, layers);
            }
            Ok(by_ethertype(ethertype, at + 20))
        }
        LinkType::NULL | LinkType::LOOP => address_family(data, at),
        LinkType::RAW | LinkType::RAW12 | LinkType::RAW14 => by_version_nibble(data, at),
        LinkType::IPV4 => Ok(Next::Ipv4(at)),
        LinkType::IPV6 => Ok(Next::Ipv6(at)),
        LinkType::PPP | LinkType::PPP_HDLC => Ok(Next::Ppp(at)),
        // Frame control, destination and source addresses, then LLC/SNAP.
        LinkType::FDDI => llc_snap(data, at + 13),
        LinkType::PPP_ETHER => pppoe_session(data, at),
        LinkType::NFLOG => wrapped::nflog(data, at),
        LinkType::PKTAP | LinkType::USER2 => wrapped::pktap(data, at),
        LinkType::IEEE802_11 => wrapped::ieee802_11(data, at),
        LinkType::IEEE802_11_RADIOTAP => wrapped::radiotap(data, at),
        _ => Ok(Next::Stop(Network::UnsupportedLink)),
    }
}

/// An Ethernet frame starting at `at` (inside a tunnel).
pub(super) fn ethernet(data: &[u8], at: usize, layers: &mut Layers) -> Result<Next, LayerError> {
    ethertype_chain(data, at + 12, layers)
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
            note_vlan(layers, tci);
            type_at += 4;
            continue;
        }
        if u32::from(ethertype) <= MAX_8023_LENGTH {
            // IEEE 802.3 length field: an LLC/SNAP frame, not a type.
            return Ok(Next::Stop(Network::Llc));
        }
        return Ok(by_ethertype(ethertype, type_at + 2));
    }
}

/// Counts a VLAN tag, keeping its id (of the first [`MAX_VLAN`]).
fn note_vlan(layers: &mut Layers, tci: u16) {
    if (layers.vlan_count as usize) < MAX_VLAN {
        layers.vlan_ids[layers.vlan_count as usize] = tci & 0x0fff;
    }
    layers.vlan_count = layers.vlan_count.saturating_add(1);
}

/// NULL and LOOP: a 4-byte family. NULL's is in the capturing host's byte
/// order, LOOP's in network order, and writers get this wrong; some systems
/// put the family in the upper half, and some write an Ethertype instead
/// (`0f 00 08 00`). Read as Wireshark reads it on a little-endian host (its
/// `packet-null.c` rules, restated): a value with upper bits set is
/// byte-swapped, or shifted down when it looks like a 16-bit family in the
/// upper half; the result above 1500 is an Ethertype, otherwise a family.
/// `ff 03` is PPP in HDLC framing.
fn address_family(data: &[u8], at: usize) -> Result<Next, LayerError> {
    let bytes: [u8; 4] = data
        .get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .ok_or(LayerError::TruncatedLink)?;
    if bytes[..2] == [0xff, 0x03] {
        return Ok(Next::Ppp(at));
    }
    let mut value = u32::from_le_bytes(bytes);
    if value & 0xffff_0000 != 0 {
        if value & 0xff00_0000 == 0 && value & 0x00ff_0000 < 0x0006_0000 {
            value >>= 16;
        } else {
            value = value.swap_bytes();
        }
    } else if value & 0xff == 0 && value & 0xff00 < 0x0600 {
        value = u32::from((value as u16).swap_bytes());
    }
    if value > MAX_8023_LENGTH {
        return Ok(by_ethertype(value as u16, at + 4));
    }
    Ok(match value {
        2 => Next::Ipv4(at + 4),
        f if AF_INET6_VALUES.contains(&f) => Next::Ipv6(at + 4),
        f => Next::Stop(Network::NonIp(f)),
    })
}

/// A PPPoE session header at `at` (version/type 0x11, code 0), then PPP.
fn pppoe_session(data: &[u8], at: usize) -> Result<Next, LayerError> {
    let header = data.get(at..at + 6).ok_or(LayerError::TruncatedLink)?;
    if header[0] != 0x11 || header[1] != 0 {
        return Ok(Next::Stop(Network::NonIp(u32::from(
            ETHERTYPE_PPPOE_SESSION,
        ))));
    }
    Ok(Next::Ppp(at + 6))
}

/// PPP from `at`: the HDLC address and control bytes (`ff 03`) when
/// present, then the protocol, one byte when compressed (odd), else two.
pub(super) fn ppp(data: &[u8], mut at: usize) -> Result<Next, LayerError> {
    if data.get(at..at + 2) == Some(&[0xff, 0x03]) {
        at += 2;
    }
    let first = *data.get(at).ok_or(LayerError::TruncatedLink)?;
    let (protocol, header) = if first & 1 == 1 {
        (u16::from(first), 1)
    } else {
        (be16(data, at).ok_or(LayerError::TruncatedLink)?, 2)
    };
    Ok(match protocol {
        0x0021 => Next::Ipv4(at + header),
        0x0057 => Next::Ipv6(at + header),
        0x0281 | 0x0283 => Next::Mpls(at + header),
        other => Next::Stop(Network::NonIp(other.into())),
    })
}

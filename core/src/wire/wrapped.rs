//! Link headers that wrap another frame: Linux NFLOG (TLVs around the IP
//! packet), Apple's PKTAP (a header naming the inner link type), IEEE 802.11
//! data frames with LLC/SNAP, and the radiotap header in front of them.

use super::ethertype::{by_version_nibble, llc_snap};
use super::{LayerError, LinkType, Network, Next};

/// NFLOG TLV type of the logged packet (`NFULA_PAYLOAD`).
const NFULA_PAYLOAD: u16 = 9;
/// Linux address families in the NFLOG header.
const NFLOG_AF_INET: u8 = 2;
const NFLOG_AF_INET6: u8 = 10;
/// TLVs walked at most in one NFLOG record (loop guard; real ones have about ten).
const MAX_NFLOG_TLVS: usize = 64;

/// NFLOG (LINKTYPE 239): family, version, resource id, then TLVs whose
/// length (header included, padded to 4) and type are in the capturing
/// host's byte order. The order is taken from the first TLV: the reading
/// whose length fits the record (little-endian when both do).
pub(super) fn nflog(data: &[u8], at: usize) -> Result<Next, LayerError> {
    let family = *data.get(at).ok_or(LayerError::TruncatedLink)?;
    let mut pos = at + 4;
    let first = data.get(pos..pos + 2).ok_or(LayerError::TruncatedLink)?;
    let fits = |len: u16| len >= 4 && pos + usize::from(len) <= data.len();
    let little = fits(u16::from_le_bytes([first[0], first[1]]))
        || !fits(u16::from_be_bytes([first[0], first[1]]));
    let word = |at: usize| -> Option<u16> {
        let b = data.get(at..at + 2)?;
        Some(if little {
            u16::from_le_bytes([b[0], b[1]])
        } else {
            u16::from_be_bytes([b[0], b[1]])
        })
    };
    for _ in 0..MAX_NFLOG_TLVS {
        let (Some(len), Some(kind)) = (word(pos), word(pos + 2)) else {
            return Err(LayerError::TruncatedLink);
        };
        let len = usize::from(len);
        if len < 4 {
            return Err(LayerError::TruncatedLink);
        }
        if kind & 0x7fff == NFULA_PAYLOAD {
            let payload = pos + 4;
            return match family {
                NFLOG_AF_INET => Ok(Next::Ipv4(payload)),
                NFLOG_AF_INET6 => Ok(Next::Ipv6(payload)),
                _ => by_version_nibble(data, payload),
            };
        }
        pos += (len + 3) & !3;
    }
    Ok(Next::Stop(Network::NonIp(u32::from(family))))
}

/// PKTAP (LINKTYPE 258; also LINKTYPE_USER2, which early macOS used): a
/// little-endian header whose first word is its length, second the record
/// type (1: a packet) and third the inner link type, then the packet.
pub(super) fn pktap(data: &[u8], at: usize) -> Result<Next, LayerError> {
    let word = |i: usize| -> Option<u32> {
        let b = data.get(at + 4 * i..at + 4 * i + 4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let (Some(length), Some(record), Some(inner)) = (word(0), word(1), word(2)) else {
        return Err(LayerError::TruncatedLink);
    };
    let length = length as usize;
    if record != 1 || length < 12 {
        return Ok(Next::Stop(Network::UnsupportedLink));
    }
    if data.len() < at + length {
        // The header is longer than what was captured.
        return Err(LayerError::TruncatedLink);
    }
    match LinkType(inner) {
        // One PKTAP header per frame: a nested one is not followed.
        LinkType::PKTAP | LinkType::USER2 => Ok(Next::Stop(Network::UnsupportedLink)),
        inner => Ok(Next::Link(inner, at + length)),
    }
}

/// Radiotap (LINKTYPE 127): version 0, padding, then its little-endian
/// length; the 802.11 frame follows.
pub(super) fn radiotap(data: &[u8], at: usize) -> Result<Next, LayerError> {
    let header = data.get(at..at + 4).ok_or(LayerError::TruncatedLink)?;
    let length = usize::from(u16::from_le_bytes([header[2], header[3]]));
    if header[0] != 0 || length < 8 {
        return Ok(Next::Stop(Network::UnsupportedLink));
    }
    ieee802_11(data, at + length)
}

/// An IEEE 802.11 frame at `at`. Data frames with a body, not protected,
/// not an A-MSDU, lead through their LLC/SNAP header to the Ethertype;
/// management, control, null-data and encrypted frames are not IP.
pub(super) fn ieee802_11(data: &[u8], at: usize) -> Result<Next, LayerError> {
    const TYPE_DATA: u8 = 2;
    const TO_AND_FROM_DS: u8 = 0x03;
    const PROTECTED: u8 = 0x40;
    const ORDER: u8 = 0x80;
    let control = data.get(at..at + 2).ok_or(LayerError::TruncatedLink)?;
    let (kind, subtype, flags) = ((control[0] >> 2) & 3, control[0] >> 4, control[1]);
    let not_ip = Ok(Next::Stop(Network::NonIp(0)));
    if kind != TYPE_DATA || subtype & 0x04 != 0 || flags & PROTECTED != 0 {
        return not_ip;
    }
    let mut header = 24;
    if flags & TO_AND_FROM_DS == TO_AND_FROM_DS {
        header += 6; // a fourth address
    }
    if subtype & 0x08 != 0 {
        // QoS data: a 2-byte QoS control field, whose bit 7 marks an A-MSDU.
        let qos = *data.get(at + header).ok_or(LayerError::TruncatedLink)?;
        if qos & 0x80 != 0 {
            return not_ip;
        }
        header += 2;
        if flags & ORDER != 0 {
            header += 4; // HT control
        }
    }
    llc_snap(data, at + header)
}

//! IPv4 (with options) and IPv6 (with extension headers).

use super::{be16, be32, transport, Fragment, Inner, LayerError, Layers, Network};

/// IPv6 extension headers whose length byte counts 8-octet units beyond the first 8.
const EXT_8_OCTET: [u8; 6] = [0, 43, 60, 135, 139, 140];
const EXT_FRAGMENT: u8 = 44;
const EXT_AH: u8 = 51;
/// More than this many extension headers is treated as malformed.
const MAX_EXT_HEADERS: usize = 16;

pub(super) fn parse_ipv4(
    data: &[u8],
    at: usize,
    wire_len: u32,
    layers: &mut Layers,
) -> Result<Option<Inner>, LayerError> {
    let fixed: &[u8; 20] = data
        .get(at..at + 20)
        .and_then(|h| h.try_into().ok())
        .ok_or(LayerError::TruncatedIpv4)?;
    if fixed[0] >> 4 != 4 {
        return Err(LayerError::BadIpVersion);
    }
    let header_len = usize::from(fixed[0] & 0x0f) * 4;
    if header_len < 20 {
        return Err(LayerError::BadIpv4HeaderLength);
    }
    if data.len() < at + header_len {
        return Err(LayerError::TruncatedIpv4);
    }
    layers.network = Network::Ipv4;
    layers.l3_offset = at as u32;
    let total = usize::from(u16::from_be_bytes([fixed[2], fixed[3]]));
    // Total length 0 happens with TCP segmentation offload: the datagram is the frame.
    let mut wire_end = if total == 0 {
        wire_len as usize
    } else {
        at + total
    };
    if wire_end < at + header_len {
        return Err(LayerError::BadIpv4TotalLength);
    }
    if wire_end > wire_len as usize {
        // The header claims more than the frame carried: note it, and parse
        // what the frame holds (as tshark does).
        layers.note(LayerError::BadIpv4TotalLength);
        wire_end = wire_len as usize;
    }
    let ip_end = clamp_to_capture(wire_end, data.len(), layers);
    let protocol = fixed[9];
    layers.protocol = protocol;
    let flags_offset = u16::from_be_bytes([fixed[6], fixed[7]]);
    let more = flags_offset & 0x2000 != 0;
    let offset = u32::from(flags_offset & 0x1fff) * 8;
    if more || offset > 0 {
        layers.fragment = Some(Fragment {
            id: u32::from(u16::from_be_bytes([fixed[4], fixed[5]])),
            offset,
            more,
            protocol,
            atomic: false,
        });
        set_fragment_data(at + header_len, ip_end, wire_end, layers);
        return Ok(None);
    }
    transport::parse(data, at + header_len, ip_end, wire_end, protocol, layers)
}

pub(super) fn parse_ipv6(
    data: &[u8],
    at: usize,
    wire_len: u32,
    layers: &mut Layers,
) -> Result<Option<Inner>, LayerError> {
    let first = *data.get(at).ok_or(LayerError::TruncatedIpv6)?;
    if first >> 4 != 6 {
        return Err(LayerError::BadIpVersion);
    }
    if data.len() < at + 40 {
        return Err(LayerError::TruncatedIpv6);
    }
    layers.network = Network::Ipv6;
    layers.l3_offset = at as u32;
    let payload_len = usize::from(be16(data, at + 4).ok_or(LayerError::TruncatedIpv6)?);
    let mut next = data[at + 6];
    // Payload length 0 with a hop-by-hop header is a jumbogram: the datagram is the frame.
    let mut wire_end = if payload_len == 0 && next == 0 {
        wire_len as usize
    } else {
        at + 40 + payload_len
    };
    if wire_end > wire_len as usize {
        layers.note(LayerError::BadIpv6PayloadLength);
        wire_end = wire_len as usize;
    }
    let ip_end = clamp_to_capture(wire_end, data.len(), layers);
    let mut cursor = at + 40;
    for _ in 0..MAX_EXT_HEADERS {
        layers.protocol = next;
        let header_len = if EXT_8_OCTET.contains(&next) {
            (usize::from(ext_byte(data, cursor + 1, ip_end)?) + 1) * 8
        } else if next == EXT_AH {
            (usize::from(ext_byte(data, cursor + 1, ip_end)?) + 2) * 4
        } else if next == EXT_FRAGMENT {
            let following = ext_byte(data, cursor, ip_end)?;
            let offset_flags =
                be16(data, cursor + 2).ok_or(LayerError::TruncatedExtensionHeader)?;
            let id = be32(data, cursor + 4).ok_or(LayerError::TruncatedExtensionHeader)?;
            if cursor + 8 > ip_end {
                return Err(LayerError::TruncatedExtensionHeader);
            }
            let fragment = Fragment {
                id,
                offset: u32::from(offset_flags & 0xfff8),
                more: offset_flags & 1 != 0,
                protocol: following,
                atomic: offset_flags & 0xfff9 == 0,
            };
            layers.fragment = Some(fragment);
            if !fragment.atomic {
                layers.protocol = following;
                set_fragment_data(cursor + 8, ip_end, wire_end, layers);
                return Ok(None);
            }
            8
        } else {
            return transport::parse(data, cursor, ip_end, wire_end, next, layers);
        };
        if cursor + header_len > ip_end {
            return Err(LayerError::TruncatedExtensionHeader);
        }
        next = data[cursor];
        cursor += header_len;
    }
    Err(LayerError::TooManyExtensionHeaders)
}

/// Reads one byte of an extension header that must lie inside the datagram.
fn ext_byte(data: &[u8], at: usize, ip_end: usize) -> Result<u8, LayerError> {
    if at >= ip_end {
        return Err(LayerError::TruncatedExtensionHeader);
    }
    data.get(at)
        .copied()
        .ok_or(LayerError::TruncatedExtensionHeader)
}

/// The datagram's end within the captured bytes (recorded in `layers.ip_end`);
/// marks the packet truncated when the capture stops short of it.
fn clamp_to_capture(wire_end: usize, caplen: usize, layers: &mut Layers) -> usize {
    let end = wire_end.min(caplen);
    layers.truncated |= wire_end > caplen;
    layers.ip_end = end as u32;
    end
}

/// A fragment's data (what reassembly puts together) as the packet's payload.
fn set_fragment_data(start: usize, ip_end: usize, wire_end: usize, layers: &mut Layers) {
    layers.payload_offset = start as u32;
    layers.payload_len = ip_end.saturating_sub(start) as u32;
    layers.wire_payload_len = wire_end.saturating_sub(start) as u32;
}

//! UDP and TCP headers.

use super::{encap, Inner, LayerError, Layers, Transport};

const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

/// Parses the transport header at `at`. `ip_end` is the datagram's end within
/// the captured bytes, `wire_end` its end on the wire (beyond `ip_end` when the
/// capture was cut by a snaplen). A tunnel (IP-in-IP, GRE, or UDP on a
/// tunnel's port whose header checks out) gives the packet inside.
pub(super) fn parse(
    data: &[u8],
    at: usize,
    ip_end: usize,
    wire_end: usize,
    protocol: u8,
    layers: &mut Layers,
) -> Result<Option<Inner>, LayerError> {
    layers.protocol = protocol;
    layers.l4_offset = at as u32;
    match protocol {
        PROTO_UDP => {
            let header: &[u8; 8] = header_at(data, at, ip_end).ok_or(LayerError::TruncatedUdp)?;
            let length = usize::from(u16::from_be_bytes([header[4], header[5]]));
            if length < 8 {
                return Err(LayerError::BadUdpLength);
            }
            let mut udp_end = at + length;
            if udp_end > wire_end {
                // Longer than the IP payload: note it, and take what the datagram holds.
                layers.note(LayerError::BadUdpLength);
                udp_end = wire_end;
            }
            set_ports(header, layers, Transport::Udp);
            set_payload(at + 8, udp_end, ip_end, layers);
            let end = udp_end.min(ip_end).max(at + 8);
            let found = encap::udp(data, layers.sport, layers.dport, at + 8, end);
            Ok(found.map(|found| Inner {
                found,
                end,
                wire_end: udp_end,
            }))
        }
        PROTO_TCP => {
            let header: &[u8; 20] = header_at(data, at, ip_end).ok_or(LayerError::TruncatedTcp)?;
            let header_len = usize::from(header[12] >> 4) * 4;
            if header_len < 20 || at + header_len > wire_end {
                return Err(LayerError::BadTcpDataOffset);
            }
            if at + header_len > ip_end {
                return Err(LayerError::TruncatedTcp);
            }
            set_ports(header, layers, Transport::Tcp);
            set_payload(at + header_len, wire_end, ip_end, layers);
            Ok(None)
        }
        other => {
            layers.transport = Transport::Other(other);
            set_payload(at, wire_end, ip_end, layers);
            let end = ip_end.max(at);
            Ok(encap::ip(data, other, at, end).map(|found| Inner {
                found,
                end,
                wire_end,
            }))
        }
    }
}

/// The fixed-size header at `at`, when it lies within the captured datagram.
#[inline]
fn header_at<const N: usize>(data: &[u8], at: usize, ip_end: usize) -> Option<&[u8; N]> {
    if at + N > ip_end {
        return None;
    }
    data.get(at..at + N)?.try_into().ok()
}

/// Source and destination ports: the first four bytes of both UDP and TCP headers.
#[inline]
fn set_ports(header: &[u8], layers: &mut Layers, transport: Transport) {
    layers.sport = u16::from_be_bytes([header[0], header[1]]);
    layers.dport = u16::from_be_bytes([header[2], header[3]]);
    layers.transport = transport;
}

/// Payload from `start` to `wire_end` on the wire, of which up to `ip_end` was captured.
fn set_payload(start: usize, wire_end: usize, ip_end: usize, layers: &mut Layers) {
    let end = wire_end.min(ip_end).max(start);
    layers.payload_offset = start as u32;
    layers.payload_len = (end - start) as u32;
    layers.wire_payload_len = wire_end.saturating_sub(start) as u32;
    if wire_end > ip_end {
        layers.truncated = true;
    }
}

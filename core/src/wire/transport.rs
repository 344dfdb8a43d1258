//! UDP and TCP headers.

use super::{be16, LayerError, Layers, Transport};

const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

/// Parses the transport header at `at`. `ip_end` is the datagram's end within
/// the captured bytes, `wire_end` its end on the wire (beyond `ip_end` when the
/// capture was cut by a snaplen).
pub(super) fn parse(
    data: &[u8],
    at: usize,
    ip_end: usize,
    wire_end: usize,
    protocol: u8,
    layers: &mut Layers,
) -> Result<(), LayerError> {
    layers.protocol = protocol;
    layers.l4_offset = at as u32;
    match protocol {
        PROTO_UDP => {
            if at + 8 > ip_end {
                return Err(LayerError::TruncatedUdp);
            }
            let length = usize::from(be16(data, at + 4).ok_or(LayerError::TruncatedUdp)?);
            if length < 8 {
                return Err(LayerError::BadUdpLength);
            }
            let mut udp_end = at + length;
            if udp_end > wire_end {
                // Longer than the IP payload: note it, and take what the datagram holds.
                layers.note(LayerError::BadUdpLength);
                udp_end = wire_end;
            }
            set_ports(data, at, layers, Transport::Udp)?;
            set_payload(at + 8, udp_end, ip_end, layers);
            Ok(())
        }
        PROTO_TCP => {
            if at + 20 > ip_end {
                return Err(LayerError::TruncatedTcp);
            }
            let header_len = usize::from(data[at + 12] >> 4) * 4;
            if header_len < 20 || at + header_len > wire_end {
                return Err(LayerError::BadTcpDataOffset);
            }
            if at + header_len > ip_end {
                return Err(LayerError::TruncatedTcp);
            }
            set_ports(data, at, layers, Transport::Tcp)?;
            set_payload(at + header_len, wire_end, ip_end, layers);
            Ok(())
        }
        other => {
            layers.transport = Transport::Other(other);
            set_payload(at, wire_end, ip_end, layers);
            Ok(())
        }
    }
}

fn set_ports(data: &[u8], at: usize, layers: &mut Layers, transport: Transport) -> Result<(), LayerError> {
    let truncated = match transport {
        Transport::Tcp => LayerError::TruncatedTcp,
        _ => LayerError::TruncatedUdp,
    };
    layers.sport = be16(data, at).ok_or(truncated)?;
    layers.dport = be16(data, at + 2).ok_or(truncated)?;
    layers.transport = transport;
    Ok(())
}

/// Payload from `start` to `wire_end` on the wire, of which up to `ip_end` was captured.
fn set_payload(start: usize, wire_end: usize, ip_end: usize, layers: &mut Layers) {
    let end = wire_end.min(ip_end).max(start);
    layers.payload_offset = start as u32;
    layers.payload_len = (end - start) as u32;
    if wire_end > ip_end {
        layers.truncated = true;
    }
}

//! dnstap's protobuf messages (dnstap.proto, the `dnstap.pb` schema), declared
//! by hand with prost's derive from the schema's field numbers: the schema
//! is small and stable, and this keeps `protoc` (and a build script) out of
//! the build. Only the fields dnsluice reads or writes are declared; prost
//! skips the others (`policy`, `http_protocol`, ...) when decoding.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The content type of dnstap in Frame Streams.
pub const CONTENT_TYPE: &[u8] = b"protobuf:dnstap.Dnstap";

/// `Dnstap.Type.MESSAGE`: the only frame type there is.
pub const TYPE_MESSAGE: i32 = 1;

/// `message Dnstap`: one frame.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Dnstap {
    /// The server's identity (`identity`, 1).
    #[prost(bytes = "vec", optional, tag = "1")]
    pub identity: Option<Vec<u8>>,
    /// The server's version (`version`, 2).
    #[prost(bytes = "vec", optional, tag = "2")]
    pub version: Option<Vec<u8>>,
    /// The message (`message`, 14).
    #[prost(message, optional, tag = "14")]
    pub message: Option<Message>,
    /// The frame type (`type`, 15): [`TYPE_MESSAGE`].
    #[prost(int32, required, tag = "15")]
    pub r#type: i32,
}

/// `message Message`: one DNS message seen by the server, with its peers.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Message {
    /// `Message.Type` (1): see [`message_type_name`].
    #[prost(int32, required, tag = "1")]
    pub r#type: i32,
    /// `SocketFamily` (2): INET = 1, INET6 = 2.
    #[prost(int32, optional, tag = "2")]
    pub socket_family: Option<i32>,
    /// `SocketProtocol` (3): see [`protocol_name`].
    #[prost(int32, optional, tag = "3")]
    pub socket_protocol: Option<i32>,
    /// The address of the side that sent the query (4), 4 or 16 bytes.
    #[prost(bytes = "vec", optional, tag = "4")]
    pub query_address: Option<Vec<u8>>,
    /// The address of the side that answered (5).
    #[prost(bytes = "vec", optional, tag = "5")]
    pub response_address: Option<Vec<u8>>,
    /// The querying side's port (6).
    #[prost(uint32, optional, tag = "6")]
    pub query_port: Option<u32>,
    /// The answering side's port (7).
    #[prost(uint32, optional, tag = "7")]
    pub response_port: Option<u32>,
    /// When the query was sent or received: seconds (8).
    #[prost(uint64, optional, tag = "8")]
    pub query_time_sec: Option<u64>,
    /// ... and nanoseconds (9).
    #[prost(fixed32, optional, tag = "9")]
    pub query_time_nsec: Option<u32>,
    /// The query, in wire format (10).
    #[prost(bytes = "vec", optional, tag = "10")]
    pub query_message: Option<Vec<u8>>,
    /// When the response was sent or received: seconds (12).
    #[prost(uint64, optional, tag = "12")]
    pub response_time_sec: Option<u64>,
    /// ... and nanoseconds (13).
    #[prost(fixed32, optional, tag = "13")]
    pub response_time_nsec: Option<u32>,
    /// The response, in wire format (14).
    #[prost(bytes = "vec", optional, tag = "14")]
    pub response_message: Option<Vec<u8>>,
}

/// `SocketFamily.INET`.
pub const FAMILY_INET: i32 = 1;
/// `SocketFamily.INET6`.
pub const FAMILY_INET6: i32 = 2;
/// `SocketProtocol.UDP`.
pub const PROTOCOL_UDP: i32 = 1;
/// `SocketProtocol.TCP`.
pub const PROTOCOL_TCP: i32 = 2;

/// The `Message.Type` names, numbered from 1.
const MESSAGE_TYPES: [&str; 14] = [
    "AUTH_QUERY",
    "AUTH_RESPONSE",
    "RESOLVER_QUERY",
    "RESOLVER_RESPONSE",
    "CLIENT_QUERY",
    "CLIENT_RESPONSE",
    "FORWARDER_QUERY",
    "FORWARDER_RESPONSE",
    "STUB_QUERY",
    "STUB_RESPONSE",
    "TOOL_QUERY",
    "TOOL_RESPONSE",
    "UPDATE_QUERY",
    "UPDATE_RESPONSE",
];

/// The name of `Message.Type` `n` (`CLIENT_QUERY`), or `None`.
pub fn message_type_name(n: i32) -> Option<&'static str> {
    MESSAGE_TYPES
        .get(usize::try_from(n).ok()?.checked_sub(1)?)
        .copied()
}

/// `Message.Type` named `name`.
pub fn message_type_of(name: &str) -> Option<i32> {
    MESSAGE_TYPES
        .iter()
        .position(|t| *t == name)
        .map(|i| i as i32 + 1)
}

/// Whether `Message.Type` `n` carries a response (the even ones).
pub fn is_response_type(n: i32) -> bool {
    n > 0 && n % 2 == 0
}

/// The name of `SocketProtocol` `n` (`UDP`, `TCP`, `DOT`, `DOH`, ...), or `None`.
pub fn protocol_name(n: i32) -> Option<&'static str> {
    Some(match n {
        1 => "UDP",
        2 => "TCP",
        3 => "DOT",
        4 => "DOH",
        5 => "DNSCryptUDP",
        6 => "DNSCryptTCP",
        7 => "DOQ",
        _ => return None,
    })
}

/// Whether `SocketProtocol` `n` runs over a stream (TCP, DoT, DoH, DNSCrypt over TCP).
pub fn is_stream_protocol(n: i32) -> bool {
    matches!(n, 2 | 3 | 4 | 6)
}

/// An address field (4 or 16 bytes); `None` for any other length.
pub fn address(bytes: &[u8]) -> Option<IpAddr> {
    match bytes.len() {
        4 => Some(IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(bytes).ok()?))),
        16 => Some(IpAddr::V6(Ipv6Addr::from(
            <[u8; 16]>::try_from(bytes).ok()?,
        ))),
        _ => None,
    }
}

/// An address as the field holds it.
pub fn address_bytes(ip: IpAddr, out: &mut Vec<u8>) {
    out.clear();
    match ip {
        IpAddr::V4(a) => out.extend_from_slice(&a.octets()),
        IpAddr::V6(a) => out.extend_from_slice(&a.octets()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;

    #[test]
    fn names_and_numbers() {
        assert_eq!(message_type_name(5), Some("CLIENT_QUERY"));
        assert_eq!(message_type_name(14), Some("UPDATE_RESPONSE"));
        assert_eq!(message_type_name(0), None);
        assert_eq!(message_type_name(15), None);
        assert_eq!(message_type_of("RESOLVER_RESPONSE"), Some(4));
        assert!(is_response_type(6) && !is_response_type(5));
        assert_eq!(protocol_name(3), Some("DOT"));
    }

    #[test]
    fn decodes_a_frame_encoded_by_hand() {
        // identity "ns" (field 1), message (14) { type CLIENT_QUERY (1: 5),
        // family INET (2: 1), protocol UDP (3: 1), query_address 10.0.0.1
        // (4), query_port 5353 (6), query_time_nsec 7 (9, fixed32) }, type 1 (15).
        let inner = [
            0x08, 5, 0x10, 1, 0x18, 1, 0x22, 4, 10, 0, 0, 1, 0x30, 0xe9, 0x29, 0x4d, 7, 0, 0, 0,
        ];
        let mut frame = vec![0x0a, 2, b'n', b's', 0x72, inner.len() as u8];
        frame.extend_from_slice(&inner);
        frame.extend_from_slice(&[0x78, 1]);
        let d = Dnstap::decode(&frame[..]).unwrap();
        assert_eq!(d.identity.as_deref(), Some(&b"ns"[..]));
        assert_eq!(d.r#type, TYPE_MESSAGE);
        let m = d.message.clone().unwrap();
        assert_eq!(m.r#type, 5);
        assert_eq!(m.socket_family, Some(FAMILY_INET));
        assert_eq!(
            address(m.query_address.as_deref().unwrap()),
            Some("10.0.0.1".parse().unwrap())
        );
        assert_eq!(m.query_port, Some(5353));
        assert_eq!(m.query_time_nsec, Some(7));
        // And back to the same bytes (fields in tag order, as written above).
        assert_eq!(d.encode_to_vec(), frame);
    }
}

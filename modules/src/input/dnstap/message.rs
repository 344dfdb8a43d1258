//! A dnstap message as a DNS message object: the wire message the frame's
//! type says it carries (a query for `*_QUERY`, a response for
//! `*_RESPONSE`), in the packet the frame describes — made up (raw IP, see
//! [`crate::synth`]) from the frame's family, addresses, ports and socket
//! protocol (UDP, or one TCP segment for TCP, DoT, DoH) — stamped with the
//! frame's query or response time.

use crate::format::dnstap::{self, Message};
use crate::synth;
use dnsluice_core::wire::Transport;
use dnsluice_core::Origin;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Where the message is in the made-up packet, and what to say about it.
#[derive(Clone, Copy, Debug)]
pub struct Made {
    /// The message's offset in the packet.
    pub at: usize,
    /// The message's length.
    pub len: usize,
    /// The time the frame gives for the message, in ns since the epoch.
    pub ts_ns: Option<i64>,
    /// UDP or TCP (the made-up packet's).
    pub transport: Transport,
    /// Source and destination ports.
    pub ports: (u16, u16),
    /// The dnstap type and protocol.
    pub origin: Origin,
}

/// Why a frame's message is not made into an object (the counter's name).
pub type Unusable = &'static str;

/// Writes the packet for `m` into `packet` and says where its DNS message is.
pub fn make(m: &Message, packet: &mut Vec<u8>) -> Result<Made, Unusable> {
    let Some(_) = dnstap::message_type_name(m.r#type) else {
        return Err("unknown_message_type");
    };
    let response = dnstap::is_response_type(m.r#type);
    let wire = if response {
        &m.response_message
    } else {
        &m.query_message
    };
    let Some(wire) = wire.as_deref().filter(|w| !w.is_empty()) else {
        return Err("no_dns_message");
    };
    if wire.len() > 65_535 - 60 {
        return Err("dns_message_too_long");
    }
    let (query_ip, response_ip) = addresses(m)?;
    let query = SocketAddr::new(query_ip, port(m.query_port)?);
    let server = SocketAddr::new(response_ip, port(m.response_port)?);
    let (src, dst) = if response {
        (server, query)
    } else {
        (query, server)
    };
    let protocol = m.socket_protocol.unwrap_or(0);
    let stream = dnstap::is_stream_protocol(protocol);
    if stream {
        synth::tcp_packet(src, dst, wire, packet);
    } else {
        synth::udp_packet(src, dst, wire, packet);
    }
    let time = |sec: Option<u64>, nsec: Option<u32>| {
        let sec = i64::try_from(sec?).ok()?;
        sec.checked_mul(1_000_000_000)?
            .checked_add(i64::from(nsec.unwrap_or(0).min(999_999_999)))
    };
    let query_time = time(m.query_time_sec, m.query_time_nsec);
    let response_time = time(m.response_time_sec, m.response_time_nsec);
    let ts_ns = if response {
        response_time.or(query_time)
    } else {
        query_time.or(response_time)
    };
    Ok(Made {
        at: packet.len() - wire.len(),
        len: wire.len(),
        ts_ns,
        transport: if stream {
            Transport::Tcp
        } else {
            Transport::Udp
        },
        ports: (src.port(), dst.port()),
        origin: Origin::Dnstap {
            message_type: m.r#type as u8,
            protocol: u8::try_from(protocol).unwrap_or(0),
        },
    })
}

fn port(p: Option<u32>) -> Result<u16, Unusable> {
    u16::try_from(p.unwrap_or(0)).map_err(|_| "bad_port")
}

/// The query and response addresses, of one family; a missing one is the
/// family's unspecified address (`0.0.0.0`, `::`).
fn addresses(m: &Message) -> Result<(IpAddr, IpAddr), Unusable> {
    let read = |a: &Option<Vec<u8>>| match a.as_deref() {
        None | Some([]) => Ok(None),
        Some(bytes) => dnstap::address(bytes).map(Some).ok_or("bad_address"),
    };
    let (q, r) = (read(&m.query_address)?, read(&m.response_address)?);
    let v6 = match (q, r) {
        (Some(a), _) | (None, Some(a)) => a.is_ipv6(),
        (None, None) => m.socket_family == Some(dnstap::FAMILY_INET6),
    };
    let unspecified = if v6 {
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    } else {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    };
    let (q, r) = (q.unwrap_or(unspecified), r.unwrap_or(unspecified));
    if q.is_ipv6() != r.is_ipv6() {
        return Err("bad_address");
    }
    Ok((q, r))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(kind: i32) -> Message {
        Message {
            r#type: kind,
            socket_family: Some(dnstap::FAMILY_INET6),
            socket_protocol: Some(dnstap::PROTOCOL_TCP),
            query_address: Some(vec![0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
            response_address: None,
            query_port: Some(40000),
            response_port: Some(53),
            query_time_sec: Some(2),
            query_time_nsec: Some(5),
            query_message: Some(b"query-bytes!".to_vec()),
            response_time_sec: Some(3),
            response_time_nsec: None,
            response_message: Some(b"response-bytes".to_vec()),
        }
    }

    #[test]
    fn a_response_goes_from_the_server_at_the_response_time() {
        let mut packet = Vec::new();
        let made = make(&message(6), &mut packet).unwrap();
        assert_eq!(&packet[made.at..made.at + made.len], b"response-bytes");
        assert_eq!(made.ports, (53, 40000));
        assert_eq!(made.ts_ns, Some(3_000_000_000));
        assert_eq!(made.transport, Transport::Tcp);
        // IPv6: the source is the unspecified response address, the destination the client.
        assert_eq!(&packet[8..24], &[0; 16]);
        assert_eq!(packet[24..26], [0x20, 1]);
        let made = make(&message(5), &mut packet).unwrap();
        assert_eq!(&packet[made.at..made.at + made.len], b"query-bytes!");
        assert_eq!((made.ports, made.ts_ns), ((40000, 53), Some(2_000_000_005)));
    }

    #[test]
    fn unusable_messages_say_why() {
        let mut packet = Vec::new();
        let mut m = message(5);
        m.query_message = None;
        assert_eq!(make(&m, &mut packet).unwrap_err(), "no_dns_message");
        let mut m = message(5);
        m.response_address = Some(vec![127, 0, 0, 1]);
        assert_eq!(make(&m, &mut packet).unwrap_err(), "bad_address");
        m.response_address = Some(vec![1, 2, 3]);
        assert_eq!(make(&m, &mut packet).unwrap_err(), "bad_address");
        assert_eq!(
            make(&message(99), &mut packet).unwrap_err(),
            "unknown_message_type"
        );
        let mut m = message(5);
        m.query_port = Some(70_000);
        assert_eq!(make(&m, &mut packet).unwrap_err(), "bad_port");
    }
}

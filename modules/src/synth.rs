//! Packets made up for objects that never were packets: a client's query and
//! the answer it got, as raw IP/UDP datagrams, so `output.pcap` can write a
//! replay's responses for tshark and Wireshark; and a dnstap frame's message
//! as the UDP datagram or TCP segment the frame describes (`input.dnstap`).
//!
//! The client's address is made up too: `198.18.0.0/15` (IPv4) or
//! `2001:2::/48` (IPv6), the ranges reserved for benchmarking (RFC 2544,
//! RFC 5180), numbered by the simulated client; its port is 1024 + the client
//! number modulo 64 000. Every exchange is written as UDP whatever transport
//! carried it (the DNS messages are what matter), with valid checksums.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The made-up address of simulated client `client` talking to `server`.
pub fn client_address(client: u32, server: &SocketAddr) -> SocketAddr {
    let port = 1024 + (client % 64_000) as u16;
    let ip = match server {
        SocketAddr::V4(_) => {
            let [_, _, c, d] = client.to_be_bytes();
            let b = 18 + ((client >> 16) & 1) as u8;
            IpAddr::V4(Ipv4Addr::new(198, b, c, d))
        }
        SocketAddr::V6(_) => {
            let [a, b, c, d] = client.to_be_bytes();
            IpAddr::V6(Ipv6Addr::from([
                0x20, 0x01, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, a, b, c, d,
            ]))
        }
    };
    SocketAddr::new(ip, port)
}

/// Writes a raw IP (LINKTYPE_RAW) packet carrying `payload` in UDP from `src`
/// to `dst` into `out` (cleared first). Both addresses must be of one family.
pub fn udp_packet(src: SocketAddr, dst: SocketAddr, payload: &[u8], out: &mut Vec<u8>) {
    ip_packet(src, dst, Carrier::Udp, payload, out);
}

/// Writes a raw IP (LINKTYPE_RAW) packet carrying the DNS message `message`
/// over TCP from `src` to `dst` into `out` (cleared first): one segment
/// (PSH, ACK; sequence and acknowledgement numbers 1) holding the
/// message with its two-byte length (RFC 1035 §4.2.2).
pub fn tcp_packet(src: SocketAddr, dst: SocketAddr, message: &[u8], out: &mut Vec<u8>) {
    ip_packet(src, dst, Carrier::Tcp, message, out);
}

/// What carries a made-up packet's payload.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Carrier {
    Udp,
    Tcp,
}

impl Carrier {
    fn protocol(self) -> u8 {
        match self {
            Carrier::Udp => 17,
            Carrier::Tcp => 6,
        }
    }

    /// The transport header and what it carries: its length.
    fn len(self, payload: &[u8]) -> usize {
        match self {
            Carrier::Udp => 8 + payload.len(),
            Carrier::Tcp => 20 + 2 + payload.len(),
        }
    }
}

fn ip_packet(
    src: SocketAddr,
    dst: SocketAddr,
    carrier: Carrier,
    payload: &[u8],
    out: &mut Vec<u8>,
) {
    out.clear();
    let len = carrier.len(payload) as u16;
    let protocol = carrier.protocol();
    match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let total = 20 + len;
            out.extend_from_slice(&[0x45, 0]);
            out.extend_from_slice(&total.to_be_bytes());
            out.extend_from_slice(&[0, 0, 0x40, 0, 64, protocol, 0, 0]); // id, DF, TTL
            out.extend_from_slice(&s.octets());
            out.extend_from_slice(&d.octets());
            let header_sum = checksum(&[&out[..20]]);
            out[10..12].copy_from_slice(&header_sum.to_be_bytes());
            let pseudo: [&[u8]; 4] = [&s.octets(), &d.octets(), &[0, protocol], &len.to_be_bytes()];
            push_transport(&pseudo, carrier, src.port(), dst.port(), payload, out);
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            out.extend_from_slice(&[0x60, 0, 0, 0]);
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(&[protocol, 64]); // next header, hop limit
            out.extend_from_slice(&s.octets());
            out.extend_from_slice(&d.octets());
            let pseudo: [&[u8]; 4] = [
                &s.octets(),
                &d.octets(),
                &u32::from(len).to_be_bytes(),
                &[0, 0, 0, protocol],
            ];
            push_transport(&pseudo, carrier, src.port(), dst.port(), payload, out);
        }
        // Mixed families cannot happen: callers make both of one family.
        _ => {}
    }
}

/// Appends the UDP or TCP header and payload, its checksum over the
/// pseudo-header `pseudo` (given in parts, so nothing is allocated) and the
/// segment.
fn push_transport(
    pseudo: &[&[u8]; 4],
    carrier: Carrier,
    sport: u16,
    dport: u16,
    payload: &[u8],
    out: &mut Vec<u8>,
) {
    let start = out.len();
    out.extend_from_slice(&sport.to_be_bytes());
    out.extend_from_slice(&dport.to_be_bytes());
    let sum_at = match carrier {
        Carrier::Udp => {
            out.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
            out.extend_from_slice(&[0, 0]);
            6
        }
        Carrier::Tcp => {
            out.extend_from_slice(&1u32.to_be_bytes()); // sequence number
            out.extend_from_slice(&1u32.to_be_bytes()); // acknowledgement number
            out.extend_from_slice(&[5 << 4, 0x18]); // 20-byte header; PSH, ACK
            out.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]); // window, checksum, urgent
            out.extend_from_slice(&(payload.len() as u16).to_be_bytes());
            16
        }
    };
    out.extend_from_slice(payload);
    let parts = [pseudo[0], pseudo[1], pseudo[2], pseudo[3], &out[start..]];
    let sum = match checksum(&parts) {
        0 if carrier == Carrier::Udp => 0xffff, // zero means "no checksum" in UDP
        s => s,
    };
    out[start + sum_at..start + sum_at + 2].copy_from_slice(&sum.to_be_bytes());
}

/// The Internet checksum (RFC 1071) of the parts, taken as one byte string.
fn checksum(parts: &[&[u8]]) -> u16 {
    let mut sum: u32 = 0;
    let mut odd: Option<u8> = None;
    for part in parts {
        for &b in part.iter() {
            match odd.take() {
                Some(high) => sum += u32::from(u16::from_be_bytes([high, b])),
                None => odd = Some(b),
            }
        }
    }
    if let Some(high) = odd {
        sum += u32::from(u16::from_be_bytes([high, 0]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The server's socket address from how a client names it: `ip:port`, or a
/// DoH URL `https://IP[:PORT]/...` (port 443 by default); `None` otherwise.
pub fn server_address(server: &str) -> Option<SocketAddr> {
    if let Ok(addr) = server.parse() {
        return Some(addr);
    }
    let authority = server.strip_prefix("https://")?.split('/').next()?;
    if let Ok(addr) = authority.parse() {
        return Some(addr);
    }
    let ip = authority.trim_start_matches('[').trim_end_matches(']');
    ip.parse::<IpAddr>().ok().map(|ip| SocketAddr::new(ip, 443))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example_checksum() {
        // RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to ddf2; the checksum
        // is its complement.
        assert_eq!(
            checksum(&[&[0x00, 0x01, 0xf2, 0x03], &[0xf4, 0xf5, 0xf6, 0xf7]]),
            !0xddf2
        );
    }

    #[test]
    fn addresses() {
        let v4: SocketAddr = "127.0.0.1:53".parse().unwrap();
        assert_eq!(client_address(0, &v4).to_string(), "198.18.0.0:1024");
        assert_eq!(
            client_address(70_000, &v4).to_string(),
            "198.19.17.112:7024"
        );
        let v6: SocketAddr = "[::1]:53".parse().unwrap();
        assert_eq!(client_address(258, &v6).to_string(), "[2001:2::102]:1282");
        assert_eq!(
            server_address("127.0.0.1:8853"),
            Some("127.0.0.1:8853".parse().unwrap())
        );
        assert_eq!(
            server_address("https://127.0.0.1:8443/dns-query"),
            Some("127.0.0.1:8443".parse().unwrap())
        );
        assert_eq!(
            server_address("https://[::1]/q"),
            Some("[::1]:443".parse().unwrap())
        );
        assert_eq!(server_address("https://dns.example/q"), None);
    }

    #[test]
    fn packets_check_out() {
        let mut out = Vec::new();
        let src: SocketAddr = "198.18.0.1:1025".parse().unwrap();
        let dst: SocketAddr = "127.0.0.1:53".parse().unwrap();
        udp_packet(src, dst, b"abc", &mut out);
        assert_eq!(out.len(), 20 + 8 + 3);
        // A header with its checksum in place sums to zero (RFC 1071).
        assert_eq!(checksum(&[&out[..20]]), 0);
        let pseudo = [&[198, 18, 0, 1][..], &[127, 0, 0, 1], &[0, 17, 0, 11]].concat();
        assert_eq!(checksum(&[&pseudo, &out[20..]]), 0);
        let src: SocketAddr = "[2001:2::1]:1025".parse().unwrap();
        let dst: SocketAddr = "[::1]:53".parse().unwrap();
        udp_packet(src, dst, b"abcd", &mut out);
        assert_eq!(out.len(), 40 + 8 + 4);
        assert_eq!(&out[4..6], &[0, 12]);
        let src: SocketAddr = "10.0.0.1:40000".parse().unwrap();
        let dst: SocketAddr = "10.0.0.2:53".parse().unwrap();
        tcp_packet(src, dst, b"abcde", &mut out);
        assert_eq!(out.len(), 20 + 20 + 2 + 5);
        assert_eq!(&out[40..], b"\0\x05abcde");
        let pseudo = [&[10, 0, 0, 1][..], &[10, 0, 0, 2], &[0, 6, 0, 27]].concat();
        assert_eq!(checksum(&[&pseudo, &out[20..]]), 0);
    }
}

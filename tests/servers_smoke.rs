//! The loopback test servers (`tests/servers/up.sh`) are up and serve the
//! generated zone: one hand-built query to knot over UDP and over TCP.
//! Fails (does not skip) when the servers are not running.

use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::str::FromStr;
use std::time::Duration;

use hickory_proto::op::{Message, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType};

const INDEX: u32 = 12345;
const TIMEOUT: Duration = Duration::from_secs(5);

fn query(id: u16) -> Vec<u8> {
    let name = Name::from_str(&format!("n{INDEX}.lookup.test.")).unwrap();
    let mut msg = Message::query();
    msg.metadata.id = id;
    msg.metadata.op_code = OpCode::Query;
    msg.metadata.recursion_desired = false;
    msg.add_query(Query::query(name, RecordType::A));
    msg.to_vec().unwrap()
}

/// Checks the response answers with exactly the address the zone generator
/// gives `n12345` (10.0.48.57).
fn check(id: u16, response: &[u8]) {
    let msg = Message::from_vec(response).unwrap();
    assert_eq!(msg.metadata.id, id);
    assert_eq!(msg.metadata.response_code, ResponseCode::NoError);
    assert!(msg.metadata.authoritative);
    let addrs: Vec<_> = msg
        .answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(a.0),
            _ => None,
        })
        .collect();
    assert_eq!(addrs, [testkit::lookup_address(INDEX)]);
    assert_eq!(addrs, ["10.0.48.57".parse::<std::net::Ipv4Addr>().unwrap()]);
}

#[test]
fn knot_answers_the_generated_zone_over_udp() {
    let servers = testkit::servers();
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(TIMEOUT)).unwrap();
    socket.send_to(&query(0x5151), servers.knot).unwrap();
    let mut buf = [0u8; 4096];
    let n = socket.recv(&mut buf).unwrap();
    check(0x5151, &buf[..n]);
}

#[test]
fn knot_answers_the_generated_zone_over_tcp() {
    let servers = testkit::servers();
    let mut conn = TcpStream::connect_timeout(&servers.knot, TIMEOUT).unwrap();
    conn.set_read_timeout(Some(TIMEOUT)).unwrap();
    let msg = query(0x7272);
    let mut frame = (msg.len() as u16).to_be_bytes().to_vec();
    frame.extend_from_slice(&msg);
    conn.write_all(&frame).unwrap();
    let mut len = [0u8; 2];
    conn.read_exact(&mut len).unwrap();
    let mut response = vec![0u8; usize::from(u16::from_be_bytes(len))];
    conn.read_exact(&mut response).unwrap();
    check(0x7272, &response);
}

#[test]
fn servers_env_lists_every_nameserver() {
    let servers = testkit::servers();
    assert_eq!(servers.fast_dns.len(), 3);
    assert_eq!(servers.fast_dns[0], servers.knot);
    assert_eq!(servers.fast_dot.len(), 2);
    assert!(servers.ca_file.exists(), "{}", servers.ca_file.display());
    assert_eq!(servers.tls_name, "dns.test");
    assert_eq!(
        servers.zone_names, 100_000,
        "up.sh generates 100,000 numbered names"
    );
}

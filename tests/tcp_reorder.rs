//! DNS over TCP captured out of order, against tshark (which reassembles
//! out-of-order segments when asked, `tcp.reassemble_out_of_order`): a
//! query's second segment overtaken by the next query, in both directions
//! of one connection. Every message comes out, as in tshark. The overtaking
//! segment used to be taken for the stream resuming after lost bytes: the
//! message it overtook was dropped and a gap counted. And a message whose
//! middle segment is in a pcapng Simple Packet Block, which has no time.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use testkit::pipeline::dns_run;
use testkit::{assert_ok, temp_path};

const CLIENT: [u8; 4] = [10, 0, 0, 1];
const SERVER: [u8; 4] = [10, 0, 0, 2];
const SYN: u8 = 0x02;
const ACK: u8 = 0x10;
const PSH_ACK: u8 = 0x18;
const FIN_ACK: u8 = 0x11;

/// A DNS query for `NAME.example` A with id `id`, with its two-byte length.
fn framed_query(id: u16, name: &str) -> Vec<u8> {
    let mut m = id.to_be_bytes().to_vec();
    m.extend([0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    m.push(name.len() as u8);
    m.extend(name.as_bytes());
    m.extend(b"\x07example\x00\x00\x01\x00\x01");
    [(m.len() as u16).to_be_bytes().to_vec(), m].concat()
}

/// A raw IPv4 packet (LINKTYPE_RAW) with a TCP segment from `from` (the
/// client or the server), sequence number `seq`, flags `flags` and `data`.
fn segment(from_client: bool, seq: u32, flags: u8, data: &[u8]) -> Vec<u8> {
    let (src, dst, sport, dport) = if from_client {
        (CLIENT, SERVER, 40000u16, 53u16)
    } else {
        (SERVER, CLIENT, 53, 40000)
    };
    let total = (20 + 20 + data.len()) as u16;
    let mut p = vec![0x45, 0];
    p.extend(total.to_be_bytes());
    p.extend([0, 1, 0x40, 0, 64, 6, 0, 0]);
    p.extend(src);
    p.extend(dst);
    p.extend(sport.to_be_bytes());
    p.extend(dport.to_be_bytes());
    p.extend(seq.to_be_bytes());
    p.extend(0u32.to_be_bytes()); // no acknowledgement number checked
    p.extend([0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    p.extend(data);
    p
}

/// A classic pcap of `packets` (LINKTYPE_RAW), one a millisecond.
fn pcap(packets: &[Vec<u8>]) -> PathBuf {
    let mut file = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    file.extend(65535u32.to_le_bytes());
    file.extend(101u32.to_le_bytes());
    for (i, p) in packets.iter().enumerate() {
        for field in [
            1_700_000_000,
            1000 * i as u32,
            p.len() as u32,
            p.len() as u32,
        ] {
            file.extend(field.to_le_bytes());
        }
        file.extend(p);
    }
    let path = temp_path("reordered.pcap");
    std::fs::write(&path, file).unwrap();
    path
}

/// The ids of the DNS messages tshark finds, reassembling out of order.
fn tshark_ids(capture: &Path) -> Vec<u64> {
    let out = Command::new("tshark")
        .args(["-n", "-o", "tcp.reassemble_out_of_order:TRUE", "-r"])
        .arg(capture)
        .args(["-Y", "dns", "-T", "fields", "-e", "dns.id"])
        .output()
        .unwrap();
    assert!(out.status.success(), "tshark");
    let mut ids: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .flat_map(|field| field.split(','))
        .map(|id| u64::from_str_radix(id.trim_start_matches("0x"), 16).unwrap())
        .collect();
    ids.sort_unstable();
    ids
}

#[test]
fn a_segment_overtaken_by_the_next_message_is_reassembled_as_tshark_does() {
    let (a, b, c) = (
        framed_query(1, "first-query-name"),
        framed_query(2, "second"),
        framed_query(3, "third"),
    );
    let (x, y) = (framed_query(7, "answer-like-one"), framed_query(8, "other"));
    let (client, server) = (1000u32, 5000u32);
    let at = |start: u32, offset: usize| start + 1 + offset as u32;
    let packets = [
        segment(true, client, SYN, b""),
        segment(false, server, SYN | ACK, b""),
        // The client: a's first ten bytes, then b (overtaking), a's rest, c.
        segment(true, at(client, 0), PSH_ACK, &a[..10]),
        segment(true, at(client, a.len()), PSH_ACK, &b),
        segment(true, at(client, 10), PSH_ACK, &a[10..]),
        segment(true, at(client, a.len() + b.len()), PSH_ACK, &c),
        // The server's side the same: x cut in two, y overtaking its rest.
        segment(false, at(server, 0), PSH_ACK, &x[..5]),
        segment(false, at(server, x.len()), PSH_ACK, &y),
        segment(false, at(server, 5), PSH_ACK, &x[5..]),
        segment(true, at(client, a.len() + b.len() + c.len()), FIN_ACK, b""),
        segment(false, at(server, x.len() + y.len()), FIN_ACK, b""),
    ];
    let capture = pcap(&packets);
    assert_eq!(tshark_ids(&capture), [1, 2, 3, 7, 8]);
    let (rows, stats, out) = dns_run("input.fpcap", &capture);
    assert_ok(&out, "dnsluice");
    let mut ids: Vec<u64> = rows
        .iter()
        .filter_map(|r| r["dns"]["id"].as_u64())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, [1, 2, 3, 7, 8], "{stats}");
    let dns: &Value = &stats["stages"][2];
    assert_eq!(dns["module"], "filter.dns");
    assert_eq!(dns["counters"].get("tcp_gaps"), None, "{dns}");
}

/// A pcapng block of type `kind` around `body` (little-endian, padded).
fn block(kind: u32, body: &[u8]) -> Vec<u8> {
    let padded = body.len().div_ceil(4) * 4;
    let total = (12 + padded) as u32;
    let mut b = kind.to_le_bytes().to_vec();
    b.extend(total.to_le_bytes());
    b.extend(body);
    b.resize(8 + padded, 0);
    b.extend(total.to_le_bytes());
    b
}

/// An Enhanced Packet Block on interface 0 at `micros` (the default
/// resolution), and a Simple Packet Block, which has no time.
fn epb(micros: u64, packet: &[u8]) -> Vec<u8> {
    let mut body = 0u32.to_le_bytes().to_vec();
    body.extend(((micros >> 32) as u32).to_le_bytes());
    body.extend((micros as u32).to_le_bytes());
    body.extend((packet.len() as u32).to_le_bytes());
    body.extend((packet.len() as u32).to_le_bytes());
    body.extend(packet);
    block(6, &body)
}

fn spb(packet: &[u8]) -> Vec<u8> {
    let mut body = (packet.len() as u32).to_le_bytes().to_vec();
    body.extend(packet);
    block(3, &body)
}

/// A message cut in three segments, the middle one in a Simple Packet Block
/// (no time): the message comes out, as tshark finds it. The block's packet
/// was taken as of 1970, and the flow's next packet found it idle for 55
/// years: the flow expired, the message lost.
#[test]
fn a_segment_without_a_time_does_not_age_its_flow() {
    let a = framed_query(4, "spread-over-three-segments");
    let client = 1000u32;
    let at = |offset: usize| client + 1 + offset as u32;
    let mut file = block(0x0a0d_0d0a, &{
        let mut shb = 0x1a2b_3c4du32.to_le_bytes().to_vec();
        shb.extend([1, 0, 0, 0]);
        shb.extend([0xff; 8]);
        shb
    });
    // Interface 0: raw IP (101), snaplen 65535.
    file.extend(block(1, &[101, 0, 0, 0, 0xff, 0xff, 0, 0]));
    let start = 1_700_000_000_000_000u64;
    file.extend(epb(start, &segment(true, client, SYN, b"")));
    file.extend(epb(start + 1000, &segment(true, at(0), PSH_ACK, &a[..10])));
    file.extend(spb(&segment(true, at(10), PSH_ACK, &a[10..20])));
    file.extend(epb(start + 2000, &segment(true, at(20), PSH_ACK, &a[20..])));
    let capture = temp_path("timeless.pcapng");
    std::fs::write(&capture, file).unwrap();
    assert_eq!(tshark_ids(&capture), [4]);
    let (rows, stats, out) = dns_run("input.fpcap", &capture);
    assert_ok(&out, "dnsluice");
    let ids: Vec<u64> = rows
        .iter()
        .filter_map(|r| r["dns"]["id"].as_u64())
        .collect();
    assert_eq!(ids, [4], "{stats}");
}

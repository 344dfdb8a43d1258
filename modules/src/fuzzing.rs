//! Drivers shared by the fuzz targets in `fuzz/` and the tests that replay
//! what they found (`tests/fuzz_regressions.rs`), so both run the same code.
//! Each panics when an invariant does not hold.

use crate::filter::dns::defrag::{DatagramKey, DefragLimits, Defragmenter};
use crate::filter::dns::tcp::{FlowKey, TcpLimits, TcpReassembler};
use dnsluice_core::dns::{check, name, questions, rdata, records, scan};
use dnsluice_core::wire::{Layers, Transport};
use dnsluice_core::{CaptureMeta, DnsMessage, Flow, LinkType, Object, Origin, Packet, PacketRef};

/// A DNS message through `scan` (with and without the capture-cut flag), the
/// question and record iterators, name and RDATA printing, and its JSON line;
/// the summary must agree with what the iterators find.
pub fn dns_message(msg: &[u8]) {
    for cut in [false, true] {
        let info = scan(msg, cut);
        assert!(info.error_offset as usize <= msg.len(), "{info:?}");
        let checked = check(msg, cut);
        assert_eq!(
            checked.expand(msg),
            info,
            "the compact form expands to the summary"
        );
        if let Some(h) = info.header {
            assert!(msg.len() >= 12);
            assert!(info.questions <= h.qdcount);
            if info.error.is_none() {
                assert_eq!(info.questions, h.qdcount);
                assert_eq!(info.records, [h.ancount, h.nscount, h.arcount]);
            }
        }
        let found: Vec<_> = questions(msg).collect();
        assert_eq!(found.len(), usize::from(info.questions), "{info:?}");
        assert_eq!(found.first().copied(), info.question);
        let mut text = Vec::new();
        for q in &found {
            assert!(
                name::write(msg, q.name as usize, &mut text).is_ok(),
                "a question that scanned has a name"
            );
        }
        let listed: usize = info.records.iter().map(|n| usize::from(*n)).sum();
        assert_eq!(records(msg).count(), listed, "{info:?}");
        for r in records(msg) {
            let _ = name::write(msg, r.name as usize, &mut text);
            rdata::write(msg, &r, &mut text);
        }
        let packet = Packet {
            data: &[],
            meta: CaptureMeta {
                frame: 1,
                ts_ns: Some(0),
                len: 0,
                link: LinkType::RAW,
            },
            layers: Layers::default(),
        };
        let message = DnsMessage {
            packet: PacketRef::Held(packet),
            bytes: msg,
            checked,
            flow: Flow {
                sport: 53,
                dport: 53,
                transport: Transport::Udp,
            },
            origin: Origin::Datagram,
        };
        let mut line = Vec::new();
        crate::json::write_object(&Object::Dns(message), &mut line, &mut Vec::new());
        assert!(line.starts_with(b"{") && line.ends_with(b"}"));
        assert!(std::str::from_utf8(&line).is_ok(), "JSON must be UTF-8");
    }
}

/// TCP stream reassembly and IP defragmentation on a sequence of segments and
/// fragments, with small limits so that eviction, expiry, overflow and
/// snaplen-cut paths run too. Input: 6-byte headers, each followed by its
/// payload: `[kind/port][seq or offset: 2 bytes][flags][time step][length]`.
pub fn reassembly(data: &[u8]) {
    let mut tcp = TcpReassembler::new(TcpLimits {
        max_flows: 4,
        max_flow_bytes: 2048,
        idle_timeout_ns: 1_000,
    });
    let mut ip = Defragmenter::new(DefragLimits {
        max_datagrams: 4,
        timeout_ns: 1_000,
    });
    let src = "192.0.2.1".parse().expect("an address");
    let dst = "192.0.2.53".parse().expect("an address");
    let mut rest = data;
    let mut now = 0i64;
    let mut seqs = [0u32; 8];
    while let Some(head) = rest.get(..6) {
        let (kind, position, flags, step, len) = (
            head[0],
            u16::from_be_bytes([head[1], head[2]]),
            head[3],
            head[4],
            usize::from(head[5]),
        );
        let payload = rest.get(6..6 + len).unwrap_or(&rest[6..]);
        rest = &rest[(6 + len).min(rest.len())..];
        now += i64::from(step);
        let flow = usize::from(kind & 7);
        if kind & 0x80 == 0 {
            // A TCP segment: sequence numbers move relative to the flow's last one.
            seqs[flow] = seqs[flow]
                .wrapping_add(u32::from(position))
                .wrapping_sub(1 << 14);
            let key = FlowKey {
                src,
                dst,
                sport: 1000 + flow as u16,
                dport: 53,
            };
            // Sometimes the capture cut the segment: it was longer on the wire.
            let wire = if flags & 0x80 != 0 {
                payload.len() + usize::from(step)
            } else {
                payload.len()
            };
            tcp.segment(
                key,
                seqs[flow],
                flags & 0x1f,
                payload,
                wire,
                now,
                &mut |message, segments, _cut| {
                    assert!(message.len() <= usize::from(u16::MAX));
                    assert!(segments >= 1);
                },
            );
            assert!(tcp.flows() <= 5);
        } else {
            let key = DatagramKey {
                src,
                dst,
                id: u32::from(kind & 3),
                protocol: 17,
            };
            let offset = u32::from(position & 0xfff8);
            if let Some((datagram, fragments)) =
                ip.fragment(key, offset, flags & 1 != 0, payload, now, 1)
            {
                assert!(!datagram.is_empty() && fragments >= 1);
            }
        }
    }
    tcp.finish();
    ip.finish();
    assert_eq!(tcp.flows(), 0);
}

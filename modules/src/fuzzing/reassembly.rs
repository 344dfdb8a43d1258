//! The `reassembly` target: TCP stream reassembly and IP defragmentation.

use crate::filter::dns::defrag::{DatagramKey, DefragLimits, Defragmenter};
use crate::filter::dns::tcp::{FlowKey, TcpLimits, TcpReassembler};

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
    tcp.finish(None);
    ip.finish(None);
    assert_eq!(tcp.flows(), 0);
}

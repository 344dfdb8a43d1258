//! DNS over TCP: per-flow stream reassembly and RFC 1035 §4.2.2 framing (a
//! two-byte length before each message).
//!
//! Several messages in one segment, one message over several segments, a
//! length prefix split across segments; retransmitted and overlapping bytes
//! are ignored; segments that arrive early are held (within a window) until
//! the gap is filled. Memory is bounded: at most `max_flows` flows, at most
//! `max_flow_bytes` held per flow, and flows idle for `idle_timeout` of
//! capture time are dropped. Everything dropped is counted.
//!
//! Bytes that were never captured (capture loss, a capture that starts in
//! the middle of a connection) would hold every later segment back: a
//! segment beyond a gap that starts a plausible message ([`resync`]) declares
//! the gap instead. What was held before it is dropped (counted), the
//! stream resumes there, and the first message after the resync must check
//! out as a whole, or the stream waits for the next such segment. A message
//! is never assembled across a gap. A segment that arrives late, inside a
//! declared gap, is framed on its own. A message start that comes while a
//! partial message waits for its rest is held first, for one more segment
//! or the connection's end: it may only have overtaken that rest.

use super::table::{idle_past, take_expired, take_quietest, KeyedTable};

/// Bounds of the reassembler.
#[derive(Clone, Copy, Debug)]
pub struct TcpLimits {
    /// Flows tracked at once.
    pub max_flows: usize,
    /// Bytes held per flow (partial message plus early segments).
    pub max_flow_bytes: usize,
    /// Capture-time idle timeout, in ns.
    pub idle_timeout_ns: i64,
}

pub use super::flow_key::FlowKey;
use super::tcp_stream::{resume, resync_at_held_start, take_cut_segment, take_segment, FlowState};
pub use super::tcp_stream::{Emit, TcpCounters};

/// Emptied stream buffers kept for the next flows, at most.
const SPARE_BUFFERS: usize = 256;
/// A buffer grown past this is freed with its flow, not kept (the spares
/// hold 1 MiB at most; most DNS messages over TCP fit).
const SPARE_CAPACITY: usize = 4096;

/// The reassembler: flows by key.
#[derive(Debug)]
pub struct TcpReassembler {
    limits: TcpLimits,
    flows: KeyedTable<FlowKey, FlowState>,
    /// Stream buffers of flows that ended, emptied, for the next flows: a
    /// buffer grown from nothing costs each flow an allocation and a
    /// reallocation or two (on generated DNS-over-TCP connections, about a
    /// twentieth of a run's instructions went to growing them).
    spare: Vec<Vec<u8>>,
    /// Capture time of the last sweep for idle flows.
    swept_ns: i64,
    /// The latest capture time seen.
    latest_ns: i64,
    /// Counters.
    pub counters: TcpCounters,
}

impl TcpReassembler {
    /// An empty reassembler.
    pub fn new(limits: TcpLimits) -> Self {
        TcpReassembler {
            limits,
            flows: KeyedTable::default(),
            spare: Vec::new(),
            swept_ns: i64::MIN,
            latest_ns: i64::MIN,
            counters: TcpCounters::default(),
        }
    }

    /// Flows currently tracked.
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    /// Takes one segment: `seq`, the TCP `flags` byte, its captured `payload`
    /// of `wire_len` bytes on the wire, at capture time `now_ns`. Calls `emit`
    /// for each complete message.
    ///
    /// A segment cut by the capture's snaplen cannot be joined to what follows:
    /// its complete messages are emitted, then the partial one (marked cut), and
    /// the stream restarts after it.
    #[allow(clippy::too_many_arguments)]
    pub fn segment(
        &mut self,
        key: FlowKey,
        seq: u32,
        flags: u8,
        payload: &[u8],
        wire_len: usize,
        now_ns: i64,
        emit: &mut Emit<'_>,
    ) {
        const FIN: u8 = 0x01;
        const SYN: u8 = 0x02;
        const RST: u8 = 0x04;
        self.sweep(now_ns);
        let tracked = self.expire_if_idle(&key, now_ns);
        if flags & SYN != 0 {
            // A new connection: whatever an old one with these ports left is gone.
            if let Some(old) = tracked.then(|| self.flows.remove(&key)).flatten() {
                self.drop_flow(old);
            }
            let state = FlowState {
                next_seq: seq.wrapping_add(1),
                last_ns: now_ns,
                buffer: self.spare.pop().unwrap_or_default(),
                ..Default::default()
            };
            self.insert(key, state);
            if payload.is_empty() {
                return;
            }
            // Data on the SYN (TCP Fast Open, RFC 7413; RFC 7766 encourages it for
            // DNS): its bytes start the stream, one past the SYN's sequence number.
            return self.segment(
                key,
                seq.wrapping_add(1),
                flags & !SYN,
                payload,
                wire_len,
                now_ns,
                emit,
            );
        }
        if !payload.is_empty() {
            self.counters.segments += 1;
            // (Past a SYN, which returned above: `tracked` still holds.)
            if !tracked {
                // Mid-stream: we did not see the handshake; start at the first
                // segment that starts a message.
                let buffer = self.spare.pop().unwrap_or_default();
                self.insert(
                    key,
                    FlowState {
                        next_seq: seq,
                        lost: true,
                        buffer,
                        ..Default::default()
                    },
                );
            }
            let limits = self.limits;
            let counters = &mut self.counters;
            if let Some(flow) = self.flows.get_mut(&key) {
                flow.last_ns = now_ns;
                if !resume(flow, seq, payload, counters) {
                    // Still looking for a message start: this segment is skipped.
                } else if wire_len > payload.len() {
                    counters.truncated_segments += 1;
                    take_cut_segment(flow, seq, payload, wire_len, counters, emit);
                } else {
                    take_segment(flow, seq, payload, counters, emit);
                }
                if flow.held() > limits.max_flow_bytes {
                    // Holding a message start for the rest of the one
                    // before it: stop waiting before giving the flow up.
                    resync_at_held_start(flow, counters, emit);
                    if flow.held() > limits.max_flow_bytes {
                        counters.flows_overflowed += 1;
                        let flow = self.flows.remove(&key).unwrap_or_default();
                        self.drop_flow(flow);
                    }
                }
            }
        }
        if flags & (FIN | RST) != 0 {
            if let Some(mut flow) = self.flows.remove(&key) {
                if !flow.early.is_empty() {
                    // A message held back, waiting for the rest of the one
                    // before it, which will not come now.
                    resync_at_held_start(&mut flow, &mut self.counters, emit);
                }
                self.drop_flow(flow);
            }
        }
    }

    /// Drops every flow, counting incomplete messages and, as expired,
    /// the flows idle past the timeout at the end of the input: its latest
    /// capture time, `input_end_ns` when a split told it, else the latest
    /// this reassembler saw (end of input).
    pub fn finish(&mut self, input_end_ns: Option<i64>) {
        let end = input_end_ns.map_or(self.latest_ns, |t| t.max(self.latest_ns));
        let timeout = self.limits.idle_timeout_ns;
        let flows: Vec<FlowState> = self.flows.drain().map(|(_, f)| f).collect();
        for flow in flows {
            if idle_past(end, flow.last_ns, timeout) {
                self.counters.flows_expired += 1;
            }
            self.drop_flow(flow);
        }
    }

    /// A flow whose next segment comes after the idle timeout has expired,
    /// swept or not: decided by the flow's own segments, so the same with
    /// any number of threads (a sweep only frees memory sooner). Returns
    /// whether `key`'s flow is (still) tracked, so the caller need not look
    /// it up again to know.
    fn expire_if_idle(&mut self, key: &FlowKey, now_ns: i64) -> bool {
        self.latest_ns = self.latest_ns.max(now_ns);
        let timeout = self.limits.idle_timeout_ns;
        let idle = match self.flows.get(key) {
            None => return false,
            Some(flow) => idle_past(now_ns, flow.last_ns, timeout),
        };
        if !idle {
            return true;
        }
        if let Some(flow) = self.flows.remove(key) {
            self.counters.flows_expired += 1;
            self.drop_flow(flow);
        }
        false
    }

    fn insert(&mut self, key: FlowKey, state: FlowState) {
        if self.flows.len() >= self.limits.max_flows {
            // Full: make room for many new flows at once, quietest first.
            for (_, flow) in take_quietest(&mut self.flows, |f| f.last_ns) {
                self.counters.flows_evicted += 1;
                self.drop_flow(flow);
            }
        }
        self.flows.insert(key, state);
    }

    /// Counts what an ending flow leaves unfinished and keeps its buffer
    /// for a flow to come (emptied).
    fn drop_flow(&mut self, flow: FlowState) {
        let held = flow.held();
        if held > 0 {
            self.counters.incomplete_messages += 1;
            self.counters.incomplete_bytes += held as u64;
        }
        let mut buffer = flow.buffer;
        if buffer.capacity() <= SPARE_CAPACITY && self.spare.len() < SPARE_BUFFERS {
            buffer.clear();
            self.spare.push(buffer);
        }
    }

    /// Drops flows idle for longer than the timeout (at most every quarter timeout of capture time).
    fn sweep(&mut self, now_ns: i64) {
        let timeout = self.limits.idle_timeout_ns;
        if now_ns.saturating_sub(self.swept_ns) < timeout / 4 {
            return;
        }
        self.swept_ns = now_ns;
        for (_, flow) in take_expired(&mut self.flows, now_ns, timeout, |f| f.last_ns) {
            self.counters.flows_expired += 1;
            self.drop_flow(flow);
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    const ACK: u8 = 0x10;
    const SYN: u8 = 0x02;
    const FIN: u8 = 0x01;

    fn key(port: u16) -> FlowKey {
        FlowKey {
            src: "192.0.2.1".parse().unwrap(),
            dst: "192.0.2.53".parse().unwrap(),
            sport: port,
            dport: 53,
        }
    }

    fn limits() -> TcpLimits {
        TcpLimits {
            max_flows: 4,
            max_flow_bytes: 1000,
            idle_timeout_ns: 10_000_000_000,
        }
    }

    /// A length-prefixed message of `len` bytes, each byte `fill`.
    fn framed(len: usize, fill: u8) -> Vec<u8> {
        let mut v = (len as u16).to_be_bytes().to_vec();
        v.extend(std::iter::repeat_n(fill, len));
        v
    }

    /// Feeds (seq, flags, payload, time) segments; returns (message bytes, segments) emitted.
    fn run(
        r: &mut TcpReassembler,
        k: FlowKey,
        segments: &[(u32, u8, &[u8], i64)],
    ) -> Vec<(Vec<u8>, u32)> {
        let mut out = Vec::new();
        for (seq, flags, payload, now) in segments {
            r.segment(
                k,
                *seq,
                *flags,
                payload,
                payload.len(),
                *now,
                &mut |m, n, cut| {
                    assert!(!cut);
                    out.push((m.to_vec(), n));
                },
            );
        }
        out
    }

    #[test]
    fn several_messages_in_one_segment_and_one_over_three() {
        let mut r = TcpReassembler::new(limits());
        let mut two = framed(3, 1);
        two.extend(framed(2, 2));
        let big = framed(20, 3);
        let got = run(
            &mut r,
            key(1),
            &[
                (99, SYN, b"", 0),
                (100, ACK, &two, 1),
                (109, ACK, &big[..1], 2),
                (110, ACK, &big[1..10], 3),
                (119, ACK, &big[10..], 4),
            ],
        );
        assert_eq!(
            got,
            vec![(vec![1; 3], 1), (vec![2; 2], 1), (vec![3; 20], 3)]
        );
    }

    /// A flow that ends with half a message in its buffer leaves the
    /// buffer, emptied, to the next flow: the next flow's message is its
    /// own bytes alone (nothing of the first one's left in front), framed in
    /// the buffer the first one grew (kept, then taken).
    #[test]
    fn an_ended_flows_buffer_serves_the_next_flow_empty() {
        let mut r = TcpReassembler::new(limits());
        let first = framed(40, 7);
        let segments = [(99, SYN, &b""[..], 0), (100, ACK, &first[..10], 1)];
        assert!(run(&mut r, key(1), &segments).is_empty());
        assert!(run(&mut r, key(1), &[(110, FIN | ACK, b"", 2)]).is_empty());
        assert_eq!(r.counters.incomplete_messages, 1);
        assert_eq!(r.spare.len(), 1, "the ended flow's buffer was kept");
        let second = framed(30, 9);
        let segments = [(499, SYN, &b""[..], 3), (500, ACK, &second[..5], 4)];
        assert!(run(&mut r, key(2), &segments).is_empty());
        assert!(r.spare.is_empty(), "the new flow took the kept buffer");
        let got = run(&mut r, key(2), &[(505, ACK, &second[5..], 5)]);
        assert_eq!(got, vec![(vec![9; 30], 2)]);
    }

    #[test]
    fn data_on_the_syn_starts_the_stream() {
        let mut r = TcpReassembler::new(limits());
        let first = framed(5, 4);
        let got = run(
            &mut r,
            key(3),
            &[(500, SYN, &first, 0), (508, ACK, &framed(2, 5), 1)],
        );
        assert_eq!(got, vec![(vec![4; 5], 1), (vec![5; 2], 1)]);
    }

    #[test]
    fn retransmissions_overlaps_and_early_segments() {
        let mut r = TcpReassembler::new(limits());
        let a = framed(4, 7);
        let b = framed(4, 8);
        let c = framed(4, 9);
        let mut bc = b.clone();
        bc.extend(&c);
        let got = run(
            &mut r,
            key(2),
            &[
                (999, SYN, b"", 0),
                (1000, ACK, &a, 0),
                (1000, ACK, &a, 1), // retransmitted: ignored
                (1012, ACK, &c, 2), // early: held
                (1003, ACK, &[a[3..].to_vec(), bc[..6].to_vec()].concat(), 3), // overlaps a's last 3 bytes
            ],
        );
        assert_eq!(got, vec![(vec![7; 4], 1), (vec![8; 4], 1), (vec![9; 4], 1)]);
        assert_eq!(
            (
                r.counters.retransmissions,
                r.counters.overlaps,
                r.counters.out_of_order
            ),
            (1, 1, 1)
        );
    }

    #[test]
    fn limits_are_kept_and_what_is_dropped_is_counted() {
        let mut r = TcpReassembler::new(limits());
        // Five flows with a partial message each: the table holds four, the quietest is evicted.
        for port in 0..5u16 {
            run(
                &mut r,
                key(100 + port),
                &[
                    (0, SYN, b"", i64::from(port)),
                    (1, ACK, &framed(50, 1)[..10], i64::from(port)),
                ],
            );
        }
        assert_eq!(
            (
                r.flows(),
                r.counters.flows_evicted,
                r.counters.incomplete_messages
            ),
            (4, 1, 1)
        );
        // A flow holding more than max_flow_bytes is dropped.
        run(
            &mut r,
            key(200),
            &[(0, SYN, b"", 10), (1, ACK, &framed(2000, 1)[..1200], 10)],
        );
        assert_eq!(r.counters.flows_overflowed, 1);
        // Idle flows go after the timeout (capture time).
        run(
            &mut r,
            key(300),
            &[
                (0, SYN, b"", 60_000_000_000),
                (1, ACK, &framed(4, 1), 60_000_000_000),
            ],
        );
        assert_eq!(
            r.flows(),
            1,
            "every earlier flow expired; the new one stays while open"
        );
        assert!(r.counters.flows_expired >= 3);
        // A connection closed in the middle of a message: dropped, counted.
        let before = r.counters.incomplete_messages;
        run(
            &mut r,
            key(400),
            &[
                (0, SYN, b"", 61_000_000_000),
                (1, ACK, &framed(300, 1)[..44], 61_000_000_000),
                (45, FIN | ACK, b"", 61_000_000_001),
            ],
        );
        assert_eq!((r.flows(), r.counters.incomplete_messages), (1, before + 1));
    }

    #[test]
    fn cut_segments_report_the_partial_message_and_restart() {
        let mut r = TcpReassembler::new(limits());
        let whole = framed(30, 5);
        let mut got = Vec::new();
        r.segment(key(9), 0, SYN, b"", 0, 0, &mut |_, _, _| {});
        // Only 12 of the 32 bytes were captured.
        r.segment(key(9), 1, ACK, &whole[..12], 32, 0, &mut |m, _, cut| {
            got.push((m.to_vec(), cut))
        });
        // The next segment starts a new message.
        r.segment(key(9), 33, ACK, &framed(3, 6), 5, 1, &mut |m, _, cut| {
            got.push((m.to_vec(), cut))
        });
        assert_eq!(got, vec![(vec![5; 10], true), (vec![6; 3], false)]);
        assert_eq!(r.counters.truncated_segments, 1);
    }

    /// A length-prefixed DNS query for `name.example.` type A with id `id`
    /// (RFC 1035 layout: header, QNAME labels, QTYPE, QCLASS).
    fn query(id: u16, name: &[u8]) -> Vec<u8> {
        let mut m = id.to_be_bytes().to_vec();
        m.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
        m.push(name.len() as u8);
        m.extend_from_slice(name);
        m.extend_from_slice(b"\x07example\x00\x00\x01\x00\x01");
        [(m.len() as u16).to_be_bytes().to_vec(), m].concat()
    }

    /// The ids of the messages `got` holds (the first two bytes of each).
    fn ids(got: &[(Vec<u8>, u32)]) -> Vec<u16> {
        got.iter()
            .map(|(m, _)| u16::from_be_bytes([m[0], m[1]]))
            .collect()
    }

    #[test]
    fn a_gap_inside_a_message_is_never_bridged() {
        let mut r = TcpReassembler::new(limits());
        let a = query(1, b"first-message-name");
        let b = query(2, b"second");
        let c = query(3, b"third");
        let (a1, a2, a3) = (&a[..10], &a[10..20], &a[20..]);
        let at = |offset: usize| 1 + offset as u32;
        let got = run(
            &mut r,
            key(20),
            &[
                (0, SYN, b"", 0),
                (at(0), ACK, a1, 1),
                // a2 was never captured; a3 continues the message after the hole.
                (at(20), ACK, a3, 2),
                // b starts a message: the gap is declared, a is dropped.
                (at(a.len()), ACK, &b, 3),
                (at(a.len() + b.len()), ACK, &c, 4),
            ],
        );
        assert_eq!(ids(&got), [2, 3]);
        assert_eq!(
            (r.counters.gaps, r.counters.gap_bytes),
            (1, a.len() as u64 - 10)
        );
        assert_eq!(r.counters.incomplete_messages, 1, "the first part of a");
        assert_eq!(r.counters.skipped_bytes, a3.len() as u64);
        // The missing part arriving after all (a retransmission): it lies in
        // the declared gap and is framed alone; it starts no message.
        let late = run(&mut r, key(20), &[(at(10), ACK, a2, 5)]);
        assert!(late.is_empty());
    }

    /// The next message's segment overtook the rest of the one before it:
    /// both come out whole, in stream order, and no gap is counted. (The
    /// overtaking segment declared a gap: the first message was lost.)
    #[test]
    fn a_message_overtaken_by_the_next_one_comes_out_whole() {
        let mut r = TcpReassembler::new(limits());
        let a = query(1, b"first-message-name");
        let b = query(2, b"second");
        let c = query(3, b"third");
        let at = |offset: usize| 1 + offset as u32;
        let got = run(
            &mut r,
            key(24),
            &[
                (0, SYN, b"", 0),
                (at(0), ACK, &a[..10], 1),
                (at(a.len()), ACK, &b, 2),
                (at(10), ACK, &a[10..], 3),
                (at(a.len() + b.len()), ACK, &c, 4),
            ],
        );
        assert_eq!(ids(&got), [1, 2, 3]);
        assert_eq!(got[0].1, 2, "a spans its two segments");
        assert_eq!(r.counters.gaps, 0);
        assert_eq!(r.counters.out_of_order, 1);
        assert_eq!(r.counters.incomplete_messages, 0);
    }

    /// Messages that came out, with the segments each spans.
    type Emitted = Vec<(Vec<u8>, u32)>;

    /// A connection on port `port` with a's first ten bytes, then b (whole,
    /// beyond the rest of a: held). The reassembler, a, b and what came out.
    fn b_held_after_a_part(port: u16) -> (TcpReassembler, Vec<u8>, Vec<u8>, Emitted) {
        let mut r = TcpReassembler::new(limits());
        let a = query(1, b"first-message-name");
        let b = query(2, b"second");
        let start = [
            (0, SYN, &b""[..], 0),
            (1, ACK, &a[..10], 1),
            (1 + a.len() as u32, ACK, &b[..], 2),
        ];
        let got = run(&mut r, key(port), &start);
        assert!(got.is_empty(), "b is held");
        (r, a, b, got)
    }

    /// A copy of the held message start (a retransmission, a mirror port's
    /// duplicate) is no other message start: the wait goes on and both
    /// messages come out whole. (It ended the wait, and the first message
    /// was lost.)
    #[test]
    fn a_copy_of_the_held_start_does_not_end_the_wait() {
        let (mut r, a, b, mut got) = b_held_after_a_part(26);
        let at = |offset: usize| 1 + offset as u32;
        let rest = [(at(a.len()), ACK, &b[..], 3), (at(10), ACK, &a[10..], 4)];
        got.extend(run(&mut r, key(26), &rest));
        assert_eq!(ids(&got), [1, 2]);
        assert_eq!((r.counters.gaps, r.counters.retransmissions), (0, 1));
    }

    /// A message held whose own later segments fill the early list: the
    /// wait ends at the held start when no room is left (the rest of its
    /// segments were dropped as beyond the window).
    #[test]
    fn a_held_message_longer_than_the_early_list_comes_out() {
        let mut r = TcpReassembler::new(limits());
        let a = query(1, b"first-message-name");
        // b: a long name, cut in 2-byte segments after its first 14 bytes.
        let b = query(2, &[b'x'; 60]);
        let at = |offset: usize| 1 + offset as u32;
        let mut segments: Vec<(u32, u8, &[u8], i64)> = vec![
            (0, SYN, b"", 0),
            (at(0), ACK, &a[..10], 1),
            (at(a.len()), ACK, &b[..14], 2),
        ];
        for (k, piece) in b[14..].chunks(1).enumerate() {
            segments.push((at(a.len() + 14 + k), ACK, piece, 3 + k as i64));
        }
        let got = run(&mut r, key(27), &segments);
        assert_eq!(ids(&got), [2]);
        assert_eq!(r.counters.gaps, 1);
        assert_eq!(r.counters.beyond_window, 0);
    }

    /// A message start held while the rest of the message before it is
    /// awaited: when that rest never comes, the connection's end (FIN)
    /// declares the gap and hands the held message on.
    #[test]
    fn a_held_message_comes_out_when_the_connection_ends() {
        // The rest of a was never captured.
        let (mut r, a, b, mut got) = b_held_after_a_part(25);
        let end = 1 + (a.len() + b.len()) as u32;
        got.extend(run(&mut r, key(25), &[(end, ACK | FIN, b"", 3)]));
        assert_eq!(ids(&got), [2]);
        assert_eq!(
            (r.counters.gaps, r.counters.gap_bytes),
            (1, a.len() as u64 - 10)
        );
        assert_eq!(r.counters.incomplete_messages, 1, "the first part of a");
        assert_eq!(r.flows(), 0);
    }

    #[test]
    fn a_capture_that_starts_mid_connection_picks_up_at_a_message() {
        let mut r = TcpReassembler::new(limits());
        let a = query(1, b"cut-in-half");
        let b = query(2, b"whole");
        let c = query(3, b"after");
        // No SYN: the first segment is the second half of a; b's length
        // prefix comes alone, its message in the next segment; then c.
        let got = run(
            &mut r,
            key(21),
            &[
                (500, ACK, &a[9..], 0),
                (500 + (a.len() - 9) as u32, ACK, &b[..2], 1),
                (502 + (a.len() - 9) as u32, ACK, &b[2..], 2),
                (500 + (a.len() - 9 + b.len()) as u32, ACK, &c, 3),
            ],
        );
        assert_eq!(ids(&got), [2, 3]);
        assert_eq!(got[0].1, 2, "b spans its two segments");
        assert_eq!(r.counters.skipped_bytes, (a.len() - 9) as u64);
    }

    #[test]
    fn reordered_whole_messages_both_come_out() {
        let mut r = TcpReassembler::new(limits());
        let a = query(1, b"one");
        let b = query(2, b"two");
        let got = run(
            &mut r,
            key(22),
            &[
                (0, SYN, b"", 0),
                (1 + a.len() as u32, ACK, &b, 1), // b overtook a
                (1, ACK, &a, 2),
            ],
        );
        assert_eq!(ids(&got), [2, 1]);
    }

    #[test]
    fn a_resync_that_does_not_check_out_waits_for_the_next_message() {
        let mut r = TcpReassembler::new(limits());
        let b = query(2, b"real");
        // After a gap, a plausible length prefix alone, then bytes that are
        // no DNS message (a label running past the end): nothing is passed
        // on; the next message start resumes the stream.
        let mut junk = query(9, b"junk");
        junk[14] = 60; // the first label's length
        let got = run(
            &mut r,
            key(23),
            &[
                (0, SYN, b"", 0),
                (100, ACK, &junk[..2], 1),
                (102, ACK, &junk[2..], 2),
                (200, ACK, &b, 3),
            ],
        );
        assert_eq!(ids(&got), [2]);
        assert_eq!(r.counters.gaps, 1);
        assert_eq!(r.counters.skipped_bytes, junk.len() as u64);
    }
}

//! DNS over TCP: per-flow stream reassembly and RFC 1035 §4.2.2 framing (a
//! two-byte length before each message).
//!
//! Several messages in one segment, one message over several segments, a
//! length prefix split across segments; retransmitted and overlapping bytes
//! are ignored; segments that arrive early are held (within a window) until
//! the gap is filled. Memory is bounded: at most `max_flows` flows, at most
//! `max_flow_bytes` held per flow, and flows idle for `idle_timeout` of
//! capture time are dropped. Everything dropped is counted.

use std::collections::HashMap;
use std::net::IpAddr;

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

/// One direction of a TCP connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowKey {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
}

#[derive(Debug, Default)]
struct FlowState {
    /// Sequence number of the next byte expected.
    next_seq: u32,
    /// Stream bytes not yet framed into messages.
    buffer: Vec<u8>,
    /// Segments whose bytes are in `buffer`.
    buffered_segments: u32,
    /// Segments that arrived before a gap was filled: (seq, bytes).
    early: Vec<(u32, Vec<u8>)>,
    /// Capture time of the last segment.
    last_ns: i64,
}

impl FlowState {
    fn held(&self) -> usize {
        self.buffer.len() + self.early.iter().map(|(_, b)| b.len()).sum::<usize>()
    }
}

/// What happened to TCP segments and messages, for the summary.
#[derive(Debug, Default, Clone, Copy)]
pub struct TcpCounters {
    /// Segments with payload seen.
    pub segments: u64,
    /// Segments whose bytes were all seen before (retransmissions).
    pub retransmissions: u64,
    /// Segments that overlapped bytes seen before (the new part is used).
    pub overlaps: u64,
    /// Segments held until a gap before them was filled.
    pub out_of_order: u64,
    /// Segments too far ahead of the stream to hold (dropped).
    pub beyond_window: u64,
    /// Segments cut by the capture's snaplen.
    pub truncated_segments: u64,
    /// Zero-length messages (a length prefix of 0) skipped.
    pub empty_messages: u64,
    /// Flows dropped because the flow table was full.
    pub flows_evicted: u64,
    /// Flows dropped after `idle_timeout` without traffic.
    pub flows_expired: u64,
    /// Flows dropped because they held more than `max_flow_bytes`.
    pub flows_overflowed: u64,
    /// Bytes of incomplete messages dropped with their flow (closed, expired, evicted).
    pub incomplete_bytes: u64,
    /// Flows that ended with an incomplete message.
    pub incomplete_messages: u64,
}

/// How far ahead of the expected sequence number an early segment may be.
const WINDOW: u32 = 1 << 20;

/// The reassembler: flows by key.
#[derive(Debug)]
pub struct TcpReassembler {
    limits: TcpLimits,
    flows: HashMap<FlowKey, FlowState>,
    /// Capture time of the last sweep for idle flows.
    swept_ns: i64,
    /// Counters.
    pub counters: TcpCounters,
}

/// A message found in a stream: its bytes, how many segments carried it, and
/// whether the capture cut it short (the rest of it was not captured).
pub type Emit<'e> = dyn FnMut(&[u8], u32, bool) + 'e;

impl TcpReassembler {
    /// An empty reassembler.
    pub fn new(limits: TcpLimits) -> Self {
        TcpReassembler {
            limits,
            flows: HashMap::new(),
            swept_ns: i64::MIN,
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
        if flags & SYN != 0 {
            // A new connection: whatever an old one with these ports left is gone.
            if let Some(old) = self.flows.remove(&key) {
                self.drop_flow(&old);
            }
            if !payload.is_empty() || flags & (FIN | RST) == 0 {
                let state = FlowState {
                    next_seq: seq.wrapping_add(1),
                    last_ns: now_ns,
                    ..Default::default()
                };
                self.insert(key, state);
            }
            return;
        }
        if !payload.is_empty() {
            self.counters.segments += 1;
            if !self.flows.contains_key(&key) {
                // Mid-stream: we did not see the handshake; start here.
                self.insert(
                    key,
                    FlowState {
                        next_seq: seq,
                        ..Default::default()
                    },
                );
            }
            let limits = self.limits;
            let counters = &mut self.counters;
            if let Some(flow) = self.flows.get_mut(&key) {
                flow.last_ns = now_ns;
                if wire_len > payload.len() {
                    counters.truncated_segments += 1;
                    take_cut_segment(flow, seq, payload, wire_len, counters, emit);
                } else {
                    take_segment(flow, seq, payload, counters, emit);
                }
                if flow.held() > limits.max_flow_bytes {
                    counters.flows_overflowed += 1;
                    let flow = self.flows.remove(&key).unwrap_or_default();
                    self.drop_flow(&flow);
                }
            }
        }
        if flags & (FIN | RST) != 0 {
            if let Some(flow) = self.flows.remove(&key) {
                self.drop_flow(&flow);
            }
        }
    }

    /// Drops every flow, counting incomplete messages (end of input).
    pub fn finish(&mut self) {
        let flows: Vec<FlowState> = self.flows.drain().map(|(_, f)| f).collect();
        for flow in &flows {
            self.drop_flow(flow);
        }
    }

    fn insert(&mut self, key: FlowKey, state: FlowState) {
        if self.flows.len() >= self.limits.max_flows {
            // Evict the flow that has been quiet longest.
            if let Some(oldest) = self
                .flows
                .iter()
                .min_by_key(|(_, f)| f.last_ns)
                .map(|(k, _)| *k)
            {
                if let Some(flow) = self.flows.remove(&oldest) {
                    self.counters.flows_evicted += 1;
                    self.drop_flow(&flow);
                }
            }
        }
        self.flows.insert(key, state);
    }

    fn drop_flow(&mut self, flow: &FlowState) {
        let held = flow.held();
        if held > 0 {
            self.counters.incomplete_messages += 1;
            self.counters.incomplete_bytes += held as u64;
        }
    }

    /// Drops flows idle for longer than the timeout (at most every quarter timeout of capture time).
    fn sweep(&mut self, now_ns: i64) {
        let timeout = self.limits.idle_timeout_ns;
        if now_ns.saturating_sub(self.swept_ns) < timeout / 4 {
            return;
        }
        self.swept_ns = now_ns;
        let expired: Vec<FlowKey> = self
            .flows
            .iter()
            .filter(|(_, f)| now_ns.saturating_sub(f.last_ns) > timeout)
            .map(|(k, _)| *k)
            .collect();
        for key in expired {
            if let Some(flow) = self.flows.remove(&key) {
                self.counters.flows_expired += 1;
                self.drop_flow(&flow);
            }
        }
    }
}

/// Places one segment's bytes in its flow and frames what completes.
fn take_segment(
    flow: &mut FlowState,
    seq: u32,
    payload: &[u8],
    counters: &mut TcpCounters,
    emit: &mut Emit<'_>,
) {
    let offset = seq.wrapping_sub(flow.next_seq) as i32;
    let fresh = if offset < 0 {
        let seen = offset.unsigned_abs() as usize;
        if seen >= payload.len() {
            counters.retransmissions += 1;
            return;
        }
        counters.overlaps += 1;
        &payload[seen..]
    } else if offset > 0 {
        if offset as u32 > WINDOW {
            counters.beyond_window += 1;
        } else {
            counters.out_of_order += 1;
            flow.early.push((seq, payload.to_vec()));
        }
        return;
    } else {
        payload
    };
    append(flow, fresh, counters, emit);
    // Early segments that now fit.
    while let Some(index) = flow
        .early
        .iter()
        .position(|(s, _)| s.wrapping_sub(flow.next_seq) as i32 <= 0)
    {
        let (s, bytes) = flow.early.swap_remove(index);
        let seen = flow.next_seq.wrapping_sub(s) as usize;
        if seen < bytes.len() {
            append(flow, &bytes[seen..], counters, emit);
        }
    }
}

/// A segment whose end was not captured: frame what is there (after what the
/// flow holds), emit the partial message last (cut), and restart the stream
/// at the next segment. The rest of a cut message may run into later
/// segments; like tshark, we do not try to skip it by its length prefix (that
/// prefix may itself be garbage), so a later segment is read from its start.
fn take_cut_segment(
    flow: &mut FlowState,
    seq: u32,
    payload: &[u8],
    wire_len: usize,
    counters: &mut TcpCounters,
    emit: &mut Emit<'_>,
) {
    if seq != flow.next_seq {
        // Out of order or overlapping: the cut bytes cannot be placed reliably.
        drop_held(flow, counters);
    } else {
        flow.buffer.extend_from_slice(payload);
        let used = frame(&flow.buffer, flow.buffered_segments + 1, counters, emit);
        if let Some(rest) = flow.buffer.get(used + 2..).filter(|rest| !rest.is_empty()) {
            emit(rest, 1, true);
        }
        flow.buffer.clear();
        flow.buffered_segments = 0;
    }
    flow.early.clear();
    flow.next_seq = seq.wrapping_add(wire_len as u32);
}

/// Drops the bytes a flow holds, counting them as an incomplete message.
fn drop_held(flow: &mut FlowState, counters: &mut TcpCounters) {
    if !flow.buffer.is_empty() {
        counters.incomplete_messages += 1;
        counters.incomplete_bytes += flow.buffer.len() as u64;
    }
    flow.buffer.clear();
    flow.buffered_segments = 0;
}

/// Appends in-order stream bytes and emits every complete message.
fn append(flow: &mut FlowState, bytes: &[u8], counters: &mut TcpCounters, emit: &mut Emit<'_>) {
    flow.next_seq = flow.next_seq.wrapping_add(bytes.len() as u32);
    if flow.buffer.is_empty() {
        // Common case: messages straight from the segment, no copy.
        let used = frame(bytes, 1, counters, emit);
        if used < bytes.len() {
            flow.buffer.extend_from_slice(&bytes[used..]);
            flow.buffered_segments = 1;
        }
        return;
    }
    flow.buffer.extend_from_slice(bytes);
    flow.buffered_segments += 1;
    let used = frame(&flow.buffer, flow.buffered_segments, counters, emit);
    flow.buffer.drain(..used);
    flow.buffered_segments = if flow.buffer.is_empty() { 0 } else { 1 };
}

/// Emits each complete length-prefixed message at the start of `stream`;
/// returns the bytes used. The first message spans `segments` segments, the
/// others lie in the last one.
fn frame(stream: &[u8], segments: u32, counters: &mut TcpCounters, emit: &mut Emit<'_>) -> usize {
    let mut used = 0;
    let mut spans = segments;
    while let Some(prefix) = stream.get(used..used + 2) {
        let len = usize::from(u16::from_be_bytes([prefix[0], prefix[1]]));
        if len == 0 {
            counters.empty_messages += 1;
            used += 2;
            continue;
        }
        let Some(message) = stream.get(used + 2..used + 2 + len) else {
            break;
        };
        emit(message, spans, false);
        spans = 1;
        used += 2 + len;
    }
    used
}

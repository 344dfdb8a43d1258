//! One DNS-over-TCP flow's stream: where each segment's bytes go (in order,
//! early, retransmitted, overlapping, beyond a gap) and the messages framed
//! from it (RFC 1035 §4.2.2: a two-byte length before each). The
//! reassembler (`super::tcp`) keeps the flows, this places their bytes; the
//! policy is in `super::tcp`'s docs.

use super::resync;

#[derive(Debug, Default)]
pub(super) struct FlowState {
    /// Sequence number of the next byte expected.
    pub(super) next_seq: u32,
    /// Stream bytes not yet framed into messages.
    pub(super) buffer: Vec<u8>,
    /// Segments whose bytes are in `buffer`.
    pub(super) buffered_segments: u32,
    /// Segments that arrived before a gap was filled: (seq, bytes).
    pub(super) early: Vec<(u32, Vec<u8>)>,
    /// Bytes held in `early`.
    pub(super) early_bytes: usize,
    /// Capture time of the last segment.
    pub(super) last_ns: i64,
    /// The stream's position is unknown (a flow first seen mid-connection,
    /// or a message after a resync that did not check out): segments are
    /// skipped until one starts a plausible message.
    pub(super) lost: bool,
    /// The first message framed after a resync is checked before it is passed on.
    pub(super) verify: bool,
    /// The last gap declared: sequence numbers from `.0` up to `.1` were never seen.
    pub(super) hole: Option<(u32, u32)>,
}

impl FlowState {
    pub(super) fn held(&self) -> usize {
        self.buffer.len() + self.early_bytes
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
    /// Gaps declared: bytes never captured, the stream resumed after them.
    pub gaps: u64,
    /// Sequence-number bytes in those gaps.
    pub gap_bytes: u64,
    /// Captured bytes that could not be placed in a message (segments
    /// skipped while looking for a message start after a gap or mid-stream).
    pub skipped_bytes: u64,
}

/// How far ahead of the expected sequence number an early segment may be.
const WINDOW: u32 = 1 << 20;
/// Early segments held per flow at most (more are dropped and counted).
const MAX_EARLY: usize = 64;

/// A message found in a stream: its bytes, how many segments carried it, and
/// whether the capture cut it short (the rest of it was not captured).
pub type Emit<'e> = dyn FnMut(&[u8], u32, bool) + 'e;

/// Places one segment's bytes in its flow and frames what completes.
pub(super) fn take_segment(
    flow: &mut FlowState,
    seq: u32,
    payload: &[u8],
    counters: &mut TcpCounters,
    emit: &mut Emit<'_>,
) {
    let offset = seq.wrapping_sub(flow.next_seq) as i32;
    let fresh = if offset < 0 {
        if in_hole(flow.hole, seq, payload.len()) {
            // Late, inside a gap already declared: framed on its own.
            counters.out_of_order += 1;
            frame_alone(payload, counters, emit);
            return;
        }
        let seen = offset.unsigned_abs() as usize;
        if seen >= payload.len() {
            counters.retransmissions += 1;
            return;
        }
        counters.overlaps += 1;
        &payload[seen..]
    } else if offset > 0 {
        if flow
            .early
            .iter()
            .any(|(s, bytes)| *s == seq && bytes.len() >= payload.len())
        {
            // A copy of a segment held early (retransmitted, or a mirror
            // port's duplicate): nothing new, and no other message start.
            counters.retransmissions += 1;
            return;
        }
        let room = offset as u32 <= WINDOW && flow.early.len() < MAX_EARLY;
        let starts = resync::starts_message(payload);
        // A message starts beyond a gap. Bytes lost to the capture would
        // hold the stream back for ever: the gap is declared and the stream
        // resumes here. But the segment may only have overtaken the rest of
        // the message held (segments seen out of order): while no other
        // message start waits, and there is room, it waits for more. Another
        // message start, or no room left, ends the wait at the one held.
        if (starts || !room) && held_start(flow).is_some() {
            resync_at_held_start(flow, counters, emit);
            if flow.lost && !resume(flow, seq, payload, counters) {
                return;
            }
            return take_segment(flow, seq, payload, counters, emit);
        }
        if !starts {
            if room {
                hold_early(flow, seq, payload, counters);
            } else {
                counters.beyond_window += 1;
            }
            return;
        }
        if !flow.buffer.is_empty() && room {
            hold_early(flow, seq, payload, counters);
            return;
        }
        declare_gap(flow, seq, counters);
        payload
    } else {
        payload
    };
    append(flow, fresh, counters, emit);
    take_early(flow, counters, emit);
}

/// Holds a segment that came before the bytes ahead of it.
fn hold_early(flow: &mut FlowState, seq: u32, payload: &[u8], counters: &mut TcpCounters) {
    counters.out_of_order += 1;
    flow.early_bytes += payload.len();
    flow.early.push((seq, payload.to_vec()));
}

/// The place in `flow.early` of the earliest segment held that starts a
/// message, if one does.
fn held_start(flow: &FlowState) -> Option<usize> {
    flow.early
        .iter()
        .enumerate()
        .filter(|(_, (_, bytes))| resync::starts_message(bytes))
        .min_by_key(|(_, (s, _))| s.wrapping_sub(flow.next_seq))
        .map(|(index, _)| index)
}

/// Gives up waiting for the bytes before the earliest message start held
/// early: the gap before it is declared (what the flow held before it is
/// dropped, counted) and the stream resumes with it.
pub(super) fn resync_at_held_start(
    flow: &mut FlowState,
    counters: &mut TcpCounters,
    emit: &mut Emit<'_>,
) {
    let Some(index) = held_start(flow) else {
        return;
    };
    let (seq, bytes) = flow.early.swap_remove(index);
    flow.early_bytes -= bytes.len();
    declare_gap(flow, seq, counters);
    append(flow, &bytes, counters, emit);
    take_early(flow, counters, emit);
}

/// Appends the early segments that now fit (unless the stream lost its place).
fn take_early(flow: &mut FlowState, counters: &mut TcpCounters, emit: &mut Emit<'_>) {
    while let Some(index) = flow
        .early
        .iter()
        .position(|(s, _)| s.wrapping_sub(flow.next_seq) as i32 <= 0)
        .filter(|_| !flow.lost)
    {
        let (s, bytes) = flow.early.swap_remove(index);
        flow.early_bytes -= bytes.len();
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
pub(super) fn take_cut_segment(
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
        let used = frame(
            &flow.buffer,
            flow.buffered_segments + 1,
            &mut flow.verify,
            counters,
            emit,
        )
        .unwrap_or(flow.buffer.len());
        if let Some(rest) = flow.buffer.get(used + 2..).filter(|rest| !rest.is_empty()) {
            // Started in the bytes held before this segment, if nothing was framed.
            let segments = if used == 0 {
                flow.buffered_segments + 1
            } else {
                1
            };
            emit(rest, segments, true);
        }
        flow.buffer.clear();
        flow.buffered_segments = 0;
    }
    // Early segments cannot be placed after a cut: skipped, counted.
    counters.skipped_bytes += flow.early_bytes as u64;
    flow.early.clear();
    flow.early_bytes = 0;
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
        let used = frame(bytes, 1, &mut flow.verify, counters, emit);
        match used {
            Some(used) if used < bytes.len() => {
                flow.buffer.extend_from_slice(&bytes[used..]);
                flow.buffered_segments = 1;
            }
            Some(_) => {}
            None => lose_position(flow, bytes.len(), counters),
        }
        return;
    }
    flow.buffer.extend_from_slice(bytes);
    flow.buffered_segments += 1;
    match frame(
        &flow.buffer,
        flow.buffered_segments,
        &mut flow.verify,
        counters,
        emit,
    ) {
        Some(0) => {}
        Some(used) => {
            flow.buffer.drain(..used);
            // What is left (if anything) came with the last segment.
            flow.buffered_segments = u32::from(!flow.buffer.is_empty());
        }
        None => {
            let held = flow.buffer.len();
            lose_position(flow, held, counters);
        }
    }
}

/// Emits each complete length-prefixed message at the start of `stream`;
/// returns the bytes used. The first message spans `segments` segments, the
/// others lie in the last one. With `verify` set (the stream was just
/// picked up after a gap), the first message must check out: if it does
/// not, nothing is emitted and the result is `None`.
fn frame(
    stream: &[u8],
    segments: u32,
    verify: &mut bool,
    counters: &mut TcpCounters,
    emit: &mut Emit<'_>,
) -> Option<usize> {
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
        if *verify {
            if !resync::plausible_message(message) {
                return None;
            }
            *verify = false;
        }
        emit(message, spans, false);
        spans = 1;
        used += 2 + len;
    }
    Some(used)
}

/// A segment that arrived late, inside a declared gap: the complete
/// messages at its start, if it starts one; the rest is skipped.
fn frame_alone(payload: &[u8], counters: &mut TcpCounters, emit: &mut Emit<'_>) {
    let used = if resync::starts_message(payload) {
        frame(payload, 1, &mut true, counters, emit).unwrap_or(0)
    } else {
        0
    };
    counters.skipped_bytes += (payload.len() - used) as u64;
}

/// Should the segment at `seq` be taken? Yes, unless the flow's position is
/// unknown and the segment does not start a message (then it is skipped and
/// counted). A segment that does start one resumes the stream there.
pub(super) fn resume(
    flow: &mut FlowState,
    seq: u32,
    payload: &[u8],
    counters: &mut TcpCounters,
) -> bool {
    if !flow.lost {
        return true;
    }
    if !resync::starts_message(payload) {
        counters.skipped_bytes += payload.len() as u64;
        return false;
    }
    flow.lost = false;
    flow.verify = true;
    flow.next_seq = seq;
    true
}

/// The bytes before `seq` will not come: drops what is held (a partial
/// message, early segments before `seq`), counts the gap and resumes at `seq`.
fn declare_gap(flow: &mut FlowState, seq: u32, counters: &mut TcpCounters) {
    counters.gaps += 1;
    counters.gap_bytes += u64::from(seq.wrapping_sub(flow.next_seq));
    drop_held(flow, counters);
    let mut skipped = 0;
    flow.early.retain(|(s, bytes)| {
        let keep = s.wrapping_sub(seq) as i32 >= 0;
        if !keep {
            skipped += bytes.len();
        }
        keep
    });
    flow.early_bytes -= skipped;
    counters.skipped_bytes += skipped as u64;
    flow.hole = Some((flow.next_seq, seq));
    flow.next_seq = seq;
    flow.verify = true;
}

/// The message after a resync did not check out: the `bytes` held are
/// skipped and the stream waits for a segment that starts a message.
fn lose_position(flow: &mut FlowState, bytes: usize, counters: &mut TcpCounters) {
    counters.skipped_bytes += bytes as u64;
    flow.buffer.clear();
    flow.buffered_segments = 0;
    flow.lost = true;
    flow.verify = false;
}

/// Does the segment at `seq` of `len` bytes lie inside `hole`?
fn in_hole(hole: Option<(u32, u32)>, seq: u32, len: usize) -> bool {
    hole.is_some_and(|(start, end)| {
        seq.wrapping_sub(start) as i32 >= 0
            && end.wrapping_sub(seq.wrapping_add(len as u32)) as i32 >= 0
    })
}

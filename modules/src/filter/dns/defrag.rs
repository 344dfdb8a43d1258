//! IP defragmentation (IPv4 and IPv6) for DNS over UDP.
//!
//! Fragments are keyed by (source, destination, identification, protocol).
//! A datagram is complete when fragments cover it from 0 to the end given by
//! the last fragment (more-fragments clear); it is then credited to the
//! fragment that completed it. A fragment that overlaps bytes already held is
//! dropped and counted (overlaps are how fragment attacks work; a correct
//! sender never produces them). Datagrams still incomplete after `timeout` of
//! capture time, or at the end of the input, are reported, not silently lost.

use std::collections::HashMap;
use std::net::IpAddr;

/// Bounds of the defragmenter.
#[derive(Clone, Copy, Debug)]
pub struct DefragLimits {
    /// Datagrams being reassembled at once.
    pub max_datagrams: usize,
    /// Capture-time timeout, in ns.
    pub timeout_ns: i64,
}

/// Identifies the fragments of one datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DatagramKey {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// IP identification.
    pub id: u32,
    /// The datagram's protocol.
    pub protocol: u8,
}

#[derive(Debug, Default)]
struct Partial {
    /// (offset, bytes) of each fragment held.
    pieces: Vec<(u32, Vec<u8>)>,
    /// The datagram's length, once the last fragment arrived.
    total: Option<u32>,
    first_ns: i64,
    first_frame: u64,
}

/// What happened to fragments, for the summary.
#[derive(Debug, Default, Clone, Copy)]
pub struct DefragCounters {
    /// Fragments taken.
    pub fragments: u64,
    /// Datagrams completed.
    pub reassembled: u64,
    /// Fragments dropped because they overlapped bytes already held.
    pub overlapping: u64,
    /// Exact duplicates of a fragment already held (ignored).
    pub duplicates: u64,
    /// Datagrams given up after the timeout.
    pub expired: u64,
    /// Datagrams still incomplete at the end of the input.
    pub incomplete_at_end: u64,
    /// Datagrams dropped because too many were in flight.
    pub evicted: u64,
    /// Fragments that contradict the datagram's length (data past the end).
    pub inconsistent: u64,
}

/// Longest datagram accepted.
const MAX_DATAGRAM: u32 = 65_535;

/// The defragmenter.
#[derive(Debug)]
pub struct Defragmenter {
    limits: DefragLimits,
    partial: HashMap<DatagramKey, Partial>,
    swept_ns: i64,
    assembled: Vec<u8>,
    /// Counters.
    pub counters: DefragCounters,
    /// One line per datagram given up (the first few), for the summary.
    pub lost: Vec<String>,
}

/// How many lost datagrams are described one by one.
const LOST_LINES: usize = 10;

impl Defragmenter {
    /// An empty defragmenter.
    pub fn new(limits: DefragLimits) -> Self {
        Defragmenter {
            limits,
            partial: HashMap::new(),
            swept_ns: i64::MIN,
            assembled: Vec::new(),
            counters: DefragCounters::default(),
            lost: Vec::new(),
        }
    }

    /// Takes one fragment (`offset` in bytes, `more` fragments follow, its
    /// `data`). When this completes the datagram, returns its bytes and the
    /// number of fragments.
    pub fn fragment(
        &mut self,
        key: DatagramKey,
        offset: u32,
        more: bool,
        data: &[u8],
        now_ns: i64,
        frame: u64,
    ) -> Option<(&[u8], u32)> {
        self.sweep(now_ns);
        self.counters.fragments += 1;
        let end = offset + data.len() as u32;
        if end > MAX_DATAGRAM {
            self.counters.inconsistent += 1;
            return None;
        }
        if !self.partial.contains_key(&key) && self.partial.len() >= self.limits.max_datagrams {
            if let Some(oldest) = self
                .partial
                .iter()
                .min_by_key(|(_, p)| p.first_ns)
                .map(|(k, _)| *k)
            {
                self.partial.remove(&oldest);
                self.counters.evicted += 1;
            }
        }
        let partial = self.partial.entry(key).or_insert_with(|| Partial {
            first_ns: now_ns,
            first_frame: frame,
            ..Default::default()
        });
        if partial
            .pieces
            .iter()
            .any(|(o, b)| *o == offset && b.as_slice() == data)
        {
            self.counters.duplicates += 1;
            return None;
        }
        if partial
            .pieces
            .iter()
            .any(|(o, b)| offset < o + b.len() as u32 && *o < end)
        {
            self.counters.overlapping += 1;
            return None;
        }
        let beyond_total = partial.total.is_some_and(|t| end > t);
        let wrong_last = !more && partial.pieces.iter().any(|(o, b)| o + b.len() as u32 > end);
        if beyond_total || wrong_last {
            self.counters.inconsistent += 1;
            return None;
        }
        if !more {
            partial.total = Some(end);
        }
        partial.pieces.push((offset, data.to_vec()));
        let total = partial.total?;
        let covered: u32 = partial.pieces.iter().map(|(_, b)| b.len() as u32).sum();
        if covered != total {
            return None;
        }
        // No overlaps and full coverage: the pieces tile [0, total).
        let mut partial = self.partial.remove(&key)?;
        partial.pieces.sort_by_key(|(o, _)| *o);
        self.assembled.clear();
        for (_, bytes) in &partial.pieces {
            self.assembled.extend_from_slice(bytes);
        }
        self.counters.reassembled += 1;
        Some((&self.assembled, partial.pieces.len() as u32))
    }

    /// Reports every datagram still incomplete (end of input).
    pub fn finish(&mut self) {
        let left: Vec<(DatagramKey, Partial)> = self.partial.drain().collect();
        for (key, partial) in left {
            self.counters.incomplete_at_end += 1;
            self.describe_lost(&key, &partial, "incomplete at the end of the input");
        }
    }

    fn sweep(&mut self, now_ns: i64) {
        let timeout = self.limits.timeout_ns;
        if now_ns.saturating_sub(self.swept_ns) < timeout / 4 {
            return;
        }
        self.swept_ns = now_ns;
        let expired: Vec<DatagramKey> = self
            .partial
            .iter()
            .filter(|(_, p)| now_ns.saturating_sub(p.first_ns) > timeout)
            .map(|(k, _)| *k)
            .collect();
        for key in expired {
            if let Some(partial) = self.partial.remove(&key) {
                self.counters.expired += 1;
                self.describe_lost(&key, &partial, "expired with fragments missing");
            }
        }
    }

    fn describe_lost(&mut self, key: &DatagramKey, partial: &Partial, why: &str) {
        if self.lost.len() < LOST_LINES {
            let held: u32 = partial.pieces.iter().map(|(_, b)| b.len() as u32).sum();
            let total = partial
                .total
                .map_or("unknown".to_string(), |t| t.to_string());
            self.lost.push(format!(
                "IP datagram id {} {} → {} (first fragment in frame {}): {why}; {} fragments, {held} of {total} bytes",
                key.id,
                key.src,
                key.dst,
                partial.first_frame,
                partial.pieces.len()
            ));
        }
    }
}

//! IP defragmentation (IPv4 and IPv6) for DNS over UDP.
//!
//! Fragments are keyed by (source, destination, identification, protocol).
//! A datagram is complete when fragments cover it from 0 to the end given by
//! the last fragment (more-fragments clear); it is then credited to the
//! fragment that completed it. A fragment that overlaps bytes already held is
//! dropped and counted (overlaps are how fragment attacks work; a correct
//! sender never produces them). Fragments that only copy those of a datagram
//! completed within the timeout and never complete one again are counted as
//! duplicates, not as a datagram lost. Datagrams still incomplete after `timeout` of
//! capture time, or at the end of the input, are reported, not silently lost.

use super::table::{idle_past, take_expired, take_quietest, KeyedTable};
use dnsluice_core::stats::keep_example;
use std::collections::BTreeMap;
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

/// A datagram completed within the timeout: its fragments, each as its
/// offset, length and a hash of its bytes, so that a copy of one coming
/// later (a network or a mirror port that duplicates) is told from the
/// first fragment of a new datagram that reuses the IP id.
#[derive(Debug)]
struct Completed {
    at_ns: i64,
    pieces: Vec<(u32, u32, u64)>,
}

/// The hash of a fragment's bytes, under the table's seed.
fn piece_hash(table: &KeyedTable<DatagramKey, Completed>, data: &[u8]) -> u64 {
    use std::hash::BuildHasher;
    table.hasher().hash_one(data)
}

#[derive(Debug, Default)]
struct Partial {
    /// (offset, bytes) of each fragment held.
    pieces: Vec<(u32, Vec<u8>)>,
    /// The datagram's length, once the last fragment arrived.
    total: Option<u32>,
    first_ns: i64,
    first_frame: u64,
    /// Every fragment held is a copy of one of a datagram completed within
    /// the timeout: if this never completes, it was a copy, not a loss.
    copies: bool,
}

/// Why an incomplete datagram is given up.
#[derive(Clone, Copy)]
enum GivenUp {
    Evicted,
    Expired,
    AtEnd,
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
    /// Exact duplicates of a fragment already held, or of one of a datagram
    /// completed within the timeout (ignored).
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
    partial: KeyedTable<DatagramKey, Partial>,
    /// Datagrams completed within the timeout (at most `max_datagrams`).
    completed: KeyedTable<DatagramKey, Completed>,
    swept_ns: i64,
    /// The latest capture time seen.
    latest_ns: i64,
    assembled: Vec<u8>,
    /// Counters.
    pub counters: DefragCounters,
    /// One line per datagram given up, by the frame of its first fragment:
    /// the first few by frame (as on one thread, so on several), for the
    /// summary.
    pub lost: BTreeMap<u64, String>,
}

impl Defragmenter {
    /// An empty defragmenter.
    pub fn new(limits: DefragLimits) -> Self {
        Defragmenter {
            limits,
            partial: KeyedTable::default(),
            completed: KeyedTable::default(),
            swept_ns: i64::MIN,
            latest_ns: i64::MIN,
            assembled: Vec::new(),
            counters: DefragCounters::default(),
            lost: BTreeMap::new(),
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
        self.expire_if_late(&key, now_ns);
        self.counters.fragments += 1;
        let end = offset + data.len() as u32;
        // A datagram of no bytes was never fragmented; past 64 KiB none can be.
        if end > MAX_DATAGRAM || (end == 0 && !more) {
            self.counters.inconsistent += 1;
            return None;
        }
        let copy = self.copy_of_completed(&key, offset, data, now_ns);
        if !self.partial.contains_key(&key) && self.partial.len() >= self.limits.max_datagrams {
            // Full: make room for many new datagrams at once, oldest first.
            for (old, partial) in take_quietest(&mut self.partial, |p| p.first_ns) {
                self.give_up(&old, &partial, GivenUp::Evicted);
            }
        }
        let partial = self.partial.entry(key).or_insert_with(|| Partial {
            first_ns: now_ns,
            first_frame: frame,
            copies: true,
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
        partial.copies &= copy;
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
        self.remember_completed(key, &partial.pieces, now_ns);
        Some((&self.assembled, partial.pieces.len() as u32))
    }

    /// Whether a fragment of `key` at `offset` with `data` is a copy of one
    /// of a datagram completed within the timeout.
    fn copy_of_completed(&self, key: &DatagramKey, offset: u32, data: &[u8], now_ns: i64) -> bool {
        let Some(done) = self.completed.get(key) else {
            return false;
        };
        if idle_past(now_ns, done.at_ns, self.limits.timeout_ns) {
            return false;
        }
        let hash = piece_hash(&self.completed, data);
        done.pieces
            .iter()
            .any(|&(o, len, h)| o == offset && len as usize == data.len() && h == hash)
    }

    /// Keeps what a copy of the fragments of `key`, just completed, would match.
    fn remember_completed(&mut self, key: DatagramKey, pieces: &[(u32, Vec<u8>)], now_ns: i64) {
        if self.completed.len() >= self.limits.max_datagrams {
            take_quietest(&mut self.completed, |c| c.at_ns);
        }
        let pieces = pieces
            .iter()
            .map(|(o, b)| (*o, b.len() as u32, piece_hash(&self.completed, b)))
            .collect();
        self.completed.insert(
            key,
            Completed {
                at_ns: now_ns,
                pieces,
            },
        );
    }

    /// Reports every datagram still incomplete (end of input): as expired
    /// when its first fragment is older than the timeout at the input's
    /// latest capture time (`input_end_ns` when a split told it, else the
    /// latest this defragmenter saw), else as incomplete at the end.
    pub fn finish(&mut self, input_end_ns: Option<i64>) {
        let end = input_end_ns.map_or(self.latest_ns, |t| t.max(self.latest_ns));
        let timeout = self.limits.timeout_ns;
        let mut left: Vec<(DatagramKey, Partial)> = self.partial.drain().collect();
        left.sort_by_key(|(_, p)| p.first_frame);
        for (key, partial) in left {
            let why = match idle_past(end, partial.first_ns, timeout) {
                true => GivenUp::Expired,
                false => GivenUp::AtEnd,
            };
            self.give_up(&key, &partial, why);
        }
    }

    /// A datagram whose next fragment comes after the timeout has expired,
    /// swept or not: decided by its own fragments, so the same with any
    /// number of threads (a sweep only frees memory sooner).
    fn expire_if_late(&mut self, key: &DatagramKey, now_ns: i64) {
        self.latest_ns = self.latest_ns.max(now_ns);
        let timeout = self.limits.timeout_ns;
        let late = self
            .partial
            .get(key)
            .is_some_and(|p| idle_past(now_ns, p.first_ns, timeout));
        if let Some(partial) = late.then(|| self.partial.remove(key)).flatten() {
            self.give_up(key, &partial, GivenUp::Expired);
        }
    }

    fn sweep(&mut self, now_ns: i64) {
        let timeout = self.limits.timeout_ns;
        if now_ns.saturating_sub(self.swept_ns) < timeout / 4 {
            return;
        }
        self.swept_ns = now_ns;
        take_expired(&mut self.completed, now_ns, timeout, |c| c.at_ns);
        for (key, partial) in take_expired(&mut self.partial, now_ns, timeout, |p| p.first_ns) {
            self.give_up(&key, &partial, GivenUp::Expired);
        }
    }

    /// Counts an incomplete datagram given up, and describes it, unless it
    /// held only copies of fragments of a datagram completed before (a
    /// network or mirror port that duplicates): then its fragments are
    /// duplicates. (A whole datagram copied completes again, as in tshark.)
    fn give_up(&mut self, key: &DatagramKey, partial: &Partial, why: GivenUp) {
        if partial.copies {
            self.counters.duplicates += partial.pieces.len() as u64;
            return;
        }
        let (counter, text) = match why {
            GivenUp::Evicted => (
                &mut self.counters.evicted,
                "dropped: too many datagrams in flight",
            ),
            GivenUp::Expired => (&mut self.counters.expired, "expired with fragments missing"),
            GivenUp::AtEnd => (
                &mut self.counters.incomplete_at_end,
                "incomplete at the end of the input",
            ),
        };
        *counter += 1;
        self.describe_lost(key, partial, text);
    }

    fn describe_lost(&mut self, key: &DatagramKey, partial: &Partial, why: &str) {
        keep_example(&mut self.lost, partial.first_frame, || {
            let held: u32 = partial.pieces.iter().map(|(_, b)| b.len() as u32).sum();
            let total = partial
                .total
                .map_or("unknown".to_string(), |t| t.to_string());
            format!(
                "IP datagram id {} {} → {} (first fragment in frame {}): {why}; {} fragments, {held} of {total} bytes",
                key.id,
                key.src,
                key.dst,
                partial.first_frame,
                partial.pieces.len()
            )
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: u32) -> DatagramKey {
        DatagramKey {
            src: "192.0.2.53".parse().unwrap(),
            dst: "192.0.2.1".parse().unwrap(),
            id,
            protocol: 17,
        }
    }

    fn defrag() -> Defragmenter {
        Defragmenter::new(DefragLimits {
            max_datagrams: 2,
            timeout_ns: 30_000_000_000,
        })
    }

    #[test]
    fn any_order_gives_the_datagram() {
        let data: Vec<u8> = (0..=255).cycle().take(3000).collect();
        let pieces = [
            (0u32, true, &data[..1480]),
            (1480, true, &data[1480..2960]),
            (2960, false, &data[2960..]),
        ];
        for order in [[0, 1, 2], [2, 0, 1], [1, 2, 0]] {
            let mut d = defrag();
            let mut whole = None;
            for (i, &p) in order.iter().enumerate() {
                let (offset, more, bytes) = pieces[p];
                let got = d
                    .fragment(key(1), offset, more, bytes, i as i64, i as u64 + 1)
                    .map(|(b, n)| (b.to_vec(), n));
                if i < 2 {
                    assert!(got.is_none());
                } else {
                    whole = got;
                }
            }
            assert_eq!(whole, Some((data.clone(), 3)), "{order:?}");
        }
    }

    /// A copy of a fragment of a datagram already completed (a mirror port
    /// that duplicates) is a duplicate, not a datagram lost at the end; a
    /// whole datagram copied completes again (as tshark reassembles it); a
    /// fragment with the same IP id but other bytes, never completed, is a
    /// datagram lost.
    #[test]
    fn a_copy_of_a_completed_datagrams_fragment_is_a_duplicate() {
        let data: Vec<u8> = (0..=255).cycle().take(2000).collect();
        let (first, last) = (&data[..1480], &data[1480..]);
        let whole = |d: &mut Defragmenter, at: i64| {
            assert!(d.fragment(key(7), 0, true, first, at, 1).is_none());
            assert!(d.fragment(key(7), 1480, false, last, at + 1, 2).is_some());
        };
        // The last fragment copied after the datagram: a duplicate.
        let mut d = defrag();
        whole(&mut d, 0);
        assert!(d.fragment(key(7), 1480, false, last, 2, 3).is_none());
        d.finish(None);
        assert_eq!(
            (d.counters.duplicates, d.counters.incomplete_at_end),
            (1, 0)
        );
        assert!(d.lost.is_empty(), "{:?}", d.lost);
        // The whole datagram twice: two datagrams.
        let mut d = defrag();
        whole(&mut d, 0);
        whole(&mut d, 2);
        assert_eq!((d.counters.reassembled, d.counters.duplicates), (2, 0));
        // The id again with other bytes, never completed: lost.
        let mut d = defrag();
        whole(&mut d, 0);
        let other: Vec<u8> = first.iter().map(|b| b ^ 0xff).collect();
        assert!(d.fragment(key(7), 0, true, &other, 2, 3).is_none());
        d.finish(None);
        assert_eq!(
            (d.counters.duplicates, d.counters.incomplete_at_end),
            (0, 1)
        );
        assert_eq!(d.lost.len(), 1);
    }

    #[test]
    fn overlaps_duplicates_and_contradictions_are_dropped_and_counted() {
        let mut d = defrag();
        assert!(d.fragment(key(2), 0, true, &[1; 16], 0, 1).is_none());
        assert!(d.fragment(key(2), 0, true, &[1; 16], 0, 2).is_none()); // exact duplicate
        assert!(d.fragment(key(2), 8, true, &[9; 16], 0, 3).is_none()); // overlaps bytes 8..16
        assert!(d.fragment(key(2), 32, false, &[3; 8], 0, 4).is_none()); // ends the datagram at 40
        assert!(d.fragment(key(2), 40, true, &[4; 8], 0, 5).is_none()); // past the end
        let (bytes, n) = d.fragment(key(2), 16, true, &[2; 16], 0, 6).unwrap();
        assert_eq!((bytes.len(), n), (40, 3));
        let c = d.counters;
        assert_eq!(
            (c.duplicates, c.overlapping, c.inconsistent, c.reassembled),
            (1, 1, 1, 1)
        );
    }

    #[test]
    fn missing_fragments_expire_or_are_reported_at_the_end() {
        let mut d = defrag();
        assert!(d.fragment(key(3), 0, true, &[0; 8], 0, 7).is_none());
        // 31 s of capture time later, a fragment of another datagram: the first has expired.
        assert!(d
            .fragment(key(4), 0, true, &[0; 8], 31_000_000_000, 8)
            .is_none());
        assert_eq!(d.counters.expired, 1);
        d.finish(None);
        assert_eq!(d.counters.incomplete_at_end, 1);
        assert_eq!(d.lost.len(), 2);
        let first = &d.lost[&7];
        assert!(
            first.contains("id 3") && first.contains("frame 7") && first.contains("expired"),
            "{:?}",
            d.lost
        );
    }

    #[test]
    fn too_many_datagrams_in_flight_evicts_the_oldest() {
        let mut d = defrag();
        for id in 0..3 {
            assert!(d
                .fragment(key(10 + id), 0, true, &[0; 8], i64::from(id), 1)
                .is_none());
        }
        assert_eq!(d.counters.evicted, 1);
        assert!(d.lost[&1].contains("too many datagrams"), "{:?}", d.lost);
    }
}

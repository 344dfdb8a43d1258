//! A mapped classic pcap read in parts by several threads ([`MappedParts`]):
//! what `input.mmpcap` hands over to a split (`threads = N`) instead of
//! reading every record on its own thread.
//!
//! A pcap file has no marks to start reading from in the middle: where a
//! record starts is known only from the one before. So a part is taken
//! ([`MappedParts::claim`]) by walking its record headers under a lock, from
//! where the previous part ended to the first record that ends past
//! `part_kib` (512 KiB: a few thousand DNS packets, a millisecond or two
//! of a thread's work, small enough to stay in the core's cache between the
//! walk and the reading) further; the walk counts the records (so each packet keeps
//! its place in the input, its frame number, as one thread would number it),
//! finds the end of the file, a record cut off or a corrupt one, and then
//! the thread that took the part reads its packets ([`MappedParts::packets`])
//! from bytes the walk has just brought into its core's cache. Only the walk
//! is done one part at a time; on the 20 M-packet bench a part's walk is a
//! small fraction of the work its packets then cost.
//!
//! pcapng (interfaces declared in blocks along the file), compressed files
//! and standard input are read by one thread, as before.

use super::helper::Helper;
use crate::format::pcap::Pcap;
use crate::format::CaptureFormat;
use crate::input::reader::{cut_off, ReadSoFar};
use dnsluice_core::sync::lock;
use dnsluice_core::{CaptureMeta, Packet, Pulled, Reading, StageError, StageStats};
use memmap2::Mmap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A run of records taken by one thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Part {
    /// Parts are numbered in file order from 0.
    pub index: u64,
    /// Where its first record starts in the file.
    pub start: usize,
    /// Where its last record ends.
    pub end: usize,
    /// The place in the input (records before it) of its first record.
    pub first_key: u64,
    /// The place of the record after its last: the next part's first.
    pub end_key: u64,
}

/// The walk from part to part, under the lock.
#[derive(Default)]
struct Walk {
    /// Where the next part starts.
    at: usize,
    /// Records walked: the next part's first place.
    key: u64,
    /// Parts taken.
    index: u64,
    bytes: u64,
    first_ts_ns: Option<i64>,
    last_ts_ns: Option<i64>,
    /// The file ended, was cut off or corrupt, or the run was stopped.
    ended: bool,
    /// The file ends inside a record (as the one-thread reader says it).
    warning: Option<String>,
    /// A corrupt record: the reading's error.
    error: Option<String>,
}

/// A mapped classic pcap, read in parts (see the module docs).
pub struct MappedParts {
    path: PathBuf,
    map: Arc<Mmap>,
    pcap: Pcap,
    /// About how many bytes of records a part holds (it ends with the
    /// first record that ends past this).
    part_bytes: usize,
    walk: Mutex<Walk>,
    /// Mirrors `Walk::ended`, read without the lock.
    ended: AtomicBool,
    /// Parts taken, read without the lock.
    claimed: AtomicU64,
    /// Records walked, read without the lock.
    walked: AtomicU64,
    /// Keeps the map's pages ready ahead of the walk.
    helper: Option<Helper>,
}

impl MappedParts {
    /// The records of `map` from byte `start` (the first after the file
    /// header), of the classic pcap `pcap`, at `path`, in parts of about
    /// `part_bytes`.
    pub(super) fn new(
        path: PathBuf,
        map: Arc<Mmap>,
        pcap: Pcap,
        start: usize,
        part_bytes: usize,
        helper: Option<Helper>,
    ) -> MappedParts {
        MappedParts {
            path,
            map,
            pcap,
            part_bytes,
            walk: Mutex::new(Walk {
                at: start,
                ..Walk::default()
            }),
            ended: AtomicBool::new(false),
            claimed: AtomicU64::new(0),
            walked: AtomicU64::new(0),
            helper,
        }
    }

    /// Takes the next part: walks its record headers from where the last
    /// part ended. `None` once every record is taken (or the file was
    /// found cut off or corrupt, or [`MappedParts::stop`] was called).
    pub fn claim(&self) -> Option<Part> {
        let mut walk = lock(&self.walk);
        if walk.ended {
            return None;
        }
        let data: &[u8] = &self.map;
        let (start, first_key) = (walk.at, walk.key);
        let limit = start.saturating_add(self.part_bytes);
        let mut at = start;
        while at < limit {
            let rest = &data[at..];
            let Some(record) = self.pcap.record(rest) else {
                self.walk_ends(&mut walk, at);
                break;
            };
            walk.key += 1;
            walk.bytes += record.caplen as u64;
            if let Some(ts) = record.ts_ns {
                walk.first_ts_ns.get_or_insert(ts);
                walk.last_ts_ns = Some(ts);
            }
            at += record.consumed;
            super::prefetch(data.get(at + super::READ_AHEAD..).unwrap_or_default());
        }
        walk.at = at;
        if at >= data.len() {
            walk.ended = true;
        }
        self.ended.store(walk.ended, Ordering::Release);
        self.walked.store(walk.key, Ordering::Relaxed);
        if let Some(helper) = &self.helper {
            helper.tell(at);
        }
        if at == start {
            return None;
        }
        let part = Part {
            index: walk.index,
            start,
            end: at,
            first_key,
            end_key: walk.key,
        };
        walk.index += 1;
        self.claimed.store(walk.index, Ordering::Release);
        Some(part)
    }

    /// The walk met something other than a complete record at `at`: the
    /// end, a record cut off, or a corrupt one (in the one-thread reader's
    /// words).
    #[cold]
    fn walk_ends(&self, walk: &mut Walk, at: usize) {
        walk.ended = true;
        let rest = &self.map[at..];
        if rest.is_empty() {
            return;
        }
        match CaptureFormat::Pcap(self.pcap.clone()).next(rest) {
            Err(message) => walk.error = Some(format!("at byte offset {at}: {message}")),
            Ok(_) => {
                walk.warning = Some(cut_off(&self.path, rest.len(), at as u64, walk.key));
            }
        }
    }

    /// Stops the walk: no part is taken after this (a run stopped early).
    pub fn stop(&self) {
        lock(&self.walk).ended = true;
        self.ended.store(true, Ordering::Release);
    }

    /// Whether every part there will be has been taken.
    pub fn ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    /// How many parts were taken so far (all of them, once [`MappedParts::ended`]).
    pub fn claimed(&self) -> u64 {
        self.claimed.load(Ordering::Acquire)
    }

    /// The place of the first record no part has taken yet.
    pub fn next_key(&self) -> u64 {
        self.walked.load(Ordering::Relaxed)
    }

    /// The capture time of the input's last record (once ended).
    pub fn last_ts_ns(&self) -> Option<i64> {
        lock(&self.walk).last_ts_ns
    }

    /// The packets of `part`, in order, each with its place in the input.
    pub fn packets(&self, part: &Part) -> PartPackets<'_> {
        PartPackets {
            data: &self.map[..part.end],
            at: part.start,
            key: part.first_key,
            pcap: &self.pcap,
        }
    }

    /// Waits (a few milliseconds at a time) until every part is taken,
    /// returning [`Pulled::Waiting`] instead once `due` is set: the
    /// handed-over input's side of the run (see `Producer::parts`). Ends
    /// with the error a corrupt record gave.
    pub fn wait_for_end(&self, due: Option<&AtomicBool>) -> Result<Pulled<'static>, StageError> {
        loop {
            if self.ended() {
                return match lock(&self.walk).error.clone() {
                    Some(message) => Err(StageError::format(&self.path, message)),
                    None => Ok(Pulled::End),
                };
            }
            if due.is_some_and(|due| due.load(Ordering::Relaxed)) {
                return Ok(Pulled::Waiting);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The statistics of `input.mmpcap` read in parts: what one thread's
    /// reader says, as far as the walk has got.
    pub fn stats(&self) -> StageStats {
        let walk = lock(&self.walk);
        let read = ReadSoFar {
            module: "input.mmpcap",
            frames: walk.key,
            bytes: walk.bytes,
            skipped_blocks: 0,
            reading: Reading {
                offset: walk.at as u64,
                total: Some(self.map.len() as u64),
                first_ts_ns: walk.first_ts_ns,
                last_ts_ns: walk.last_ts_ns,
            },
        };
        read.stats(&[], walk.warning.as_slice())
    }
}

/// The packets of one part (see [`MappedParts::packets`]).
pub struct PartPackets<'a> {
    /// The map up to the part's end.
    data: &'a [u8],
    at: usize,
    key: u64,
    pcap: &'a Pcap,
}

impl<'a> Iterator for PartPackets<'a> {
    /// A packet's place in the input, and the packet.
    type Item = (u64, Packet<'a>);

    #[inline]
    fn next(&mut self) -> Option<(u64, Packet<'a>)> {
        let rest = self.data.get(self.at..)?;
        let record = self.pcap.record(rest)?;
        let from = self.at + record.data_at;
        self.at += record.consumed;
        super::prefetch(
            self.data
                .get(self.at + super::READ_AHEAD..)
                .unwrap_or_default(),
        );
        let key = self.key;
        self.key += 1;
        let meta = CaptureMeta {
            frame: key + 1,
            ts_ns: record.ts_ns,
            len: record.len,
            link: record.link,
        };
        Some((
            key,
            Packet::new(&self.data[from..from + record.caplen], meta),
        ))
    }
}

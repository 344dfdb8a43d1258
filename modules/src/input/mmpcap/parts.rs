//! A mapped capture read in parts by several threads ([`MappedParts`]):
//! what `input.mmpcap` hands over to a split (`threads = N`) instead of
//! reading every record on its own thread.
//!
//! A capture file has no marks to start reading from in the middle: where a
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
//! pcapng declares its interfaces (link type, time unit) and byte order in
//! blocks along the file: the walk reads them as the one-thread reader
//! does, and each part carries the format's state as it was where the part
//! starts (a copy of the section's interfaces, once per part), so its
//! thread reads the part's blocks, a new section or interface in it
//! included, as one thread would. Compressed files and standard input are
//! read by one thread, as before.

use super::helper::Helper;
use crate::format::{CaptureFormat, RecordInfo, Step};
use crate::input::reader::{corrupt_at, cut_off, ReadElsewhere, ReadSoFar};
use dnsluice_core::sync::lock;
use dnsluice_core::{CaptureMeta, Packet, Pulled, Reading, StageError, StageStats};
use memmap2::Mmap;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A run of records taken by one thread.
#[derive(Clone, Debug)]
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
    /// The format's state where the part starts (pcapng: the byte order and
    /// the interfaces declared before it).
    format: CaptureFormat,
}

/// The walk from part to part, under the lock.
struct Walk {
    /// Where the next part starts.
    at: usize,
    /// The format's state there.
    format: CaptureFormat,
    /// The records walked.
    tally: Tally,
    /// Parts taken.
    index: u64,
    /// Blocks walked that were not packets (pcapng).
    skipped_blocks: u64,
    /// The file ended, was cut off or corrupt, or the run was stopped.
    ended: bool,
    /// The file ends inside a record (as the one-thread reader says it).
    warning: Option<String>,
    /// A corrupt record: the reading's error.
    error: Option<String>,
}

/// What the walk counts of the records it walked.
#[derive(Default)]
struct Tally {
    /// Records walked: the next part's first place.
    key: u64,
    /// Their captured bytes.
    bytes: u64,
    first_ts_ns: Option<i64>,
    last_ts_ns: Option<i64>,
}

impl Tally {
    /// Counts a record walked.
    #[inline(always)]
    fn took(&mut self, record: &RecordInfo) {
        self.key += 1;
        self.bytes += record.caplen as u64;
        if let Some(ts) = record.ts_ns {
            self.first_ts_ns.get_or_insert(ts);
            self.last_ts_ns = Some(ts);
        }
    }
}

/// Walks the records at the start of `rest` that the format's fast path
/// reads, counting each, until one starts at or past `limit` or one is not
/// read so (another pcapng block, the end, a cut or corrupt record).
/// Returns the bytes walked.
#[inline(always)]
fn walk_records(walk: &mut Walk, rest: &[u8], limit: usize) -> usize {
    // Counted in a local (registers), not in the walk behind the lock.
    let mut tally = std::mem::take(&mut walk.tally);
    let (walked, _) = walk.format.walk(rest, |at, record| {
        if at >= limit {
            return ControlFlow::Break(());
        }
        tally.took(record);
        super::prefetch(rest, at + record.consumed + super::READ_AHEAD);
        ControlFlow::Continue(())
    });
    walk.tally = tally;
    walked
}

/// One step of a walk through records: a record, a block that is not one,
/// or what ends the walk.
enum Walked {
    Record(RecordInfo),
    Skipped(usize),
    /// Not a complete record or block (the end, a cut, or corruption).
    Stop,
}

/// The step at the start of `rest` in `format`: a record by the format's
/// fast path, anything else through its general reading.
#[inline(always)]
fn step(format: &mut CaptureFormat, rest: &[u8]) -> Walked {
    if let Some(record) = format.record(rest) {
        return Walked::Record(record);
    }
    slow_step(format, rest)
}

/// [`step`] when the fast path does not read the record: a pcapng block
/// that is not an Enhanced Packet Block, or what ends the walk.
#[cold]
#[inline(never)]
fn slow_step(format: &mut CaptureFormat, rest: &[u8]) -> Walked {
    if let CaptureFormat::Pcap(_) = format {
        return Walked::Stop;
    }
    match format.next(rest) {
        Ok(Step::Packet(record)) => Walked::Record(record),
        Ok(Step::Skip { consumed }) => Walked::Skipped(consumed),
        Ok(Step::NeedMore { .. }) | Err(_) => Walked::Stop,
    }
}

/// A mapped capture, read in parts (see the module docs).
pub struct MappedParts {
    path: PathBuf,
    map: Arc<Mmap>,
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
    /// header, if any), read in `format` (as it is at `start`), at `path`,
    /// in parts of about `part_bytes`.
    pub(super) fn new(
        path: PathBuf,
        map: Arc<Mmap>,
        format: CaptureFormat,
        start: usize,
        part_bytes: usize,
        helper: Option<Helper>,
    ) -> MappedParts {
        MappedParts {
            path,
            map,
            part_bytes,
            walk: Mutex::new(Walk {
                at: start,
                format,
                tally: Tally::default(),
                index: 0,
                skipped_blocks: 0,
                ended: false,
                warning: None,
                error: None,
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
        let mut guard = lock(&self.walk);
        let walk = &mut *guard;
        if walk.ended {
            return None;
        }
        let data: &[u8] = &self.map;
        let (start, first_key) = (walk.at, walk.tally.key);
        let format = walk.format.clone();
        let limit = start.saturating_add(self.part_bytes);
        let mut at = start;
        while at < limit {
            at += walk_records(walk, &data[at..], limit - at);
            if at >= limit {
                break;
            }
            // Not a record the fast path reads: another block, or the end.
            match slow_step(&mut walk.format, &data[at..]) {
                Walked::Record(record) => {
                    walk.tally.took(&record);
                    at += record.consumed;
                }
                Walked::Skipped(consumed) => {
                    walk.skipped_blocks += 1;
                    at += consumed;
                }
                Walked::Stop => {
                    self.walk_ends(walk, at);
                    break;
                }
            }
        }
        walk.at = at;
        if at >= data.len() {
            walk.ended = true;
        }
        self.walked.store(walk.tally.key, Ordering::Relaxed);
        if let Some(helper) = &self.helper {
            helper.tell(at);
        }
        let part = (at > start).then(|| {
            walk.index += 1;
            Part {
                index: walk.index - 1,
                start,
                end: at,
                first_key,
                end_key: walk.tally.key,
                format,
            }
        });
        // The count first: a thread that sees the end must see every part
        // taken before it (it waits for their flows' batches).
        self.claimed.store(walk.index, Ordering::Release);
        self.ended.store(walk.ended, Ordering::Release);
        part
    }

    /// The walk met something other than a complete record or block at
    /// `at`: the end, a record cut off, or a corrupt one (in the one-thread
    /// reader's words).
    #[cold]
    fn walk_ends(&self, walk: &mut Walk, at: usize) {
        walk.ended = true;
        let rest = &self.map[at..];
        if rest.is_empty() {
            return;
        }
        match walk.format.next(rest) {
            Err(message) => walk.error = Some(corrupt_at(at as u64, "", &message)),
            Ok(_) => {
                walk.warning = Some(cut_off(&self.path, rest.len(), at as u64, walk.tally.key));
            }
        }
    }

    /// Stops the walk: no part is taken after this (a run stopped early).
    pub fn stop(&self) {
        lock(&self.walk).ended = true;
        self.ended.store(true, Ordering::Release);
    }

    /// Whether every part there will be has been taken (then
    /// [`MappedParts::claimed`] counts them all).
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
        lock(&self.walk).tally.last_ts_ns
    }

    /// The packets of `part`, in order, each with its place in the input.
    pub fn packets(&self, part: &Part) -> PartPackets<'_> {
        PartPackets {
            records: self.records(part),
        }
    }

    /// The records of `part`, in order, each with its place in the input and
    /// where its bytes start in the map ([`MappedParts::bytes`]): what
    /// [`MappedParts::packets`] makes packets of, for a reader that sends
    /// most of them elsewhere by their place without making one.
    pub fn records(&self, part: &Part) -> PartRecords<'_> {
        PartRecords {
            data: &self.map[..part.end],
            at: part.start,
            key: part.first_key,
            format: part.format.clone(),
        }
    }

    /// The whole map: the bytes [`PartRecords`] places records in.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }
}

impl ReadElsewhere for MappedParts {
    /// Waits (a few milliseconds at a time) until every part is taken,
    /// returning [`Pulled::Waiting`] instead once `due` is set: the
    /// handed-over input's side of the run (see `Producer::parts`). Ends
    /// with the error a corrupt record gave, and at once when a stop is
    /// asked for ([`dnsluice_core::stop`]: SIGINT, SIGTERM), so that the
    /// driver finishes the chain as one thread's run would (the threads
    /// then take no more parts) instead of waiting for the whole capture.
    fn wait_for_end(&self, due: Option<&AtomicBool>) -> Result<Pulled<'static>, StageError> {
        loop {
            // The end first: a corrupt record's error is said even when a
            // stop came after it.
            if self.ended() {
                return match lock(&self.walk).error.clone() {
                    Some(message) => Err(StageError::format(&self.path, message)),
                    None => Ok(Pulled::End),
                };
            }
            if dnsluice_core::stop::requested().is_some() {
                return Ok(Pulled::End);
            }
            if due.is_some_and(|due| due.load(Ordering::Relaxed)) {
                return Ok(Pulled::Waiting);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The statistics of `input.mmpcap` read in parts: what one thread's
    /// reader says, as far as the walk has got.
    fn stats(&self) -> StageStats {
        let walk = lock(&self.walk);
        let read = ReadSoFar {
            module: "input.mmpcap",
            frames: walk.tally.key,
            bytes: walk.tally.bytes,
            skipped_blocks: walk.skipped_blocks,
            reading: Reading {
                offset: walk.at as u64,
                total: Some(self.map.len() as u64),
                first_ts_ns: walk.tally.first_ts_ns,
                last_ts_ns: walk.tally.last_ts_ns,
            },
        };
        read.stats(&[], walk.warning.as_slice())
    }
}

/// One record of a part (see [`MappedParts::records`]).
#[derive(Clone, Copy, Debug)]
pub struct PartRecord {
    /// Its place in the input (records before it).
    pub key: u64,
    /// Where its captured bytes start in the map.
    pub at: usize,
    /// Its captured length, length on the wire, time and link type.
    pub info: RecordInfo,
}

impl PartRecord {
    /// Its capture facts, as one thread's reader gives them (frame numbers
    /// count from 1).
    #[inline(always)]
    pub fn meta(&self) -> CaptureMeta {
        CaptureMeta {
            frame: self.key + 1,
            ts_ns: self.info.ts_ns,
            len: self.info.len,
            link: self.info.link,
        }
    }
}

/// The records of one part (see [`MappedParts::records`]).
pub struct PartRecords<'a> {
    /// The map up to the part's end.
    data: &'a [u8],
    at: usize,
    key: u64,
    /// The format's state as the walk had it at the part's start (a pcapng
    /// part's own interfaces and sections are read on the way).
    format: CaptureFormat,
}

impl<'a> PartRecords<'a> {
    /// The captured bytes of `record` (one of these records).
    #[inline(always)]
    pub fn bytes_of(&self, record: &PartRecord) -> &'a [u8] {
        // In the map: the walk found the record whole before the part's end.
        let data = self.data;
        &data[record.at..record.at + record.info.caplen]
    }
}

impl Iterator for PartRecords<'_> {
    type Item = PartRecord;

    #[inline]
    fn next(&mut self) -> Option<PartRecord> {
        let info = loop {
            let rest = self.data.get(self.at..)?;
            match step(&mut self.format, rest) {
                Walked::Record(record) => break record,
                Walked::Skipped(consumed) => self.at += consumed,
                // The part ends where the walk found the last record's end.
                Walked::Stop => return None,
            }
        };
        let at = self.at + info.data_at;
        self.at += info.consumed;
        super::prefetch(self.data, self.at + super::READ_AHEAD);
        let key = self.key;
        self.key += 1;
        Some(PartRecord { key, at, info })
    }
}

/// The packets of one part (see [`MappedParts::packets`]).
pub struct PartPackets<'a> {
    records: PartRecords<'a>,
}

impl<'a> Iterator for PartPackets<'a> {
    /// A packet's place in the input, and the packet.
    type Item = (u64, Packet<'a>);

    #[inline]
    fn next(&mut self) -> Option<(u64, Packet<'a>)> {
        let record = self.records.next()?;
        let data = self.records.bytes_of(&record);
        Some((record.key, Packet::new(data, record.meta())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::tests::{block, epb, idb, option, shb, spb};

    /// A little-endian, microsecond classic pcap on Ethernet whose record
    /// `i` captured `sizes[i]` bytes (each byte its record's number) at
    /// second `i`.
    fn capture(sizes: &[usize]) -> Vec<u8> {
        let mut bytes = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
        bytes.extend([0; 8]);
        bytes.extend(65535u32.to_le_bytes());
        bytes.extend(1u32.to_le_bytes());
        for (i, &size) in sizes.iter().enumerate() {
            for field in [i as u32, 0, size as u32, size as u32] {
                bytes.extend(field.to_le_bytes());
            }
            bytes.extend(std::iter::repeat_n(i as u8, size));
        }
        bytes
    }

    /// `bytes` (a capture) written to a file, mapped, read in parts of
    /// `part_bytes`.
    fn parts_of(bytes: &[u8], part_bytes: usize, name: &str) -> MappedParts {
        let path = std::env::temp_dir().join(format!("parts-{}-{name}.pcap", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        #[allow(unsafe_code)]
        // SAFETY: a file this test wrote and nothing else changes.
        let map = Arc::new(unsafe { Mmap::map(&file) }.unwrap());
        // The map keeps the bytes; the name is not needed any more.
        std::fs::remove_file(&path).unwrap();
        let (format, start) = CaptureFormat::detect(bytes).unwrap();
        MappedParts::new(path, map, format, start, part_bytes, None)
    }

    #[test]
    fn parts_take_every_record_once_in_order_each_past_its_size() {
        let sizes: Vec<usize> = (0..300).map(|i| 20 + (i * 37) % 180).collect();
        let parts = parts_of(&capture(&sizes), 1000, "whole");
        let (mut at, mut key, mut index) = (24, 0u64, 0u64);
        while let Some(part) = parts.claim() {
            assert_eq!((part.index, part.start, part.first_key), (index, at, key));
            let records = &sizes[part.first_key as usize..part.end_key as usize];
            let length: usize = records.iter().map(|size| 16 + size).sum();
            assert_eq!(part.end - part.start, length);
            // It ends with the first record that ends 1,000 bytes or more
            // after its start (the file's last part may end short of that).
            let last = 16 + records.last().unwrap();
            assert!(length - last < 1000, "{part:?}");
            assert!(length >= 1000 || part.end_key == 300, "{part:?}");
            for (key, packet) in parts.packets(&part) {
                assert_eq!(packet.meta.frame, key + 1);
                assert_eq!(packet.meta.ts_ns, Some(key as i64 * 1_000_000_000));
                assert_eq!(packet.data, vec![key as u8; sizes[key as usize]]);
            }
            assert_eq!(
                parts.packets(&part).count() as u64,
                part.end_key - part.first_key
            );
            (at, key, index) = (part.end, part.end_key, index + 1);
        }
        assert_eq!((key, parts.claimed()), (300, index));
        assert!(parts.ended() && parts.claim().is_none());
        let stats = parts.stats();
        assert_eq!(stats.input, 300);
        assert_eq!(stats.counters["bytes"], sizes.iter().sum::<usize>() as u64);
        assert!(stats.warnings.is_empty());
        assert_eq!(parts.last_ts_ns(), Some(299_000_000_000));
    }

    /// What a pcapng test capture holds: the bytes, and for each packet its
    /// link type, its time (ns) if it has one, and its bytes.
    type Written = (Vec<u8>, Vec<(u32, Option<i64>, Vec<u8>)>);

    /// A pcapng of two sections: little-endian with an Ethernet interface in
    /// microseconds, a second interface (raw IP, nanoseconds) declared after
    /// the first packets and a name resolution block after each interface;
    /// then big-endian with a Linux SLL interface in milliseconds and a
    /// simple packet block (no time) among enhanced ones. Packet `i` holds
    /// 20 to 100 bytes all `i`, captured at second `i`.
    fn sections() -> Written {
        let mut bytes = Vec::new();
        let mut packets = Vec::new();
        for (big, interfaces) in [
            (false, &[(1u16, 6u8), (101, 9)][..]),
            (true, &[(113, 3)][..]),
        ] {
            bytes.extend(shb(big));
            let mut declared = 0;
            for round in 0..40 {
                if round % 20 == 0 && declared < interfaces.len() {
                    let (link, resolution) = interfaces[declared];
                    bytes.extend(idb(big, link, 0, &[option(big, 9, &[resolution])]));
                    bytes.extend(block(big, 4, &[0; 4]));
                    declared += 1;
                }
                let i = packets.len();
                let interface = round % declared;
                let (link, resolution) = interfaces[interface];
                let data = vec![i as u8; 20 + (i * 13) % 80];
                let len = data.len() as u32;
                if big && round == 25 {
                    bytes.extend(spb(big, &data, len));
                    packets.push((u32::from(link), None, data));
                    continue;
                }
                let units = i as u64 * 10u64.pow(u32::from(resolution));
                bytes.extend(epb(big, interface as u32, units, &data, len));
                packets.push((u32::from(link), Some(i as i64 * 1_000_000_000), data));
            }
        }
        (bytes, packets)
    }

    #[test]
    fn pcapng_parts_read_each_packet_with_the_interface_and_section_before_it() {
        let (bytes, written) = sections();
        for part_bytes in [1, 300, 1000, 1 << 20] {
            let parts = parts_of(&bytes, part_bytes, "sections");
            let mut read = Vec::new();
            while let Some(part) = parts.claim() {
                assert_eq!(part.first_key, read.len() as u64);
                for (key, packet) in parts.packets(&part) {
                    assert_eq!(key, read.len() as u64);
                    assert_eq!(packet.meta.frame, key + 1);
                    let meta = &packet.meta;
                    read.push((meta.link.0, meta.ts_ns, packet.data.to_vec()));
                }
                assert_eq!(read.len() as u64, part.end_key);
            }
            assert_eq!(read, written, "parts of {part_bytes} bytes");
            let stats = parts.stats();
            assert_eq!(stats.input, 80);
            // Two section headers, three interfaces, three name blocks.
            assert_eq!(stats.counters["skipped_blocks"], 8);
            assert!(stats.warnings.is_empty());
            assert!(matches!(parts.wait_for_end(None), Ok(Pulled::End)));
        }
        // A block cut off, and one whose trailing length is not its
        // leading one: the reading ends as one thread's does.
        let cut = parts_of(&bytes[..bytes.len() - 10], 300, "sections-cut");
        while cut.claim().is_some() {}
        assert_eq!(cut.stats().input, 79);
        assert!(cut.stats().warnings[0].contains("incomplete record"));
        let mut corrupt = bytes.clone();
        let last = corrupt.len() - 4;
        corrupt[last] ^= 4;
        let parts = parts_of(&corrupt, 300, "sections-corrupt");
        while parts.claim().is_some() {}
        assert_eq!(parts.stats().input, 79);
        let error = parts
            .wait_for_end(None)
            .err()
            .expect("an error")
            .to_string();
        assert!(error.contains("trailing length"), "{error}");
    }

    #[test]
    fn a_record_cut_off_or_corrupt_ends_the_parts_as_one_thread_ends() {
        let sizes = [100; 50];
        let whole = capture(&sizes);
        let cut = parts_of(&whole[..whole.len() - 30], 500, "cut");
        while cut.claim().is_some() {}
        let stats = cut.stats();
        assert_eq!(stats.input, 49);
        assert_eq!(stats.errors["truncated_file"], 1);
        let expected = format!(
            "the 86 bytes from byte offset {} are an incomplete record",
            24 + 49 * 116
        );
        assert!(
            stats.warnings[0].contains(&expected),
            "{:?}",
            stats.warnings
        );
        assert!(matches!(cut.wait_for_end(None), Ok(Pulled::End)));

        let mut corrupt = whole.clone();
        let tenth = 24 + 10 * 116;
        corrupt[tenth + 8..tenth + 12].copy_from_slice(&u32::MAX.to_le_bytes());
        let parts = parts_of(&corrupt, 500, "corrupt");
        while parts.claim().is_some() {}
        assert_eq!(parts.stats().input, 10);
        let error = parts
            .wait_for_end(None)
            .err()
            .expect("an error")
            .to_string();
        assert!(
            error.contains(&format!("at byte offset {tenth}: record claims 4294967295")),
            "{error}"
        );
    }
}

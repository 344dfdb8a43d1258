//! The split's threads reading a mapped capture in parts, when
//! `input.mmpcap` handed its pcap or pcapng over (`Producer::parts`): no
//! thread reads every record and hands the others theirs; each thread
//! takes the next part of the file ([`MappedParts::claim`]), reads its
//! packets, and runs its chain on those that stand alone (every packet,
//! round-robin; by flow, a DNS datagram outside TCP and fragments).
//!
//! A packet that belongs to a flow (TCP, a fragment) must meet the others
//! of its flow on one thread, in input order, whichever thread's part it
//! lies in. The reader of a part puts those packets into one batch per
//! thread that owns flows (by the flow's hash, as the split spreads them),
//! posts each batch that has packets to that thread's mailbox under the
//! part's number, and marks the part read ([`ReadParts`]); each thread
//! takes its mailbox's batches in part order, up to the parts read without
//! a gap (between its own parts, and while it waits), so a flow's packets
//! reach its chain in the order one thread would see them. Its own flows'
//! packets take the same way, through its own mailbox. The reader glances
//! at a record's bytes where they lie in the map ([`glance_v4_at`]) and
//! puts a flow's packet into its batch as the record's place and capture
//! facts ([`Batch::push_record`]), without making a packet of it first:
//! a packet is made only for the chain that runs it (on 100,000 TCP
//! connections read on two threads, with the claim's walk on the format's
//! walk: 2.0 % fewer instructions on the workers; `docs/benchmarks.md`).
//!
//! Merging the output into one stream, each thread writes two lanes for
//! the merger: what its own parts' datagrams wrote (in part order) and
//! what its flows wrote (in mailbox order), each in input order by itself,
//! each saying how far it has got; the merger merges the lanes by place as
//! it merges a split's (`merger.rs`).
//!
//! Nothing waits while it holds something another thread needs: a thread
//! only waits before taking a part (when the parts taken are [`AHEAD_PARTS`]
//! or twice the threads ahead of the slowest thread's mailbox, or the
//! merger has not yet written what it handed over), and it takes its
//! mailbox's batches and tells the merger how far its datagrams' lane has
//! got meanwhile; a part being read is read to its end without waiting, and
//! its batches are posted when it ends.

use super::batch::Batch;
use super::lanes::{self, hand_over, hand_over_finish, publish_snapshot, run_batch, Lane, OnPanic};
use super::options::{By, SplitOptions};
use super::read_parts::ReadParts;
use super::spread::{flow_hash, glance_v4_at, FlowLanes, Glance};
use crate::input::mmpcap::parts::{MappedParts, Part, PartRecord};
use dnsluice_core::merge::{LaneHandle, AT_FINISH};
use dnsluice_core::shared::{RegionFinder, SharedRegion, Span};
use dnsluice_core::sync::lock;
use dnsluice_core::{InputParts, LinkType, Object, Packet, Receiver, StageError, StageStats};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How many parts the threads may take beyond the part the slowest
/// thread's mailbox is at, at least (what the mailboxes may hold; a thread
/// that falls behind holds the others back this far at most): this or
/// twice the threads, so that every thread has a part in hand and one more.
const AHEAD_PARTS: u64 = 8;

/// [`AHEAD_PARTS`], or more for many threads.
fn parts_ahead(threads: usize) -> u64 {
    AHEAD_PARTS.max(2 * threads as u64)
}
/// A thread takes no part while this many of its buffers wait for the
/// merger in either of its lanes.
const MERGER_BEHIND: usize = 8;
/// Room in each merger lane, at most: what lets a thread run further
/// ahead of the merger on its mailbox's batches, not what keeps it from
/// waiting (see [`lane_room`]).
const LANE_ROOM_MOST: usize = 64;

/// Room in each merger lane: a part's batches for every thread and more,
/// up to [`LANE_ROOM_MOST`] (rooms that grew with the threads made memory
/// grow with their square: 1,024 threads held gigabytes).
///
/// Handing over never waits with any room above [`MERGER_BEHIND`] + 2: a
/// thread takes a part only while fewer than [`MERGER_BEHIND`] of its
/// buffers wait in either lane, and while reading it hands over to its
/// datagrams' lane twice at most (as it starts and ends); it takes a
/// mailbox's batch only while its flows' lane has room for it and one
/// more (the hand-over of its end).
pub(super) fn lane_room(threads: usize) -> usize {
    let room = MERGER_BEHIND + 2 * (parts_ahead(threads) as usize + threads) + 4;
    room.min(LANE_ROOM_MOST)
}

/// A reader's first naps while it waits (on other threads' parts or the
/// merger), with no more threads than cores: short, as a part's batches
/// come within a part's time.
const READER_NAP: Duration = Duration::from_micros(20);
/// How many naps a reader takes at [`READER_NAP`] before it naps longer.
const READER_NAPS_SHORT: u32 = 100;
/// A reader's nap after [`READER_NAPS_SHORT`] naps in a row (nothing has
/// come for a while: a reader of the output that stopped reading), with no
/// more threads than cores.
const READER_NAP_LONG: Duration = Duration::from_millis(1);
/// A reader's nap, at most (with many threads to a core).
const READER_NAP_MOST: Duration = Duration::from_millis(50);

/// How long a reader naps after `idle` naps in a row, when each core takes
/// turns between `turns` threads: that many times longer, as each nap
/// costs a core a switch of threads, and the thread it waits on gets a
/// core only once in that many turns anyway.
fn reader_nap(idle: u32, turns: u32) -> Duration {
    let nap = match idle < READER_NAPS_SHORT {
        true => READER_NAP,
        false => READER_NAP_LONG,
    };
    nap.saturating_mul(turns).min(READER_NAP_MOST)
}

/// Which thread a packet of the parts goes to: `None`, the thread that
/// read it (it stands alone: every packet, unless `by_flow`); else the
/// owner of its flow.
#[derive(Clone, Copy, Debug)]
pub(super) struct Route {
    pub by_flow: bool,
    pub lanes: FlowLanes,
}

/// Where a glance at a record's bytes sends its packet ([`Route::at_glance`]).
enum Goes {
    /// The thread that read it runs it.
    Here,
    /// Into this owner's batch.
    To(usize),
    /// Not told at a glance: [`Route::owner`] looks at the packet.
    Closer,
}

impl Route {
    /// Where a packet goes, by a glance at its bytes `data` on link `link`.
    #[inline(always)]
    fn at_glance(&self, data: &[u8], link: LinkType) -> Goes {
        if !self.by_flow {
            return Goes::Here;
        }
        match glance_v4_at(data, link) {
            Glance::Alone => Goes::Here,
            Glance::Flow(hash) => Goes::To(self.lanes.lane(hash)),
            Glance::Closer => Goes::Closer,
        }
    }

    /// The owner of `obj`'s flow, by a full look; `None`: the thread that
    /// read it.
    fn owner(&self, obj: &Object<'_>) -> Option<usize> {
        if !self.by_flow {
            return None;
        }
        flow_hash(obj).map(|hash| self.lanes.lane(hash))
    }
}

/// What the threads reading in parts share.
pub(super) struct PartsReading {
    pub parts: Arc<MappedParts>,
    /// The map as a shared region, its offsets the map's: flow packets go
    /// into their owners' batches by their place in it. `None` (not found
    /// as such): each is pushed as a packet.
    map_region: Option<SharedRegion>,
    route: Route,
    /// Per thread: the flow packets found for it, by part number (a part
    /// with none for it posts no batch).
    mailboxes: Vec<Mutex<BTreeMap<u64, Batch>>>,
    /// The parts whose batches are all posted.
    read: ReadParts,
    /// Per thread: every part below this one its mailbox has given.
    next_part: Vec<AtomicU64>,
    /// Emptied batches, for the next parts.
    spare: Mutex<Vec<Batch>>,
    /// A thread stopped on an error: the others stop waiting for it.
    pub failed: AtomicBool,
    /// How many threads each core takes turns between ([`lanes::turns`]):
    /// the readers' naps are that many times longer.
    turns: u32,
}

impl PartsReading {
    /// The reading by `options.threads` threads of `parts`, when that is a
    /// mapped capture handed over, there are several threads, and they
    /// spread by flow or round-robin (what `threads = N` asks; `by =
    /// "client"` is only asked of a split placed by hand, which is given no
    /// parts).
    pub fn of(parts: InputParts, options: &SplitOptions) -> Option<Arc<PartsReading>> {
        let parts = parts.downcast::<Arc<MappedParts>>().ok()?;
        let threads = options.threads as usize;
        let route = Route {
            by_flow: options.by == By::Flow,
            lanes: FlowLanes::even(options.threads),
        };
        let spreads = options.by != By::Client && threads > 1;
        spreads.then(|| Arc::new(PartsReading::new(*parts, route, threads)))
    }

    /// The reading of `parts` by `threads` threads.
    pub fn new(parts: Arc<MappedParts>, route: Route, threads: usize) -> PartsReading {
        let map = parts.bytes();
        let whole = Span {
            at: 0,
            len: map.len(),
        };
        let map_region = RegionFinder::default()
            .region_of(map)
            .filter(|region| region.span_of(map) == Some(whole))
            .cloned();
        PartsReading {
            parts,
            map_region,
            route,
            mailboxes: (0..threads).map(|_| Mutex::default()).collect(),
            read: ReadParts::default(),
            next_part: (0..threads).map(|_| AtomicU64::new(0)).collect(),
            spare: Mutex::default(),
            failed: AtomicBool::new(false),
            turns: lanes::turns(threads),
        }
    }

    /// The part the slowest thread's mailbox is at.
    fn slowest(&self) -> u64 {
        let next = self.next_part.iter().map(|n| n.load(Ordering::Acquire));
        next.min().unwrap_or(0)
    }
}

/// One thread of the reading: its index, its two merger lanes (`local`:
/// its parts' datagrams, whose `handled`, `snapshot` and `failed` are the
/// thread's; `flows`: its mailbox's packets).
pub(super) struct PartsThread {
    pub index: usize,
    pub reading: Arc<PartsReading>,
    pub local: Arc<Lane>,
    pub flows: Arc<Lane>,
    pub merger_failed: Arc<AtomicBool>,
}

/// Runs one thread of the reading to the end: parts and mailbox, then the
/// chain's end. Returns the chain's statistics.
pub(super) fn work(
    thread: &PartsThread,
    merging: Option<&LaneHandle>,
    downstream: Box<dyn Receiver>,
) -> Vec<StageStats> {
    let _said = OnPanic(|| {
        thread.local.fail("it panicked".into());
        thread.reading.failed.store(true, Ordering::SeqCst);
        thread.reading.parts.stop();
    });
    let mut reader = Reader {
        thread,
        merging,
        downstream,
        out: Vec::new(),
        regions: RegionFinder::default(),
        told: 0,
        last_snapshot: Instant::now(),
    };
    if let Err(e) = reader.run() {
        thread.local.fail(e.to_string());
        thread.reading.failed.store(true, Ordering::SeqCst);
    }
    // No part is taken after a thread stopped (at the end, nothing is
    // left; on an error, the input's side stops waiting for the parts).
    thread.reading.parts.stop();
    thread.local.finish();
    thread.flows.finish();
    let mut stats = Vec::new();
    reader.downstream.stats(&mut stats);
    stats
}

/// A thread's state while it reads.
struct Reader<'a> {
    thread: &'a PartsThread,
    merging: Option<&'a LaneHandle>,
    downstream: Box<dyn Receiver>,
    /// Per owner thread: the current part's flow packets for it; empty
    /// until the first flow packet (a capture of datagrams that stand alone,
    /// or a round-robin split, needs none: at 1,024 threads, a batch for
    /// each owner in each thread would be a million).
    out: Vec<Batch>,
    regions: RegionFinder,
    /// How far the datagrams' lane has told the merger it has got.
    told: u64,
    last_snapshot: Instant,
}

impl Reader<'_> {
    fn run(&mut self) -> Result<(), StageError> {
        let reading = &*self.thread.reading;
        let mut idle = 0u32;
        loop {
            if self.take_mailbox()? {
                idle = 0;
            }
            if reading.failed.load(Ordering::SeqCst) || self.merger_failed() {
                return Ok(());
            }
            if reading.parts.ended() {
                if self.mailbox_done() {
                    break;
                }
            } else if self.may_take_part() {
                if let Some(part) = reading.parts.claim() {
                    self.read(&part)?;
                    idle = 0;
                }
                continue;
            }
            // Waiting: the datagrams' lane has nothing before the parts
            // not taken yet. Short naps (a part's batches come within a
            // part's time), longer once nothing has come for a while (a
            // reader of the output that stopped reading). A merger that is
            // behind is woken now rather than at its next look (a
            // millisecond): small parts fill `MERGER_BEHIND` buffers in
            // less, and their threads would wait for it part after part.
            self.tell_local(reading.parts.next_key());
            if self.merger_behind() {
                self.thread.local.merger.ring();
            }
            idle = idle.saturating_add(1);
            std::thread::sleep(reader_nap(idle, reading.turns));
        }
        self.finish()
    }

    /// Whether this thread may take a part: not too far ahead of the
    /// slowest mailbox, and the merger not behind on its lanes.
    fn may_take_part(&self) -> bool {
        let reading = &*self.thread.reading;
        let threads = reading.mailboxes.len();
        let ahead = reading.parts.claimed() < reading.slowest() + parts_ahead(threads);
        ahead && !self.merger_behind()
    }

    /// Whether [`MERGER_BEHIND`] of this thread's buffers wait for the
    /// merger in either of its lanes.
    fn merger_behind(&self) -> bool {
        let unwritten = |lane: &Lane| lane.written.len() >= MERGER_BEHIND;
        self.merging.is_some() && (unwritten(&self.thread.local) || unwritten(&self.thread.flows))
    }

    /// Whether the mailbox has given every part's batch (the parts ended).
    fn mailbox_done(&self) -> bool {
        let reading = &*self.thread.reading;
        reading.next_part[self.thread.index].load(Ordering::Acquire) >= reading.parts.claimed()
    }

    fn merger_failed(&self) -> bool {
        self.thread.merger_failed.load(Ordering::SeqCst)
    }

    /// Reads `part`: its standalone packets through the chain, the others
    /// into their owners' batches, posted at the end.
    fn read(&mut self, part: &Part) -> Result<(), StageError> {
        let reading = &*self.thread.reading;
        let route = reading.route;
        self.tell_local(part.first_key);
        let mut handled = 0u64;
        let map_region = reading.map_region.as_ref();
        let mut records = reading.parts.records(part);
        while let Some(record) = records.next() {
            let data = records.bytes_of(&record);
            let owner = match route.at_glance(data, record.info.link) {
                Goes::To(owner) => Some(owner),
                Goes::Here => None,
                Goes::Closer => route.owner(&Object::Packet(Packet::new(data, record.meta()))),
            };
            match owner {
                None => {
                    self.run_here(Packet::new(data, record.meta()), record.key)?;
                    handled += 1;
                }
                Some(owner) => self.send(owner, data, &record, map_region),
            }
        }
        let local = &*self.thread.local;
        local.handled.fetch_add(handled, Ordering::Relaxed);
        self.hand_over(local, part.end_key)?;
        self.told = part.end_key;
        for (owner, out) in self.out.iter_mut().enumerate() {
            if out.is_empty() {
                continue;
            }
            let fresh = lock(&reading.spare).pop().unwrap_or_default();
            let mut batch = std::mem::replace(out, fresh);
            batch.upto = part.end_key;
            lock(&reading.mailboxes[owner]).insert(part.index, batch);
        }
        reading.read.mark(part.index, part.end_key);
        self.snapshot();
        Ok(())
    }

    /// Runs `packet`, at `key` in the input, through this thread's chain.
    #[inline(always)]
    fn run_here(&mut self, packet: Packet<'_>, key: u64) -> Result<(), StageError> {
        self.downstream.receive(&mut Object::Packet(packet))?;
        if let Some(lane_handle) = self.merging {
            lane_handle.end_object(key);
        }
        Ok(())
    }

    /// Puts the packet of `record` (its bytes `data`) into `owner`'s batch:
    /// by its place in the map (`map_region`) when an entry holds it, else
    /// as a packet.
    #[inline(always)]
    fn send(
        &mut self,
        owner: usize,
        data: &[u8],
        record: &PartRecord,
        map_region: Option<&SharedRegion>,
    ) {
        if owner >= self.out.len() {
            self.make_out();
        }
        let batch = &mut self.out[owner];
        if map_region.is_some_and(|region| batch.push_record(record, region)) {
            return;
        }
        let obj = Object::Packet(Packet::new(data, record.meta()));
        batch.push(&obj, record.key, &mut self.regions);
    }

    /// A batch for every owner, for the first flow packet.
    #[cold]
    fn make_out(&mut self) {
        let threads = self.thread.reading.mailboxes.len();
        self.out.resize_with(threads, Batch::default);
    }

    /// Runs the batches the mailbox has in part order, up to the parts read
    /// without a gap (while the merger has room), and moves on past the
    /// parts that had none for it; whether it got any further.
    fn take_mailbox(&mut self) -> Result<bool, StageError> {
        let reading = &*self.thread.reading;
        let index = self.thread.index;
        let flows = &*self.thread.flows;
        let mut moved = false;
        loop {
            let next = reading.next_part[index].load(Ordering::Acquire);
            if reading.read.below() <= next {
                return Ok(moved);
            }
            if self.merging.is_some() && flows.written.len() + 2 >= flows.written.capacity() {
                return Ok(moved);
            }
            moved = true;
            // Read before the mailbox is looked at: a part's batches are
            // posted before it is marked read.
            let read = reading.read.read_below();
            let first = {
                let mut mailbox = lock(&reading.mailboxes[index]);
                match mailbox.first_entry() {
                    Some(entry) if *entry.key() < read.below => Some(entry.remove_entry()),
                    _ => None,
                }
            };
            let Some((part, mut batch)) = first else {
                // Nothing for this thread in the parts read.
                reading.next_part[index].store(read.below, Ordering::Release);
                self.hand_over(flows, read.end_key)?;
                continue;
            };
            let objects = batch.len() as u64;
            let through = batch.upto;
            let (_, result) = run_batch(&mut *self.downstream, self.merging, &mut batch);
            lock(&reading.spare).push(batch);
            result?;
            self.thread
                .local
                .handled
                .fetch_add(objects, Ordering::Relaxed);
            reading.next_part[index].store(part + 1, Ordering::Release);
            self.hand_over(flows, through)?;
        }
    }

    /// Tells the merger that the datagrams' lane has nothing before
    /// `through` (once it has got further, and while there is room).
    fn tell_local(&mut self, through: u64) {
        let local = &*self.thread.local;
        if self.merging.is_none() || through <= self.told || local.written.len() >= MERGER_BEHIND {
            return;
        }
        if self.hand_over(local, through).is_ok() {
            self.told = through;
        }
    }

    /// Hands what the chain wrote since the last hand-over to `lane`'s
    /// merger queue, saying the lane has got to `through`.
    fn hand_over(&self, lane: &Lane, through: u64) -> Result<(), StageError> {
        let Some(lane_handle) = self.merging else {
            return Ok(());
        };
        match hand_over(lane, &self.thread.merger_failed, lane_handle, through) {
            true => Ok(()),
            false => Err(StageError::other(super::MODULE, "the merged output failed")),
        }
    }

    fn snapshot(&mut self) {
        let _ = publish_snapshot(
            &self.thread.local,
            &*self.downstream,
            &mut self.last_snapshot,
        );
    }

    /// The end: the chain is told the input's last capture time and
    /// finishes; what it writes then goes to the flows' lane.
    fn finish(&mut self) -> Result<(), StageError> {
        if let Some(ts) = self.thread.reading.parts.last_ts_ns() {
            self.downstream.clock_at_end(ts);
        }
        // The datagrams' lane has nothing more (its last buffer says so).
        self.hand_over(&self.thread.local, AT_FINISH)?;
        let finished = self.downstream.finish();
        if let Some(lane_handle) = self.merging {
            hand_over_finish(&self.thread.flows, &self.thread.merger_failed, lane_handle);
        }
        finished
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_nap_longer_as_threads_take_turns() {
        let us = Duration::from_micros;
        // No more threads than cores: 20 µs, then 1 ms after 100 naps.
        assert_eq!(reader_nap(1, 1), us(20));
        assert_eq!(reader_nap(99, 1), us(20));
        assert_eq!(reader_nap(100, 1), us(1_000));
        // Three threads to a core: three times as long.
        assert_eq!(reader_nap(1, 3), us(60));
        assert_eq!(reader_nap(100, 3), us(3_000));
        // 512 to a core (1,024 threads on 2 cores): 10 ms, then 50 ms.
        assert_eq!(reader_nap(1, 512), us(10_240));
        assert_eq!(reader_nap(100, 512), us(50_000));
        assert_eq!(reader_nap(u32::MAX, u32::MAX), us(50_000));
    }
}

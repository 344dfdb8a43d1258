//! `filter.split`: runs the rest of the chain in `threads` worker threads, for
//! when one thread cannot keep up (`dnsluice run --threads N` puts one right
//! after the input; a heavy Lua filter, several DNS clients).
//!
//! Objects go to the workers in batches: round-robin (`by = "round-robin"`,
//! a whole batch to each worker in turn), by a hash of their client's address
//! (`by = "client"`: the source, or the destination of a packet from a DNS
//! server port, so a client's queries and answers meet on one thread; a
//! fragment's ports are known only after `filter.dns` has reassembled it), or by
//! a hash of the pair of addresses (`by = "flow"`: both directions of a TCP
//! connection and every fragment of a datagram meet on one thread, so
//! `filter.dns` reassembles them as one thread would; a DNS datagram that
//! stands alone, most of a capture, goes with the batches in turn). The split puts
//! each object into a batch (`batch.rs`: a packet of a capture as where its
//! bytes lie in the map or the reader's block, anything else copied into a reused
//! [`dnsluice_core::OwnedObject`]); a full batch crosses
//! with one push on a bounded lock-free queue (crossbeam `ArrayQueue`) and
//! the worker hands emptied batches back on another, so in steady state
//! nothing is allocated and the cost of crossing is paid once per batch
//! (`benches/threads.sh` measures it per object). A full queue makes the
//! split wait (it spins briefly, then sleeps 20 µs at a time; handing over
//! is `handover.rs`); an idle worker parks at once until the split wakes
//! it, once half its queue waits (or 10 ms have passed); the merger spins
//! briefly, then sleeps until half a worker's written batches wait
//! (`doorbell.rs`). A capture reader that pushes to the split fills its
//! batches in the reader's own loop (`intake.rs`). Objects wait in a batch until it
//! is full: for a live input that trickles, use fewer threads or a smaller
//! `batch`. With `inline = true` (what `threads = N` sets) the splitting
//! thread runs the first copy itself, on batches it keeps when the workers'
//! queues are half full and on a smaller share of the flows than a worker's,
//! as it also reads and hands over every packet (`inline.rs`,
//! `spread.rs`'s `FlowLanes`: 7/8 of an equal share on 2 threads, none
//! from 9 threads).
//!
//! Given a mapped capture (pcap or pcapng) to read in parts (`threads = N` after
//! `input.mmpcap`), every thread reads parts of the file itself and posts
//! flow packets to their owners (`parts.rs`).
//!
//! The stages after the split are built in each worker thread by the
//! pipeline (see `dnsluice_core::pipeline`). When the output is
//! `output.json` with one path for every thread (no `{thread}` in it), the
//! threads share one stream (see [`dnsluice_core::merge`]): a merger thread
//! writes what each worker's chain wrote, as batches come (`ordered =
//! false`), or object by object in the order the split saw them (`ordered =
//! true`, merged by each object's place in the input, which crosses with
//! it): the lines one thread would have written, in the same order, what
//! each chain writes as it finishes (TCP streams cut short) last, thread by
//! thread.
//!
//! Statistics merge exactly: counts, series and breakdowns add up, latency
//! histograms add bucket by bucket (their percentiles are the merged
//! histogram's), top lists merge with their error bounds. While the run goes
//! on, each worker publishes its chain's statistics every 100 ms, so
//! interval statistics and progress see the threads' work.

mod batch;
mod doorbell;
mod gather;
mod handover;
mod inline;
mod intake;
mod lanes;
mod merger;
mod options;
mod parts;
mod read_parts;
mod spread;
mod start;

use crate::clients::hash_onto;
use batch::Batch;
use dnsluice_core::merge::MergeTarget;
use dnsluice_core::registry::{DownstreamBuilder, ModuleEntry, Parallel};
use dnsluice_core::shared::RegionFinder;
use dnsluice_core::sync::lock;
use dnsluice_core::{InputParts, Object, Receiver, StageError, StageStats};
use doorbell::Doorbell;
use inline::InlineLane;
use lanes::{merge_stats, Lane};
use merger::Merger;
pub use options::{By, SplitOptions};
use parts::PartsReading;
use spread::{client_address, flow_hash, glance_v4, FlowLanes, Glance};
use start::Started;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

pub(super) const MODULE: &str = "filter.split";

/// Merging in order, a lane that got nothing is told how far the split has
/// got (an empty batch) once this many batches have filled (at most half as
/// many as a lane's queues hold: the merger must never wait on a lane while
/// the split waits on the merger). Counted in batches, not objects: a batch
/// handed over early (its reader moved on to another block) holds fewer.
const STALE_BATCHES: u64 = 4;

/// A lane and its worker thread's handle (none for the inline lane 0).
struct Worker {
    lane: Arc<Lane>,
    handle: Option<start::Handle>,
}

/// The split stage; see the module docs.
pub struct Split {
    workers: Vec<Worker>,
    by: By,
    batch: usize,
    /// Per worker, the batch being filled.
    pending: Vec<Option<Batch>>,
    /// Round-robin: the worker the current batch is for.
    next: usize,
    input: u64,
    /// The input's last capture time, once the driver tells it (`i64::MIN`: not told).
    input_end_ns: i64,
    /// The merger writes the lanes' bytes in input order (each lane's
    /// batches then say how far the split had got, and a lane that got
    /// nothing for a while is handed an empty batch: see [`STALE_BATCHES`]).
    ordered: bool,
    /// Batches filled so far (merging in order).
    filled: u64,
    /// Per lane: [`Split::filled`] when it was last handed something.
    told: Vec<u64>,
    /// Batches filled after which an idle lane is told how far the split has got.
    stale_after: u64,
    merger: Option<JoinHandle<Result<(), StageError>>>,
    merger_failed: Arc<AtomicBool>,
    /// The workers' merged statistics, once they have finished.
    merged: Vec<StageStats>,
    /// List the split itself in the statistics.
    report: bool,
    /// Lane 0 on the splitting thread (`inline`).
    inline: Option<InlineLane>,
    /// Which lane a flow goes to (with an inline lane, it takes fewer).
    flow_lanes: FlowLanes,
    /// Stopped already (finished, or failed to start).
    stopped: bool,
    /// The threads read the input in parts themselves (see `parts.rs`).
    reading: Option<Arc<PartsReading>>,
    /// Finds the shared region (a mapped capture) a batch's bytes lie in.
    regions: RegionFinder,
    /// How many batches waiting wake a sleeping worker: half its queue, so
    /// that a worker faster than the split is woken once for several
    /// batches (a wake-up costs a system call on each side, a few
    /// microseconds). The merger wakes a worker whose next bytes it waits
    /// for sooner (merged in order, the split may be waiting for it).
    wake_at: usize,
    /// Per worker: batches handed to it while it slept.
    handed_while_parked: Vec<handover::SleepCount>,
}

impl Split {
    /// Starts `options.threads` workers, each building its chain with `build`
    /// (reading the input's `parts` themselves, when it was handed over:
    /// a mapped pcap or pcapng); fails with the first worker's construction error.
    pub fn new(
        options: &SplitOptions,
        build: DownstreamBuilder,
        parts: Option<InputParts>,
    ) -> Result<Split, StageError> {
        let batch = options.batch as usize;
        let batches = (options.queue as usize).div_ceil(batch).max(2);
        let target = MergeTarget::new();
        let merger_failed = Arc::new(AtomicBool::new(false));
        let mut split = Split {
            workers: Vec::new(),
            by: options.by,
            batch,
            pending: Vec::new(),
            next: 0,
            input: 0,
            input_end_ns: i64::MIN,
            regions: RegionFinder::default(),
            wake_at: (batches / 2).max(1),
            handed_while_parked: Vec::new(),
            ordered: false,
            told: Vec::new(),
            filled: 0,
            stale_after: (batches as u64 / 2).clamp(1, STALE_BATCHES),
            merger: None,
            merger_failed: merger_failed.clone(),
            merged: Vec::new(),
            report: options.report,
            inline: None,
            flow_lanes: FlowLanes::even(options.threads),
            stopped: false,
            reading: None,
        };
        let threads = options.threads as usize;
        split.reading = parts.and_then(|parts| PartsReading::of(parts, options));
        let inline = options.inline && threads > 1 && split.reading.is_none();
        let merger_bell = Arc::new(Doorbell::default());
        if inline {
            split.flow_lanes = FlowLanes::with_splitting_lane(options.threads);
            let lane = Arc::new(Lane::new(0, batches, merger_bell.clone()));
            split.inline = Some(InlineLane::new(lane.clone(), &target, &build)?);
            split.add_worker(Worker { lane, handle: None });
        }
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        // The lanes the merger merges: one a thread; reading in parts, two.
        let mut merged_lanes = split
            .workers
            .iter()
            .map(|w| w.lane.clone())
            .collect::<Vec<_>>();
        let idle_sleep = lanes::idle_sleep(threads);
        for index in usize::from(inline)..threads {
            let started = Started {
                index,
                target: &target,
                build: &build,
                ready: &ready_tx,
                bell: &merger_bell,
                merger_failed: &merger_failed,
                idle_sleep,
            };
            let started = match &split.reading {
                None => started.worker(batches, &mut merged_lanes),
                Some(reading) => started.reader(reading, threads, &mut merged_lanes),
            };
            let (lane, handle) = match started {
                Ok(started) => started,
                Err(e) => return Err(split.abandon(e)),
            };
            let _ = lane.worker.set(handle.thread().clone());
            split.add_worker(Worker {
                lane,
                handle: Some(handle),
            });
        }
        drop(ready_tx);
        let mut first_error = None;
        for _ in usize::from(inline)..threads {
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    first_error.get_or_insert(e);
                }
                Err(_) => {
                    first_error.get_or_insert(
                        "a thread ended before its chain was built (it panicked)".to_string(),
                    );
                    break;
                }
            }
        }
        if let Some(e) = first_error {
            return Err(split.abandon(StageError::other(MODULE, e)));
        }
        if let Some(output) = target.take() {
            if let Err(e) = split.start_merger(merged_lanes, output, options.ordered) {
                return Err(split.abandon(e));
            }
        }
        Ok(split)
    }

    /// Stops a split that could not start every thread, or its merger, and
    /// gives back `error`. The threads that did start are told the merger
    /// failed before they are joined: none will ever take their output, and
    /// a thread reading in parts (which starts reading at once) would
    /// otherwise wait for ever for room in its lanes.
    fn abandon(mut self, error: StageError) -> StageError {
        self.merger_failed.store(true, Ordering::SeqCst);
        let _ = self.stop();
        error
    }

    /// Starts the thread that writes the workers' shared stream.
    fn start_merger(
        &mut self,
        lanes: Vec<Arc<Lane>>,
        output: (std::path::PathBuf, Box<dyn std::io::Write + Send>),
        ordered: bool,
    ) -> Result<(), StageError> {
        let merger = Merger::new(lanes, output, self.merger_failed.clone());
        self.ordered = ordered;
        let handle = dnsluice_core::thread::named("split-merge")
            .spawn(move || {
                let _cpu = crate::cpu::note_at_end();
                merger.run(ordered)
            })
            .map_err(|e| StageError::other(MODULE, format!("cannot start a thread: {e}")))?;
        self.merger = Some(handle);
        Ok(())
    }

    /// The lane `obj` goes to.
    #[inline(always)]
    fn lane_for(&self, obj: &Object<'_>) -> usize {
        match self.by {
            By::RoundRobin => self.next,
            By::Client | By::Flow => self.hashed_lane(obj),
        }
    }

    /// The lane of `obj` by its client's or its flow's hash (out of line:
    /// its registers would weigh on every object's path otherwise).
    #[inline(never)]
    fn hashed_lane(&self, obj: &Object<'_>) -> usize {
        let n = self.workers.len() as u32;
        match self.by {
            By::Client => client_address(obj).map_or(0, |a| hash_onto(a, n) as usize),
            _ => flow_hash(obj).map_or(self.next, |h| self.flow_lanes.lane(h)),
        }
    }

    /// Takes `obj` by the general path: its lane (a hash, or the batch in
    /// turn), then into that lane's batch (whole copies too), or
    /// [`Split::receive_other`] when none is being filled.
    #[inline(never)]
    fn receive_general(&mut self, obj: &mut Object<'_>) -> Result<(), StageError> {
        let index = self.lane_for(obj);
        self.receive_at(index, obj)
    }

    /// Takes `obj` for lane `index`: into that lane's batch (whole copies
    /// too), or [`Split::receive_other`] when none is being filled.
    #[inline(never)]
    fn receive_at(&mut self, index: usize, obj: &mut Object<'_>) -> Result<(), StageError> {
        let pending = self.pending.get(index).and_then(Option::as_ref);
        if pending.is_some_and(|batch| batch.is_left_behind_by(obj, &mut self.regions)) {
            self.batch_full(index)?;
        }
        let key = self.input;
        self.input += 1;
        let Some(Some(batch)) = self.pending.get_mut(index) else {
            return self.receive_other(index, obj, key);
        };
        batch.push(obj, key, &mut self.regions);
        if batch.len() < self.batch {
            return Ok(());
        }
        self.batch_full(index)
    }

    /// Takes `obj`, placed at `key`, for lane `index` when no batch is being
    /// filled for it: the inline lane's chain runs it, or it starts a batch.
    #[inline(never)]
    fn receive_other(
        &mut self,
        index: usize,
        obj: &mut Object<'_>,
        key: u64,
    ) -> Result<(), StageError> {
        let full = match self.inline.as_mut().filter(|_| index == 0) {
            Some(inline) => {
                inline.receive(obj, key)?;
                inline.pending() >= self.batch
            }
            None => {
                let mut batch = self.empty_batch(index)?;
                batch.push(obj, key, &mut self.regions);
                let full = batch.len() >= self.batch;
                self.pending[index] = Some(batch);
                full
            }
        };
        match full {
            true => self.batch_full(index),
            false => Ok(()),
        }
    }

    /// Adds a lane's worker, and the split's own state for that lane.
    fn add_worker(&mut self, worker: Worker) {
        self.workers.push(worker);
        self.pending.push(None);
        self.told.push(0);
        self.handed_while_parked
            .push(handover::SleepCount::default());
    }

    /// Hands everything over, tells every worker that nothing more comes,
    /// waits for them and for the merger; returns the first error (a
    /// worker's first: the merger's then only says a worker stopped).
    fn stop(&mut self) -> Option<StageError> {
        if std::mem::replace(&mut self.stopped, true) {
            return None;
        }
        if let Some(reading) = &self.reading {
            // No part is taken after this (a run stopped early).
            reading.parts.stop();
        }
        let mut error = self.hand_over_all().err();
        let mut merged: Vec<StageStats> = Vec::new();
        if let Some(inline) = &mut self.inline {
            if let Err(e) = inline.finish(self.input_end_ns, &self.merger_failed) {
                error.get_or_insert(e);
            }
            merge_stats(&mut merged, inline.stats());
        }
        for worker in &mut self.workers {
            let input_end = &worker.lane.input_end_ns;
            input_end.store(self.input_end_ns, Ordering::SeqCst);
            worker.lane.done.store(true, Ordering::SeqCst);
            if let Some(thread) = worker.lane.worker.get() {
                thread.unpark();
            }
            if let Some(handle) = worker.handle.take() {
                match handle.join() {
                    Ok(stats) => merge_stats(&mut merged, stats),
                    Err(_) => worker.lane.fail("a worker panicked".into()),
                }
            }
        }
        if !merged.is_empty() {
            self.merged = merged;
        }
        let worker_error = (0..self.workers.len()).find_map(|index| self.worker_error(index));
        if let Some(merger) = self.merger.take() {
            let merger_error = match merger.join() {
                Ok(result) => result.err(),
                Err(_) => Some(StageError::other(MODULE, "the merger panicked")),
            };
            error = error.or(merger_error);
        }
        worker_error.or(error)
    }
}

impl Split {
    /// The error worker `index` stopped on, if it did, with how many of the
    /// objects handed to it it never ran (said, not silently dropped).
    fn worker_error(&self, index: usize) -> Option<StageError> {
        let lane = &self.workers[index].lane;
        let e = lane.failure()?;
        let pending = self.pending.get(index).and_then(Option::as_ref);
        let not_run = lane.objects_waiting()
            + pending.map_or(0, Batch::len)
            + lane.not_run.load(Ordering::Relaxed) as usize;
        let message = match not_run {
            0 => format!("worker {index}: {e}"),
            n => format!("worker {index}: {e} ({n} objects handed to it were not run)"),
        };
        Some(StageError::other(MODULE, message))
    }
}

impl Receiver for Split {
    /// Kept small and without calls: most objects are packets whose lane a
    /// glance tells ([`glance_v4`]: round-robin, a DNS datagram standing
    /// alone, TCP to or from port 53 by its flow's hash) and that go into
    /// that lane's batch as an entry that fits ([`Batch::try_push`]); the
    /// rest (other packets and objects, whole copies, the inline lane's,
    /// the first of a batch) take [`Split::receive_general`] or
    /// [`Split::receive_at`], and a full batch [`Split::batch_full`],
    /// out of line, so that this path saves and restores few registers
    /// (2026-12-05, 9 rounds each: crossing 11.25 → 10.5 ns an object; with
    /// TCP flows told at a glance too, 1 M TCP connections on 2 threads
    /// 0.661 → 0.637 s).
    #[inline]
    fn receive(&mut self, obj: &mut Object<'_>) -> Result<(), StageError> {
        let lane = match self.by {
            By::RoundRobin => self.next,
            By::Flow => match glance_v4(obj) {
                Glance::Alone => self.next,
                Glance::Flow(hash) => self.flow_lanes.lane(hash),
                Glance::Closer => return self.receive_general(obj),
            },
            By::Client => return self.receive_general(obj),
        };
        let key = self.input;
        if let Some(Some(batch)) = self.pending.get_mut(lane) {
            if batch.try_push(obj, key) {
                self.input = key + 1;
                if batch.len() < self.batch {
                    return Ok(());
                }
                return self.batch_full(lane);
            }
        }
        self.receive_at(lane, obj)
    }

    fn finish(&mut self) -> Result<(), StageError> {
        match self.stop() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn clock_at_end(&mut self, ts_ns: i64) {
        // Passed to every thread's chain before it finishes.
        self.input_end_ns = ts_ns;
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        let mut stats = StageStats::new(MODULE);
        stats.input = self.input;
        for (index, worker) in self.workers.iter().enumerate() {
            let handled = worker.lane.handled.load(Ordering::Relaxed);
            stats.output += handled;
            stats.counters.insert(format!("thread.{index}"), handled);
        }
        if self.report {
            out.push(stats);
        }
        if !self.merged.is_empty() {
            out.extend(self.merged.iter().cloned());
            return;
        }
        // Running: the inline chain's, and the workers' last snapshots, added up.
        let mut running = self
            .inline
            .as_ref()
            .map(InlineLane::stats)
            .unwrap_or_default();
        for worker in &self.workers {
            merge_stats(&mut running, lock(&worker.lane.snapshot).clone());
        }
        out.extend(running);
    }
}

impl Drop for Split {
    fn drop(&mut self) {
        if !self.stopped {
            let _ = self.stop();
        }
    }
}

/// The registry entry.
pub fn entry() -> ModuleEntry {
    ModuleEntry::split(
        MODULE,
        "run the rest of the chain in N threads, objects spread in batches round-robin, by client or by flow",
        |o: SplitOptions, build: DownstreamBuilder, parts| Ok(Box::new(Split::new(&o, build, parts)?)),
    )
    .parallel(Parallel::No)
}

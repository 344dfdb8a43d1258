//! What the split and one worker share (a [`Lane`]), and the worker's loop.
//!
//! Objects cross in batches ([`Batch`]): the split puts objects into a
//! batch and hands the whole batch over with one queue push, so the cost
//! of a crossing (queue operations, a wake-up) is paid once per batch, not
//! once per object.

use super::batch::Batch;
use super::doorbell::Doorbell;
use crossbeam_queue::ArrayQueue;
use dnsluice_core::merge::{self, LaneBuffer, AT_FINISH};
use dnsluice_core::sync::lock;
use dnsluice_core::{Receiver, StageError, StageStats};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// How often a worker publishes its chain's statistics while it runs (for
/// interval statistics and progress).
const SNAPSHOT_EVERY: Duration = Duration::from_millis(100);
/// A worker looks at the clock (for [`SNAPSHOT_EVERY`]) once it has run this
/// many objects since it last looked: at the default batch, every 16
/// batches; with batches of 4,096 or more, after each.
const CLOCK_EVERY: usize = 4096;
/// How long an idle worker sleeps before it looks at its queue again
/// unwoken, with no more threads than cores: what bounds the wait of
/// batches fewer than the split wakes it for, from an input that trickles.
const IDLE_SLEEP: Duration = Duration::from_millis(10);
/// [`idle_sleep`] at most.
const IDLE_SLEEP_MOST: Duration = Duration::from_secs(1);

/// How long an idle worker of `threads` sleeps unwoken: [`IDLE_SLEEP`]
/// times the threads a core has to take turns between, up to
/// [`IDLE_SLEEP_MOST`]. Each look costs the core a switch of threads; on 2
/// cores, 1,024 workers looking every 10 ms took 7 s of processor time to
/// split 200,000 queries (issue 26). The split wakes a worker once
/// batches wait, the merger when it needs the worker's bytes, and every
/// worker at the end: sleeping longer only lets a trickle wait longer.
pub(super) fn idle_sleep(threads: usize) -> Duration {
    IDLE_SLEEP
        .saturating_mul(turns(threads))
        .min(IDLE_SLEEP_MOST)
}

/// How many of `threads` each core of this machine takes turns between
/// (1 with no more threads than cores): what a thread's naps are scaled
/// by, so that idle threads looking around do not take the busy ones'
/// turns.
pub(super) fn turns(threads: usize) -> u32 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    u32::try_from(threads.div_ceil(cores))
        .unwrap_or(u32::MAX)
        .max(1)
}

/// What the split and one worker share.
pub(super) struct Lane {
    /// Batches for the worker.
    pub full: ArrayQueue<Batch>,
    /// Emptied batches, back to the split.
    pub free: ArrayQueue<Batch>,
    /// The bytes the worker's chain wrote for each batch, to the merger
    /// (when the output is one stream shared by the threads).
    pub written: ArrayQueue<LaneBuffer>,
    /// Written buffers the merger emptied, back to the worker: the last one
    /// back is the next one used (its memory is the likeliest to be in the
    /// worker's cache still; taken in turn, the worker would write into
    /// every buffer there is, a megabyte or more, colder each time).
    pub spare: Mutex<Vec<LaneBuffer>>,
    /// The merger's doorbell (every lane's the same): rung once half the
    /// `written` queue waits, when this lane's worker is about to wait
    /// itself, and when it has finished.
    pub merger: Arc<Doorbell>,
    /// The worker sleeps (the split wakes it; see `Split::wake_at`).
    pub parked: AtomicBool,
    /// The worker's thread (set by the split once it has started it; none
    /// for the inline lane).
    pub worker: OnceLock<Thread>,
    /// No more batches will come.
    pub done: AtomicBool,
    /// The latest capture time of the whole input (`i64::MIN`: none), set
    /// before `done`: the chain is told it before it finishes.
    pub input_end_ns: AtomicI64,
    /// The worker has finished its chain and handed over its last bytes.
    pub finished: AtomicBool,
    /// The worker stopped on an error (its text).
    failed: Mutex<Option<String>>,
    /// Whether `failed` holds an error: looked at without the lock (the
    /// split asks of every busy worker at every batch).
    has_failed: AtomicBool,
    /// Objects of the batch it failed on that came after the failing one
    /// (never run; said in the split's error).
    pub not_run: AtomicU64,
    /// Objects the worker handled, as of its last snapshot or the last time
    /// it ran dry (exact once it has finished).
    pub handled: AtomicU64,
    /// The worker's chain's statistics, as of its last snapshot.
    pub snapshot: Mutex<Vec<StageStats>>,
    /// Its place among the lanes (what it rings the merger for).
    pub index: usize,
}

impl Lane {
    /// A lane with room for `batches` batches each way, whose worker
    /// rings `merger` when it has bytes for it.
    pub fn new(index: usize, batches: usize, merger: Arc<Doorbell>) -> Lane {
        Lane::with_room(index, batches, batches + 1, merger)
    }

    /// A lane of a thread that is given no batches (a reader of a
    /// capture's parts: it reads its own), with room for `written`
    /// buffers to the merger. Its batch queues hold nothing: sized as a
    /// worker's, with room that grew with the threads, they held memory
    /// by the square of the threads (`output.null` on 1,024 threads: a
    /// peak of 3.7 GB with them, 215 MB without; issue 26).
    pub fn of_reader(index: usize, written: usize, merger: Arc<Doorbell>) -> Lane {
        Lane::with_room(index, 0, written, merger)
    }

    /// A lane with `batches` batches for its worker and room for `written`
    /// buffers to the merger.
    fn with_room(index: usize, batches: usize, written: usize, merger: Arc<Doorbell>) -> Lane {
        let lane = Lane {
            full: ArrayQueue::new(batches.max(1)),
            free: ArrayQueue::new(batches.max(1)),
            written: ArrayQueue::new(written),
            spare: Mutex::new(Vec::new()),
            merger,
            parked: AtomicBool::new(false),
            worker: OnceLock::new(),
            done: AtomicBool::new(false),
            input_end_ns: AtomicI64::new(i64::MIN),
            finished: AtomicBool::new(false),
            failed: Mutex::new(None),
            has_failed: AtomicBool::new(false),
            not_run: AtomicU64::new(0),
            handled: AtomicU64::new(0),
            snapshot: Mutex::new(Vec::new()),
            index,
        };
        for _ in 0..batches {
            let _ = lane.free.push(Batch::default());
        }
        lane
    }

    /// Wakes the worker if it sleeps with batches waiting: what the split
    /// does once enough wait, and what the merger does when it needs this
    /// lane's next bytes (the split may be waiting for the merger).
    pub fn wake_worker(&self) {
        if self.parked.load(Ordering::SeqCst) && !self.full.is_empty() {
            if let Some(thread) = self.worker.get() {
                thread.unpark();
            }
        }
    }

    /// Says that the worker has finished (its last bytes pushed) and
    /// wakes the merger to see it.
    pub fn finish(&self) {
        self.finished.store(true, Ordering::SeqCst);
        self.merger.ring();
    }

    /// Whether the merger has something to do for this lane: bytes to
    /// write, or the worker's end to see.
    pub fn has_news(&self) -> bool {
        !self.written.is_empty() || self.finished.load(Ordering::SeqCst)
    }

    /// Records the worker's error (the first one stays).
    pub fn fail(&self, error: String) {
        lock(&self.failed).get_or_insert(error);
        self.has_failed.store(true, Ordering::Release);
    }

    /// The worker's error, if it stopped on one.
    pub fn failure(&self) -> Option<String> {
        if !self.has_failed.load(Ordering::Acquire) {
            return None;
        }
        lock(&self.failed).clone()
    }

    /// The objects in the batches that wait for the worker (once it has
    /// stopped: what it will never run).
    pub fn objects_waiting(&self) -> usize {
        let mut objects = 0;
        while let Some(batch) = self.full.pop() {
            objects += batch.len();
            let _ = self.free.push(batch);
        }
        objects
    }
}

/// One round of waiting for a queue: the first 64 rounds spin, the next 64
/// yield the thread; after that it returns true and the caller sleeps
/// (the split waiting for a batch back, a worker for room in the merger's
/// queue; the merger waits its own way, see [`time_to_sleep`], and an idle
/// worker sleeps at once, see [`work`]).
pub(super) fn spin_then_yield(spins: &mut u32) -> bool {
    *spins += 1;
    if *spins < 64 {
        std::hint::spin_loop();
    } else if *spins < 128 {
        std::thread::yield_now();
    } else {
        return true;
    }
    false
}

/// How many times the merger looks for bytes before it sleeps. It does
/// not yield in between: a thread with nothing to do is ahead of the ones
/// it waits for, and each `sched_yield` is a system call that finds it
/// still ahead.
const SPINS_BEFORE_SLEEP: u32 = 64;

/// One more look at an empty queue by a thread that sleeps when the queue
/// stays empty: the first [`SPINS_BEFORE_SLEEP`] looks spin and return
/// false; the next returns true (time to sleep) and starts the count again.
pub(super) fn time_to_sleep(spins: &mut u32) -> bool {
    if *spins < SPINS_BEFORE_SLEEP {
        *spins += 1;
        std::hint::spin_loop();
        return false;
    }
    *spins = 0;
    true
}

/// Runs its closure if the thread unwinds from a panic while it is alive:
/// a thread that panics says so to the threads waiting on it (in a build
/// that unwinds; release builds abort), instead of leaving them waiting.
pub(super) struct OnPanic<F: FnMut()>(pub F);

impl<F: FnMut()> Drop for OnPanic<F> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            (self.0)();
        }
    }
}

/// Everything a worker needs besides its chain.
pub(super) struct WorkerSide {
    /// Its lane.
    pub lane: Arc<Lane>,
    /// Set when the merger stopped on an error: stop too.
    pub merger_failed: Arc<AtomicBool>,
    /// How long it sleeps when idle, unless woken ([`idle_sleep`]).
    pub idle_sleep: Duration,
}

/// A worker: hands every batch to its chain until the split is done; when
/// the output shares one stream (`merging`: this thread's lane), hands the
/// bytes of each batch to the merger.
pub(super) fn work(
    side: &WorkerSide,
    merging: Option<&merge::LaneHandle>,
    mut downstream: Box<dyn Receiver>,
) -> Vec<StageStats> {
    let lane = &*side.lane;
    let _said = OnPanic(|| lane.fail("it panicked".into()));
    let mut last_snapshot = Instant::now();
    // Objects handled and not yet added to `lane.handled`: added with each
    // snapshot and whenever the worker runs dry, not after every batch (the
    // line it sits on is one the split reads).
    let mut unpublished = 0u64;
    let mut unclocked = 0usize;
    loop {
        if let Some(mut batch) = lane.full.pop() {
            let objects = batch.len();
            let upto = batch.upto;
            let (ran, result) = run_batch(&mut *downstream, merging, &mut batch);
            unpublished += ran as u64;
            // Never full: as many batches as room in the queue.
            let _ = lane.free.push(batch);
            if let Err(e) = result {
                // The batch's objects after the one that failed are not run.
                lane.not_run
                    .fetch_add((objects - ran) as u64, Ordering::Relaxed);
                lane.fail(e.to_string());
                break;
            }
            if merging.is_some_and(|handle| !hand_over(lane, &side.merger_failed, handle, upto)) {
                break;
            }
            // The clock is read once some thousands of objects have run,
            // not after every batch: a read is some 26 ns on this VM, and
            // with small batches it was a tenth of a batch's cost.
            unclocked += objects;
            if unclocked >= CLOCK_EVERY {
                unclocked = 0;
                if publish_snapshot(lane, &*downstream, &mut last_snapshot) {
                    lane.handled
                        .fetch_add(std::mem::take(&mut unpublished), Ordering::Relaxed);
                }
            }
            continue;
        }
        // Run dry: the counts and the snapshot brought up to date (an input
        // that trickles may take long to run CLOCK_EVERY objects).
        lane.handled
            .fetch_add(std::mem::take(&mut unpublished), Ordering::Relaxed);
        let _ = publish_snapshot(lane, &*downstream, &mut last_snapshot);
        if lane.done.load(Ordering::SeqCst) && lane.full.is_empty() {
            let input_end_ns = lane.input_end_ns.load(Ordering::SeqCst);
            if input_end_ns != i64::MIN {
                downstream.clock_at_end(input_end_ns);
            }
            if let Err(e) = downstream.finish() {
                lane.fail(e.to_string());
            }
            if let Some(lane_handle) = merging {
                hand_over_finish(lane, &side.merger_failed, lane_handle);
            }
            break;
        }
        // Idle: it sleeps at once, without looking again first. A worker
        // that runs dry is faster than the split, and each look at the
        // empty queue pulls to its core a line the split writes: spinning
        // 64 times first, it looked about ten times a batch for nothing
        // (`docs/benchmarks.md`, fourteenth session). The split wakes it
        // once half its queue waits.
        //
        // What this lane wrote but did not ring for must not wait for work
        // the worker has no more of.
        lane.merger.ring_for(lane.index);
        lane.parked.store(true, Ordering::SeqCst);
        // Checked again after saying so: the split wakes us for anything
        // pushed after this point (the timeout bounds the wait of batches
        // fewer than the split wakes us for, from an input that trickles).
        if lane.full.is_empty() && !lane.done.load(Ordering::SeqCst) {
            std::thread::park_timeout(side.idle_sleep);
        }
        lane.parked.store(false, Ordering::SeqCst);
    }
    // Stopped on an error: what it ran before still counts.
    lane.handled.fetch_add(unpublished, Ordering::Relaxed);
    lane.finish();
    let mut stats = Vec::new();
    downstream.stats(&mut stats);
    stats
}

/// Runs `batch`'s objects through `chain` in order, emptying it; when
/// `merging`, marks where each one's bytes end, by its place in the input.
/// Gives how many it ran: all, or up to the one that failed.
pub(super) fn run_batch(
    chain: &mut dyn Receiver,
    merging: Option<&merge::LaneHandle>,
    batch: &mut Batch,
) -> (usize, Result<(), StageError>) {
    let mut ran = 0;
    let result = batch.drain(|key, obj| {
        ran += 1;
        let result = chain.receive(obj);
        if let Some(lane_handle) = merging {
            lane_handle.end_object(key);
        }
        result
    });
    (ran, result)
}

/// Adds `from` (one worker's statistics) into `into`, stage by stage.
pub(super) fn merge_stats(into: &mut Vec<StageStats>, from: Vec<StageStats>) {
    if into.is_empty() {
        *into = from;
        return;
    }
    for (sum, stage) in into.iter_mut().zip(from) {
        sum.absorb(stage);
    }
}

/// Publishes the chain's statistics in `lane`'s snapshot when the last was
/// [`SNAPSHOT_EVERY`] ago or more (for interval statistics and progress);
/// true when it did.
pub(super) fn publish_snapshot(lane: &Lane, chain: &dyn Receiver, last: &mut Instant) -> bool {
    if last.elapsed() < SNAPSHOT_EVERY {
        return false;
    }
    let mut stats = Vec::new();
    chain.stats(&mut stats);
    *lock(&lane.snapshot) = stats;
    *last = Instant::now();
    true
}

/// Hands the bytes written since the last batch to the merger, with how far
/// the lane has got in the input (`through`, see [`LaneBuffer::through`]),
/// waiting while its queue is full; false when the merger has stopped on an
/// error.
pub(super) fn hand_over(
    lane: &Lane,
    merger_failed: &AtomicBool,
    lane_handle: &merge::LaneHandle,
    through: u64,
) -> bool {
    let mut written = match lane_handle.is_empty() {
        // Nothing written since the last hand-over: only how far the lane
        // has got goes, in a buffer that holds no memory. The buffer in hand
        // stays, so a lane that mostly says how far it got (a thread's
        // flows lane while its datagrams stand alone) does not swap it for
        // a spare of the other lane's size and fill its own queue with them:
        // before, that held some 70 MB a thread at 16 threads (issue 26).
        true => LaneBuffer {
            through,
            ..LaneBuffer::default()
        },
        false => {
            let empty = lock(&lane.spare).pop().unwrap_or_default();
            lane_handle.take(empty, through)
        }
    };
    let mut spins = 0u32;
    loop {
        match lane.written.push(written) {
            Ok(()) => {
                // Woken for several batches at once, not one (each wake-up
                // costs a system call on each side).
                if lane.written.len() >= lane.written.capacity() / 2 {
                    lane.merger.ring_for(lane.index);
                }
                return true;
            }
            Err(back) => written = back,
        }
        if merger_failed.load(Ordering::SeqCst) {
            return false;
        }
        if spin_then_yield(&mut spins) {
            lane.merger.ring();
            std::thread::sleep(Duration::from_micros(20));
        }
    }
}

/// Hands what the lane's chain wrote as it finished to the merger, placed
/// after every object ([`AT_FINISH`]).
pub(super) fn hand_over_finish(
    lane: &Lane,
    merger_failed: &AtomicBool,
    lane_handle: &merge::LaneHandle,
) {
    lane_handle.end_object(AT_FINISH);
    hand_over(lane, merger_failed, lane_handle, AT_FINISH);
}

#[cfg(test)]
mod tests {
    use super::*;
    use dnsluice_core::shared::RegionFinder;
    use dnsluice_core::{Object, StageError, Text, TextKind};
    use std::path::Path;

    /// An idle worker looks again unwoken every 10 ms while the threads fit
    /// the cores, less often as they take turns on them, every second at
    /// least.
    #[test]
    fn idle_workers_sleep_longer_as_threads_take_turns() {
        let cores = std::thread::available_parallelism().unwrap().get();
        let ms = Duration::from_millis;
        assert_eq!(idle_sleep(1), ms(10));
        assert_eq!(idle_sleep(cores), ms(10));
        assert_eq!(idle_sleep(cores + 1), ms(20));
        assert_eq!(idle_sleep(3 * cores), ms(30));
        assert_eq!(idle_sleep(1000 * cores), ms(1000));
    }

    /// A chain with a bug: it panics on the first object.
    struct Panics;

    impl Receiver for Panics {
        fn receive(&mut self, _: &mut Object<'_>) -> Result<(), StageError> {
            panic!("a bug in the chain");
        }
        fn stats(&self, _: &mut Vec<StageStats>) {}
    }

    /// A chain that fails on its first object (an output whose disk is full).
    struct Fails;

    impl Receiver for Fails {
        fn receive(&mut self, _: &mut Object<'_>) -> Result<(), StageError> {
            Err(StageError::other("test", "no room left"))
        }
        fn stats(&self, _: &mut Vec<StageStats>) {}
    }

    /// A lane of two batches whose first holds `lines` text lines.
    fn lane_with_lines(lines: u64) -> (Arc<Lane>, WorkerSide) {
        let lane = Arc::new(Lane::new(1, 2, Arc::new(Doorbell::default())));
        let side = WorkerSide {
            lane: lane.clone(),
            merger_failed: Arc::new(AtomicBool::new(false)),
            idle_sleep: IDLE_SLEEP,
        };
        let mut batch = lane.free.pop().expect("a free batch");
        for number in 1..=lines {
            let line = Object::Text(Text {
                kind: TextKind::Line,
                number,
                text: "one",
            });
            batch.push(&line, number - 1, &mut RegionFinder::default());
        }
        assert!(lane.full.push(batch).is_ok());
        (lane, side)
    }

    /// A hand-over with nothing written sends only how far the lane got, in
    /// a buffer that holds no memory, and keeps the buffer in hand: the
    /// lane's spares stay where they are (before, every such hand-over
    /// swapped the buffer in hand, as large as the other lane's, for a spare
    /// and queued it: some 70 MB a thread at 16 threads).
    #[test]
    fn a_hand_over_of_nothing_keeps_the_buffer_in_hand() {
        use std::io::Write;
        let lane = Lane::new(0, 4, Arc::new(Doorbell::default()));
        let failed = AtomicBool::new(false);
        let spare = |capacity| LaneBuffer {
            bytes: Vec::with_capacity(capacity),
            ..LaneBuffer::default()
        };
        lock(&lane.spare).extend([spare(1 << 20), spare(1 << 20)]);
        let handle = merge::enter(merge::MergeTarget::new());
        let mut writer = merge::claim(Path::new("out"), || Ok(Box::new(std::io::sink())))
            .expect("in a lane")
            .expect("claimed");
        writer.write_all(b"one line\n").unwrap();
        handle.end_object(0);
        assert!(hand_over(&lane, &failed, &handle, 1));
        // In hand now: a spare of 1 MiB, empty.
        assert!(hand_over(&lane, &failed, &handle, 2));

        let first = lane.written.pop().expect("the line's buffer");
        assert_eq!(
            (first.bytes.as_slice(), first.through),
            (&b"one line\n"[..], 1)
        );
        let second = lane.written.pop().expect("how far it got");
        assert_eq!(second.through, 2);
        assert!(second.bytes.is_empty() && second.marks.is_empty());
        assert_eq!(
            (second.bytes.capacity(), second.marks.capacity()),
            (0, 0),
            "a hand-over of nothing holds no memory"
        );
        assert_eq!(lock(&lane.spare).len(), 1, "one spare taken, not two");
        // The buffer in hand is the spare taken, with its memory.
        writer.write_all(b"two\n").unwrap();
        handle.end_object(2);
        assert!(hand_over(&lane, &failed, &handle, 3));
        let third = lane.written.pop().expect("the second line's buffer");
        assert_eq!(third.bytes, b"two\n");
        assert!(third.bytes.capacity() >= 1 << 20, "the spare's memory");
    }

    /// A worker whose chain panics (a build that unwinds) records that it
    /// failed: the split, which waits for its batches back, stops on it.
    #[test]
    fn a_worker_that_panics_says_it_failed() {
        let (lane, side) = lane_with_lines(1);
        let ran = std::thread::spawn(move || work(&side, None, Box::new(Panics))).join();
        assert!(ran.is_err(), "it panicked");
        assert_eq!(lane.failure().as_deref(), Some("it panicked"));
    }

    /// A worker whose chain fails stops with the error; of the batch it was
    /// given, the object it failed on counts as handled and the two after
    /// it as not run (neither count left unsaid).
    #[test]
    fn a_worker_whose_chain_fails_stops_and_counts_its_batch() {
        let (lane, side) = lane_with_lines(3);
        let ran = std::thread::spawn(move || work(&side, None, Box::new(Fails))).join();
        assert!(ran.is_ok(), "no panic");
        let failure = lane.failure().expect("it failed");
        assert!(failure.contains("no room left"), "{failure}");
        assert_eq!(lane.handled.load(Ordering::Relaxed), 1);
        assert_eq!(lane.not_run.load(Ordering::Relaxed), 2);
        assert!(lane.finished.load(Ordering::SeqCst));
    }
}

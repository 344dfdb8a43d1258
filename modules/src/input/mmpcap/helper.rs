//! The helper thread of `input.mmpcap`. It keeps the map ready ahead of the
//! walk and clears it behind, with as little work of its own as it can:
//!
//! - **Page tables**: it reads one byte of every [`FAULT_STRIDE`] bytes up
//!   to [`FAULT_LEAD`] ahead of the walk. Each read is one page fault, in
//!   which the kernel maps the whole aligned 64 KiB around the page (its
//!   fault-around), from the page cache or, for a file not yet there, after
//!   reading it in; so the walk itself neither faults nor waits on the disk.
//!   (Measured on Linux 6.18: `MADV_POPULATE_READ`, which the helper used
//!   before, costs the kernel more per page than these faults do.)
//! - **Releasing**: it drops the page tables of what the walk is done with
//!   (`MADV_DONTNEED`; the range stays mapped, and the file's pages stay in
//!   the page cache), so that this kernel work is not left for the unmap at
//!   the end, on the walking thread, and the process's resident size stays
//!   small.
//!
//! It does not read the data ahead into the CPU cache: an earlier helper
//! read a byte of every cache line a few MiB ahead of the walk, which made
//! the walk wait on memory less but cost more processor time than it saved
//! (the walk's own prefetches, [`super::READ_AHEAD`], do most of that).
//! Against that helper, the chain that parses DNS (`benches/vs-dnsjit.sh`,
//! pair `dns-parse`, 20 million packets) took less wall time and a fifth to
//! a quarter less processor time. The walk tells the helper where it is
//! every [`REPORT_EVERY`] bytes; the helper naps until the walk, at the pace
//! it kept since the helper last looked, would have used up half of what is
//! faulted in ahead of it ([`nap_for`]: between [`NAP`] and [`NAP_LONG`]);
//! while the walk does not move (a stalled consumer, the end of the file),
//! for a nap that doubles from [`NAP`] up to [`NAP_MAX`]. Waking every
//! millisecond, the helper took 0.152 s of processor time in a 5.9 s run
//! of JSON lines on one thread (20 M packets); with these naps, 0.057 s
//! (the difference over some 5,800 fewer wake-ups: about 16 µs each on
//! this VM).

use memmap2::{Mmap, UncheckedAdvice};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often (in bytes walked) the walk tells the helper where it is.
pub(super) const REPORT_EVERY: usize = 256 << 10;
/// Pages are faulted in one read per this many bytes: Linux's default
/// fault-around maps 64 KiB (16 pages) per fault. (A kernel set to map
/// less faults the rest in as the walk reaches it.)
const FAULT_STRIDE: usize = 64 << 10;
/// How far ahead of the walk (as last told) pages are faulted in: the walk
/// runs at a few GB/s, so a [`NAP`] of it is a few MiB; near enough that on
/// a file larger than memory the pages brought in are still there when the
/// walk gets to them.
const FAULT_LEAD: usize = 64 << 20;
/// Pages are faulted in this many bytes at a time between looks at the walk.
const FAULT_STEP: usize = 4 << 20;
/// How far behind the walk (as last told) the helper releases pages. Nothing
/// is borrowed from the map before the record the reader last handed out
/// (a produced object borrows the reader until the next is asked for, and
/// stages that keep bytes copy them), and a released page that is read again
/// is only mapped again from the page cache, so the margin is for speed, not
/// for safety.
const RELEASE_LAG: usize = 64 << 20;
/// What is released at a time (each call makes the kernel flush the walking
/// core's TLB, so not too often).
const RELEASE_CHUNK: usize = 16 << 20;
/// The helper's shortest nap when it is done with what the walk allows
/// (the walk moving fast), and the first while the walk does not move.
const NAP: Duration = Duration::from_millis(1);
/// The longest nap while the walk moves: a slow chain (JSON lines walk some
/// 340 MB a second, and use up the lead in 0.2 s) needs no looking after a
/// thousand times a second.
const NAP_LONG: Duration = Duration::from_millis(32);
/// The longest nap while the walk does not move (the nap doubles from
/// [`NAP`] up to this): short enough that a walk that starts again at full
/// speed does not run past its lead before the helper looks.
const NAP_MAX: Duration = Duration::from_millis(8);

/// The helper thread; stopped and joined when dropped.
pub(super) struct Helper {
    shared: Arc<WalkProgress>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What the walk and the helper share.
struct WalkProgress {
    /// Where the walk is (updated every [`REPORT_EVERY`] bytes).
    walked: AtomicUsize,
    stop: AtomicBool,
}

impl Helper {
    /// Starts the helper on `map`; `None` when no thread could be started
    /// (the walk then does without).
    pub(super) fn start(map: Arc<Mmap>) -> Option<Helper> {
        let shared = Arc::new(WalkProgress {
            walked: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        });
        let theirs = shared.clone();
        let thread = dnsluice_core::thread::named("mmpcap-helper")
            .spawn(move || {
                let _cpu = crate::cpu::note_at_end();
                Tending::new(&map).run(&theirs)
            })
            .ok()?;
        Some(Helper {
            shared,
            thread: Some(thread),
        })
    }

    /// Tells the helper that the walk is at `position`.
    pub(super) fn tell(&self, position: usize) {
        self.shared.walked.store(position, Ordering::Relaxed);
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark(); // Ends a nap at once.
            let _ = thread.join();
        }
    }
}

/// What the helper does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Job {
    /// Drop the page tables of the next [`RELEASE_CHUNK`] behind the walk.
    Release,
    /// Fault the pages in up to here.
    FaultTo(usize),
    /// Nothing is due.
    Nap,
}

/// The helper's next job, the pages being faulted in below `faulted` and
/// released below `released`, the walk at `walk` in a map of `end` bytes.
/// What is due for release comes first: a walk faster than the faulting (a
/// cheap chain: 16 GB/s with `output.null` straight after the input) would
/// otherwise find the helper always faulting and the whole file left mapped
/// (1.5 GiB resident for a 2 GB capture, against 150 MiB). Then the lead,
/// a step at a time, so that a walk that moves on meanwhile is seen, and a
/// stop is not kept waiting.
fn next_job(faulted: usize, released: usize, walk: usize, end: usize) -> Job {
    if released + RELEASE_CHUNK + RELEASE_LAG <= walk {
        return Job::Release;
    }
    let lead = walk.saturating_add(FAULT_LEAD).min(end);
    if faulted < lead {
        return Job::FaultTo((faulted + FAULT_STEP).min(lead));
    }
    Job::Nap
}

/// How far the walk moved between two looks of the helper, and in what time.
#[derive(Clone, Copy, Debug)]
struct Pace {
    walked: usize,
    over: Duration,
}

/// The helper's next nap, with `ahead` bytes faulted in ahead of the walk,
/// which kept `pace` since the last look, after a nap of `last`: the time
/// the walk takes at that pace to use up half of `ahead`, between [`NAP`]
/// and [`NAP_LONG`]; while the walk does not move, double the last nap, up
/// to [`NAP_MAX`].
fn nap_for(ahead: usize, pace: Pace, last: Duration) -> Duration {
    if pace.walked == 0 {
        return (last * 2).clamp(NAP, NAP_MAX);
    }
    let half_lead = pace.over.as_secs_f64() * (ahead as f64 / 2.0) / pace.walked as f64;
    Duration::from_secs_f64(half_lead.min(NAP_LONG.as_secs_f64())).max(NAP)
}

/// The helper's progress over the map.
struct Tending<'m> {
    map: &'m Mmap,
    /// Pages are faulted in below here.
    faulted: usize,
    /// Page tables are dropped below here.
    released: usize,
}

impl<'m> Tending<'m> {
    fn new(map: &'m Mmap) -> Self {
        Tending {
            map,
            faulted: 0,
            released: 0,
        }
    }

    /// Keeps the lead and releases what is due, then naps, until told to stop.
    fn run(&mut self, shared: &WalkProgress) {
        let (mut nap, mut last_walk, mut last_look) = (NAP, 0, Instant::now());
        while !shared.stop.load(Ordering::Relaxed) {
            let walk = shared.walked.load(Ordering::Relaxed);
            let end = self.map.len();
            // Behind the walk (it outran the helper): catch up.
            self.faulted = self.faulted.max(walk);
            match next_job(self.faulted, self.released, walk, end) {
                Job::Release => {
                    self.release();
                    continue;
                }
                Job::FaultTo(to) => {
                    self.fault_in(to);
                    continue;
                }
                Job::Nap => {}
            }
            let now = Instant::now();
            let pace = Pace {
                walked: walk.saturating_sub(last_walk),
                over: now.duration_since(last_look),
            };
            nap = nap_for(self.faulted.saturating_sub(walk), pace, nap);
            (last_walk, last_look) = (walk, now);
            std::thread::park_timeout(nap);
        }
    }

    /// Reads one byte of every [`FAULT_STRIDE`] bytes from `faulted` to
    /// `to`: a page fault each, which maps the pages around it.
    fn fault_in(&mut self, to: usize) {
        let mut sum = 0u8;
        for at in (self.faulted..to).step_by(FAULT_STRIDE) {
            sum = sum.wrapping_add(self.map.get(at).copied().unwrap_or(0));
        }
        // The reads are done for their side effect: kept, not optimised out.
        std::hint::black_box(sum);
        self.faulted = to;
    }

    /// Drops the page tables of the next [`RELEASE_CHUNK`] bytes, which the
    /// walk is done with (`MADV_DONTNEED`).
    fn release(&mut self) {
        // SAFETY: memmap2 marks MADV_DONTNEED unsafe because on a private or
        // anonymous mapping it throws the contents away. This map is a shared
        // mapping of a file, opened read-only: the advice only drops this
        // process's page-table entries for the range, which stays mapped,
        // and a later read maps the same file pages again from the page
        // cache. No byte anyone can see changes. (A failure leaves the pages
        // to the unmap at the end.)
        #[allow(unsafe_code)]
        let _ = unsafe {
            self.map
                .unchecked_advise_range(UncheckedAdvice::DontNeed, self.released, RELEASE_CHUNK)
        };
        self.released += RELEASE_CHUNK;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_due_for_release_comes_before_the_lead() {
        const MIB: usize = 1 << 20;
        let end = 2000 * MIB;
        // The walk far ahead of both: release first, a chunk at a time.
        let walk = 500 * MIB;
        assert_eq!(next_job(walk, 0, walk, end), Job::Release);
        // Released up to its lag: keep the lead, a step at a time.
        let released = walk - RELEASE_LAG - RELEASE_CHUNK + 1;
        assert_eq!(
            next_job(walk, released, walk, end),
            Job::FaultTo(walk + FAULT_STEP)
        );
        // The last step stops at the lead, and at the end of the map.
        let near = walk + FAULT_LEAD - MIB;
        assert_eq!(
            next_job(near, released, walk, end),
            Job::FaultTo(walk + FAULT_LEAD)
        );
        let tail = end - MIB;
        assert_eq!(next_job(tail, end, end - 10 * MIB, end), Job::FaultTo(end));
        // Nothing due: a nap.
        assert_eq!(next_job(walk + FAULT_LEAD, released, walk, end), Job::Nap);
        assert_eq!(next_job(end, end, end, end), Job::Nap);
    }

    /// The nap lasts until the walk, at its pace, would have used up half of
    /// what lies faulted in ahead of it, within its bounds; a walk that does
    /// not move doubles the nap up to its own bound.
    #[test]
    fn the_nap_follows_the_walk() {
        const MIB: usize = 1 << 20;
        let ms = Duration::from_millis;
        let pace = |mib: usize, millis: u64| Pace {
            walked: mib * MIB,
            over: ms(millis),
        };
        // 64 MiB ahead of a walk at 1 MiB a millisecond: half of it in 32 ms.
        assert_eq!(nap_for(64 * MIB, pace(1, 1), NAP), ms(32));
        // 16 MiB ahead, 4 MiB walked in 2 ms: half of it in 4 ms.
        assert_eq!(nap_for(16 * MIB, pace(4, 2), ms(32)), ms(4));
        // A slower walk: no longer than the longest nap.
        assert_eq!(nap_for(64 * MIB, pace(1, 100), NAP), NAP_LONG);
        // A fast walk, or nothing ahead: no shorter than the shortest.
        assert_eq!(nap_for(64 * MIB, pace(1000, 1), ms(32)), NAP);
        assert_eq!(nap_for(0, pace(1, 1), ms(32)), NAP);
        // The walk stands still: 1, 2, 4, 8, 8 ms, and 8 after a long nap.
        let still = pace(0, 5);
        let naps: Vec<Duration> =
            std::iter::successors(Some(NAP), |&n| Some(nap_for(64 * MIB, still, n)))
                .take(5)
                .collect();
        assert_eq!(naps, [ms(1), ms(2), ms(4), ms(8), ms(8)]);
        assert_eq!(nap_for(64 * MIB, still, NAP_LONG), NAP_MAX);
    }
}

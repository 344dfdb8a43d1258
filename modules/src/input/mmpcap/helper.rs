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
//! every [`REPORT_EVERY`] bytes; the helper wakes every [`NAP`] (far more
//! often than the walk can use up its lead), less often while the walk does
//! not move (a paced replay, a stalled consumer, the end of the file).

use memmap2::{Mmap, UncheckedAdvice};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
/// The helper's nap when it is done with what the walk allows, doubled (up
/// to [`NAP_MAX`]) while the walk does not move. Each wake-up costs the
/// kernel a few microseconds; one a millisecond keeps that to a fraction
/// of a percent.
const NAP: Duration = Duration::from_millis(1);
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
        let thread = std::thread::Builder::new()
            .name("mmpcap-helper".into())
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
        let (mut nap, mut last_walk) = (NAP, usize::MAX);
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
            nap = if walk == last_walk {
                (nap * 2).min(NAP_MAX)
            } else {
                NAP
            };
            last_walk = walk;
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
}

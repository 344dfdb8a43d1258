//! The helper thread of `input.mmpcap`. It keeps the map ready a little
//! ahead of the walk and clears it behind:
//!
//! - **Page tables**: `MADV_POPULATE_READ`, a chunk at a time, so the walk
//!   does not stop on a page fault every 64 KiB. (A kernel without it,
//!   before Linux 5.14, refuses; pages then fault in as the walk reaches them.)
//! - **Cache**: it reads one byte of every cache line in a window a few MiB
//!   ahead of the walk, so that the walk's loads find the lines in the shared
//!   cache instead of waiting on memory. The walk's own prefetches are not enough
//!   on a busy machine: each one holds one of the core's few line-fill
//!   buffers until memory answers.
//! - **Releasing**: it drops the page tables of what the walk is done with
//!   (`MADV_DONTNEED`; the range stays mapped, and the file's pages stay in
//!   the page cache), so that this kernel work is not left for the unmap at
//!   the end.
//!
//! With it, a chain that parses DNS (`benches/vs-dnsjit.sh`, pair
//! `dns-parse`) took 0.14 s where the walking thread alone took 0.25 s. The
//! walk tells the helper where it is every [`REPORT_EVERY`] bytes; when it
//! is ahead on everything the helper naps, longer and longer while the walk
//! does not move (a paced replay, a stalled consumer, the end of the file).

use memmap2::{Advice, Mmap, UncheckedAdvice};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often (in bytes walked) the walk tells the helper where it is.
pub(super) const REPORT_EVERY: usize = 256 << 10;
/// Page tables are set up this many bytes at a time.
const POPULATE_CHUNK: usize = 4 << 20;
/// How far ahead of the walk page tables are set up: far enough never to be
/// caught, near enough that on a file larger than memory the pages brought
/// in are still there when the walk gets to them.
const POPULATE_LEAD: usize = 256 << 20;
/// The window of cache lines read ahead of the walk, from `TOUCH_NEAR` to
/// `TOUCH_FAR` bytes past where it last said it was. Lines the helper has
/// just read sit in its own core's L2 cache, from which the walk's core
/// fetches them slower than from the shared L3; starting the window beyond
/// the size of an L2 (2 MiB here) means the helper's later reads have pushed
/// them out to L3 by the time the walk comes (measured: about 5 % faster than
/// a window from 64 KiB to 2 MiB). The window's 6 MiB must fit in L3 beside
/// everything else, which any server's does.
const TOUCH_NEAR: usize = 2 << 20;
const TOUCH_FAR: usize = 6 << 20;
/// Lines are read this many bytes at a time between checks of the walk.
const TOUCH_STEP: usize = 64 << 10;
/// How far behind the walk (as last told) the helper releases pages. Nothing
/// is borrowed from the map before the record the reader last handed out
/// (a produced object borrows the reader until the next is asked for, and
/// stages that keep bytes copy them), and a released page that is read again
/// is only mapped again from the page cache, so the margin is for speed, not
/// for safety.
const RELEASE_LAG: usize = 64 << 20;
/// What is released at a time.
const RELEASE_CHUNK: usize = 4 << 20;
/// The helper's nap when it is ahead on everything, doubled (up to
/// [`NAP_MAX`]) while the walk does not move.
const NAP_MIN: Duration = Duration::from_micros(20);
const NAP_MAX: Duration = Duration::from_millis(5);

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
            .spawn(move || Tending::new(&map).run(&theirs))
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

/// The helper's progress over the map.
struct Tending<'m> {
    map: &'m Mmap,
    /// Page tables are set up below here.
    populated: usize,
    /// `MADV_POPULATE_READ` works here (it did last time).
    can_populate: bool,
    /// Lines are read below here.
    touched: usize,
    /// Page tables are dropped below here.
    released: usize,
}

impl<'m> Tending<'m> {
    fn new(map: &'m Mmap) -> Self {
        Tending {
            map,
            populated: 0,
            can_populate: true,
            touched: 0,
            released: 0,
        }
    }

    /// One step at a time, the most urgent first, until told to stop.
    fn run(&mut self, shared: &WalkProgress) {
        let (mut nap, mut last_walk) = (NAP_MIN, 0);
        while !shared.stop.load(Ordering::Relaxed) {
            let walk = shared.walked.load(Ordering::Relaxed);
            let end = self.map.len();
            // Behind the walk (it outran the helper): catch up.
            self.populated = self.populated.max(walk);
            let populate = self.can_populate && self.populated < end;
            if populate && self.populated < walk + TOUCH_FAR + POPULATE_CHUNK {
                self.populate();
            } else if self.touched < (walk + TOUCH_FAR).min(end) {
                self.touch(walk);
            } else if populate && self.populated < walk + POPULATE_LEAD {
                self.populate();
            } else if self.released + RELEASE_CHUNK + RELEASE_LAG <= walk {
                self.release();
            } else {
                nap = if walk == last_walk {
                    (nap * 2).min(NAP_MAX)
                } else {
                    NAP_MIN
                };
                last_walk = walk;
                std::thread::park_timeout(nap);
            }
        }
    }

    fn populate(&mut self) {
        let len = POPULATE_CHUNK.min(self.map.len() - self.populated);
        let advice = self
            .map
            .advise_range(Advice::PopulateRead, self.populated, len);
        // A kernel without MADV_POPULATE_READ says EINVAL: stop asking. Any
        // other failure (a signal, memory pressure) leaves this chunk to
        // fault in as the walk reaches it.
        if let Err(e) = advice {
            self.can_populate = e.raw_os_error() != Some(libc::EINVAL);
        }
        self.populated += len;
    }

    /// Reads one byte of each line of the next [`TOUCH_STEP`] bytes of the window.
    fn touch(&mut self, walk: usize) {
        let from = self.touched.max(walk + TOUCH_NEAR);
        let to = (from + TOUCH_STEP).min(self.map.len());
        let mut sum = 0u8;
        for at in (from..to).step_by(64) {
            sum = sum.wrapping_add(self.map.get(at).copied().unwrap_or(0));
        }
        std::hint::black_box(sum);
        self.touched = to;
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

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
//! - **Unmapping**: it unmaps what the walk is done with, so that this kernel
//!   work is not left for the end.
//!
//! Done by the walking thread itself, this was a third of the time of a
//! chain that parses DNS (`benches/vs-dnsjit.sh`, pair `dns-parse`). The
//! walk tells the helper where it is every [`REPORT_EVERY`] bytes; between
//! windows the helper sleeps.

use memmap2::{Advice, Mmap};
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
/// How far behind the walk (as last told) the helper unmaps. Nothing is
/// borrowed from the map past the record the reader last handed out
/// (a produced object borrows the reader until the next is asked for, and
/// stages that keep bytes copy them), so any margin is safe; a wide one
/// costs nothing.
const UNMAP_LAG: usize = 64 << 20;
/// What is unmapped at a time (whole pages: the map starts on a page).
const UNMAP_CHUNK: usize = 4 << 20;
/// The helper's nap when it is ahead on everything.
const NAP: Duration = Duration::from_micros(20);

/// The helper thread; stopped and joined when dropped.
pub(super) struct Helper {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What the walk and the helper share.
struct Shared {
    /// Where the walk is (updated every [`REPORT_EVERY`] bytes).
    walked: AtomicUsize,
    stop: AtomicBool,
}

impl Helper {
    /// Starts the helper on `map`; `None` when no thread could be started
    /// (the walk then does without).
    pub(super) fn start(map: Arc<Mmap>) -> Option<Helper> {
        let shared = Arc::new(Shared {
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
    /// Unmapped below here.
    unmapped: usize,
}

impl<'m> Tending<'m> {
    fn new(map: &'m Mmap) -> Self {
        Tending {
            map,
            populated: 0,
            can_populate: true,
            touched: 0,
            unmapped: 0,
        }
    }

    /// One step at a time, the most urgent first, until told to stop.
    fn run(&mut self, shared: &Shared) {
        while !shared.stop.load(Ordering::Relaxed) {
            let walk = shared.walked.load(Ordering::Relaxed);
            let end = self.map.len();
            let populate = self.can_populate && self.populated < end;
            if populate && self.populated < walk + TOUCH_FAR + POPULATE_CHUNK {
                self.populate();
            } else if self.touched < (walk + TOUCH_FAR).min(end) {
                self.touch(walk);
            } else if populate && self.populated < walk + POPULATE_LEAD {
                self.populate();
            } else if self.unmapped + UNMAP_CHUNK + UNMAP_LAG <= walk {
                self.unmap();
            } else {
                std::thread::sleep(NAP);
            }
        }
    }

    fn populate(&mut self) {
        let len = POPULATE_CHUNK.min(self.map.len() - self.populated);
        let advice = self
            .map
            .advise_range(Advice::PopulateRead, self.populated, len);
        self.can_populate = advice.is_ok();
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

    /// Unmaps the next [`UNMAP_CHUNK`] bytes, which the walk is done with.
    fn unmap(&mut self) {
        let at = self.unmapped;
        debug_assert!(at + UNMAP_CHUNK <= self.map.len());
        // SAFETY: the range lies inside the map and starts on a page boundary
        // (the map does, and chunks are whole pages). Nothing refers to it
        // any more (see UNMAP_LAG): the walk is past it and only ever reads
        // ahead of where it is, and the helper itself only reads ahead of the
        // walk. The map's own unmap, when it is dropped, covers the whole
        // range again, which is allowed for pages no longer mapped.
        #[allow(unsafe_code)]
        unsafe {
            libc::munmap(self.map.as_ptr().add(at) as *mut libc::c_void, UNMAP_CHUNK);
        }
        self.unmapped += UNMAP_CHUNK;
    }
}

//! Which of a capture's parts have been read to their end ([`ReadParts`]),
//! as far as they follow on from the first without a gap.
//!
//! A thread reading in parts posts a batch to another thread's mailbox only
//! when the part had packets for it, and then marks the part read. A
//! thread takes its mailbox's batches in part order up to the parts read
//! without a gap: a part below that with no batch for it had nothing for
//! it. Posting an empty batch for every part to every thread instead made
//! the work and memory of a part grow with the threads (1,024 threads
//! posted some two million batches a gigabyte of capture, in parts of
//! 512 KiB; issue 26).

use dnsluice_core::sync::lock;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// The parts read to their end; see the module docs.
#[derive(Default)]
pub(super) struct ReadParts {
    /// Every part below this one has been read ([`Gapless::below`], read
    /// without the lock).
    below: AtomicU64,
    gapless: Mutex<Gapless>,
}

/// The parts read without a gap, and those read beyond it.
#[derive(Default)]
struct Gapless {
    /// Every part below this one has been read.
    below: u64,
    /// The input's place where the part before `below` ends (0 before any).
    end_key: u64,
    /// Parts read beyond the first not yet read: index and end key.
    beyond: BTreeMap<u64, u64>,
}

/// Every part below `below` has been read, and the last of them ends at
/// the input's place `end_key` (what a thread that had nothing in them
/// tells the merger it has got to).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ReadBelow {
    pub below: u64,
    pub end_key: u64,
}

impl ReadParts {
    /// Marks part `index`, which ends at the input's place `end_key`, read
    /// (every batch it had for a mailbox posted).
    pub fn mark(&self, index: u64, end_key: u64) {
        let mut gapless = lock(&self.gapless);
        let gapless = &mut *gapless;
        gapless.beyond.insert(index, end_key);
        while let Some(end_key) = gapless.beyond.remove(&gapless.below) {
            gapless.below += 1;
            gapless.end_key = end_key;
        }
        self.below.store(gapless.below, Ordering::Release);
    }

    /// Every part below this one has been read (a quick look, without the
    /// lock: whether [`ReadParts::read_below`] has news).
    pub fn below(&self) -> u64 {
        self.below.load(Ordering::Acquire)
    }

    /// The parts read without a gap, and where the last of them ends.
    pub fn read_below(&self) -> ReadBelow {
        let gapless = lock(&self.gapless);
        ReadBelow {
            below: gapless.below,
            end_key: gapless.end_key,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parts read out of order count only once the parts before them are
    /// read, and then where the last of them ends is told.
    #[test]
    fn parts_read_out_of_order_count_once_the_gap_is_filled() {
        let read = ReadParts::default();
        let at = |below, end_key| ReadBelow { below, end_key };
        assert_eq!(read.read_below(), at(0, 0));
        read.mark(1, 200);
        read.mark(3, 400);
        assert_eq!((read.below(), read.read_below()), (0, at(0, 0)));
        read.mark(0, 100);
        assert_eq!((read.below(), read.read_below()), (2, at(2, 200)));
        read.mark(2, 300);
        assert_eq!((read.below(), read.read_below()), (4, at(4, 400)));
        read.mark(4, 500);
        assert_eq!((read.below(), read.read_below()), (5, at(5, 500)));
    }
}

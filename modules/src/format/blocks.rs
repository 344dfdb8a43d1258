//! The read buffer of a [`super::stream::BufferedStream`] as blocks that
//! other threads may hold on to ([`SharedBlocks`]).
//!
//! A capture read from a file, standard input or a decompressor lies in the
//! reader's buffer, not in a map. Published as a shared region
//! ([`dnsluice_core::shared`]; capture inputs publish theirs,
//! `BufferedStream::shared`), a packet of it crosses to a `filter.split`
//! worker as where its bytes lie (40 bytes) instead of as a whole copy (an
//! object of some 280 bytes and its bytes: on this project's 2-core VM some
//! 70 ns of CPU a packet against some 24 ns by place, `docs/benchmarks.md`).
//! A region's bytes must not change while anything holds it, so the buffer
//! is rewritten in place only when nothing but the stream holds it (always,
//! when nothing splits); otherwise the stream reads on into another block
//! (one given back by then, or a new one) and the held one is kept aside
//! until its holders let go.
//!
//! Written here rather than taken from a crate: the blocks must be
//! `Arc`s the region registry can find, and reclaiming them needs only
//! `Arc::try_unwrap`.

use dnsluice_core::shared::{publish, SharedBytes};
use std::ops::Range;
use std::sync::Arc;

/// Blocks held elsewhere that a stream keeps to take back. Past this many,
/// the oldest is let go (freed by its last holder): a split's batches in
/// flight hold a few at a time.
const KEPT_ASIDE: usize = 64;

/// A stream's current block and the blocks other threads still hold.
#[derive(Debug)]
pub struct SharedBlocks {
    /// The block the stream reads from (published as a shared region once
    /// [`SharedBlocks::publish_from_now`] was called).
    current: Arc<Vec<u8>>,
    /// Blocks the stream read from before that were still held elsewhere
    /// when it moved on, oldest first.
    aside: Vec<Arc<Vec<u8>>>,
    /// The blocks are published (else nothing but the stream holds them).
    published: bool,
}

impl SharedBlocks {
    /// One block of `size` bytes (zeroed), not published: rewritten in place.
    pub fn new(size: usize) -> SharedBlocks {
        SharedBlocks {
            current: Arc::new(vec![0; size]),
            aside: Vec::new(),
            published: false,
        }
    }

    /// Publishes the current block and every one after it, for other
    /// threads to find (and hold).
    pub fn publish_from_now(&mut self) {
        self.published = true;
        self.publish();
    }

    /// The current block's bytes.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        &self.current
    }

    /// The current block to write into, its bytes at `keep` moved to its
    /// front: the block itself when nothing else holds it, else a block
    /// taken back or a new one of at least `size` bytes. Hand it back with
    /// [`SharedBlocks::share`].
    pub fn writable(&mut self, keep: Range<usize>, size: usize) -> Vec<u8> {
        let current = std::mem::take(&mut self.current);
        match Arc::try_unwrap(current) {
            Ok(mut own) => {
                if keep.start > 0 {
                    own.copy_within(keep, 0);
                }
                own
            }
            Err(held) => {
                let wanted = size.max(keep.len());
                let mut other = self.take_back().unwrap_or_else(|| vec![0; wanted]);
                if other.len() < wanted {
                    other.resize(wanted, 0);
                }
                other[..keep.len()].copy_from_slice(&held[keep]);
                self.set_aside(held);
                other
            }
        }
    }

    /// Makes `block` (from [`SharedBlocks::writable`], written) the current
    /// block, published for other threads to find (once published from now).
    pub fn share(&mut self, block: Vec<u8>) {
        self.current = Arc::new(block);
        if self.published {
            self.publish();
        }
    }

    fn publish(&self) {
        let shared: SharedBytes = self.current.clone();
        publish(&shared);
    }

    /// A block set aside that nothing else holds any more, if one is.
    fn take_back(&mut self) -> Option<Vec<u8>> {
        let free = self.aside.iter().position(|b| Arc::strong_count(b) == 1)?;
        // A thread finding regions may hold it for a moment: then not now.
        match Arc::try_unwrap(self.aside.swap_remove(free)) {
            Ok(block) => Some(block),
            Err(held) => {
                self.aside.push(held);
                None
            }
        }
    }

    fn set_aside(&mut self, held: Arc<Vec<u8>>) {
        if self.aside.len() == KEPT_ASIDE {
            self.aside.remove(0);
        }
        self.aside.push(held);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dnsluice_core::shared::{RegionFinder, SharedRegion};

    /// Published blocks whose current block holds `bytes`, and where they lie.
    fn holding(bytes: &[u8]) -> (SharedBlocks, *const u8) {
        let mut blocks = SharedBlocks::new(bytes.len());
        blocks.publish_from_now();
        let mut block = blocks.writable(0..0, bytes.len());
        block.copy_from_slice(bytes);
        let at = block.as_ptr();
        blocks.share(block);
        (blocks, at)
    }

    /// The current block, held as a split's batch holds it (found by its bytes).
    fn hold(blocks: &SharedBlocks) -> SharedRegion {
        let mut finder = RegionFinder::default();
        let found = finder.region_of(&blocks.bytes()[..2]).cloned();
        found.expect("the block is published")
    }

    #[test]
    fn blocks_not_published_are_not_found() {
        let mut blocks = SharedBlocks::new(8);
        let block = blocks.writable(0..0, 8);
        blocks.share(block);
        let mut finder = RegionFinder::default();
        assert!(finder.region_of(&blocks.bytes()[..2]).is_none());
    }

    #[test]
    fn an_unheld_block_is_rewritten_in_place() {
        let (mut blocks, at) = holding(b"abcdefgh");
        let block = blocks.writable(5..8, 8);
        assert_eq!(block.as_ptr(), at, "moved to another block");
        assert_eq!(&block[..3], b"fgh");
        blocks.share(block);
    }

    #[test]
    fn a_held_block_keeps_its_bytes_and_is_taken_back_once_let_go() {
        let (mut blocks, first) = holding(b"abcdefgh");
        let held = hold(&blocks);
        let mut block = blocks.writable(6..8, 4);
        assert_ne!(block.as_ptr(), first, "a held block was rewritten");
        assert_eq!(&block[..2], b"gh");
        assert!(block.len() >= 4);
        block[2..4].copy_from_slice(b"ij");
        blocks.share(block);
        assert_eq!(held.bytes(), b"abcdefgh", "the held bytes changed");
        // Still held: the next block is another one again.
        let second = blocks.bytes().as_ptr();
        let now_held = hold(&blocks);
        let block = blocks.writable(0..4, 4);
        assert!(![first, second].contains(&block.as_ptr()));
        blocks.share(block);
        // Let go: the first block is taken back for the block after.
        drop(held);
        drop(now_held);
        let _holds = hold(&blocks);
        let block = blocks.writable(0..4, 4);
        assert!([first, second].contains(&block.as_ptr()), "not taken back");
        assert_eq!(&block[..4], b"ghij");
    }
}

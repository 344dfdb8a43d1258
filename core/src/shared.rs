//! Input bytes that live as long as the run and that any thread may read (a
//! memory-mapped capture). A stage that hands objects to another thread
//! (`filter.split`) refers to bytes inside such a region by offset instead
//! of copying them: the batch keeps the region alive, the other thread reads
//! the same bytes.
//!
//! An input publishes its region ([`publish`]); the registry holds it weakly,
//! so it never keeps a map alive, and a region whose owner is gone is never
//! found again. A stage finds the region holding an object's bytes with a
//! [`RegionFinder`], which asks the registry only when something new was
//! published since it last asked: one comparison of two numbers a call
//! otherwise, and nothing at all for bytes that are in no region (a read
//! buffer, a reassembled stream), which are copied as before.
//!
//! Finding is by address: the live mappings and allocations of a process
//! never overlap, so bytes whose address lies inside a live region are that
//! region's bytes. Everything here is safe code: offsets are computed from
//! addresses as numbers and the bytes are read back by slicing the region.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// Bytes shared by the threads of a run (an `Arc` of a memory map).
pub type SharedBytes = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// Where a part of a region lies in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// Offset of its first byte in the region.
    pub at: usize,
    /// Its length.
    pub len: usize,
}

/// A published region, kept alive while this handle lives.
#[derive(Clone)]
pub struct SharedRegion {
    bytes: SharedBytes,
    start: usize,
    len: usize,
}

impl std::fmt::Debug for SharedRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedRegion({} bytes at {:#x})", self.len, self.start)
    }
}

impl SharedRegion {
    fn new(bytes: SharedBytes) -> SharedRegion {
        let (start, len) = address_range((*bytes).as_ref());
        SharedRegion { bytes, start, len }
    }

    /// Where `part` lies in this region, when it lies wholly inside it.
    #[inline]
    pub fn span_of(&self, part: &[u8]) -> Option<Span> {
        let (start, len) = address_range(part);
        let at = start.wrapping_sub(self.start);
        (at <= self.len && len <= self.len - at).then_some(Span { at, len })
    }

    /// Whether `other` is this region (a handle to the same bytes).
    #[inline]
    pub fn is(&self, other: &SharedRegion) -> bool {
        self.start == other.start && self.len == other.len
    }

    /// All of the region's bytes.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        (*self.bytes).as_ref()
    }
}

impl Span {
    /// The bytes at this span of `region`'s bytes ([`SharedRegion::bytes`];
    /// empty if the span is not in them: a span is only ever taken from its
    /// region by [`SharedRegion::span_of`]).
    #[inline]
    pub fn of(self, region: &[u8]) -> &[u8] {
        region.get(self.at..self.at + self.len).unwrap_or_default()
    }
}

/// The first address of `bytes` and their length.
#[inline]
fn address_range(bytes: &[u8]) -> (usize, usize) {
    (bytes.as_ptr() as usize, bytes.len())
}

/// The regions published so far (weakly: their owners keep them alive).
static PUBLISHED: Mutex<Vec<Weak<dyn AsRef<[u8]> + Send + Sync>>> = Mutex::new(Vec::new());
/// How many regions were ever published: a finder asks again when it grows.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Makes `bytes` findable by [`RegionFinder`] for as long as something else
/// holds them. Their content must not change while they live (a read-only map).
pub fn publish(bytes: &SharedBytes) {
    let mut published = crate::sync::lock(&PUBLISHED);
    published.retain(|weak| weak.strong_count() > 0);
    published.push(Arc::downgrade(bytes));
    GENERATION.fetch_add(1, Ordering::Release);
}

/// The live region that holds all of `part`, if one does.
fn find(part: &[u8]) -> Option<SharedRegion> {
    let published = crate::sync::lock(&PUBLISHED);
    published
        .iter()
        .filter_map(Weak::upgrade)
        .map(SharedRegion::new)
        .find(|region| region.span_of(part).is_some())
}

/// Finds the region holding an object's bytes, remembering the last one.
#[derive(Debug, Default)]
pub struct RegionFinder {
    last: Option<SharedRegion>,
    /// [`GENERATION`] when the registry was last asked.
    asked_at: u64,
}

impl RegionFinder {
    /// The region holding all of `part`: the last one found if it does,
    /// else (only when a region was published since the last look) the
    /// registry's; `None` for bytes in no region.
    #[inline]
    pub fn region_of(&mut self, part: &[u8]) -> Option<&SharedRegion> {
        if !self.last_holds(part) {
            self.look_again(part);
            if !self.last_holds(part) {
                return None;
            }
        }
        self.last.as_ref()
    }

    #[inline]
    fn last_holds(&self, part: &[u8]) -> bool {
        self.last
            .as_ref()
            .is_some_and(|region| region.span_of(part).is_some())
    }

    /// Asks the registry, when a region was published since the last time.
    #[cold]
    #[inline(never)]
    fn look_again(&mut self, part: &[u8]) {
        let generation = GENERATION.load(Ordering::Acquire);
        if generation == self.asked_at {
            return;
        }
        self.asked_at = generation;
        if let Some(found) = find(part) {
            self.last = Some(found);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region_of_vec(bytes: Vec<u8>) -> (SharedBytes, SharedRegion) {
        let shared: SharedBytes = Arc::new(bytes);
        (shared.clone(), SharedRegion::new(shared))
    }

    #[test]
    fn a_span_is_found_only_for_bytes_wholly_inside() {
        let (shared, region) = region_of_vec((0..100).collect());
        let bytes = (*shared).as_ref();
        assert_eq!(
            region.span_of(&bytes[10..30]),
            Some(Span { at: 10, len: 20 })
        );
        assert_eq!(Span { at: 10, len: 20 }.of(region.bytes()), &bytes[10..30]);
        assert_eq!(region.span_of(&bytes[90..]), Some(Span { at: 90, len: 10 }));
        assert_eq!(
            region.span_of(&bytes[100..]),
            Some(Span { at: 100, len: 0 })
        );
        let other = vec![0u8; 100];
        assert_eq!(region.span_of(&other), None);
        // A span not of this region reads as nothing, not out of bounds.
        assert_eq!(Span { at: 95, len: 10 }.of(region.bytes()), &[] as &[u8]);
    }

    #[test]
    fn a_finder_finds_published_regions_only_while_they_live() {
        let mut finder = RegionFinder::default();
        let (shared, _) = region_of_vec(vec![7u8; 64]);
        let copy = vec![7u8; 64];
        assert!(finder.region_of(&(*shared).as_ref()[..8]).is_none());
        publish(&shared);
        let found = finder.region_of(&(*shared).as_ref()[8..16]).cloned();
        assert_eq!(
            found.map(|r| r.span_of(&(*shared).as_ref()[8..16])),
            Some(Some(Span { at: 8, len: 8 }))
        );
        assert!(
            finder.region_of(&copy).is_none(),
            "bytes outside every region"
        );
        assert!(finder.region_of(&(*shared).as_ref()[60..]).is_some());
        // Its owner gone, a new finder no longer finds it.
        let weak = Arc::downgrade(&shared);
        drop(shared);
        drop(finder);
        assert!(
            weak.upgrade().is_none(),
            "the registry kept the region alive"
        );
    }
}

//! One output stream written by several threads: how the copies of a chain
//! that a split runs in its worker threads share one output file.
//!
//! A worker thread of a split [`enter`]s a lane before it builds its copy of
//! the chain. An output stage that can share its stream (`output.json`
//! writes whole lines) then [`claim`]s its path: the first claim opens the
//! real file (once, for every thread), and each thread gets a [`LaneWriter`]
//! that only appends to its lane's buffer. After each object it handed to its
//! chain the worker marks where that object's bytes end, with the object's
//! place in the input ([`LaneHandle::end_object`]: only objects that wrote
//! something get a mark); after each batch it takes the buffer with its
//! marks and how far in the input the lane has got ([`LaneHandle::take`])
//! and sends it to the split's merger, which writes the lanes' bytes into
//! the real file, either as they come or, merging the lanes' marks by their
//! places, in the order the split saw the objects (see `filter.split`).
//!
//! Outside a lane (one thread, no split) [`claim`] returns `None` and the
//! output opens its file itself: nothing here costs a single-threaded chain.

use crate::sync::lock;
use crate::StageError;
use std::cell::RefCell;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::{Arc, Mutex};

/// The real output the lanes of one split share, opened by the first claim.
#[derive(Default)]
pub struct MergeTarget {
    opened: Mutex<Option<(PathBuf, Box<dyn Write + Send>)>>,
}

impl MergeTarget {
    /// A target no output has claimed yet.
    pub fn new() -> Arc<MergeTarget> {
        Arc::new(MergeTarget::default())
    }

    /// Whether an output claimed it (then the split merges the lanes' bytes).
    pub fn is_claimed(&self) -> bool {
        lock(&self.opened).is_some()
    }

    /// The real output and its path, for the merger to write to; `None`
    /// when nothing claimed it (or it was taken already).
    pub fn take(&self) -> Option<(PathBuf, Box<dyn Write + Send>)> {
        lock(&self.opened).take()
    }
}

/// The bytes one worker's chain wrote for one batch of objects.
#[derive(Default, Debug)]
pub struct LaneBuffer {
    /// What the chain wrote, object after object.
    pub bytes: Vec<u8>,
    /// Where the bytes of each object that wrote something end in `bytes`,
    /// in order (an object that wrote nothing has no mark).
    pub marks: Vec<Mark>,
    /// How far the lane has got: every object of this lane placed before
    /// this in the input has its bytes in this buffer or an earlier one.
    pub through: u64,
}

/// The end of one object's bytes in a [`LaneBuffer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark {
    /// The object's place in the input (counted from 0 by the split), or
    /// [`AT_FINISH`].
    pub key: u64,
    /// Where its bytes end in the buffer.
    pub end: usize,
}

/// The place of what a chain writes as it finishes (TCP streams cut
/// short): after every object, and, in ordered merging, lane after lane.
pub const AT_FINISH: u64 = u64::MAX;

impl LaneBuffer {
    /// Empties it, keeping its memory.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.marks.clear();
        self.through = 0;
    }

    /// Where the bytes of mark `index` start.
    pub fn start_of(&self, index: usize) -> usize {
        index
            .checked_sub(1)
            .map_or(0, |before| self.marks[before].end)
    }
}

struct Lane {
    target: Arc<MergeTarget>,
    buffer: Rc<RefCell<LaneBuffer>>,
}

thread_local! {
    static LANE: RefCell<Option<Lane>> = const { RefCell::new(None) };
}

/// A worker thread's side of its lane (see the module docs).
pub struct LaneHandle {
    buffer: Rc<RefCell<LaneBuffer>>,
}

/// Makes the calling thread a lane of `target`, until the handle is dropped.
pub fn enter(target: Arc<MergeTarget>) -> LaneHandle {
    let buffer = Rc::new(RefCell::new(LaneBuffer::default()));
    LANE.with(|lane| {
        *lane.borrow_mut() = Some(Lane {
            target,
            buffer: buffer.clone(),
        })
    });
    LaneHandle { buffer }
}

/// Takes the calling thread out of its lane: its output writes a file of
/// its own (a path with `{thread}`), nothing to merge.
pub fn leave() {
    LANE.with(|lane| lane.borrow_mut().take());
}

impl LaneHandle {
    /// Marks the end of the bytes of the object at place `key` in the input
    /// (nothing when it wrote nothing).
    #[inline]
    pub fn end_object(&self, key: u64) {
        let mut buffer = self.buffer.borrow_mut();
        let end = buffer.bytes.len();
        if end > buffer.marks.last().map_or(0, |mark| mark.end) {
            buffer.marks.push(Mark { key, end });
        }
    }

    /// Whether nothing was written since the last [`LaneHandle::take`].
    pub fn is_empty(&self) -> bool {
        let buffer = self.buffer.borrow();
        buffer.bytes.is_empty() && buffer.marks.is_empty()
    }

    /// The batch written so far, replaced by `empty` (a buffer to reuse);
    /// `through`: every object of this lane placed before it in the input
    /// has been handed to the chain.
    pub fn take(&self, empty: LaneBuffer, through: u64) -> LaneBuffer {
        let mut taken = std::mem::replace(&mut *self.buffer.borrow_mut(), empty);
        taken.through = through;
        taken
    }
}

impl Drop for LaneHandle {
    fn drop(&mut self) {
        LANE.with(|lane| lane.borrow_mut().take());
    }
}

/// Claims `path` for a shared output: in a lane, opens the real output with
/// `open` if no thread did yet (an error there is every thread's error) and
/// returns a writer into this thread's lane; outside a lane, `None`.
/// One output per chain may claim (a second claim of another path fails).
pub fn claim(
    path: &Path,
    open: impl FnOnce() -> Result<Box<dyn Write + Send>, StageError>,
) -> Option<Result<LaneWriter, StageError>> {
    LANE.with(|lane| {
        let lane = lane.borrow();
        let lane = lane.as_ref()?;
        let mut opened = lock(&lane.target.opened);
        let result = match &*opened {
            Some((shared, _)) if shared != path => Err(StageError::other(
                "threads",
                format!(
                    "two outputs would share the threads' merged stream ({} and {}): give one a path with {{thread}}",
                    shared.display(),
                    path.display()
                ),
            )),
            Some(_) => Ok(()),
            None => open().map(|out| *opened = Some((path.to_path_buf(), out))),
        };
        Some(result.map(|()| {
            LaneWriter {
                buffer: lane.buffer.clone(),
            }
        }))
    })
}

/// Appends to the calling thread's lane buffer.
pub struct LaneWriter {
    buffer: Rc<RefCell<LaneBuffer>>,
}

impl LaneWriter {
    /// Lets `write` append to the lane's bytes in place (no copy through a
    /// buffer of the output's own).
    pub fn append(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        write(&mut self.buffer.borrow_mut().bytes);
    }
}

impl Write for LaneWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.buffer.borrow_mut().bytes.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.buffer.borrow_mut().bytes.extend_from_slice(bytes);
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lane_collects_what_its_output_writes_object_by_object() {
        let target = MergeTarget::new();
        let handle = enter(target.clone());
        let mut out = claim(Path::new("out.jsonl"), || Ok(Box::new(Vec::new())))
            .expect("in a lane")
            .expect("opened");
        assert!(target.is_claimed());
        out.write_all(b"one\n").unwrap();
        handle.end_object(7);
        // An object that wrote nothing has no mark.
        handle.end_object(8);
        out.write_all(b"three\n").unwrap();
        handle.end_object(12);
        let batch = handle.take(LaneBuffer::default(), 13);
        assert_eq!(batch.bytes, b"one\nthree\n");
        let mark = |key, end| Mark { key, end };
        assert_eq!(batch.marks, vec![mark(7, 4), mark(12, 10)]);
        assert_eq!((batch.start_of(0), batch.start_of(1)), (0, 4));
        assert_eq!(batch.through, 13);
        // The next buffer starts afresh: its first object's bytes start at 0.
        out.write_all(b"four\n").unwrap();
        handle.end_object(14);
        let batch = handle.take(LaneBuffer::default(), 20);
        assert_eq!(
            (batch.bytes.as_slice(), batch.marks.as_slice()),
            (&b"four\n"[..], &[mark(14, 5)][..])
        );
        let second = claim(Path::new("other.jsonl"), || Ok(Box::new(Vec::new())));
        assert!(second.expect("in a lane").is_err());
        drop(handle);
        assert!(claim(Path::new("out.jsonl"), || unreachable!()).is_none());
    }
}

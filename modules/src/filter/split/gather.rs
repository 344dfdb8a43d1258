//! Runs of the lanes' bytes gathered for the ordered merger to write with
//! one vectored system call (`writev`), where they lie ([`Gather`]).
//!
//! Merged in input order, a TCP capture's lines come in runs of one or two
//! from each lane in turn; copied into a buffer before being written, those
//! bytes cost the merger a second pass over everything the workers wrote
//! (1.2 GB for a million TCP connections: most of the merger's time). The
//! gather keeps where each run lies instead, holds on to the lane buffers
//! it points into (a buffer the merger is done with goes back to its worker
//! only once its runs are written), and writes them all at once.

use dnsluice_core::merge::LaneBuffer;
use std::io::{self, IoSlice, Write};

/// At most this many runs are written at once (Linux's `IOV_MAX`).
const MAX_RUNS: usize = 1024;
/// Runs are written once this many bytes wait (each lane buffer they hold
/// is kept from its worker until then).
const MAX_BYTES: usize = 1 << 20;

/// Runs waiting to be written, and the lane buffers done with that they
/// still point into.
#[derive(Default)]
pub(super) struct Gather {
    runs: Vec<Run>,
    /// Buffers the merger is done with, each with its lane, kept until
    /// their runs are written.
    retired: Vec<(usize, LaneBuffer)>,
    /// Bytes the runs hold.
    bytes: usize,
}

/// Bytes `start..end` of a buffer.
#[derive(Clone, Copy)]
struct Run {
    held: Held,
    start: usize,
    end: usize,
}

/// Where a run's buffer is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Held {
    /// The buffer the merger is in for this lane.
    Current(usize),
    /// [`Gather::retired`]'s buffer at this index.
    Retired(usize),
}

impl Gather {
    /// Adds bytes `start..end` of lane `lane`'s current buffer (one longer
    /// run when they follow the last run's bytes).
    pub fn add(&mut self, lane: usize, start: usize, end: usize) {
        self.bytes += end - start;
        let held = Held::Current(lane);
        match self.runs.last_mut() {
            Some(last) if last.held == held && last.end == start => last.end = end,
            _ => self.runs.push(Run { held, start, end }),
        }
    }

    /// Whether no run waits.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Whether it is time to write.
    pub fn is_full(&self) -> bool {
        self.runs.len() >= MAX_RUNS || self.bytes >= MAX_BYTES
    }

    /// Takes lane `lane`'s buffer, which the merger is done with: kept when
    /// runs point into it, else given back at once to be recycled.
    pub fn retire(&mut self, lane: usize, buffer: LaneBuffer) -> Option<LaneBuffer> {
        let current = Held::Current(lane);
        if !self.runs.iter().any(|run| run.held == current) {
            return Some(buffer);
        }
        let retired = Held::Retired(self.retired.len());
        for run in self.runs.iter_mut().filter(|run| run.held == current) {
            run.held = retired;
        }
        self.retired.push((lane, buffer));
        None
    }

    /// Writes every run to `out` in order (the current buffers being
    /// `current`, by lane) and hands each retired buffer, with its lane, to
    /// `recycle`.
    pub fn write(
        &mut self,
        current: &[Option<(LaneBuffer, usize)>],
        out: &mut dyn Write,
        mut recycle: impl FnMut(usize, LaneBuffer),
    ) -> io::Result<()> {
        let bytes_of = |run: &Run| -> Option<IoSlice<'_>> {
            let buffer = match run.held {
                Held::Current(lane) => current.get(lane)?.as_ref().map(|(buffer, _)| buffer),
                Held::Retired(index) => self.retired.get(index).map(|(_, buffer)| buffer),
            };
            Some(IoSlice::new(buffer?.bytes.get(run.start..run.end)?))
        };
        // A run whose bytes are gone would be a bug here: said, not skipped.
        let slices: Option<Vec<IoSlice<'_>>> = self.runs.iter().map(bytes_of).collect();
        let result = match slices {
            Some(mut slices) => write_all_vectored(out, &mut slices),
            None => Err(io::Error::other("a gathered run's buffer is gone")),
        };
        self.runs.clear();
        self.bytes = 0;
        for (lane, buffer) in self.retired.drain(..) {
            recycle(lane, buffer);
        }
        result
    }
}

/// Writes every byte of `slices` to `out`, as many at once as it takes.
fn write_all_vectored(out: &mut dyn Write, mut slices: &mut [IoSlice<'_>]) -> io::Result<()> {
    IoSlice::advance_slices(&mut slices, 0);
    while !slices.is_empty() {
        match out.write_vectored(slices) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut slices, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer(text: &str) -> LaneBuffer {
        let mut buffer = LaneBuffer::default();
        buffer.bytes.extend_from_slice(text.as_bytes());
        buffer
    }

    /// A writer that takes at most three bytes a call, and says so once
    /// with an interruption: every byte still goes out, in order.
    struct Trickle {
        out: Vec<u8>,
        interrupted: bool,
    }

    impl Write for Trickle {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            if !self.interrupted {
                self.interrupted = true;
                return Err(io::ErrorKind::Interrupted.into());
            }
            let n = bytes.len().min(3);
            self.out.extend_from_slice(&bytes[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Runs from two lanes, one of them out of a buffer retired meanwhile,
    /// come out in the order they were added; the retired buffer is kept
    /// until then and recycled after, a buffer no run points into at once.
    #[test]
    fn runs_come_out_in_order_and_retired_buffers_wait_for_them() {
        let mut current = vec![Some((buffer("a\nb\nc\n"), 0)), Some((buffer("x\ny\n"), 0))];
        let mut gather = Gather::default();
        gather.add(0, 0, 2);
        gather.add(1, 0, 2);
        gather.add(0, 2, 4);
        gather.add(0, 4, 6);
        assert_eq!(gather.runs.len(), 3, "a run that follows the last is one");
        let (old, _) = current[0].take().unwrap();
        assert!(gather.retire(0, old).is_none(), "runs point into it");
        current[0] = Some((buffer("d\n"), 0));
        gather.add(0, 0, 2);
        gather.add(1, 2, 4);
        assert!(gather.retire(2, buffer("unused")).is_some(), "no run in it");
        let mut out = Trickle {
            out: Vec::new(),
            interrupted: false,
        };
        let mut recycled = Vec::new();
        gather
            .write(&current, &mut out, |lane, buffer| {
                recycled.push((lane, String::from_utf8(buffer.bytes).unwrap()))
            })
            .unwrap();
        assert_eq!(String::from_utf8(out.out).unwrap(), "a\nx\nb\nc\nd\ny\n");
        assert_eq!(recycled, [(0, "a\nb\nc\n".to_string())]);
        assert!(gather.is_empty() && !gather.is_full());
    }

    /// Runs of one buffer with bytes between them stay two runs.
    #[test]
    fn a_run_joins_only_the_bytes_just_before_it() {
        let current = vec![Some((buffer("a\nb\nc\n"), 0))];
        let mut gather = Gather::default();
        gather.add(0, 0, 2);
        gather.add(0, 4, 6);
        let mut out = Vec::new();
        gather.write(&current, &mut out, |_, _| {}).unwrap();
        assert_eq!(out, b"a\nc\n");
    }

    /// A run whose bytes are not there (a bug in the merger) is an error,
    /// not a panic nor lines silently skipped.
    #[test]
    fn a_run_without_its_bytes_is_an_error() {
        let current = vec![Some((buffer("a\n"), 0)), None];
        for (lane, end) in [(0, 10), (1, 2)] {
            let mut gather = Gather::default();
            gather.add(lane, 0, end);
            let error = gather.write(&current, &mut Vec::new(), |_, _| {});
            assert!(error.unwrap_err().to_string().contains("gone"));
        }
    }

    /// A writer that takes nothing is an error, not a loop.
    #[test]
    fn a_writer_that_takes_nothing_is_an_error() {
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Ok(0)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let current = vec![Some((buffer("a\n"), 0))];
        let mut gather = Gather::default();
        gather.add(0, 0, 2);
        let error = gather.write(&current, &mut Full, |_, _| {}).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::WriteZero);
    }
}

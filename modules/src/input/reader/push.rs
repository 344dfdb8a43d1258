//! The reader's push side ([`dnsluice_core::Producer::push_into`]): the
//! records of the window walked in one loop with the chain's first stage,
//! the reader's counts kept at hand from one record to the next. Pulling
//! ([`dnsluice_core::Producer::produce`]) makes a call per record, which
//! stores the reader's state and loads it again, and chooses the format and
//! byte order again each time; in this loop they are chosen once: about 50
//! instructions a packet fewer (`docs/benchmarks.md`, "The input runs the
//! loop").

use super::CaptureReader;
use crate::format::stream::RecordSource;
use crate::format::RecordInfo;
use crate::input::mmpcap::{prefetch, READ_AHEAD};
use dnsluice_core::{CaptureMeta, Object, Packet, PushTo, Pushed, Receiver, StageError};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};

#[cfg(test)]
mod tests;

impl<S: RecordSource> CaptureReader<S> {
    /// [`dnsluice_core::Producer::push_into`]'s loop: the records in the window walked in
    /// one loop ([`CaptureReader::push_walked`]); what that loop does not
    /// take (a pcapng block that is not a packet, a record the window does
    /// not hold yet, the end) the usual way, one object at a time.
    pub(super) fn push_all(&mut self, to: PushTo<'_>) -> Result<Pushed, StageError> {
        let PushTo {
            receiver,
            due,
            moved,
        } = to;
        loop {
            if let Some(paused) = self.push_walked(receiver, due, moved)? {
                return Ok(paused);
            }
            // Used where it was made (a move out of the `Result` is a copy).
            let mut next = self.next_object();
            match &mut next {
                Ok(Some(obj)) => receiver.receive(obj)?,
                Ok(None) => return Ok(Pushed::End),
                Err(_) => return next.map(|_| Pushed::End),
            }
            *moved += 1;
        }
    }

    /// Pushes the complete records of the window, at most about
    /// [`PUSH_CHUNK`] bytes of them before the source is told (a map's
    /// helper hears where the walk is), until one is not complete:
    /// `Some(Pushed::Paused)` when a stop was asked or a watcher is due,
    /// `None` when the loop has no more it can take.
    #[inline(always)]
    fn push_walked(
        &mut self,
        receiver: &mut dyn Receiver,
        due: Option<&AtomicBool>,
        moved: &mut u64,
    ) -> Result<Option<Pushed>, StageError> {
        loop {
            self.source.consume(std::mem::take(&mut self.pending));
            let window = self.source.window();
            let mut tally = Tally {
                frames: self.frames,
                bytes: self.bytes,
                first_ts_ns: self.first_ts_ns,
                last_ts_ns: self.last_ts_ns,
            };
            let (walked, flow) = self.format.walk(window, |at, record| {
                if at >= PUSH_CHUNK {
                    return ControlFlow::Break(Ok(None));
                }
                if dnsluice_core::stop::requested().is_some()
                    || due.is_some_and(|due| due.load(Ordering::Relaxed))
                {
                    return ControlFlow::Break(Ok(Some(Pushed::Paused)));
                }
                // Two lines a record, as `input.mmpcap` does (see there).
                if let Some(ahead) = window.get(at + READ_AHEAD..) {
                    prefetch(ahead);
                    prefetch(ahead.get(64..).unwrap_or_default());
                }
                let mut obj = Object::Packet(tally.packet(window, at, record));
                match receiver.receive(&mut obj) {
                    Ok(()) => {
                        *moved += 1;
                        ControlFlow::Continue(())
                    }
                    // The record was counted and handed out: it is read.
                    Err(e) => ControlFlow::Break(Err((e, record.consumed))),
                }
            });
            self.frames = tally.frames;
            self.bytes = tally.bytes;
            self.first_ts_ns = tally.first_ts_ns;
            self.last_ts_ns = tally.last_ts_ns;
            match flow {
                ControlFlow::Continue(()) => {
                    self.pending = walked;
                    return Ok(None);
                }
                ControlFlow::Break(Ok(None)) => self.pending = walked,
                ControlFlow::Break(Ok(paused)) => {
                    self.pending = walked;
                    return Ok(paused);
                }
                ControlFlow::Break(Err((e, consumed))) => {
                    self.pending = walked + consumed;
                    return Err(e);
                }
            }
        }
    }
}

/// How many bytes of records [`CaptureReader::push_walked`] walks before it
/// tells the source where it is (a map's helper keeps its lead from that).
const PUSH_CHUNK: usize = 64 << 10;

/// A reader's counts, kept at hand in [`CaptureReader::push_walked`]'s loop.
struct Tally {
    frames: u64,
    bytes: u64,
    first_ts_ns: Option<i64>,
    last_ts_ns: Option<i64>,
}

impl Tally {
    /// Counts the record at `at` in `window` and makes its packet.
    #[inline(always)]
    fn packet<'a>(&mut self, window: &'a [u8], at: usize, record: &RecordInfo) -> Packet<'a> {
        self.frames += 1;
        self.bytes += record.caplen as u64;
        self.last_ts_ns = record.ts_ns.or(self.last_ts_ns);
        if self.first_ts_ns.is_none() {
            self.first_ts_ns = record.ts_ns;
        }
        let start = at + record.data_at;
        let meta = CaptureMeta {
            frame: self.frames,
            ts_ns: record.ts_ns,
            len: record.len,
            link: record.link,
        };
        Packet::new(&window[start..start + record.caplen], meta)
    }
}

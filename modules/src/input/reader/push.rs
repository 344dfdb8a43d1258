//! The reader's push side ([`dnsluice_core::Producer::push_into`]): the
//! records of the window walked in one loop with the chain's first stage,
//! the reader's counts kept at hand from one record to the next. Pulling
//! ([`dnsluice_core::Producer::produce`]) makes a call per record, which
//! stores the reader's state and loads it again, and chooses the format and
//! byte order again each time; in this loop they are chosen once: about 50
//! instructions a packet fewer (`docs/benchmarks.md`, "The input runs the
//! loop").

use super::CaptureReader;
use crate::filter::split::Split;
use crate::format::stream::RecordSource;
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
        if let Some(split) = receiver
            .as_any_mut()
            .and_then(|any| any.downcast_mut::<Split>())
        {
            return self.push_each(split, due, moved);
        }
        self.push_each(receiver, due, moved)
    }

    /// [`CaptureReader::push_all`]'s loop for `receiver`: built once for any
    /// stage (a call per object) and once for a split (its intake runs in
    /// the walk's loop).
    #[inline(always)]
    fn push_each<R: Intake + ?Sized>(
        &mut self,
        receiver: &mut R,
        due: Option<&AtomicBool>,
        moved: &mut u64,
    ) -> Result<Pushed, StageError> {
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
    fn push_walked<R: Intake + ?Sized>(
        &mut self,
        receiver: &mut R,
        due: Option<&AtomicBool>,
        moved: &mut u64,
    ) -> Result<Option<Pushed>, StageError> {
        loop {
            self.source.consume(std::mem::take(&mut self.pending));
            let window = self.source.window();
            let mut tally = self.counts;
            let (walked, flow) = self.format.walk(
                window,
                // With the split's intake in it, the compiler otherwise
                // makes the closure a call per record (179 M instructions
                // a million packets against 108 M, `docs/benchmarks.md`).
                #[inline(always)]
                |at, record| {
                    if at >= PUSH_CHUNK {
                        return ControlFlow::Break(Ok(None));
                    }
                    if dnsluice_core::stop::requested().is_some()
                        || due.is_some_and(|due| due.load(Ordering::Relaxed))
                    {
                        return ControlFlow::Break(Ok(Some(Pushed::Paused)));
                    }
                    // Two lines a record, as `input.mmpcap` does (see there).
                    prefetch(window, at + READ_AHEAD);
                    prefetch(window, at + READ_AHEAD + 64);
                    let (data, meta) = tally.record(window, at, record);
                    match receiver.take(data, meta) {
                        Ok(()) => {
                            *moved += 1;
                            ControlFlow::Continue(())
                        }
                        // The record was counted and handed out: it is read.
                        Err(e) => ControlFlow::Break(Err((e, record.consumed))),
                    }
                },
            );
            self.counts = tally;
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

/// Where the walk's packets go: any stage, with a call per packet; a
/// split, into its batches in the walk's own loop when it can
/// ([`Split::try_take`]: 46 instructions a packet fewer on the reading
/// thread, `docs/benchmarks.md`, fourteenth session).
trait Intake: Receiver {
    /// Takes the packet just read: its bytes `data`, its capture facts `meta`.
    fn take(&mut self, data: &[u8], meta: CaptureMeta) -> Result<(), StageError>;
}

impl Intake for dyn Receiver + '_ {
    #[inline(always)]
    fn take(&mut self, data: &[u8], meta: CaptureMeta) -> Result<(), StageError> {
        self.receive(&mut Object::Packet(Packet::new(data, meta)))
    }
}

impl Intake for Split {
    /// The packet is made only when the split's own loop cannot take it.
    #[inline(always)]
    fn take(&mut self, data: &[u8], meta: CaptureMeta) -> Result<(), StageError> {
        match self.try_take(data, &meta) {
            true => Ok(()),
            false => receive_packet(self, data, meta),
        }
    }
}

/// The split's usual intake, out of the walk's loop.
#[inline(never)]
fn receive_packet(split: &mut Split, data: &[u8], meta: CaptureMeta) -> Result<(), StageError> {
    split.receive(&mut Object::Packet(Packet::new(data, meta)))
}

/// How many bytes of records [`CaptureReader::push_walked`] walks before it
/// tells the source where it is (a map's helper keeps its lead from that).
const PUSH_CHUNK: usize = 64 << 10;

//! A helper thread that walks classic pcap records ahead of the reader.
//!
//! Finding the next record means reading the length of the current one: a
//! chain of dependent loads through the whole file, each a potential cache or
//! page miss. `input.mmpcap` moves that chain to a second core: the walker
//! thread reads record headers from the shared map and hands batches of
//! record positions to the reading thread, which only builds packet views
//! (and finds the bytes already in the shared cache, the pages already mapped).
//!
//! Batches are recycled through a second channel, so the steady state
//! allocates nothing. The walker stops at the first record it cannot take
//! whole (the end, a cut-off record, a corrupt header); the reader then
//! carries on by itself from there, so errors and warnings come from one place.

use super::format::pcap::Pcap;
use super::format::RecordInfo;
use memmap2::Mmap;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};
use std::sync::Arc;
use std::thread;

/// Records per batch.
const BATCH: usize = 4096;
/// Batches in flight between the threads.
const IN_FLIGHT: usize = 4;

/// One record found by the walker.
#[derive(Clone, Copy, Debug)]
struct Walked {
    /// Absolute offset of the record header in the file.
    offset: usize,
    /// The record, positions relative to `offset`.
    record: RecordInfo,
}

/// The reading side of a walker thread.
pub struct Walker {
    batches: Receiver<Vec<Walked>>,
    recycle: SyncSender<Vec<Walked>>,
    current: Vec<Walked>,
    next: usize,
}

impl Walker {
    /// Starts walking `map` from `start` (the first record header) with `pcap`'s byte order and link type.
    pub fn start(map: Arc<Mmap>, pcap: Pcap, start: usize) -> std::io::Result<Walker> {
        let (batch_tx, batch_rx) = sync_channel::<Vec<Walked>>(IN_FLIGHT);
        let (recycle_tx, recycle_rx) = sync_channel::<Vec<Walked>>(IN_FLIGHT + 2);
        thread::Builder::new()
            .name("mmpcap-walker".into())
            .spawn(move || walk(&map, &pcap, start, &batch_tx, &recycle_rx))?;
        Ok(Walker {
            batches: batch_rx,
            recycle: recycle_tx,
            current: Vec::new(),
            next: 0,
        })
    }

    /// The record at absolute offset `position`, or `None` when the walker has
    /// no more (the reader then walks on by itself from `position`).
    #[inline]
    pub fn next_at(&mut self, position: usize) -> Option<RecordInfo> {
        if self.next == self.current.len() && !self.refill() {
            return None;
        }
        let walked = self.current[self.next];
        if walked.offset != position {
            // Cannot happen while the reader consumes exactly what it is given;
            // if it ever does, the reader's own walk is always right.
            return None;
        }
        self.next += 1;
        Some(walked.record)
    }

    fn refill(&mut self) -> bool {
        let done = std::mem::take(&mut self.current);
        // The walker may have stopped; a full or closed recycle channel only costs an allocation.
        let _ = self.recycle.try_send(done);
        match self.batches.recv() {
            Ok(batch) if !batch.is_empty() => {
                self.current = batch;
                self.next = 0;
                true
            }
            _ => false,
        }
    }
}

fn walk(
    map: &Mmap,
    pcap: &Pcap,
    mut position: usize,
    out: &SyncSender<Vec<Walked>>,
    recycle: &Receiver<Vec<Walked>>,
) {
    loop {
        let mut batch = match recycle.try_recv() {
            Ok(mut reused) => {
                reused.clear();
                reused
            }
            Err(TryRecvError::Empty) => Vec::with_capacity(BATCH),
            Err(TryRecvError::Disconnected) => return,
        };
        let mut finished = false;
        while batch.len() < BATCH {
            let Some(record) = map.get(position..).and_then(|rest| pcap.record(rest)) else {
                finished = true;
                break;
            };
            batch.push(Walked {
                offset: position,
                record,
            });
            position += record.consumed;
        }
        if out.send(batch).is_err() || finished {
            return;
        }
    }
}

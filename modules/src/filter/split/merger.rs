//! The merger: one thread that writes what the workers' outputs wrote into
//! the one stream they share (see [`dnsluice_core::merge`]).
//!
//! Unordered, it writes each batch's bytes as they come, lane after lane.
//! Ordered, it follows the split's log of where each object went
//! ([`Route`](super::routes::Route)s, sent once the batches they describe
//! were handed over) and writes each object's bytes in the order the split saw the objects: the
//! stream a single thread would have written. At the end it writes what each
//! worker's chain wrote as it finished, lane by lane. When the bytes it
//! needs are not there yet, it spins briefly, then sleeps on its
//! [`Doorbell`] until a worker rings it.

use super::doorbell::Doorbell;
use super::lanes::{time_to_sleep, Lane};
use super::routes::RouteInbox;
use dnsluice_core::merge::LaneBuffer;
use dnsluice_core::StageError;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The merger's state: the real output and, per lane, the batch it is in.
pub(super) struct Merger {
    lanes: Vec<Arc<Lane>>,
    sink: Sink,
    /// Per lane: the batch being written and how many of its objects are.
    current: Vec<Option<(LaneBuffer, usize)>>,
    failed: Arc<AtomicBool>,
    /// What it sleeps on when the bytes it needs are not there yet (the
    /// workers ring it; see `lanes.rs`).
    bell: Arc<Doorbell>,
}

impl Merger {
    /// A merger of `lanes` into `out`; `failed` is set when it stops on an error.
    pub fn new(
        lanes: Vec<Arc<Lane>>,
        (path, out): (PathBuf, Box<dyn Write + Send>),
        failed: Arc<AtomicBool>,
    ) -> Merger {
        let current = lanes.iter().map(|_| None).collect();
        let bell = lanes
            .first()
            .map(|lane| lane.merger.clone())
            .unwrap_or_default();
        Merger {
            bell,
            lanes,
            sink: Sink {
                out: BufWriter::with_capacity(LARGE, out),
                path,
            },
            current,
            failed,
        }
    }

    /// Runs to the end: ordered when `routes` is given. An error stops the
    /// workers (through `failed`) and is returned.
    pub fn run(mut self, routes: Option<RouteInbox>) -> Result<(), StageError> {
        let result = match routes {
            Some(routes) => self.ordered(routes),
            None => self.unordered(),
        }
        .and_then(|()| self.sink.flush());
        if result.is_err() {
            self.failed.store(true, Ordering::SeqCst);
        }
        result
    }

    /// Gives an emptied buffer back to its worker.
    fn recycle(&self, lane: usize, mut buffer: LaneBuffer) {
        buffer.clear();
        let _ = self.lanes[lane].spare.push(buffer);
    }

    /// Each batch's bytes as they come; then each lane's last bytes.
    fn unordered(&mut self) -> Result<(), StageError> {
        let mut spins = 0u32;
        loop {
            let mut wrote = false;
            let mut all_finished = true;
            for index in 0..self.lanes.len() {
                // Read before popping: a lane seen finished has pushed all.
                let finished = self.lanes[index].finished.load(Ordering::SeqCst);
                while let Some(buffer) = self.lanes[index].written.pop() {
                    self.sink.write(&buffer.bytes)?;
                    self.recycle(index, buffer);
                    wrote = true;
                }
                all_finished &= finished;
            }
            if all_finished {
                return self.worker_failures();
            }
            if wrote {
                spins = 0;
            } else if time_to_sleep(&mut spins) {
                let lanes = &self.lanes;
                self.bell.wait(|| {
                    lanes.iter().any(|lane| !lane.written.is_empty())
                        || lanes
                            .iter()
                            .all(|lane| lane.finished.load(Ordering::SeqCst))
                });
            }
        }
    }

    /// Object by object in the split's order, then each lane's last bytes.
    fn ordered(&mut self, routes: RouteInbox) -> Result<(), StageError> {
        while let Some(round) = routes.next() {
            for route in &round {
                let mut left = route.count as usize;
                while left > 0 {
                    left -= self.write_from(route.lane as usize, left)?;
                }
            }
            routes.give_back(round);
        }
        // What the chains wrote as they finished, lane by lane.
        for index in 0..self.lanes.len() {
            if let Some((buffer, done)) = self.current[index].take() {
                let start = done.checked_sub(1).map_or(0, |i| buffer.ends[i]);
                self.sink.write(&buffer.bytes[start..])?;
                self.recycle(index, buffer);
            }
            loop {
                let finished = self.lanes[index].finished.load(Ordering::SeqCst);
                match self.lanes[index].written.pop() {
                    Some(buffer) => {
                        self.sink.write(&buffer.bytes)?;
                        self.recycle(index, buffer);
                    }
                    None if finished => break,
                    None => self.bell.wait(|| self.lanes[index].has_news()),
                }
            }
        }
        self.worker_failures()
    }

    /// Writes up to `want` objects of lane `lane`'s current batch (waiting
    /// for it when needed); returns how many.
    fn write_from(&mut self, lane: usize, want: usize) -> Result<usize, StageError> {
        if self.current[lane].is_none() {
            let buffer = self.next_batch(lane)?;
            self.current[lane] = Some((buffer, 0));
        }
        let (buffer, done) = self.current[lane].as_mut().expect("filled above");
        let take = want.min(buffer.ends.len() - *done);
        let start = done.checked_sub(1).map_or(0, |i| buffer.ends[i]);
        let end = buffer.ends[*done + take - 1];
        *done += take;
        let exhausted = *done == buffer.ends.len();
        self.sink.write(&buffer.bytes[start..end])?;
        if exhausted {
            let (buffer, _) = self.current[lane].take().expect("still there");
            self.recycle(lane, buffer);
        }
        Ok(take)
    }

    /// Lane `lane`'s next batch of bytes; an error when its worker stopped
    /// before writing it.
    fn next_batch(&self, lane: usize) -> Result<LaneBuffer, StageError> {
        let mut spins = 0u32;
        loop {
            if let Some(buffer) = self.lanes[lane].written.pop() {
                // A batch of no objects (a worker that finished) ends nothing here.
                if !buffer.ends.is_empty() {
                    return Ok(buffer);
                }
                continue;
            }
            if self.lanes[lane].finished.load(Ordering::SeqCst)
                && self.lanes[lane].written.is_empty()
            {
                let why = self.lanes[lane].failure();
                let why = why.unwrap_or_else(|| format!("worker {lane} ended early"));
                return Err(StageError::other(super::MODULE, why));
            }
            if !time_to_sleep(&mut spins) {
                continue;
            }
            // Merged in order, the split may be waiting for the merger: a
            // worker that sleeps on fewer batches than wake it must not
            // hold everything up.
            self.lanes[lane].wake_worker();
            self.bell.wait(|| self.lanes[lane].has_news());
        }
    }

    fn worker_failures(&self) -> Result<(), StageError> {
        match self.lanes.iter().find_map(|lane| lane.failure()) {
            Some(e) => Err(StageError::other(super::MODULE, e)),
            None => Ok(()),
        }
    }
}

/// The real output.
struct Sink {
    out: BufWriter<Box<dyn Write + Send>>,
    path: PathBuf,
}

/// Bytes written past the buffer, straight to the output (a whole batch).
const LARGE: usize = 64 * 1024;

impl Sink {
    fn write(&mut self, bytes: &[u8]) -> Result<(), StageError> {
        let result = if bytes.len() >= LARGE {
            // Not copied through the buffer: what it holds first, then these.
            self.out
                .flush()
                .and_then(|()| self.out.get_mut().write_all(bytes))
        } else {
            self.out.write_all(bytes)
        };
        result.map_err(|e| StageError::io(&self.path, e))
    }

    fn flush(&mut self) -> Result<(), StageError> {
        self.out.flush().map_err(|e| StageError::io(&self.path, e))
    }
}

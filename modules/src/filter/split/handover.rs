//! Handing batches over to the workers: the batch a lane fills is pushed
//! to its worker's queue once full (or, merging in order, once a lane has
//! been left without anything for a while: an empty one), the worker woken
//! once half its queue waits, and the next lane for standalone objects
//! chosen; an empty batch is taken back from the worker's free queue.

use super::batch::Batch;
use super::lanes::spin_then_yield;
use super::{By, Split, MODULE};
use dnsluice_core::StageError;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Duration;

impl Split {
    /// An empty batch for worker `index`, waiting for one to come back.
    pub(super) fn empty_batch(&mut self, index: usize) -> Result<Batch, StageError> {
        let lane = self.workers[index].lane.clone();
        let mut spins = 0u32;
        loop {
            if let Some(batch) = lane.free.pop() {
                return Ok(batch);
            }
            self.check_failures(index)?;
            if spin_then_yield(&mut spins) {
                // The merger may be waiting for bytes this thread's lane wrote.
                lane.merger.ring();
                std::thread::sleep(Duration::from_micros(20));
            }
        }
    }

    pub(super) fn check_failures(&mut self, index: usize) -> Result<(), StageError> {
        if let Some(e) = self.worker_error(index) {
            return Err(e);
        }
        if self.merger_failed.load(Ordering::SeqCst) {
            return Err(self.merger_error());
        }
        Ok(())
    }

    /// The error the merger stopped on (it has stopped: it said so), e.g. a
    /// reader of standard output that went away.
    pub(super) fn merger_error(&mut self) -> StageError {
        match self.merger.take().map(JoinHandle::join) {
            Some(Ok(Err(e))) => e,
            _ => StageError::other(MODULE, "the merged output failed"),
        }
    }

    /// Hands worker `index` its pending batch (the inline lane: what its
    /// chain wrote, to the merger). Merging in order, a lane not handed
    /// anything for `stale_after` batches gets an empty batch: it tells the
    /// merger that the lane has nothing before here.
    pub(super) fn hand_over(&mut self, index: usize) -> Result<(), StageError> {
        let through = self.input;
        // Merging in order, a lane that got nothing is handed an empty batch
        // once the merger may be waiting on it: once it has not been told
        // for a few batches (not at every hand-over: with many threads, most
        // lanes would be woken for nothing most of the time).
        let tell_idle = self.ordered && self.filled - self.told[index] >= self.stale_after;
        if let Some(inline) = self.inline.as_mut().filter(|_| index == 0) {
            if inline.pending() > 0 || tell_idle {
                self.told[0] = self.filled;
            }
            if !inline.hand_over(&self.merger_failed, through, tell_idle) {
                return Err(self.merger_error());
            }
            return Ok(());
        }
        let batch = match self.pending[index].take() {
            Some(batch) => batch,
            None if tell_idle => self.empty_batch(index)?,
            None => return Ok(()),
        };
        if batch.is_empty() && !tell_idle {
            self.pending[index] = Some(batch);
            return Ok(());
        }
        self.told[index] = self.filled;
        let mut batch = batch;
        batch.upto = through;
        let worker = &self.workers[index];
        // Never full: as many batches as room in the queue.
        let _ = worker.lane.full.push(batch);
        self.wake_if_due(index);
        Ok(())
    }

    /// Wakes worker `index` once [`Split::wake_at`] batches were handed to
    /// it while it slept (see [`SleepCount`]).
    fn wake_if_due(&mut self, index: usize) {
        let lane = &self.workers[index].lane;
        let parked = lane.parked.load(Ordering::SeqCst);
        if self.handed_while_parked[index].handed(parked, self.wake_at) {
            lane.wake_worker();
        }
    }

    /// A batch filled up: hands it over (ordered merging: every lane's).
    #[inline(never)]
    pub(super) fn batch_full(&mut self, index: usize) -> Result<(), StageError> {
        match self.ordered {
            false => self.hand_over(index)?,
            true => {
                self.filled += 1;
                self.hand_over_all()?
            }
        }
        // The batch standalone objects go to is full: the next worker's turn.
        if self.by != By::Client && index == self.next {
            self.next = self.next_lane()?;
        }
        Ok(())
    }

    /// The lane the next batch of standalone objects goes to: the next in
    /// turn; with an inline lane, the next worker whose queue is less than
    /// half full, and the splitting thread itself only when every worker is
    /// busy (it reads the input too: given an equal share, it would hold the
    /// workers back). A worker passed over as busy may have stopped on an
    /// error (its queue then never empties): that error, then, so that the
    /// run stops instead of reading on without it.
    pub(super) fn next_lane(&mut self) -> Result<usize, StageError> {
        let n = self.workers.len();
        if self.inline.is_none() {
            return Ok((self.next + 1) % n);
        }
        let next = self.next;
        for index in (1..=n).map(|step| (next + step) % n) {
            if index == 0 {
                continue;
            }
            let queue = &self.workers[index].lane.full;
            if queue.len() < queue.capacity() / 2 {
                return Ok(index);
            }
            self.check_failures(index)?;
        }
        Ok(0)
    }

    /// Hands every pending batch over.
    pub(super) fn hand_over_all(&mut self) -> Result<(), StageError> {
        for index in 0..self.workers.len() {
            self.hand_over(index)?;
        }
        Ok(())
    }
}

/// Batches handed to a worker since it was last seen awake: the split wakes
/// a sleeping worker once half its queue waits. Counted by the split, not
/// asked of the queue: the queue's length reads the line the worker writes
/// at every batch it takes (one more trip between the cores a batch),
/// whether it sleeps is written only when it goes to sleep or wakes.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct SleepCount(usize);

impl SleepCount {
    /// One more batch handed over, the worker `parked` or not as seen just
    /// after: true when it sleeps with `wake_at` batches handed over since
    /// it was last seen awake (the count then starts again).
    pub fn handed(&mut self, parked: bool, wake_at: usize) -> bool {
        if !parked {
            self.0 = 0;
            return false;
        }
        self.0 += 1;
        if self.0 < wake_at {
            return false;
        }
        self.0 = 0;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::SleepCount;

    #[test]
    fn a_sleeping_worker_is_woken_once_for_every_wake_at_batches() {
        let mut count = SleepCount::default();
        // Awake: never woken, however many batches.
        assert!((0..10).all(|_| !count.handed(false, 3)));
        // Asleep: the third batch wakes it, then the sixth.
        let woken: Vec<bool> = (0..7).map(|_| count.handed(true, 3)).collect();
        assert_eq!(woken, [false, false, true, false, false, true, false]);
        // Seen awake in between: the count starts again.
        assert!(!count.handed(false, 3));
        assert!(!count.handed(true, 3));
        assert!(!count.handed(true, 3));
        assert!(count.handed(true, 3));
        // A queue of two batches wakes at every one.
        let mut small = SleepCount::default();
        assert!((0..4).all(|_| small.handed(true, 1)));
    }
}

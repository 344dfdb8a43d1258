//! The input's thread as one of the split's lanes (`inline = true`, what
//! `threads = N` sets): it runs the first copy of the chain itself, on the
//! objects the split gives that lane, as they come. Its share is neither
//! copied nor handed across cores, and N copies need N - 1 threads more,
//! not N: on a machine with as many cores as copies, one thread fewer
//! competes for them.

use super::lanes::{hand_over, hand_over_finish, Lane};
use dnsluice_core::merge::{self, LaneHandle, MergeTarget};
use dnsluice_core::registry::DownstreamBuilder;
use dnsluice_core::{Object, Receiver, StageError, StageStats};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Lane 0, run on the input's thread.
pub(super) struct InlineLane {
    chain: Box<dyn Receiver>,
    /// Its lane of the threads' shared stream, when the output claimed one.
    merging: Option<LaneHandle>,
    lane: Arc<Lane>,
    /// Objects handed to the chain since the last hand-over.
    pending: usize,
}

impl InlineLane {
    /// Builds copy 0 of the chain on the calling thread (first: its output
    /// claims the shared stream, if it shares one, before any worker's).
    pub fn new(
        lane: Arc<Lane>,
        target: &Arc<MergeTarget>,
        build: &DownstreamBuilder,
    ) -> Result<InlineLane, StageError> {
        let handle = merge::enter(target.clone());
        let chain = build(0)?;
        Ok(InlineLane {
            chain,
            // Dropped when nothing is merged: the thread leaves the lane.
            merging: target.is_claimed().then_some(handle),
            lane,
            pending: 0,
        })
    }

    /// Hands `obj`, placed at `key` in the input, to the chain.
    pub fn receive(&mut self, obj: &mut Object<'_>, key: u64) -> Result<(), StageError> {
        let result = self.chain.receive(obj);
        if let Some(handle) = &self.merging {
            handle.end_object(key);
        }
        self.pending += 1;
        result
    }

    /// Objects since the last hand-over.
    pub fn pending(&self) -> usize {
        self.pending
    }

    /// Hands what the chain wrote since the last time to the merger, the
    /// split having seen `through` objects (waiting while its queue is full);
    /// false when the merger has stopped. Nothing new, it hands over nothing
    /// unless `always` (merging in order, the merger must learn how far the
    /// lane has got).
    pub fn hand_over(&mut self, merger_failed: &AtomicBool, through: u64, always: bool) -> bool {
        if self.pending == 0 && !always {
            return true;
        }
        self.lane
            .handled
            .fetch_add(self.pending as u64, Ordering::Relaxed);
        self.pending = 0;
        match &self.merging {
            Some(handle) => hand_over(&self.lane, merger_failed, handle, through),
            None => true,
        }
    }

    /// Finishes the chain (told the input's last capture time first, when
    /// known) and hands its last bytes over.
    pub fn finish(
        &mut self,
        input_end_ns: i64,
        merger_failed: &AtomicBool,
    ) -> Result<(), StageError> {
        if input_end_ns != i64::MIN {
            self.chain.clock_at_end(input_end_ns);
        }
        let result = self.chain.finish();
        if let Some(handle) = &self.merging {
            hand_over_finish(&self.lane, merger_failed, handle);
        }
        self.lane.finish();
        result
    }

    /// The chain's statistics.
    pub fn stats(&self) -> Vec<StageStats> {
        let mut out = Vec::new();
        self.chain.stats(&mut out);
        out
    }
}

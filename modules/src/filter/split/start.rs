//! Starting the split's worker threads: each enters the shared stream's
//! lane, builds its copy of the chain in its own thread and says whether
//! that worked ([`Started::spawn`]); then it works batches the split hands
//! it (`lanes.rs`) or reads parts of the capture itself (`parts.rs`).

use super::doorbell::Doorbell;
use super::lanes::{self, Lane, WorkerSide};
use super::parts::{self, PartsReading, PartsThread};
use super::MODULE;
use dnsluice_core::merge::{self, MergeTarget};
use dnsluice_core::registry::DownstreamBuilder;
use dnsluice_core::{Receiver, StageError, StageStats};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// A worker thread's handle: its chain's statistics when it ends.
pub(super) type Handle = JoinHandle<Vec<StageStats>>;

/// What starting worker thread `index` takes.
pub(super) struct Started<'a> {
    pub index: usize,
    /// The stream the threads share, when the output claims it.
    pub target: &'a Arc<MergeTarget>,
    pub build: &'a DownstreamBuilder,
    /// Where the thread says whether its chain was built.
    pub ready: &'a Sender<Result<(), String>>,
    /// The merger's doorbell.
    pub bell: &'a Arc<Doorbell>,
    pub merger_failed: &'a Arc<AtomicBool>,
    /// How long a worker sleeps when idle, unless woken.
    pub idle_sleep: Duration,
}

impl Started<'_> {
    /// Starts a worker of the batches the split hands it; its lane is
    /// added to the merger's `lanes`.
    pub fn worker(
        &self,
        batches: usize,
        lanes: &mut Vec<Arc<Lane>>,
    ) -> Result<(Arc<Lane>, Handle), StageError> {
        let lane = Arc::new(Lane::new(self.index, batches, self.bell.clone()));
        lanes.push(lane.clone());
        let side = WorkerSide {
            lane: lane.clone(),
            merger_failed: self.merger_failed.clone(),
            idle_sleep: self.idle_sleep,
        };
        let failed = lane.clone();
        let handle = self.spawn(
            move || failed.finish(),
            move |merging, downstream| lanes::work(&side, merging, downstream),
        )?;
        Ok((lane, handle))
    }

    /// Starts one of `threads` readers of the capture's parts; its two
    /// lanes (its parts' datagrams, its flows) are added to the merger's
    /// `lanes`, and the first, which counts the thread's work, returned.
    pub fn reader(
        &self,
        reading: &Arc<PartsReading>,
        threads: usize,
        lanes: &mut Vec<Arc<Lane>>,
    ) -> Result<(Arc<Lane>, Handle), StageError> {
        let room = parts::lane_room(threads);
        let local = Arc::new(Lane::of_reader(2 * self.index, room, self.bell.clone()));
        let flows = Arc::new(Lane::of_reader(2 * self.index + 1, room, self.bell.clone()));
        lanes.extend([local.clone(), flows.clone()]);
        let thread = PartsThread {
            index: self.index,
            reading: reading.clone(),
            local: local.clone(),
            flows: flows.clone(),
            merger_failed: self.merger_failed.clone(),
        };
        let lanes_of_thread = [local.clone(), flows];
        let handle = self.spawn(
            move || lanes_of_thread.iter().for_each(|lane| lane.finish()),
            move |merging, downstream| parts::work(&thread, merging, downstream),
        )?;
        Ok((local, handle))
    }

    /// Starts the thread: it enters the shared stream's lane, builds its
    /// chain, says whether that worked, and `run`s it (given its lane of
    /// the stream, when the output shares one); a chain that could not be
    /// built says so and calls `failed`.
    fn spawn(
        &self,
        failed: impl FnOnce() + Send + 'static,
        run: impl FnOnce(Option<&merge::LaneHandle>, Box<dyn Receiver>) -> Vec<StageStats>
            + Send
            + 'static,
    ) -> Result<Handle, StageError> {
        let (index, target, build) = (self.index, self.target.clone(), self.build.clone());
        let ready = self.ready.clone();
        dnsluice_core::thread::named(format!("split-{index}"))
            .spawn(move || {
                let _cpu = crate::cpu::note_at_end();
                let lane_handle = merge::enter(target.clone());
                match build(index) {
                    Ok(downstream) => {
                        // Asked before saying ready: the split then takes
                        // the shared stream for its merger.
                        let merging = target.is_claimed();
                        let _ = ready.send(Ok(()));
                        // Said: the split's wait ends when every thread
                        // has said or is gone (a build that panicked).
                        drop(ready);
                        run(merging.then_some(&lane_handle), downstream)
                    }
                    Err(e) => {
                        let _ = ready.send(Err(e.to_string()));
                        failed();
                        Vec::new()
                    }
                }
            })
            .map_err(|e| StageError::other(MODULE, format!("cannot start a thread: {e}")))
    }
}

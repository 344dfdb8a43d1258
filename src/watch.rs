//! Runs a pipeline while the progress bar and the interval statistics
//! watch it: a [`Ticker`] raises a flag at their periods, and the driver,
//! between two objects, hands both a snapshot of every stage's statistics
//! (see [`dnsluice_core::Watch`]). A metrics endpoint's scrape raises the
//! same flag and gets the snapshot ([`crate::metrics::board`]). Without any
//! of them, the chain runs unwatched.

use crate::intervals::Recorder;
use crate::metrics::board::Board;
use crate::progress::{Position, Progress, REFRESH};
use crate::ticker::Ticker;
use dnsluice_core::pipeline::Chain;
use dnsluice_core::{StageError, StageStats, Watch};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What the progress bar shows of a chain's statistics.
pub type Locate<'a> = &'a dyn Fn(&[StageStats]) -> Position;

/// What watches a run: the progress bar, the interval statistics, the
/// metrics endpoint.
pub struct Watchers<'a> {
    /// The progress bar (maybe disabled).
    pub progress: &'a mut Progress,
    /// The interval statistics, when asked for.
    pub recorder: &'a mut Option<Recorder>,
    /// The metrics endpoint's snapshot, when one serves.
    pub metrics: Option<&'a Board>,
}

/// Runs `chain` to its end, updating the progress bar, feeding the
/// recorder and publishing snapshots for the metrics endpoint.
pub fn run_watched(
    chain: &mut Chain,
    watchers: Watchers<'_>,
    locate: Locate<'_>,
) -> Result<u64, StageError> {
    let Watchers {
        progress,
        recorder,
        metrics,
    } = watchers;
    if !progress.enabled() && recorder.is_none() && metrics.is_none() {
        return chain.run(None);
    }
    // Raised at once, so the bar has its total from the first object on.
    let due = metrics.map_or_else(|| Arc::new(AtomicBool::new(true)), Board::due);
    due.store(true, Ordering::Relaxed);
    if let Some(board) = metrics {
        board.run_started();
    }
    let raise = due.clone();
    let _ticker = Ticker::spawn(
        &[
            progress.enabled().then_some(REFRESH),
            recorder.as_ref().map(Recorder::period),
        ],
        move || raise.store(true, Ordering::Relaxed),
    );
    let mut call = |_moved: u64, snapshot: &dyn Fn() -> Vec<StageStats>| {
        let stats = snapshot();
        progress.update(&locate(&stats));
        match (metrics, recorder.as_mut()) {
            (Some(board), Some(recorder)) => {
                board.publish(stats.clone());
                recorder.observe(stats);
            }
            // The snapshot itself, not a copy (a replay's latencies are
            // thousands of buckets, up to ten snapshots a second).
            (Some(board), None) => board.publish(stats),
            (None, Some(recorder)) => recorder.observe(stats),
            (None, None) => {}
        }
    };
    chain.run(Some(Watch {
        due: &due,
        call: &mut call,
    }))
}

/// The first stage's reading: bytes read of the total, its records.
pub fn input_position(stats: &[StageStats], count: u64, unit: &'static str) -> Position {
    let reading = stats.first().and_then(|s| s.reading).unwrap_or_default();
    Position {
        done: reading.offset,
        total: reading.total,
        count,
        unit,
    }
}

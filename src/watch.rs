//! Runs a pipeline while the progress bar and the interval statistics
//! watch it: a [`Ticker`] raises a flag at their periods, and the driver,
//! between two objects, hands both a snapshot of every stage's statistics
//! (see [`dnsluice_core::Watch`]). Without either, the chain runs unwatched.

use crate::intervals::Recorder;
use crate::progress::{Position, Progress, REFRESH};
use crate::ticker::Ticker;
use dnsluice_core::pipeline::Chain;
use dnsluice_core::{StageError, StageStats, Watch};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What the progress bar shows of a chain's statistics.
pub type Locate<'a> = &'a dyn Fn(&[StageStats]) -> Position;

/// Runs `chain` to its end, updating `progress` and feeding `recorder`.
pub fn run_watched(
    chain: &mut Chain,
    progress: &mut Progress,
    recorder: &mut Option<Recorder>,
    locate: Locate<'_>,
) -> Result<u64, StageError> {
    if !progress.enabled() && recorder.is_none() {
        return chain.run(None);
    }
    // Raised at once, so the bar has its total from the first object on.
    let due = Arc::new(AtomicBool::new(true));
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
        if let Some(recorder) = recorder.as_mut() {
            recorder.observe(stats);
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

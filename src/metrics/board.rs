//! What the metrics endpoint serves: the latest snapshot of every stage's
//! statistics, put there by the chain's driver and read by the endpoint's
//! thread. The driver never waits on a scrape: it takes the lock only to
//! swap in a new snapshot (an `Arc`), and a scrape holds it only to clone
//! the `Arc`s; rendering happens outside it, on the endpoint's thread.
//!
//! A scrape asks for a fresh snapshot (it raises the driver's watch flag)
//! and waits for it at most [`FRESH_WAIT`]; a chain that does not come to
//! the watch in that time (blocked on a full window, waiting for input) is
//! served the last snapshot. Nothing is snapshotted while nobody scrapes.

use dnsluice_core::sync::lock;
use dnsluice_core::StageStats;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a scrape waits for the driver's fresh snapshot.
pub const FRESH_WAIT: Duration = Duration::from_millis(100);

/// How often a lingering endpoint looks whether a signal asked it to end.
pub const LINGER_LOOK: Duration = Duration::from_millis(100);

/// The shared snapshot; see the module docs.
#[derive(Default)]
pub struct Board {
    state: Mutex<State>,
    changed: Condvar,
    due: Arc<AtomicBool>,
}

#[derive(Default)]
struct State {
    /// The finished runs of a worker that runs a chain per work item, added up.
    done: Arc<Vec<StageStats>>,
    /// The running chain's latest snapshot.
    live: Arc<Vec<StageStats>>,
    /// Whether a chain is running (a scrape then asks it for a snapshot).
    running: bool,
    /// Counts the snapshots published.
    generation: u64,
    /// No more runs: the values are the final ones.
    finished: bool,
    /// A scrape has taken the final values.
    final_served: bool,
}

impl Board {
    /// The flag a scrape raises to ask the driver for a snapshot: the
    /// driver's watch flag ([`dnsluice_core::Watch::due`]).
    pub fn due(&self) -> Arc<AtomicBool> {
        self.due.clone()
    }

    /// A chain starts.
    pub fn run_started(&self) {
        lock(&self.state).running = true;
    }

    /// The driver's snapshot of the running chain.
    pub fn publish(&self, live: Vec<StageStats>) {
        let live = Arc::new(live);
        let mut state = lock(&self.state);
        state.live = live;
        state.generation += 1;
        drop(state);
        self.changed.notify_all();
    }

    /// A chain has ended with `stats`: added to the finished runs' totals.
    pub fn run_ended(&self, stats: &[StageStats]) {
        let mut state = lock(&self.state);
        let mut done = state.done.as_ref().clone();
        add_stages(&mut done, stats);
        state.done = Arc::new(done);
        state.live = Arc::new(Vec::new());
        state.running = false;
        state.generation += 1;
        drop(state);
        self.changed.notify_all();
    }

    /// No more runs: what is served now is final.
    pub fn finish(&self) {
        lock(&self.state).finished = true;
        self.changed.notify_all();
    }

    /// What a scrape serves: every stage's statistics (finished runs and
    /// the running one added up, stage by stage; the latest snapshot as it
    /// is, not a copy, when only one of them has any) and whether they are
    /// final.
    pub fn scrape(&self) -> (Arc<Vec<StageStats>>, bool) {
        let mut state = lock(&self.state);
        if state.running && !state.finished {
            let seen = state.generation;
            self.due.store(true, Ordering::Relaxed);
            let until = Instant::now() + FRESH_WAIT;
            while state.generation == seen && !state.finished {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                state = self
                    .changed
                    .wait_timeout(state, left)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
        let (done, live, finished) = (state.done.clone(), state.live.clone(), state.finished);
        drop(state);
        if done.is_empty() {
            return (live, finished);
        }
        if live.is_empty() {
            return (done, finished);
        }
        let mut stages = done.as_ref().clone();
        add_stages(&mut stages, &live);
        (Arc::new(stages), finished)
    }

    /// A scrape's answer has been sent; `finished`: it held the final
    /// values (so a lingering process may end: not before, or the answer
    /// would die with it).
    pub fn served(&self, finished: bool) {
        if finished {
            lock(&self.state).final_served = true;
            self.changed.notify_all();
        }
    }

    /// Waits until a scrape has taken the final values, at most `linger`,
    /// or until `stopped` says to stop waiting (a signal: looked at every
    /// [`LINGER_LOOK`], as a signal handler cannot wake a condition
    /// variable). Whether a scrape took them.
    pub fn wait_final_scrape(&self, linger: Duration, stopped: &dyn Fn() -> bool) -> bool {
        let until = Instant::now() + linger;
        let mut state = lock(&self.state);
        while !state.final_served {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || stopped() {
                return false;
            }
            state = self
                .changed
                .wait_timeout(state, left.min(LINGER_LOOK))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        true
    }
}

/// Adds `more` (a later run's, or the running one's) to `sum` stage by
/// stage (by position, when the modules agree; a stage with no counterpart
/// is appended), as [`StageStats::absorb_later`] does: gauges are not
/// added, `more`'s values replace `sum`'s (50 runs of a replay had 50 times
/// its window's cap).
fn add_stages(sum: &mut Vec<StageStats>, more: &[StageStats]) {
    for (i, stage) in more.iter().enumerate() {
        match sum.get_mut(i).filter(|s| s.module == stage.module) {
            Some(s) => s.absorb_later(stage.clone()),
            None => sum.push(stage.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauges_are_the_latest_runs_not_a_sum() {
        let run = |cap: u64, sent: u64| {
            let mut s = StageStats::new("output.dnscli");
            s.counters.insert("inflight_cap".into(), cap);
            s.counters.insert("sent".into(), sent);
            s.breakdowns
                .entry("nameserver_rate".into())
                .or_default()
                .insert("127.0.0.1:53".into(), cap);
            s
        };
        let mut sum = vec![run(100, 7)];
        add_stages(&mut sum, &[run(100, 5)]);
        assert_eq!(sum[0].counters["inflight_cap"], 100);
        assert_eq!(sum[0].counters["sent"], 12);
        assert_eq!(sum[0].breakdowns["nameserver_rate"]["127.0.0.1:53"], 100);
        // A gauge the later run does not have (zero: left out) is gone.
        let mut later = run(0, 1);
        later.counters.remove("inflight_cap");
        add_stages(&mut sum, &[later]);
        assert!(!sum[0].counters.contains_key("inflight_cap"));
    }

    fn stage(input: u64) -> StageStats {
        let mut s = StageStats::new("output.null");
        s.input = input;
        s
    }

    #[test]
    fn runs_add_up_and_the_final_scrape_is_seen() {
        let board = Arc::new(Board::default());
        board.run_started();
        board.publish(vec![stage(3)]);
        board.run_ended(&[stage(5)]);
        board.run_started();
        board.publish(vec![stage(2)]);
        // A scrape asks for a fresh snapshot: published by another thread.
        let driver = board.clone();
        let due = board.due();
        let t = std::thread::spawn(move || {
            while !due.swap(false, Ordering::Relaxed) {
                std::thread::yield_now();
            }
            driver.publish(vec![stage(4)]);
        });
        assert_eq!(board.scrape().0[0].input, 9);
        t.join().unwrap();
        assert!(!board.wait_final_scrape(Duration::from_millis(10), &|| false));
        board.run_ended(&[stage(6)]);
        board.finish();
        let (stages, finished) = board.scrape();
        assert_eq!((stages[0].input, finished), (11, true));
        assert!(
            !board.wait_final_scrape(Duration::ZERO, &|| false),
            "not before it is sent"
        );
        board.served(true);
        assert!(board.wait_final_scrape(Duration::ZERO, &|| false));
    }
}

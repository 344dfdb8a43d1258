//! Whether a compressed input's decoder gets a thread of its own.
//!
//! Alone, a run reads its records on one thread while its decoder fills
//! chunks on another, so the parse hides behind the decompression. When the
//! process runs several chains at once (`run --files ... --jobs N`) the jobs
//! already use the cores, and a decoder thread per job only adds hand-overs
//! and wake-ups: on 2 cores, eight zstd captures on two jobs took 0.793 s
//! with a decoder thread each and 0.736 s with the decoding on the jobs' own
//! threads (`docs/benchmarks.md`, "A capture set several files at once").
//! So a decoder gets its own thread when every run going at once can have
//! two cores, its reading thread's and its decoder's.

use std::sync::atomic::{AtomicUsize, Ordering};

/// How many runs of a chain the process has going at once (1 unless a
/// [`RunsAtOnce`] says more).
static RUNS_AT_ONCE: AtomicUsize = AtomicUsize::new(1);

/// Says, for as long as it is kept, that `n` runs share the process's cores
/// (what `run --files ... --jobs N` sets for its runs); dropped, it puts
/// back what was said before.
#[must_use = "the count holds only while this is kept"]
pub struct RunsAtOnce {
    before: usize,
}

impl RunsAtOnce {
    /// `n` runs at once (at least 1).
    pub fn set(n: usize) -> Self {
        let before = RUNS_AT_ONCE.swap(n.max(1), Ordering::Relaxed);
        RunsAtOnce { before }
    }
}

impl Drop for RunsAtOnce {
    fn drop(&mut self) {
        RUNS_AT_ONCE.store(self.before, Ordering::Relaxed);
    }
}

/// Should a decoder opened now run on a thread of its own? Yes when the
/// machine has two cores for each run going at once.
pub fn decoder_gets_a_thread() -> bool {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    two_cores_each(cores, RUNS_AT_ONCE.load(Ordering::Relaxed))
}

/// `cores` are enough for `runs` runs of two threads each.
fn two_cores_each(cores: usize, runs: usize) -> bool {
    cores >= 2 * runs.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decoder_has_a_thread_when_each_run_can_have_two_cores() {
        // (cores, runs at once, a thread each?)
        let cases = [
            (1, 1, false),
            (2, 1, true),
            (2, 2, false),
            (3, 2, false),
            (4, 2, true),
            (16, 8, true),
            (16, 9, false),
            (16, 16, false),
            (2, 0, true),
        ];
        for (cores, runs, thread) in cases {
            assert_eq!(
                two_cores_each(cores, runs),
                thread,
                "{cores} cores, {runs} runs"
            );
        }
    }

    #[test]
    fn the_count_holds_while_kept_and_the_one_before_comes_back() {
        let outer = RunsAtOnce::set(3);
        assert_eq!(RUNS_AT_ONCE.load(Ordering::Relaxed), 3);
        {
            let _inner = RunsAtOnce::set(0);
            assert_eq!(RUNS_AT_ONCE.load(Ordering::Relaxed), 1);
        }
        assert_eq!(RUNS_AT_ONCE.load(Ordering::Relaxed), 3);
        drop(outer);
        assert_eq!(RUNS_AT_ONCE.load(Ordering::Relaxed), 1);
    }
}

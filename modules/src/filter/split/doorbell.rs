//! A [`Doorbell`]: how the merger sleeps until a worker has bytes for it.
//!
//! Waiting by spinning, yielding and short sleeps (what the merger did
//! before) costs a thread that has nothing to do a system call every few
//! microseconds; on a machine with as many cores as workers, each of those
//! wake-ups takes a core from a worker. With a doorbell the merger sleeps
//! until a worker rings it: once half its queue of written batches waits,
//! when the worker (or the split) is about to wait itself, and when it has
//! finished (see `lanes.rs`); a ring costs a system call only when the
//! merger sleeps. A merger that waits for one lane's bytes (merging in
//! order) says which ([`Doorbell::wait_for`]), and a worker's routine ring
//! ([`Doorbell::ring_for`]) wakes it only for its own lane: a wake-up that
//! finds nothing it can use takes a core from a worker for nothing (on the
//! 5 M-packet capture, most of the merger's 6,000 wake-ups were such).

use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::thread::Thread;
use std::time::Duration;

/// One sleeping thread and whoever wakes it; see the module docs.
pub(super) struct Doorbell {
    /// The sleeper is asleep or about to be.
    sleeping: AtomicBool,
    /// The sleeper's thread, once it has waited.
    sleeper: OnceLock<Thread>,
    /// How long it sleeps at most (a bound, should a ring ever be missed;
    /// none should, see [`Doorbell::wait`]).
    longest_sleep: Duration,
    /// The lane the sleeper waits for, or [`ANY_LANE`].
    wanted: AtomicUsize,
}

/// [`Doorbell::wanted`] of a sleeper that any lane's bytes wake.
const ANY_LANE: usize = usize::MAX;

impl Default for Doorbell {
    fn default() -> Doorbell {
        Doorbell::with_longest_sleep(Duration::from_millis(1))
    }
}

impl Doorbell {
    /// A doorbell whose sleeper sleeps `longest_sleep` at most.
    pub fn with_longest_sleep(longest_sleep: Duration) -> Doorbell {
        Doorbell {
            sleeping: AtomicBool::new(false),
            sleeper: OnceLock::new(),
            longest_sleep,
            wanted: AtomicUsize::new(ANY_LANE),
        }
    }

    /// Wakes the sleeper if it sleeps. Call it after making what it waits
    /// for visible (a push, a flag).
    pub fn ring(&self) {
        self.ring_for(ANY_LANE);
    }

    /// Wakes the sleeper if it sleeps waiting for lane `lane` or for any
    /// lane. Call it after making that lane's bytes visible.
    pub fn ring_for(&self, lane: usize) {
        // Orders the caller's push before the look at `sleeping`: with the
        // fence in `wait`, either the sleeper sees the push or we see it asleep.
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) {
            let wanted = self.wanted.load(Ordering::Relaxed);
            if lane == ANY_LANE || wanted == ANY_LANE || wanted == lane {
                if let Some(thread) = self.sleeper.get() {
                    thread.unpark();
                }
            }
        }
    }

    /// Sleeps on the calling thread until rung, unless `ready` already
    /// holds once the sleeper has said it sleeps (a ring after that point
    /// wakes it, or makes its sleep return at once).
    pub fn wait(&self, ready: impl Fn() -> bool) {
        self.wait_for(ANY_LANE, ready);
    }

    /// As [`Doorbell::wait`], for a sleeper that only lane `lane`'s bytes
    /// (or a ring for every lane) let go on.
    pub fn wait_for(&self, lane: usize, ready: impl Fn() -> bool) {
        let _ = self.sleeper.get_or_init(std::thread::current);
        self.wanted.store(lane, Ordering::Relaxed);
        self.sleeping.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if !ready() {
            std::thread::park_timeout(self.longest_sleep);
        }
        self.sleeping.store(false, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;
    use std::time::Instant;

    /// A sleeper waiting for each value a ringer sets in turn is woken by
    /// the ring every time: with a longest sleep of 2 s, no wait lasts
    /// anywhere near it (a bell that did not wake would make a wait last
    /// the whole 2 s; a woken one lasts the ringer's 50 µs pause).
    #[test]
    fn a_ring_wakes_the_sleeper_every_time() {
        let bell = Arc::new(Doorbell::with_longest_sleep(Duration::from_secs(2)));
        let value = Arc::new(AtomicU64::new(0));
        let seen = Arc::new(AtomicU64::new(0));
        let rounds = 50u64;
        let ringer = {
            let (bell, value, seen) = (bell.clone(), value.clone(), seen.clone());
            std::thread::spawn(move || {
                for next in 1..=rounds {
                    // The sleeper has seen the last value and goes to sleep.
                    while seen.load(Ordering::SeqCst) != next - 1 {
                        std::hint::spin_loop();
                    }
                    std::thread::sleep(Duration::from_micros(50));
                    value.store(next, Ordering::SeqCst);
                    bell.ring();
                }
            })
        };
        let mut longest = Duration::ZERO;
        for round in 1..=rounds {
            let start = Instant::now();
            while value.load(Ordering::SeqCst) < round {
                bell.wait(|| value.load(Ordering::SeqCst) >= round);
            }
            longest = longest.max(start.elapsed());
            seen.store(round, Ordering::SeqCst);
        }
        ringer.join().unwrap();
        assert!(
            longest < Duration::from_secs(1),
            "a wait lasted {longest:?}: the ring did not wake the sleeper"
        );
    }

    /// A sleeper waiting for lane 1 sleeps through a ring for lane 0 (what
    /// it waits for is there, but the ring is not for it) and wakes at the
    /// ring for lane 1; a ring for every lane wakes any sleeper.
    #[test]
    fn a_ring_for_another_lane_lets_the_sleeper_sleep() {
        for last_ring in [Some(1), None] {
            let bell = Arc::new(Doorbell::with_longest_sleep(Duration::from_secs(2)));
            let ready = Arc::new(AtomicBool::new(false));
            let ringer = {
                let (bell, ready) = (bell.clone(), ready.clone());
                std::thread::spawn(move || {
                    while !bell.sleeping.load(Ordering::SeqCst) {
                        std::hint::spin_loop();
                    }
                    std::thread::sleep(Duration::from_millis(20));
                    ready.store(true, Ordering::SeqCst);
                    bell.ring_for(0);
                    std::thread::sleep(Duration::from_millis(200));
                    match last_ring {
                        Some(lane) => bell.ring_for(lane),
                        None => bell.ring(),
                    }
                })
            };
            let start = Instant::now();
            bell.wait_for(1, || ready.load(Ordering::SeqCst));
            let slept = start.elapsed();
            ringer.join().unwrap();
            assert!(
                slept >= Duration::from_millis(200) && slept < Duration::from_secs(1),
                "slept {slept:?}: woken by the ring for lane 0, or not by {last_ring:?}"
            );
        }
    }
}

//! The window: at most so many queries outstanding. The sender waits on a
//! condition variable when it is full, and the receiver wakes it only when
//! it said it is waiting and enough room opened.
//!
//! A window may grow, from where it starts up to its cap, doubling each
//! time the sender finds it full (see `Core::wait_for_room`): a replay paced
//! at R queries a second to a server T away needs R × T in flight, which no
//! fixed default fits from loopback to the other side of the world.

use dnsluice_core::sync::lock;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

pub(super) struct Window {
    /// The limit now.
    max: AtomicUsize,
    /// The most it may grow to (its start when it does not grow).
    cap: usize,
    /// Times the sender found it full at its cap.
    bound: AtomicU64,
    inflight: AtomicUsize,
    sender_waiting: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Window {
    /// A window of `start`, growing up to `cap` (no growth when they are equal).
    pub fn new(start: usize, cap: usize) -> Self {
        Window {
            max: AtomicUsize::new(start.min(cap).max(1)),
            cap: cap.max(1),
            bound: AtomicU64::new(0),
            inflight: AtomicUsize::new(0),
            sender_waiting: AtomicBool::new(false),
            lock: Mutex::new(()),
            cv: Condvar::new(),
        }
    }

    /// Queries outstanding.
    pub fn count(&self) -> usize {
        self.inflight.load(Ordering::SeqCst)
    }

    /// The limit now.
    pub fn max(&self) -> usize {
        self.max.load(Ordering::SeqCst)
    }

    /// The most it may grow to.
    pub fn cap(&self) -> usize {
        self.cap
    }

    pub fn is_full(&self) -> bool {
        self.count() >= self.max()
    }

    /// Whether the limit is below its cap.
    pub fn may_grow(&self) -> bool {
        self.max() < self.cap
    }

    /// Doubles the limit, up to the cap; false at the cap.
    pub fn grow(&self) -> bool {
        let max = self.max();
        if max >= self.cap {
            self.bound.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        self.max.store((2 * max).min(self.cap), Ordering::SeqCst);
        true
    }

    /// Times the sender found the window full at its cap.
    pub fn times_bound(&self) -> u64 {
        self.bound.load(Ordering::Relaxed)
    }

    /// Where a full window reopens: waking the sender for every answer would
    /// cost a context switch per query, so it waits until an eighth of the
    /// window (at most 64 queries) is free.
    pub fn low_water(&self) -> usize {
        let max = self.max();
        max - (max / 8).clamp(1, 64)
    }

    /// One more query outstanding.
    pub fn enter(&self) {
        self.inflight.fetch_add(1, Ordering::SeqCst);
    }

    /// `n` queries left the window; wakes the sender if there is room now.
    pub fn release(&self, n: usize) {
        if n > 0 {
            self.inflight.fetch_sub(n, Ordering::SeqCst);
            self.wake_sender(false);
        }
    }

    /// Wakes the sender if it waits and there is room (or, with `force`,
    /// something else for it to do).
    pub fn wake_sender(&self, force: bool) {
        if self.sender_waiting.load(Ordering::SeqCst) && (force || self.count() <= self.low_water())
        {
            let _guard = lock(&self.lock);
            self.cv.notify_one();
        }
    }

    /// The sender's wait: runs `between` (sending retries), then returns if
    /// `ready(outstanding)`, else sleeps until woken (or `nap`, which only
    /// guards against a lost wake-up: the receiver notifies under the lock).
    pub fn wait_until(&self, ready: impl Fn(usize) -> bool, nap: Duration, between: impl Fn()) {
        loop {
            between();
            let guard = lock(&self.lock);
            self.sender_waiting.store(true, Ordering::SeqCst);
            if ready(self.count()) {
                self.sender_waiting.store(false, Ordering::SeqCst);
                return;
            }
            let _ = self.cv.wait_timeout(guard, nap);
            self.sender_waiting.store(false, Ordering::SeqCst);
        }
    }
}

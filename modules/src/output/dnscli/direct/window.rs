//! The window: at most `inflight` queries outstanding. The sender waits on a
//! condition variable when it is full, and the receiver wakes it only when
//! it said it is waiting and enough room opened.

use crate::sync::lock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

pub(super) struct Window {
    max: usize,
    inflight: AtomicUsize,
    sender_waiting: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Window {
    pub fn new(max: usize) -> Self {
        Window {
            max,
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

    pub fn is_full(&self) -> bool {
        self.count() >= self.max
    }

    /// Where a full window reopens: waking the sender for every answer would
    /// cost a context switch per query, so it waits until an eighth of the
    /// window (at most 64 queries) is free.
    pub fn low_water(&self) -> usize {
        self.max - (self.max / 8).clamp(1, 64)
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

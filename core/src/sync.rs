//! The one lock helper of the workspace's threads.

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, taking the data of a lock poisoned by a panic elsewhere: every
/// update under these locks is complete before the lock is released, so the
/// data is consistent even then.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

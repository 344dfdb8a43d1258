//! The one poison-tolerant lock helper of the workspace: [`lock`], [`read`]
//! and [`write`] take a lock and, when a thread panicked while holding it,
//! the data anyway. Every lock they are used on is updated in whole steps
//! (an insert, a removal, a counter, a note), so a panic elsewhere never
//! leaves the data half-changed, and the rest of the run goes on (and can
//! still report what it counted) instead of panicking in turn.

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Locks `mutex`, taking its data even when a panicking holder poisoned it.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Takes `lock` for reading, even when a panicking writer poisoned it.
pub fn read<T: ?Sized>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Takes `lock` for writing, even when a panicking holder poisoned it.
pub fn write<T: ?Sized>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_poisoned_lock_still_gives_its_data() {
        let mutex = Arc::new(Mutex::new(1));
        let rwlock = Arc::new(RwLock::new(2));
        let (m, r) = (mutex.clone(), rwlock.clone());
        let _ = std::thread::spawn(move || {
            let _held = (m.lock().unwrap(), r.write().unwrap());
            panic!("poisons both locks");
        })
        .join();
        assert!(mutex.is_poisoned() && rwlock.is_poisoned());
        *lock(&mutex) += 1;
        *write(&rwlock) += 1;
        assert_eq!((*lock(&mutex), *read(&rwlock)), (2, 3));
    }
}

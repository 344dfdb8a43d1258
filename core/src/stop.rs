//! A request to stop the running chains early (SIGINT, SIGTERM): the
//! drivers ([`crate::drive`]) look at it before each object and, once it is
//! made, stop pulling and finish the chain as at the end of the input, so
//! every output writes what it holds (a Parquet file its footer, a pcap its
//! last records). The binary's signal handler makes the request; it is one
//! relaxed atomic load per object.

use std::sync::atomic::{AtomicI32, Ordering};

/// The signal that asked to stop (0: none).
static STOP: AtomicI32 = AtomicI32::new(0);

/// Asks every running driver to stop after its current object; `signal`
/// is the signal that asked (async-signal-safe: one atomic store).
pub fn request(signal: i32) {
    STOP.store(signal.max(1), Ordering::Relaxed);
}

/// What [`abandon`] leaves: a stop no signal asked for.
const ABANDONED: i32 = -1;

/// Asks every running driver to stop, as [`request`] does, but for no
/// signal: the program has failed, and what else runs is abandoned (the
/// other runs of a file set once one failed). A signal that came first
/// stays the one said.
pub fn abandon() {
    let _ = STOP.compare_exchange(0, ABANDONED, Ordering::Relaxed, Ordering::Relaxed);
}

/// Whether a stop was asked for: the signal that asked, or -1 ([`abandon`]).
#[inline(always)]
pub fn requested() -> Option<i32> {
    match STOP.load(Ordering::Relaxed) {
        0 => None,
        signal => Some(signal),
    }
}

/// The signal that asked to stop, when one did (not [`abandon`]).
pub fn signal() -> Option<i32> {
    requested().filter(|signal| *signal > 0)
}

/// Forgets a signal that came after the run it would have stopped was
/// over (a lingering metrics endpoint's wait, which it ended instead): the
/// exit code is then the run's own.
pub fn forget_signal() {
    let _ = STOP.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |signal| {
        (signal > 0).then_some(0)
    });
}

//! The one tokio runtime every NATS connection of the process runs on.
//!
//! Stages are synchronous (`produce`, `receive`); they call into their
//! connection with [`block_on`]. One runtime for all of them, so an
//! acknowledgement made by `output.nats` can travel on the connection
//! `input.nats` took the item on (tickets hold that connection).

use std::future::Future;
use std::sync::OnceLock;
use tokio::runtime::Runtime;

/// The shared runtime (one worker thread: NATS I/O is light next to lookups).
pub fn get() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("dnsluice-nats")
            .enable_all()
            .build()
            .expect("cannot start the NATS runtime (no threads or timers left?)")
    })
}

/// Runs `future` to its end on the shared runtime, from synchronous code.
pub fn block_on<F: Future>(future: F) -> F::Output {
    get().block_on(future)
}

//! How far apart two cores are, as the time one cache line takes to go from
//! one core to the other and back: two threads, each pinned to its core,
//! hand a counter back and forth.
//!
//!     cargo bench --bench core-distance                # cores 0 and 1
//!     cargo bench --bench core-distance -- 2 5         # cores 2 and 5
//!
//! Prints one line, `core-distance 0-1 85 ns` (the median of 9 runs of
//! 20,000 round trips). Why it is here: on a virtual machine the host may
//! place the two virtual cores on the same core complex (a shared L3 cache:
//! ~85 ns here) or on two (328–389 ns printed here), and move them while
//! the guest runs.
//! Everything that crosses threads (the split's batches, the merger, the
//! walk's lock, flows posted to their owners) costs several times more in
//! the second placement, so `benches/threads.sh` runs this before each
//! timed run and reports its figures by placement.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Round trips in one timed run.
const ROUND_TRIPS: u64 = 20_000;
/// Timed runs; the median is printed.
const RUNS: usize = 9;

/// The counter, alone on its cache line.
#[repr(align(128))]
struct Line(AtomicU64);

/// Pins the calling thread to `cpu`, or ends the process with a message
/// when the kernel refuses (no such core, or not one this process may use).
fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes into
    // it (a core past its size is refused before); sched_setaffinity reads it.
    #[allow(unsafe_code)]
    let pinned = cpu < libc::CPU_SETSIZE as usize
        && unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
        };
    if !pinned {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        eprintln!("core-distance: cannot run on core {cpu} (this process may use {cores} cores)");
        std::process::exit(1);
    }
}

fn main() {
    let cpus: Option<Vec<usize>> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .map(|a| a.parse().ok())
        .collect();
    let (a, b) = match cpus.as_deref() {
        Some([]) => (0, 1),
        Some(&[a, b]) => (a, b),
        _ => {
            eprintln!("usage: cargo bench --bench core-distance [-- CORE CORE] (two core numbers)");
            std::process::exit(2);
        }
    };
    let line = Arc::new(Line(AtomicU64::new(0)));
    // The answering side: turns every odd value into the next even one,
    // until told to stop (u64::MAX).
    let answerer = {
        let line = line.clone();
        std::thread::spawn(move || {
            pin(b);
            loop {
                let value = line.0.load(Ordering::Acquire);
                if value == u64::MAX {
                    return;
                }
                if value % 2 == 1 {
                    line.0.store(value + 1, Ordering::Release);
                }
            }
        })
    };
    pin(a);
    let mut runs = Vec::with_capacity(RUNS);
    let mut value = 0u64;
    for _ in 0..RUNS {
        let started = Instant::now();
        for _ in 0..ROUND_TRIPS {
            line.0.store(value + 1, Ordering::Release);
            value += 2;
            // No pause in either loop: it would add its own latency.
            while line.0.load(Ordering::Acquire) != value {}
        }
        runs.push(started.elapsed().as_nanos() as f64 / ROUND_TRIPS as f64);
    }
    line.0.store(u64::MAX, Ordering::Release);
    answerer.join().expect("the answering thread");
    runs.sort_by(f64::total_cmp);
    println!("core-distance {a}-{b} {:.0} ns", runs[RUNS / 2]);
}

//! `filter.split`: runs the rest of the chain in `threads` worker threads, for
//! when one thread cannot keep up (several DNS clients, a heavy Lua filter).
//!
//! Objects go to the workers round-robin (`by = "round-robin"`) or by a hash
//! of their client's address (`by = "client"`: the source, or the destination
//! of a packet from a DNS server port), so one client's packets, queries and
//! answers, always meet the same thread, in order. Each worker has two bounded lock-free
//! queues (crossbeam `ArrayQueue`): a full one the split pushes copies into,
//! and a free one the worker hands emptied objects back on. The objects
//! ([`OwnedObject`]) are made once, `queue` per worker, and their buffers are
//! reused: in steady state nothing is allocated per object. A full queue
//! makes the split wait (it spins briefly, then sleeps 20 µs at a time); an
//! idle worker parks until the split wakes it.
//!
//! The stages after the split are built in each worker thread by the pipeline
//! (see `dnsluice_core::pipeline`); their statistics are merged at the end:
//! counts add up, series add up element-wise, and latency percentiles
//! (`latency_us.*`, not additive) are the largest of the threads'. A stage
//! that lists only its most frequent values (`filter.dns`'s ten qtypes) may
//! list a few more once merged.

use crate::clients::hash_onto;
use crossbeam_queue::ArrayQueue;
use dnsluice_core::registry::{DownstreamBuilder, ModuleEntry};
use dnsluice_core::sync::lock;
use dnsluice_core::{Object, OwnedObject, Receiver, StageError, StageStats};
use dnsluice_options::{Choice, Options};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

const MODULE: &str = "filter.split";

/// Options of `filter.split`.
#[derive(Debug, Clone, Options)]
pub struct SplitOptions {
    /// Worker threads, each running its own copy of the rest of the chain.
    #[option(default = 2, range = 1..=1024)]
    pub threads: u32,
    /// How objects are spread over the workers.
    #[option(default = By::RoundRobin)]
    pub by: By,
    /// Objects queued per worker (bounded: the split waits when it is full).
    #[option(default = 1024, range = 1..=(1 << 20))]
    pub queue: u32,
}

/// How objects are spread over the workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Choice)]
pub enum By {
    /// In turn.
    RoundRobin,
    /// By a hash of the client's address: a client's queries and answers stay on one thread.
    Client,
}

/// What the split and one worker share.
struct Lane {
    /// Objects for the worker.
    full: ArrayQueue<OwnedObject>,
    /// Emptied objects, back to the split.
    free: ArrayQueue<OwnedObject>,
    /// The worker sleeps (the split wakes it after a push).
    parked: AtomicBool,
    /// No more objects will come.
    done: AtomicBool,
    /// The worker stopped on an error (its text).
    failed: Mutex<Option<String>>,
    /// Objects the worker handled.
    handled: AtomicU64,
}

struct Worker {
    lane: Arc<Lane>,
    thread: Thread,
    handle: Option<JoinHandle<Vec<StageStats>>>,
}

/// The split stage; see the module docs.
pub struct Split {
    workers: Vec<Worker>,
    by: By,
    next: usize,
    input: u64,
    /// The workers' merged statistics, once they have finished.
    merged: Vec<StageStats>,
}

impl Split {
    /// Starts `options.threads` workers, each building its chain with `build`;
    /// fails with the first worker's construction error.
    pub fn new(options: &SplitOptions, build: DownstreamBuilder) -> Result<Split, StageError> {
        let by = options.by;
        let mut workers = Vec::new();
        let mut split = Split {
            workers: Vec::new(),
            by,
            next: 0,
            input: 0,
            merged: Vec::new(),
        };
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        for index in 0..options.threads as usize {
            let capacity = options.queue as usize;
            let lane = Arc::new(Lane {
                full: ArrayQueue::new(capacity),
                free: ArrayQueue::new(capacity),
                parked: AtomicBool::new(false),
                done: AtomicBool::new(false),
                failed: Mutex::new(None),
                handled: AtomicU64::new(0),
            });
            for _ in 0..capacity {
                let _ = lane.free.push(OwnedObject::default());
            }
            let worker_lane = lane.clone();
            let build = build.clone();
            let ready = ready_tx.clone();
            let handle = std::thread::Builder::new()
                .name(format!("split-{index}"))
                .spawn(move || match build(index) {
                    Ok(downstream) => {
                        let _ = ready.send(Ok(()));
                        work(&worker_lane, downstream)
                    }
                    Err(e) => {
                        let _ = ready.send(Err(e.to_string()));
                        Vec::new()
                    }
                })
                .map_err(|e| StageError::other(MODULE, format!("cannot start a thread: {e}")))?;
            workers.push(Worker {
                lane,
                thread: handle.thread().clone(),
                handle: Some(handle),
            });
        }
        drop(ready_tx);
        split.workers = workers;
        let mut first_error = None;
        for _ in 0..options.threads {
            if let Ok(Err(e)) = ready_rx.recv() {
                first_error.get_or_insert(e);
            }
        }
        if let Some(e) = first_error {
            split.stop();
            return Err(StageError::other(MODULE, e));
        }
        Ok(split)
    }

    fn lane_for(&mut self, obj: &Object<'_>) -> usize {
        let n = self.workers.len();
        match self.by {
            By::RoundRobin => {
                let lane = self.next;
                self.next = if lane + 1 == n { 0 } else { lane + 1 };
                lane
            }
            By::Client => match client_address(obj) {
                Some(src) => hash_onto(src, n as u32) as usize,
                None => 0,
            },
        }
    }

    /// Tells every worker that nothing more comes and waits for them; returns
    /// the first error a worker stopped on.
    fn stop(&mut self) -> Option<String> {
        let mut merged: Vec<StageStats> = Vec::new();
        for worker in &mut self.workers {
            worker.lane.done.store(true, Ordering::SeqCst);
            worker.thread.unpark();
            if let Some(handle) = worker.handle.take() {
                match handle.join() {
                    Ok(stats) => merge(&mut merged, stats),
                    Err(_) => {
                        lock(&worker.lane.failed).get_or_insert("a worker panicked".into());
                    }
                }
            }
        }
        if !merged.is_empty() {
            self.merged = merged;
        }
        self.workers
            .iter()
            .find_map(|w| lock(&w.lane.failed).clone())
    }
}

/// The client's address of a packet: its source, unless it comes from a DNS
/// server port (53, 853, 443, 5353) to another port, then its destination. So
/// queries and their answers, and both directions of a TCP connection, meet
/// on one thread.
fn client_address(obj: &Object<'_>) -> Option<std::net::IpAddr> {
    let packet = obj.packet()?;
    let src = packet.src()?;
    let server_port = |port: u16| matches!(port, 53 | 853 | 443 | 5353);
    let layers = &packet.layers;
    if server_port(layers.sport) && !server_port(layers.dport) {
        return packet.dst().or(Some(src));
    }
    Some(src)
}

/// One round of waiting for a queue: the first 64 rounds spin, the next 64
/// yield the thread; after that it returns true and the caller blocks its
/// own way (the worker parks, the split sleeps).
fn spin_then_yield(spins: &mut u32) -> bool {
    *spins += 1;
    if *spins < 64 {
        std::hint::spin_loop();
    } else if *spins < 128 {
        std::thread::yield_now();
    } else {
        return true;
    }
    false
}

/// A worker: hands every object to its chain until the split is done.
fn work(lane: &Lane, mut downstream: Box<dyn Receiver>) -> Vec<StageStats> {
    let mut spins = 0u32;
    loop {
        if let Some(owned) = lane.full.pop() {
            spins = 0;
            let result = downstream.receive(&mut owned.view());
            // Never full: as many objects as room in the queue.
            let _ = lane.free.push(owned);
            lane.handled.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = result {
                *lock(&lane.failed) = Some(e.to_string());
                break;
            }
            continue;
        }
        if lane.done.load(Ordering::SeqCst) && lane.full.is_empty() {
            if let Err(e) = downstream.finish() {
                *lock(&lane.failed) = Some(e.to_string());
            }
            break;
        }
        if spin_then_yield(&mut spins) {
            lane.parked.store(true, Ordering::SeqCst);
            // Checked again after saying so: the split wakes us for anything
            // pushed after this point.
            if lane.full.is_empty() && !lane.done.load(Ordering::SeqCst) {
                std::thread::park_timeout(Duration::from_millis(10));
            }
            lane.parked.store(false, Ordering::SeqCst);
        }
    }
    let mut stats = Vec::new();
    downstream.stats(&mut stats);
    stats
}

/// Adds `from` (one worker's statistics) into `into`, stage by stage.
fn merge(into: &mut Vec<StageStats>, from: Vec<StageStats>) {
    if into.is_empty() {
        *into = from;
        return;
    }
    for (sum, stage) in into.iter_mut().zip(from) {
        sum.absorb(stage);
    }
}

impl Receiver for Split {
    fn receive(&mut self, obj: &mut Object<'_>) -> Result<(), StageError> {
        let index = self.lane_for(obj);
        let worker = &self.workers[index];
        let lane = &*worker.lane;
        let mut spins = 0u32;
        let mut owned = loop {
            if let Some(owned) = lane.free.pop() {
                break owned;
            }
            if let Some(e) = lock(&lane.failed).clone() {
                return Err(StageError::other(MODULE, format!("worker {index}: {e}")));
            }
            if spin_then_yield(&mut spins) {
                std::thread::sleep(Duration::from_micros(20));
            }
        };
        owned.copy_from(obj);
        // Never full: as many objects as room in the queue.
        let _ = lane.full.push(owned);
        if lane.parked.load(Ordering::SeqCst) {
            worker.thread.unpark();
        }
        self.input += 1;
        Ok(())
    }

    fn finish(&mut self) -> Result<(), StageError> {
        match self.stop() {
            Some(e) => Err(StageError::other(MODULE, e)),
            None => Ok(()),
        }
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        let mut stats = StageStats::new(MODULE);
        stats.input = self.input;
        for (index, worker) in self.workers.iter().enumerate() {
            let handled = worker.lane.handled.load(Ordering::Relaxed);
            stats.output += handled;
            stats.counters.insert(format!("thread.{index}"), handled);
        }
        out.push(stats);
        out.extend(self.merged.iter().cloned());
    }
}

impl Drop for Split {
    fn drop(&mut self) {
        if self.workers.iter().any(|w| w.handle.is_some()) {
            let _ = self.stop();
        }
    }
}

/// The registry entry.
pub fn entry() -> ModuleEntry {
    ModuleEntry::split(
        MODULE,
        "run the rest of the chain in N threads, objects spread round-robin or by client",
        |o: SplitOptions, build: DownstreamBuilder| Ok(Box::new(Split::new(&o, build)?)),
    )
}

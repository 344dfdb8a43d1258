//! `filter.split`: runs the rest of the chain in `threads` worker threads, for
//! when one thread cannot keep up (`dnsluice run --threads N` puts one right
//! after the input; a heavy Lua filter, several DNS clients).
//!
//! Objects go to the workers in batches: round-robin (`by = "round-robin"`,
//! a whole batch to each worker in turn), by a hash of their client's address
//! (`by = "client"`: the source, or the destination of a packet from a DNS
//! server port, so a client's queries and answers meet on one thread), or by
//! a hash of the pair of addresses (`by = "flow"`: both directions of a TCP
//! connection and every fragment of a datagram meet on one thread, so
//! `filter.dns` reassembles them as one thread would; a DNS datagram that
//! stands alone, most of a capture, goes with the batches in turn). The split copies
//! each object into a batch's reused [`OwnedObject`]; a full batch crosses
//! with one push on a bounded lock-free queue (crossbeam `ArrayQueue`) and
//! the worker hands emptied batches back on another, so in steady state
//! nothing is allocated and the cost of crossing is paid once per batch
//! (`benches/threads.sh` measures it per object). A full queue makes the
//! split wait (it spins briefly, then sleeps 20 µs at a time); an idle
//! worker parks until the split wakes it. Objects wait in a batch until it
//! is full: for a live input that trickles, use fewer threads or a smaller
//! `batch`.
//!
//! The stages after the split are built in each worker thread by the
//! pipeline (see `dnsluice_core::pipeline`). When the output is
//! `output.json` with one path for every thread (no `{thread}` in it), the
//! threads share one stream (see [`dnsluice_core::merge`]): a merger thread
//! writes what each worker's chain wrote, as batches come (`ordered =
//! false`), or object by object in the order the split saw them (`ordered =
//! true`): the lines one thread would have written, in the same order, what
//! each chain writes as it finishes (TCP streams cut short) last, thread by
//! thread.
//!
//! Statistics merge exactly: counts, series and breakdowns add up, latency
//! histograms add bucket by bucket (their percentiles are the merged
//! histogram's), top lists merge with their error bounds. While the run goes
//! on, each worker publishes its chain's statistics every 100 ms, so
//! interval statistics and progress see the threads' work.

mod lanes;
mod merger;

use crate::clients::hash_onto;
use dnsluice_core::merge::{self, MergeTarget};
use dnsluice_core::registry::{DownstreamBuilder, ModuleEntry, Parallel};
use dnsluice_core::sync::lock;
use dnsluice_core::wire::{parse_layers, Network};
use dnsluice_core::{LinkType, Object, Receiver, StageError, StageStats};
use dnsluice_options::{Choice, Options};
use lanes::{spin_then_yield, Batch, Lane, WorkerSide};
use merger::{Merger, Route};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;
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
    #[option(default = 4096, range = 1..=(1 << 20))]
    pub queue: u32,
    /// Objects handed to a worker at once.
    #[option(default = 256, range = 1..=65536)]
    pub batch: u32,
    /// When the threads share one output stream: write it in the order the
    /// split saw the objects (as one thread would), not as batches come.
    #[option(default = true)]
    pub ordered: bool,
    /// List the split itself in the statistics (`threads = N` does not: the
    /// summary names the threads instead).
    #[option(default = true)]
    pub report: bool,
}

/// How objects are spread over the workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Choice)]
pub enum By {
    /// A batch to each worker in turn.
    RoundRobin,
    /// By a hash of the client's address: a client's queries and answers stay on one thread.
    Client,
    /// TCP, fragments and the rest by a hash of the two addresses (both
    /// directions and every fragment stay on one thread); DNS datagrams that
    /// stand alone in batches, in turn.
    Flow,
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
    batch: usize,
    /// Per worker, the batch being filled.
    pending: Vec<Option<Batch>>,
    /// Round-robin: the worker the current batch is for.
    next: usize,
    input: u64,
    /// The input's last capture time, once the driver tells it (`i64::MIN`: not told).
    input_end_ns: i64,
    /// Ordered merging: where the objects since the last hand-over went.
    routes: Option<(Vec<Route>, SyncSender<Vec<Route>>)>,
    merger: Option<JoinHandle<Result<(), StageError>>>,
    merger_failed: Arc<AtomicBool>,
    /// The workers' merged statistics, once they have finished.
    merged: Vec<StageStats>,
    /// List the split itself in the statistics.
    report: bool,
}

impl Split {
    /// Starts `options.threads` workers, each building its chain with `build`;
    /// fails with the first worker's construction error.
    pub fn new(options: &SplitOptions, build: DownstreamBuilder) -> Result<Split, StageError> {
        let batch = options.batch as usize;
        let batches = (options.queue as usize).div_ceil(batch).max(2);
        let target = MergeTarget::new();
        let merger_failed = Arc::new(AtomicBool::new(false));
        let mut split = Split {
            workers: Vec::new(),
            by: options.by,
            batch,
            pending: Vec::new(),
            next: 0,
            input: 0,
            input_end_ns: i64::MIN,
            routes: None,
            merger: None,
            merger_failed: merger_failed.clone(),
            merged: Vec::new(),
            report: options.report,
        };
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        for index in 0..options.threads as usize {
            let lane = Arc::new(Lane::new(batches));
            let side = WorkerSide {
                lane: lane.clone(),
                target: target.clone(),
                merger_failed: merger_failed.clone(),
            };
            let build = build.clone();
            let ready = ready_tx.clone();
            let handle = std::thread::Builder::new()
                .name(format!("split-{index}"))
                .spawn(move || {
                    let lane_handle = merge::enter(side.target.clone());
                    match build(index) {
                        Ok(downstream) => {
                            // Asked before saying ready: the split then takes
                            // the shared stream for its merger.
                            let merging = side.target.is_claimed();
                            let _ = ready.send(Ok(()));
                            let lane_handle = merging.then_some(&lane_handle);
                            lanes::work(&side, lane_handle, downstream)
                        }
                        Err(e) => {
                            let _ = ready.send(Err(e.to_string()));
                            side.lane.finished.store(true, Ordering::SeqCst);
                            Vec::new()
                        }
                    }
                })
                .map_err(|e| StageError::other(MODULE, format!("cannot start a thread: {e}")))?;
            split.workers.push(Worker {
                lane,
                thread: handle.thread().clone(),
                handle: Some(handle),
            });
            split.pending.push(None);
        }
        drop(ready_tx);
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
        if let Some(output) = target.take() {
            split.start_merger(output, options.ordered)?;
        }
        Ok(split)
    }

    /// Starts the thread that writes the workers' shared stream.
    fn start_merger(
        &mut self,
        output: (std::path::PathBuf, Box<dyn std::io::Write + Send>),
        ordered: bool,
    ) -> Result<(), StageError> {
        let lanes = self.workers.iter().map(|w| w.lane.clone()).collect();
        let merger = Merger::new(lanes, output, self.merger_failed.clone());
        let routes = ordered.then(|| {
            let (tx, rx) = sync_channel(64);
            self.routes = Some((Vec::new(), tx));
            rx
        });
        let handle = std::thread::Builder::new()
            .name("split-merge".into())
            .spawn(move || merger.run(routes))
            .map_err(|e| StageError::other(MODULE, format!("cannot start a thread: {e}")))?;
        self.merger = Some(handle);
        Ok(())
    }

    fn lane_for(&mut self, obj: &Object<'_>) -> usize {
        let n = self.workers.len() as u32;
        match self.by {
            By::RoundRobin => self.next,
            By::Client => client_address(obj).map_or(0, |a| hash_onto(a, n) as usize),
            By::Flow => flow_hash(obj).map_or(self.next, |h| (h % n) as usize),
        }
    }

    /// An empty batch for worker `index`, waiting for one to come back.
    fn empty_batch(&mut self, index: usize) -> Result<Batch, StageError> {
        let lane = self.workers[index].lane.clone();
        let mut spins = 0u32;
        loop {
            if let Some(batch) = lane.free.pop() {
                return Ok(batch);
            }
            self.check_failures(index)?;
            if spin_then_yield(&mut spins) {
                std::thread::sleep(Duration::from_micros(20));
            }
        }
    }

    fn check_failures(&mut self, index: usize) -> Result<(), StageError> {
        if let Some(e) = self.workers[index].lane.failure() {
            return Err(StageError::other(MODULE, format!("worker {index}: {e}")));
        }
        if self.merger_failed.load(Ordering::SeqCst) {
            return Err(self.merger_error());
        }
        Ok(())
    }

    /// The error the merger stopped on (it has stopped: it said so), e.g. a
    /// reader of standard output that went away.
    fn merger_error(&mut self) -> StageError {
        match self.merger.take().map(JoinHandle::join) {
            Some(Ok(Err(e))) => e,
            _ => StageError::other(MODULE, "the merged output failed"),
        }
    }

    /// Hands worker `index` its pending batch.
    fn hand_over(&mut self, index: usize) {
        let Some(batch) = self.pending[index].take() else {
            return;
        };
        if batch.len == 0 {
            self.pending[index] = Some(batch);
            return;
        }
        let worker = &self.workers[index];
        // Never full: as many batches as room in the queue.
        let _ = worker.lane.full.push(batch);
        if worker.lane.parked.load(Ordering::SeqCst) {
            worker.thread.unpark();
        }
    }

    /// A batch filled up: hands it over (ordered merging: every pending
    /// batch, then the log of where their objects went).
    fn batch_full(&mut self, index: usize) -> Result<(), StageError> {
        match &mut self.routes {
            None => self.hand_over(index),
            Some(_) => self.hand_over_all()?,
        }
        // The batch standalone objects go to is full: the next worker's turn.
        if self.by != By::Client && index == self.next {
            self.next = (self.next + 1) % self.workers.len();
        }
        Ok(())
    }

    /// Hands every pending batch over, then the routes of their objects.
    fn hand_over_all(&mut self) -> Result<(), StageError> {
        for index in 0..self.workers.len() {
            self.hand_over(index);
        }
        if let Some((log, tx)) = &mut self.routes {
            if !log.is_empty() && tx.send(std::mem::take(log)).is_err() {
                return Err(self.merger_error());
            }
        }
        Ok(())
    }

    /// Hands everything over, tells every worker that nothing more comes,
    /// waits for them and for the merger; returns the first error (a
    /// worker's first: the merger's then only says a worker stopped).
    fn stop(&mut self) -> Option<StageError> {
        let mut error = self.hand_over_all().err();
        // Closing the log tells an ordered merger that no more objects come.
        self.routes = None;
        let mut merged: Vec<StageStats> = Vec::new();
        for worker in &mut self.workers {
            let input_end = &worker.lane.input_end_ns;
            input_end.store(self.input_end_ns, Ordering::SeqCst);
            worker.lane.done.store(true, Ordering::SeqCst);
            worker.thread.unpark();
            if let Some(handle) = worker.handle.take() {
                match handle.join() {
                    Ok(stats) => merge_stats(&mut merged, stats),
                    Err(_) => worker.lane.fail("a worker panicked".into()),
                }
            }
        }
        if !merged.is_empty() {
            self.merged = merged;
        }
        let worker_error = self.workers.iter().enumerate().find_map(|(index, w)| {
            let e = w.lane.failure()?;
            Some(StageError::other(MODULE, format!("worker {index}: {e}")))
        });
        if let Some(merger) = self.merger.take() {
            let merger_error = match merger.join() {
                Ok(result) => result.err(),
                Err(_) => Some(StageError::other(MODULE, "the merger panicked")),
            };
            error = error.or(merger_error);
        }
        worker_error.or(error)
    }
}

/// The client's address of a packet: its source, unless it comes from a DNS
/// server port (53, 853, 443, 5353) to another port, then its destination. So
/// queries and their answers, and both directions of a TCP connection, meet
/// on one thread.
fn client_address(obj: &Object<'_>) -> Option<IpAddr> {
    let packet = obj.packet()?;
    let src = packet.src()?;
    let server_port = |port: u16| matches!(port, 53 | 853 | 443 | 5353);
    let layers = &packet.layers;
    if server_port(layers.sport) && !server_port(layers.dport) {
        return packet.dst().or(Some(src));
    }
    Some(src)
}

/// Where a packet goes when flows must stay together: `None` for a DNS
/// datagram that stands alone (UDP to or from port 53, not a fragment: most
/// of a capture), which any thread may take; else a hash of its two
/// addresses, the same both ways (the innermost ones, through tunnels: an
/// inner flow may change tunnels). Fragments after the first carry no ports,
/// so ports are left out: a datagram's fragments meet on one thread.
/// Untagged Ethernet carrying DNS straight over IPv4 or IPv6 is read in
/// place; anything else has its layers parsed here when no stage before did.
fn flow_hash(obj: &Object<'_>) -> Option<u32> {
    let packet = obj.packet()?;
    let data = packet.data;
    let dns_port = |at: usize| {
        let port = |i: usize| data.get(i..i + 2).map(|p| u16::from_be_bytes([p[0], p[1]]));
        port(at) == Some(53) || port(at + 2) == Some(53)
    };
    if packet.meta.link == LinkType::EN10MB && data.len() >= 14 {
        let (v4, v6) = (data[12..14] == [0x08, 0x00], data[12..14] == [0x86, 0xdd]);
        if v4 && data.len() >= 34 {
            let header = usize::from(data[14] & 0x0f) * 4;
            let fragment = u16::from_be_bytes([data[20], data[21]]) & 0x3fff != 0;
            let protocol = data[23];
            let direct_dns = matches!(protocol, 6 | 17) && dns_port(14 + header);
            if protocol == 17 && !fragment && direct_dns {
                return None;
            }
            if fragment || direct_dns {
                return Some(symmetric_hash(&data[26..30], &data[30..34]));
            }
        }
        if v6 && data.len() >= 54 {
            // UDP or TCP right after the fixed header; a fragment header.
            let next = data[20];
            if next == 17 && dns_port(54) {
                return None;
            }
            if next == 44 || (next == 6 && dns_port(54)) {
                return Some(symmetric_hash(&data[22..38], &data[38..54]));
            }
        }
    }
    let parsed;
    let layers = if packet.layers.network == Network::Unparsed {
        parsed = parse_layers(packet.meta.link, data, packet.meta.len);
        &parsed
    } else {
        &packet.layers
    };
    let (src, dst) = (layers.src_addr(data)?, layers.dst_addr(data)?);
    Some(match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => symmetric_hash(&s.octets(), &d.octets()),
        (s, d) => symmetric_hash(&sixteen(s), &sixteen(d)),
    })
}

/// An address as 16 bytes (IPv4 mapped into IPv6).
fn sixteen(address: IpAddr) -> [u8; 16] {
    match address {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

/// FNV-1a of the lower of two addresses, then the higher: the same both ways.
fn symmetric_hash(a: &[u8], b: &[u8]) -> u32 {
    let (low, high) = if a <= b { (a, b) } else { (b, a) };
    let mut h: u32 = 0x811c_9dc5;
    for byte in low.iter().chain(high) {
        h ^= u32::from(*byte);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// Adds `from` (one worker's statistics) into `into`, stage by stage.
fn merge_stats(into: &mut Vec<StageStats>, from: Vec<StageStats>) {
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
        if self.pending[index].is_none() {
            self.pending[index] = Some(self.empty_batch(index)?);
        }
        let batch = self.pending[index].as_mut().expect("filled above");
        batch.next_slot().copy_from(obj);
        let full = batch.len >= self.batch;
        if let Some((log, _)) = &mut self.routes {
            match log.last_mut() {
                Some(route) if route.lane as usize == index => route.count += 1,
                _ => log.push(Route {
                    lane: index as u32,
                    count: 1,
                }),
            }
        }
        self.input += 1;
        if full {
            self.batch_full(index)?;
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<(), StageError> {
        match self.stop() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn clock_at_end(&mut self, ts_ns: i64) {
        // Passed to every thread's chain before it finishes.
        self.input_end_ns = ts_ns;
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        let mut stats = StageStats::new(MODULE);
        stats.input = self.input;
        for (index, worker) in self.workers.iter().enumerate() {
            let handled = worker.lane.handled.load(Ordering::Relaxed);
            stats.output += handled;
            stats.counters.insert(format!("thread.{index}"), handled);
        }
        if self.report {
            out.push(stats);
        }
        if !self.merged.is_empty() {
            out.extend(self.merged.iter().cloned());
            return;
        }
        // Running: the workers' last snapshots, added up.
        let mut running = Vec::new();
        for worker in &self.workers {
            merge_stats(&mut running, lock(&worker.lane.snapshot).clone());
        }
        out.extend(running);
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
        "run the rest of the chain in N threads, objects spread in batches round-robin, by client or by flow",
        |o: SplitOptions, build: DownstreamBuilder| Ok(Box::new(Split::new(&o, build)?)),
    )
    .parallel(Parallel::No)
}

//! The engine's thread: one epoll loop over the run's few UDP sockets, the
//! in-flight table, the timers, and the queues of names waiting for their
//! turn. Each pass takes new names while the table has room, times out the
//! tries whose wait is over, sends what the pacing allows, and reads every
//! answer waiting. How names are sent is [`super::dispatch`], how answers
//! are taken [`super::answer`], how tries end and names finish
//! [`super::expire`].

use super::fallback::Fallback;
use super::nameservers::{Nameservers, Waiting};
use super::pace::Pace;
use super::sockets::SocketSet;
use super::table::{Phase, Table};
use super::Msg;
use crate::format::RecordStyle;
use crate::record::Batch;
use crate::stats::RunCounters;
use dnsluice_net::datagrams::{Received, RECV_BATCH};
use dnsluice_net::query::QueryOptions;
use dnsluice_net::NetCounters;
use mio::{Events, Poll, Token};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// The waker's token (sockets have their index).
pub const WAKER: Token = Token(usize::MAX);
/// Records handed back kept to write new ones in: enough for the records
/// on their way between the threads (a batch or two).
const SPARE_RECORDS: usize = 2048;
/// Records gathered before they go to the caller even while the loop is busy.
const BATCH_MAX: usize = 1024;
/// How often the gauges are published and idle rounds closed.
const PUBLISH_EVERY: Duration = Duration::from_millis(50);

/// What every name of the run is asked and within which budget.
pub struct EngineConfig {
    /// The record type.
    pub qtype: u16,
    /// RD, EDNS.
    pub query: QueryOptions,
    /// Tries per name, the first included.
    pub tries: u32,
    /// The time budget of a name.
    pub name_timeout: Duration,
    /// The longest wait for one answer (`--timeout`).
    pub max_wait: Duration,
    /// Answers with these RCODEs are asked again while the budget lasts.
    pub retry_rcodes: Vec<u8>,
    /// Ask again over TCP when an answer has TC=1.
    pub tcp_fallback: bool,
    /// How records are written.
    pub style: RecordStyle,
}

/// Where finished names go, and the counters the probe reads.
pub struct Output {
    /// Finished records, a batch per pass of the loop.
    pub results: mpsc::Sender<Batch>,
    /// The records of this pass.
    pub batch: Batch,
    /// Run counters.
    pub run: Arc<RunCounters>,
    /// Socket counters.
    pub net: Arc<NetCounters>,
    /// Names in the table now (a gauge).
    pub in_table: Arc<AtomicU64>,
}

/// The engine's state; see the module docs.
pub struct Engine {
    pub(super) config: EngineConfig,
    pub(super) poll: Poll,
    pub(super) sockets: SocketSet,
    pub(super) table: Table,
    pub(super) nameservers: Nameservers,
    /// (due, slot, the slot's timer then): a try's wait or a backoff.
    pub(super) timers: BinaryHeap<Reverse<(Instant, u32, u32)>>,
    /// Unpinned names waiting for a nameserver with room.
    pub(super) ready: VecDeque<Waiting>,
    /// Nameservers with names waiting for them alone.
    pub(super) directed: Vec<u32>,
    pub(super) inbox: mpsc::Receiver<Msg>,
    pub(super) input_open: bool,
    pub(super) hungry: Arc<AtomicBool>,
    /// Set by the handle when its caller is gone: stop at once.
    pub(super) stop: Arc<AtomicBool>,
    pub(super) out: Output,
    /// `--rate`: every query of the run.
    pub(super) global: Option<Pace>,
    pub(super) fallback: Fallback,
    /// Truncated names waiting for the caps to let their TCP query go:
    /// (slot, the slot's timer then, nameserver).
    pub(super) tcp_waiting: VecDeque<(u32, u32, u32)>,
    /// Set when the pacing held work back in the last dispatch.
    pub(super) blocked: bool,
    /// Room for the copy of an answer a record is written from.
    pub(super) answer_buffer: Vec<u8>,
    /// Room for its status.
    pub(super) status_buffer: String,
    /// Records their writer handed back ([`Msg::Spent`]), to write new ones in.
    pub(super) spare: Vec<crate::record::Finished>,
}

impl Engine {
    /// An engine over `sockets`, polled by `poll`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: EngineConfig,
        poll: Poll,
        sockets: SocketSet,
        depth: usize,
        nameservers: Nameservers,
        inbox: mpsc::Receiver<Msg>,
        hungry: Arc<AtomicBool>,
        stop: Arc<AtomicBool>,
        out: Output,
        global: Option<Pace>,
        fallback: Fallback,
    ) -> Engine {
        Engine {
            config,
            poll,
            sockets,
            table: Table::new(depth, Instant::now()),
            nameservers,
            timers: BinaryHeap::new(),
            ready: VecDeque::new(),
            directed: Vec::new(),
            inbox,
            input_open: true,
            hungry,
            stop,
            out,
            global,
            fallback,
            tcp_waiting: VecDeque::new(),
            blocked: false,
            answer_buffer: Vec::new(),
            status_buffer: String::new(),
            spare: Vec::new(),
        }
    }

    /// Runs until the input is closed and every name has finished (or the
    /// handle asks it to stop); gives back the TCP fallback, whose last
    /// names may still be on their way.
    pub fn run(mut self) -> Fallback {
        let mut events = Events::with_capacity(256);
        let mut received = Received::new();
        let mut published = Instant::now();
        loop {
            let now = Instant::now();
            if self.stop.load(Ordering::Relaxed) {
                break;
            }
            self.admit(now);
            self.expire(now);
            self.dispatch(now);
            self.flush();
            if self.out.batch.len() >= BATCH_MAX {
                self.send_batch();
            }
            if now.duration_since(published) >= PUBLISH_EVERY {
                self.publish(now);
                published = now;
            }
            if !self.input_open && self.table.in_use() == 0 {
                break;
            }
            if self.input_open && self.table.has_room() {
                // Ask to be woken for input; look once more first.
                self.hungry.store(true, Ordering::SeqCst);
                if self.inbox_has_work() {
                    self.hungry.store(false, Ordering::SeqCst);
                    continue;
                }
            }
            // The records gathered go to the caller when the loop is about
            // to wait (one wake-up of the caller per batch, not per record).
            let mut polled = self.poll.poll(&mut events, Some(Duration::ZERO));
            if polled.is_ok() && events.is_empty() {
                self.send_batch();
                polled = self.poll.poll(&mut events, self.next_wake(now));
            }
            if let Err(e) = polled {
                if e.kind() != std::io::ErrorKind::Interrupted {
                    eprintln!("dnsluice: lookup engine: poll failed: {e}");
                    break;
                }
            }
            self.hungry.store(false, Ordering::SeqCst);
            let now = Instant::now();
            for event in events.iter() {
                if event.token() == WAKER {
                    continue;
                }
                let socket = event.token().0;
                loop {
                    let n = self.sockets.read_batch(socket, &mut received);
                    for i in 0..n {
                        if let Some((message, from)) = received.datagram(i) {
                            self.on_datagram(socket as u16, message, from, now);
                        }
                    }
                    if n < RECV_BATCH {
                        break;
                    }
                }
            }
        }
        self.send_batch();
        self.publish(Instant::now());
        self.fallback
    }

    /// Hands the records finished so far to the caller.
    fn send_batch(&mut self) {
        if !self.out.batch.is_empty() {
            let room = self.out.batch.len().next_power_of_two();
            let batch = std::mem::replace(&mut self.out.batch, Vec::with_capacity(room));
            // The handle outlives the engine, so the receiver is there.
            let _ = self.out.results.send(batch);
        }
    }

    /// Whether a message waits in the inbox (taking it into the table when
    /// there is room).
    fn inbox_has_work(&mut self) -> bool {
        let before = self.table.in_use();
        let open = self.input_open;
        self.admit(Instant::now());
        self.table.in_use() != before || self.input_open != open
    }

    /// Takes names from the inbox while the table has room.
    fn admit(&mut self, now: Instant) {
        while self.input_open && self.table.has_room() {
            match self.inbox.try_recv() {
                Ok(Msg::Job {
                    index,
                    name,
                    pinned,
                }) => self.start_name(index, name, pinned, now),
                Ok(Msg::Close) | Err(mpsc::TryRecvError::Disconnected) => {
                    self.input_open = false;
                }
                Ok(Msg::Spent(mut records)) => {
                    // More would only sit here.
                    let room = SPARE_RECORDS.saturating_sub(self.spare.len());
                    records.truncate(room);
                    self.spare.append(&mut records);
                }
                Err(mpsc::TryRecvError::Empty) => break,
            }
        }
        self.out
            .in_table
            .store(self.table.in_use() as u64, Ordering::Relaxed);
    }

    /// Puts a new name in a slot and on its queue.
    fn start_name(
        &mut self,
        index: u64,
        name: super::JobName,
        pinned: Option<std::net::SocketAddr>,
        now: Instant,
    ) {
        let Some(slot) = self.table.take() else {
            return;
        };
        let pinned = pinned.map(|addr| self.nameservers.get_or_add(addr, now));
        let config = &self.config;
        let s = self.table.get_mut(slot);
        s.index = index;
        s.name.clear();
        s.name.push_str(name.as_str());
        s.pinned = pinned;
        s.started = now;
        s.deadline = now + config.name_timeout;
        s.tries = 0;
        s.timer = s.timer.wrapping_add(1);
        s.phase = Phase::Queued;
        s.trace = config.style.trace().then(Vec::new);
        let built = dnsluice_net::query::build_in_class(
            0,
            &s.name,
            config.qtype,
            dnsluice_net::query::CLASS_IN,
            &config.query,
            &mut s.query,
        );
        if let Err(e) = built {
            let error = format!("bad name: {e}");
            self.finish(slot, now, None, Some(("ERROR", error)));
            return;
        }
        let waiting = (slot, s.timer);
        match pinned {
            Some(ns) => self.queue_for(ns, waiting, false),
            None => self.ready.push_back(waiting),
        }
    }

    /// Queues a name for nameserver `ns` alone (at the front for a retry).
    pub(super) fn queue_for(&mut self, ns: u32, waiting: Waiting, front: bool) {
        let queue = &mut self.nameservers.get_mut(ns).ready;
        if queue.is_empty() && !self.directed.contains(&ns) {
            self.directed.push(ns);
        }
        if front {
            queue.push_front(waiting);
        } else {
            queue.push_back(waiting);
        }
    }

    /// When to look again: the next timer, or soon when the pacing held
    /// work back.
    fn next_wake(&self, now: Instant) -> Option<Duration> {
        let timer = self.timers.peek().map(|Reverse((due, _, _))| *due);
        let paced = self.blocked.then(|| now + Duration::from_millis(1));
        let wake = match (timer, paced) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if !self.input_open && self.table.in_use() == 0 {
            return Some(Duration::ZERO);
        }
        wake.map(|w| w.saturating_duration_since(now))
    }

    /// Sends what was held for the sockets.
    fn flush(&mut self) {
        self.sockets.flush();
    }

    /// Closes idle rounds and publishes every nameserver's gauges.
    fn publish(&mut self, now: Instant) {
        for (_, ns) in self.nameservers.iter_mut() {
            let round = ns.round();
            ns.pace.end_round_if_due(now, round);
            ns.publish();
        }
    }
}

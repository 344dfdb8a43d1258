//! Where lookup work waits: a bounded priority queue per nameserver plus a
//! global queue (the `sticky` design of ZDNS PR #439), or the global queue
//! alone (`fifo`, `random`).
//!
//! The demultiplexer ([`Board::offer`]) puts a job on its nameserver's queue,
//! or on the global queue when that one is full. Workers are homed on
//! nameservers (worker `i` on nameserver `i mod n`); a worker takes from its
//! home queue first and *steals* only when it is empty: from the global queue,
//! then from the queues of nameservers no worker is homed on.

use super::job::Job;
use super::stats::NameserverStats;
use super::turns::Turns;
use crossbeam_queue::{ArrayQueue, SegQueue};
use dnsluice_core::sync;
use dnsluice_net::Endpoint;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// How work is handed to workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, dnsluice_options::Choice)]
pub enum Scheduler {
    /// Per-nameserver priority queues + a global queue; connections kept.
    #[default]
    Sticky,
    /// One queue in input order; a worker re-dials whenever its nameserver changes.
    Fifo,
    /// One queue in input order; a new connection for every query.
    Random,
}

/// Consecutive failures after which a nameserver is deprioritised.
const FAILURES_TO_COOL: u32 = 3;
/// How long a deprioritised nameserver is avoided.
const COOLING: Duration = Duration::from_secs(5);

/// One nameserver: its queue, its wake-up, its counters, its health.
pub struct Nameserver {
    /// Position in the board's list.
    pub id: usize,
    /// Where it is.
    pub endpoint: Endpoint,
    /// Its priority queue (sticky only).
    queue: ArrayQueue<(Job, usize)>,
    /// Woken when work lands on `queue`.
    notify: Notify,
    /// What happened on its sockets.
    pub stats: Arc<NameserverStats>,
    /// Its cap, `--rate-per-nameserver`.
    pub turns: Option<Turns>,
    consecutive_failures: AtomicU32,
    cooling_until: Mutex<Option<Instant>>,
}

impl Nameserver {
    /// Records the end of one exchange: failures in a row deprioritise it.
    pub fn record_health(&self, ok: bool) {
        if ok {
            self.consecutive_failures.store(0, Ordering::Relaxed);
            return;
        }
        self.stats.failures.fetch_add(1, Ordering::Relaxed);
        let failures = self.consecutive_failures.fetch_add(1, Ordering::Relaxed) + 1;
        if failures >= FAILURES_TO_COOL {
            *sync::lock(&self.cooling_until) = Some(Instant::now() + COOLING);
        }
    }

    /// Whether it failed repeatedly and recently.
    pub fn is_cooling(&self) -> bool {
        let until = *sync::lock(&self.cooling_until);
        until.is_some_and(|t| Instant::now() < t)
    }
}

/// The shared state of one lookup run's queues.
pub struct Board {
    scheduler: Scheduler,
    queue_capacity: usize,
    threads: usize,
    /// Every nameserver seen so far (configured first, then pinned ones).
    nameservers: RwLock<Vec<Arc<Nameserver>>>,
    by_endpoint: Mutex<HashMap<Endpoint, usize>>,
    /// How many of the first nameservers are the configured set.
    configured: usize,
    global: SegQueue<(Job, usize)>,
    global_notify: Notify,
    input_done: AtomicBool,
    round_robin: AtomicU32,
    /// `--rate-per-nameserver`, each nameserver's cap.
    rate_per_nameserver: Option<f64>,
}

impl Board {
    /// A board for `configured` nameservers and `threads` workers, each
    /// nameserver capped at `rate_per_nameserver` queries a second.
    pub fn new(
        scheduler: Scheduler,
        configured: &[Endpoint],
        threads: usize,
        queue_capacity: usize,
        rate_per_nameserver: Option<f64>,
    ) -> Board {
        let board = Board {
            scheduler,
            queue_capacity: queue_capacity.max(1),
            threads: threads.max(1),
            nameservers: RwLock::new(Vec::new()),
            by_endpoint: Mutex::new(HashMap::new()),
            configured: 0,
            global: SegQueue::new(),
            global_notify: Notify::new(),
            input_done: AtomicBool::new(false),
            round_robin: AtomicU32::new(0),
            rate_per_nameserver,
        };
        for endpoint in configured {
            board.nameserver(endpoint);
        }
        Board {
            configured: configured.len(),
            ..board
        }
    }

    /// The scheduler in use.
    pub fn scheduler(&self) -> Scheduler {
        self.scheduler
    }

    /// The nameserver for `endpoint`, added on first sight.
    pub fn nameserver(&self, endpoint: &Endpoint) -> Arc<Nameserver> {
        let mut index = sync::lock(&self.by_endpoint);
        let mut list = sync::write(&self.nameservers);
        if let Some(&id) = index.get(endpoint) {
            return list[id].clone();
        }
        let id = list.len();
        let ns = Arc::new(Nameserver {
            id,
            endpoint: endpoint.clone(),
            queue: ArrayQueue::new(self.queue_capacity),
            notify: Notify::new(),
            stats: Arc::default(),
            turns: self.rate_per_nameserver.map(Turns::new),
            consecutive_failures: AtomicU32::new(0),
            cooling_until: Mutex::new(None),
        });
        list.push(ns.clone());
        index.insert(endpoint.clone(), id);
        ns
    }

    /// Every nameserver seen so far.
    pub fn nameservers(&self) -> Vec<Arc<Nameserver>> {
        sync::read(&self.nameservers).clone()
    }

    /// Picks a nameserver for an unpinned job from the configured set: the
    /// one with the shortest priority queue (a slow nameserver's queue stays
    /// long, so it gets less work), ties broken round-robin; deprioritised ones
    /// are skipped while a healthy one is left. The baselines keep no
    /// per-nameserver queues, so for them this is plain round-robin.
    pub fn choose(&self) -> Option<Arc<Nameserver>> {
        let list = sync::read(&self.nameservers);
        let configured = &list[..self.configured.min(list.len())];
        if configured.is_empty() {
            return None;
        }
        let start = self.round_robin.fetch_add(1, Ordering::Relaxed) as usize;
        let n = configured.len();
        let in_turn = (0..n).map(|k| &configured[(start + k) % n]);
        in_turn
            .clone()
            .filter(|ns| !ns.is_cooling())
            .min_by_key(|ns| ns.queue.len())
            .or_else(|| in_turn.min_by_key(|ns| ns.queue.len()))
            .cloned()
    }

    /// The demultiplexer: queues `job` for nameserver `ns`.
    pub fn offer(&self, job: Job, ns: &Arc<Nameserver>) {
        let item = (job, ns.id);
        if self.scheduler == Scheduler::Sticky {
            match ns.queue.push(item) {
                Ok(()) => {
                    ns.notify.notify_one();
                    // A worker homed elsewhere may be idle: let one look.
                    self.global_notify.notify_one();
                    return;
                }
                Err(item) => {
                    self.global.push(item);
                    self.global_notify.notify_one();
                    return;
                }
            }
        }
        self.global.push(item);
        self.global_notify.notify_one();
    }

    /// No more jobs will be offered; idle workers may stop once queues drain.
    pub fn close_input(&self) {
        self.input_done.store(true, Ordering::SeqCst);
        self.global_notify.notify_waiters();
        for ns in self.nameservers() {
            ns.notify.notify_waiters();
        }
    }

    /// Whether the input is done and every queue is empty.
    pub fn drained(&self) -> bool {
        self.input_done.load(Ordering::SeqCst)
            && self.global.is_empty()
            && self.nameservers().iter().all(|ns| ns.queue.is_empty())
    }

    /// The nameserver worker `worker` is homed on (sticky), if any yet.
    pub fn home(&self, worker: usize) -> Option<Arc<Nameserver>> {
        let list = sync::read(&self.nameservers);
        if list.is_empty() {
            return None;
        }
        Some(list[worker % list.len()].clone())
    }

    /// The next job for `worker`: `(job, nameserver id, stolen)`.
    pub fn take(&self, worker: usize) -> Option<(Job, usize, bool)> {
        if self.scheduler != Scheduler::Sticky {
            return self.global.pop().map(|(job, ns)| (job, ns, false));
        }
        self.take_home(worker).or_else(|| self.steal(worker))
    }

    /// The next job on `worker`'s home queue (sticky).
    pub fn take_home(&self, worker: usize) -> Option<(Job, usize, bool)> {
        let home = self.home(worker)?;
        home.queue.pop().map(|(job, ns)| (job, ns, false))
    }

    /// Work from outside the home queue: the global queue, then queues of
    /// nameservers no worker is homed on (there are more of them than workers).
    pub fn steal(&self, _worker: usize) -> Option<(Job, usize, bool)> {
        if let Some((job, ns)) = self.global.pop() {
            return Some((job, ns, true));
        }
        let list = self.nameservers();
        if list.len() > self.threads {
            for ns in &list[self.threads..] {
                if let Some((job, id)) = ns.queue.pop() {
                    return Some((job, id, true));
                }
            }
        }
        None
    }

    /// Waits until work may be there for `worker` (or `limit` passes).
    pub async fn wait_for_work(&self, worker: usize, limit: Duration) {
        let home = if self.scheduler == Scheduler::Sticky {
            self.home(worker)
        } else {
            None
        };
        let global = self.global_notify.notified();
        tokio::pin!(global);
        global.as_mut().enable();
        match home {
            Some(home) => {
                let own = home.notify.notified();
                tokio::pin!(own);
                own.as_mut().enable();
                if !home.queue.is_empty() || !self.global.is_empty() || self.drained() {
                    return;
                }
                tokio::select! {
                    _ = own => {}
                    _ = global => {}
                    _ = tokio::time::sleep(limit) => {}
                }
            }
            None => {
                if !self.global.is_empty() || self.drained() {
                    return;
                }
                tokio::select! {
                    _ = global => {}
                    _ = tokio::time::sleep(limit) => {}
                }
            }
        }
    }

    /// Waits up to `wait` for work on `worker`'s home queue (the PR's
    /// steal-wait variants); true when some arrived.
    pub async fn wait_for_home(&self, worker: usize, wait: Duration) -> bool {
        let Some(home) = self.home(worker) else {
            return false;
        };
        let own = home.notify.notified();
        tokio::pin!(own);
        own.as_mut().enable();
        if !home.queue.is_empty() {
            return true;
        }
        tokio::select! {
            _ = own => true,
            _ = tokio::time::sleep(wait) => !home.queue.is_empty(),
        }
    }

    /// The nameserver with id `id`.
    pub fn by_id(&self, id: usize) -> Arc<Nameserver> {
        sync::read(&self.nameservers)[id].clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dnsluice_net::DnsTransport;

    fn endpoints(n: usize) -> Vec<Endpoint> {
        (1..=n)
            .map(|i| Endpoint::parse(&format!("127.0.0.{i}"), DnsTransport::Udp).unwrap())
            .collect()
    }

    fn job(index: u64) -> Job {
        Job {
            index,
            name: format!("n{index}.example"),
            pinned: None,
        }
    }

    #[test]
    fn unpinned_work_avoids_a_backed_up_nameserver() {
        let ns = endpoints(2);
        let board = Board::new(Scheduler::Sticky, &ns, 2, 8, None);
        let slow = board.nameserver(&ns[0]);
        for i in 0..5 {
            board.offer(job(i), &slow);
        }
        // The first nameserver's queue is long: every choice goes to the other.
        for _ in 0..4 {
            assert_eq!(board.choose().unwrap().endpoint, ns[1]);
        }
    }

    #[test]
    fn baselines_choose_round_robin() {
        let ns = endpoints(3);
        let board = Board::new(Scheduler::Fifo, &ns, 2, 8, None);
        let picks: Vec<Endpoint> = (0..6)
            .map(|_| board.choose().unwrap().endpoint.clone())
            .collect();
        assert_eq!(picks, [&ns[..], &ns[..]].concat());
    }

    #[test]
    fn full_priority_queue_overflows_to_the_global_queue_and_is_stolen() {
        let ns = endpoints(2);
        let board = Board::new(Scheduler::Sticky, &ns, 2, 2, None);
        let first = board.nameserver(&ns[0]);
        for i in 0..3 {
            board.offer(job(i), &first);
        }
        // Worker 0 is homed on the first nameserver: its queue in order...
        assert_eq!(
            board.take(0).map(|(j, _, stolen)| (j.index, stolen)),
            Some((0, false))
        );
        assert_eq!(
            board.take(0).map(|(j, _, stolen)| (j.index, stolen)),
            Some((1, false))
        );
        // ...and worker 1, homed on the idle second one, steals the overflow.
        assert_eq!(
            board.take(1).map(|(j, _, stolen)| (j.index, stolen)),
            Some((2, true))
        );
        assert!(board.take(0).is_none() && board.take(1).is_none());
        assert!(!board.drained());
        board.close_input();
        assert!(board.drained());
    }

    #[test]
    fn failing_nameserver_cools_down() {
        let ns = endpoints(2);
        let board = Board::new(Scheduler::Sticky, &ns, 2, 8, None);
        let bad = board.nameserver(&ns[0]);
        for _ in 0..FAILURES_TO_COOL {
            bad.record_health(false);
        }
        assert!(bad.is_cooling());
        for _ in 0..4 {
            assert_eq!(board.choose().unwrap().endpoint, ns[1]);
        }
        bad.record_health(true);
        assert_eq!(bad.consecutive_failures.load(Ordering::Relaxed), 0);
    }
}

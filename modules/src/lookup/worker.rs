//! Workers: take a job, resolve it over a kept (or, for the baselines, fresh)
//! connection with retries, and hand the result record on.

use super::board::{Nameserver, Scheduler};
use super::job::Job;
use super::qtype::LookupType;
use super::record::Finished;
use super::record::{self, Outcome};
use super::shared::Shared;
use dnsluice_core::dns::{self, Section};
use dnsluice_net::{connect, Connection, NetError, Transport};
use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// How long an idle worker sleeps before looking again, at most.
const IDLE_POLL: Duration = Duration::from_millis(100);

/// Most CNAMEs followed by `ALOOKUP`.
const MAX_CNAME_HOPS: usize = 8;

/// A kept connection and how many queries it carried.
struct Slot {
    connection: Connection,
    uses: AtomicU64,
}

/// Most connections a worker keeps; past this the least recently used one is
/// closed (a worker that stole from many nameservers must not run the process
/// out of file descriptors).
const MAX_KEPT: usize = 64;

/// The kept connection for one (nameserver, transport), if any, and when it
/// was last handed out.
#[derive(Default)]
struct Cell {
    slot: Option<Arc<Slot>>,
    last_used: u64,
}

type Key = (usize, Transport);

/// A worker's connections, by nameserver and transport. Each key has its own
/// lock, held while dialling, so jobs for one nameserver wait for the one
/// connection being opened to it, and jobs for others do not wait at all.
#[derive(Default)]
struct Connections {
    cells: std::sync::Mutex<HashMap<Key, Arc<tokio::sync::Mutex<Cell>>>>,
    tick: AtomicU64,
}

impl Connections {
    fn cell(&self, key: Key, fifo: bool) -> Arc<tokio::sync::Mutex<Cell>> {
        let mut cells = self.cells.lock().unwrap_or_else(|p| p.into_inner());
        if fifo && !cells.contains_key(&key) {
            // ZDNS today: one connection, torn down when the nameserver changes.
            cells.clear();
        }
        if cells.len() >= MAX_KEPT && !cells.contains_key(&key) {
            let oldest = cells
                .iter()
                .filter_map(|(k, c)| c.try_lock().ok().map(|c| (c.last_used, *k)))
                .min_by_key(|(last_used, _)| *last_used);
            if let Some((_, k)) = oldest {
                cells.remove(&k);
            }
        }
        cells.entry(key).or_default().clone()
    }

    /// A usable connection to `ns` over `transport`: the kept one, or a new one.
    /// `fifo` keeps one connection per worker (re-dialling on a change of
    /// nameserver); `random` never keeps any.
    async fn get(
        &self,
        shared: &Shared,
        ns: &Nameserver,
        transport: Transport,
    ) -> Result<Arc<Slot>, NetError> {
        let scheduler = shared.board.scheduler();
        if scheduler == Scheduler::Random {
            return dial(shared, ns, transport).await;
        }
        let cell = self.cell((ns.id, transport), scheduler == Scheduler::Fifo);
        let mut cell = cell.lock().await;
        cell.last_used = self.tick.fetch_add(1, Ordering::Relaxed);
        if let Some(slot) = &cell.slot {
            if slot.connection.broken().is_none() {
                return Ok(slot.clone());
            }
        }
        cell.slot = None;
        let slot = dial(shared, ns, transport).await?;
        cell.slot = Some(slot.clone());
        Ok(slot)
    }

    /// Drops `slot` if it is still the kept connection for `key`.
    async fn forget(&self, key: Key, slot: &Arc<Slot>) {
        let cell = self
            .cells
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .cloned();
        if let Some(cell) = cell {
            let mut cell = cell.lock().await;
            if cell.slot.as_ref().is_some_and(|s| Arc::ptr_eq(s, slot)) {
                cell.slot = None;
            }
        }
    }
}

/// Opens a connection to `ns` over `transport`, counted for `ns`.
async fn dial(
    shared: &Shared,
    ns: &Nameserver,
    transport: Transport,
) -> Result<Arc<Slot>, NetError> {
    let mut endpoint = ns.endpoint.clone();
    endpoint.transport = transport;
    let connection = connect(&endpoint, shared.setup_for(transport)).await?;
    ns.stats.connections_opened.fetch_add(1, Ordering::Relaxed);
    Ok(Arc::new(Slot {
        connection,
        uses: AtomicU64::new(0),
    }))
}

/// Runs worker `id` until the input is done and the queues are drained.
pub async fn run(shared: Arc<Shared>, id: usize) {
    let connections = Arc::new(Connections::default());
    let mut running = JoinSet::new();
    let inflight = shared.config.inflight.max(1);
    loop {
        while running.len() < inflight {
            let Some((job, ns, stolen)) = next_job(&shared, id).await else {
                break;
            };
            if stolen {
                shared.run.steals.fetch_add(1, Ordering::Relaxed);
            }
            let shared = shared.clone();
            let connections = connections.clone();
            running.spawn(async move { resolve_job(&shared, &connections, job, ns).await });
        }
        if running.is_empty() {
            if shared.board.drained() {
                return;
            }
            shared.board.wait_for_work(id, IDLE_POLL).await;
            continue;
        }
        // Room for more and more may come: wake for whichever is first. Once
        // the queues are drained, only the running jobs are left to wait for
        // (waiting for work then would return at once and spin).
        if running.len() < inflight && !shared.board.drained() {
            tokio::select! {
                _ = running.join_next() => {}
                _ = shared.board.wait_for_work(id, IDLE_POLL) => {}
            }
        } else {
            running.join_next().await;
        }
    }
}

/// The next job for worker `id`, honouring `--steal-wait`.
async fn next_job(shared: &Shared, id: usize) -> Option<(Job, usize, bool)> {
    let board = &shared.board;
    if board.scheduler() != Scheduler::Sticky {
        return board.take(id);
    }
    if let Some(job) = board.take_home(id) {
        return Some(job);
    }
    if let Some(wait) = shared.config.steal_wait {
        if board.wait_for_home(id, wait).await {
            if let Some(job) = board.take_home(id) {
                return Some(job);
            }
        }
    }
    board.steal(id)
}

/// Resolves one job and sends its record.
async fn resolve_job(shared: &Shared, connections: &Connections, job: Job, ns_id: usize) {
    let mut guard = RecordGuard {
        shared,
        index: job.index,
        name: &job.name,
        sent: false,
    };
    let pinned = job.pinned.is_some();
    let mut ns = shared.board.by_id(ns_id);
    // An unpinned name was queued for its nameserver when it was read, up to
    // a few hundred names ago; if that nameserver has failed since and is set
    // aside, the name goes to a healthy one instead.
    if !pinned && ns.is_cooling() {
        if let Some(healthy) = shared.board.choose() {
            ns = healthy;
        }
    }
    let started = Instant::now();
    let mut outcome = match shared.config.qtype {
        LookupType::Single(qtype) => {
            let mut outcome = Outcome::default();
            match ask(
                shared,
                connections,
                &ns,
                pinned,
                &job.name,
                qtype,
                &mut outcome,
            )
            .await
            {
                Ok(response) => {
                    outcome.status = record::status_of(&response);
                    outcome.response = Some(response);
                }
                Err(error) => fail(&mut outcome, &error),
            }
            outcome
        }
        LookupType::Addresses => addresses(shared, connections, &ns, pinned, &job.name).await,
    };
    outcome.duration = started.elapsed();
    outcome.nameserver = Some(ns.endpoint.resolver_name());
    if outcome.protocol.is_empty() {
        outcome.protocol = shared.config.transport.protocol_name();
    }
    shared.finish(job.index, &job.name, &outcome);
    guard.sent = true;
}

/// Makes sure a job's record is sent even if its task ends without one (it
/// is cancelled, or it panics in a build that unwinds; release builds abort
/// on panic): without it the run would wait for that record forever.
struct RecordGuard<'a> {
    shared: &'a Shared,
    index: u64,
    name: &'a str,
    sent: bool,
}

impl Drop for RecordGuard<'_> {
    fn drop(&mut self) {
        if !self.sent {
            let outcome = Outcome {
                status: "ERROR".to_string(),
                error: Some("internal error: the lookup was abandoned".to_string()),
                ..Outcome::default()
            };
            self.shared.finish(self.index, self.name, &outcome);
        }
    }
}

fn fail(outcome: &mut Outcome, error: &NetError) {
    outcome.status = match error {
        NetError::Timeout => "TIMEOUT",
        _ => "ERROR",
    }
    .to_string();
    outcome.error = Some(error.to_string());
}

/// Sends one question with retries; the response, or the last error.
async fn ask(
    shared: &Shared,
    connections: &Connections,
    ns: &Nameserver,
    pinned: bool,
    name: &str,
    qtype: u16,
    outcome: &mut Outcome,
) -> Result<Vec<u8>, NetError> {
    let config = &shared.config;
    let mut query = Vec::with_capacity(64);
    dnsluice_net::query::build(0, name, qtype, &config.query, &mut query)
        .map_err(|_| NetError::BadQuery("the name cannot be encoded"))?;
    // A nameserver that keeps failing gets one try for pinned names (an
    // unpinned name was steered away from it, when it was read and again
    // when its job started).
    let tries = if ns.is_cooling() && pinned {
        1
    } else {
        1 + config.retries
    };
    let mut last = NetError::Timeout;
    for attempt in 0..tries {
        if attempt > 0 {
            shared.run.retries.fetch_add(1, Ordering::Relaxed);
        }
        outcome.attempts += 1;
        match exchange_once(shared, connections, ns, config.transport, &query).await {
            Ok(response) => {
                outcome.protocol = config.transport.protocol_name();
                let truncated = dns::Header::parse(&response).is_some_and(|h| h.tc());
                if !(truncated && config.transport == Transport::Udp && config.tcp_fallback) {
                    return Ok(response);
                }
                // TC=1 over UDP: ask again over TCP (RFC 7766 §5).
                shared.run.tcp_fallbacks.fetch_add(1, Ordering::Relaxed);
                outcome.attempts += 1;
                outcome.protocol = Transport::Tcp.protocol_name();
                match exchange_once(shared, connections, ns, Transport::Tcp, &query).await {
                    Ok(response) => return Ok(response),
                    Err(error) => last = error,
                }
            }
            Err(error) => last = error,
        }
    }
    Err(last)
}

/// One exchange on a kept (or new) connection, with the counters. A query
/// that finds its kept connection closed by the server (closed or reset, or
/// the write failed: the server timed the idle connection out just before)
/// is sent again once on a new connection, without counting as an attempt.
async fn exchange_once(
    shared: &Shared,
    connections: &Connections,
    ns: &Nameserver,
    transport: Transport,
    query: &[u8],
) -> Result<Vec<u8>, NetError> {
    match exchange_on_kept(shared, connections, ns, transport, query).await {
        Err((NetError::Closed(_) | NetError::Send(_), true)) => {
            shared.run.stale_redials.fetch_add(1, Ordering::Relaxed);
            exchange_on_kept(shared, connections, ns, transport, query)
                .await
                .map_err(|(error, _)| error)
        }
        result => result.map_err(|(error, _)| error),
    }
}

/// [`exchange_once`] without the second chance: the error comes with
/// whether the connection had been used before (kept, not new).
async fn exchange_on_kept(
    shared: &Shared,
    connections: &Connections,
    ns: &Nameserver,
    transport: Transport,
    query: &[u8],
) -> Result<Vec<u8>, (NetError, bool)> {
    let slot = match connections.get(shared, ns, transport).await {
        Ok(slot) => slot,
        Err(error) => {
            ns.record_health(false);
            return Err((error, false));
        }
    };
    let reused = slot.uses.fetch_add(1, Ordering::Relaxed) > 0;
    if reused {
        shared
            .run
            .connections_reused
            .fetch_add(1, Ordering::Relaxed);
    }
    ns.stats.queries.fetch_add(1, Ordering::Relaxed);
    let result = slot.connection.exchange(query, shared.config.timeout).await;
    match &result {
        Ok(exchange) => {
            ns.record_health(true);
            ns.stats
                .latency
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .record(exchange.latency);
        }
        Err(error) => {
            ns.record_health(false);
            if matches!(error, NetError::Timeout) {
                shared.run.timeouts.fetch_add(1, Ordering::Relaxed);
            }
            if error.breaks_connection() {
                connections.forget((ns.id, transport), &slot).await;
            }
        }
    }
    result
        .map(|exchange| exchange.response)
        .map_err(|error| (error, reused))
}

/// `ALOOKUP`: A and AAAA for `name`, following CNAME chains: within each
/// answer by owner name, and with a new query when the server stopped at a
/// CNAME it is not authoritative for. A loop or a chain longer than
/// [`MAX_CNAME_HOPS`] is an error; addresses found before an error are kept.
async fn addresses(
    shared: &Shared,
    connections: &Connections,
    ns: &Nameserver,
    pinned: bool,
    name: &str,
) -> Outcome {
    let mut outcome = Outcome::default();
    let mut found = (Vec::new(), Vec::new());
    'types: for qtype in [1u16, 28] {
        let mut target = canonical(name);
        let mut visited = vec![target.clone()];
        loop {
            let response = match ask(
                shared,
                connections,
                ns,
                pinned,
                &target,
                qtype,
                &mut outcome,
            )
            .await
            {
                Ok(response) => response,
                Err(error) => {
                    fail(&mut outcome, &error);
                    break 'types;
                }
            };
            let status = record::status_of(&response);
            // The first answer's status, unless a later link of the chain fails.
            if outcome.status.is_empty() || status != "NOERROR" {
                outcome.status = status;
            }
            let (end, addresses) = follow_chain(&response, &target, qtype, &mut visited);
            let list = if qtype == 1 {
                &mut found.0
            } else {
                &mut found.1
            };
            list.extend(addresses);
            match end {
                ChainEnd::Done => break,
                // `visited` holds the name asked for and each CNAME's target.
                ChainEnd::Follow(next) if visited.len() - 1 <= MAX_CNAME_HOPS => target = next,
                ChainEnd::Follow(_) => {
                    outcome.status = "ERROR".to_string();
                    outcome.error = Some(format!("more than {MAX_CNAME_HOPS} CNAMEs"));
                    break 'types;
                }
                ChainEnd::Loop(at) => {
                    outcome.status = "ERROR".to_string();
                    outcome.error = Some(format!("CNAME loop at {at}"));
                    break 'types;
                }
            }
        }
    }
    outcome.addresses = Some(found);
    outcome
}

/// Lower-case presentation form with the trailing dot.
fn canonical(name: &str) -> String {
    let mut s = name.to_ascii_lowercase();
    if !s.ends_with('.') {
        s.push('.');
    }
    s
}

/// How far an answer took a CNAME chain.
enum ChainEnd {
    /// Addresses found, or the chain ends without them.
    Done,
    /// The answer stops at a CNAME target: ask for it.
    Follow(String),
    /// A CNAME leads back to a name already on the chain.
    Loop(String),
}

/// Walks the answer section from `start`: CNAMEs by owner name, then the
/// records of `qtype` owned by the chain's last name.
fn follow_chain(
    msg: &[u8],
    start: &str,
    qtype: u16,
    visited: &mut Vec<String>,
) -> (ChainEnd, Vec<String>) {
    let answers: Vec<_> = dns::records(msg)
        .filter(|r| r.section == Section::Answer)
        .collect();
    let owner = |r: &dns::Record| {
        dns::name::to_string(msg, r.name as usize)
            .map(|n| canonical(&n))
            .ok()
    };
    let mut current = start.to_string();
    while let Some(cname) = answers
        .iter()
        .find(|r| r.rtype == 5 && owner(r).as_deref() == Some(current.as_str()))
    {
        let Ok(next) = dns::name::to_string(msg, cname.rdata_at as usize) else {
            break;
        };
        let next = canonical(&next);
        if visited.contains(&next) {
            return (ChainEnd::Loop(next), Vec::new());
        }
        visited.push(next.clone());
        current = next;
    }
    let addresses: Vec<String> = answers
        .iter()
        .filter(|r| r.rtype == qtype && owner(r).as_deref() == Some(current.as_str()))
        .filter_map(|r| address_text(msg, r))
        .collect();
    if addresses.is_empty() && current != start {
        (ChainEnd::Follow(current), addresses)
    } else {
        (ChainEnd::Done, addresses)
    }
}

/// An A or AAAA record's address as text.
fn address_text(msg: &[u8], record: &dns::Record) -> Option<String> {
    let at = record.rdata_at as usize;
    let rdata = msg.get(at..at + usize::from(record.rdata_len))?;
    match rdata.len() {
        4 => Some(Ipv4Addr::from(<[u8; 4]>::try_from(rdata).ok()?).to_string()),
        16 => Some(Ipv6Addr::from(<[u8; 16]>::try_from(rdata).ok()?).to_string()),
        _ => None,
    }
}

/// A finished record for a line that never became a job.
pub fn bad_line_record(index: u64, name: &str, reason: &str) -> Finished {
    let outcome = Outcome {
        status: "ERROR".to_string(),
        error: Some(reason.to_string()),
        ..Outcome::default()
    };
    Finished::new(index, name, &outcome)
}

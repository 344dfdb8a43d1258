//! Workers: take a job, resolve it over a kept (or, for the baselines, fresh)
//! connection with retries, and hand the result record on.

use super::board::{Nameserver, Scheduler};
use super::engine::{Finished, Shared};
use super::job::Job;
use super::qtype::LookupType;
use super::record::{self, Outcome};
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

/// A worker's connections, by nameserver and transport.
#[derive(Default)]
struct Connections {
    slots: tokio::sync::Mutex<HashMap<(usize, Transport), Arc<Slot>>>,
}

impl Connections {
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
        let key = (ns.id, transport);
        let mut slots = self.slots.lock().await;
        if scheduler != Scheduler::Random {
            if let Some(slot) = slots.get(&key) {
                if slot.connection.broken().is_none() {
                    return Ok(slot.clone());
                }
                slots.remove(&key);
            }
        }
        if scheduler == Scheduler::Fifo {
            // ZDNS today: one connection, torn down when the nameserver changes.
            slots.clear();
        }
        let setup = shared.setup_for(transport);
        let mut endpoint = ns.endpoint.clone();
        endpoint.transport = transport;
        let connection = connect(&endpoint, setup).await?;
        ns.stats.connections_opened.fetch_add(1, Ordering::Relaxed);
        let slot = Arc::new(Slot {
            connection,
            uses: AtomicU64::new(0),
        });
        if scheduler != Scheduler::Random {
            slots.insert(key, slot.clone());
        }
        Ok(slot)
    }

    /// Drops `slot` if it is still the kept connection for `key`.
    async fn forget(&self, key: (usize, Transport), slot: &Arc<Slot>) {
        let mut slots = self.slots.lock().await;
        if slots.get(&key).is_some_and(|s| Arc::ptr_eq(s, slot)) {
            slots.remove(&key);
        }
    }
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
    let ns = shared.board.by_id(ns_id);
    let started = Instant::now();
    let pinned = job.pinned.is_some();
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

/// Makes sure a job's record is sent even if resolving it panics (a bug):
/// without it the run would wait for that record forever.
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
    // unpinned name was already steered away from it).
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

/// One exchange on a kept (or new) connection, with the counters.
async fn exchange_once(
    shared: &Shared,
    connections: &Connections,
    ns: &Nameserver,
    transport: Transport,
    query: &[u8],
) -> Result<Vec<u8>, NetError> {
    let slot = match connections.get(shared, ns, transport).await {
        Ok(slot) => slot,
        Err(error) => {
            ns.record_health(false);
            return Err(error);
        }
    };
    if slot.uses.fetch_add(1, Ordering::Relaxed) > 0 {
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
    result.map(|exchange| exchange.response)
}

/// `ALOOKUP`: A and AAAA for `name`, following CNAMEs the server did not.
async fn addresses(
    shared: &Shared,
    connections: &Connections,
    ns: &Nameserver,
    pinned: bool,
    name: &str,
) -> Outcome {
    let mut outcome = Outcome::default();
    let mut found = (Vec::new(), Vec::new());
    for qtype in [1u16, 28] {
        let mut target = name.to_string();
        for _ in 0..=MAX_CNAME_HOPS {
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
                    return outcome;
                }
            };
            if outcome.status.is_empty() || qtype == 1 && target == name {
                outcome.status = record::status_of(&response);
            }
            let (addresses, next) = collect_addresses(&response, qtype);
            let list = if qtype == 1 {
                &mut found.0
            } else {
                &mut found.1
            };
            list.extend(addresses.iter().cloned());
            match next {
                Some(cname) if addresses.is_empty() => target = cname,
                _ => break,
            }
        }
    }
    outcome.addresses = Some(found);
    outcome
}

/// The addresses of type `qtype` in the answer section, and the last CNAME
/// target (to follow when no address came with it).
fn collect_addresses(msg: &[u8], qtype: u16) -> (Vec<String>, Option<String>) {
    let mut addresses = Vec::new();
    let mut cname = None;
    for record in dns::records(msg).filter(|r| r.section == Section::Answer) {
        let at = record.rdata_at as usize;
        let rdata = &msg[at..at + usize::from(record.rdata_len)];
        match (record.rtype, rdata.len()) {
            (1, 4) if qtype == 1 => {
                addresses.push(Ipv4Addr::new(rdata[0], rdata[1], rdata[2], rdata[3]).to_string())
            }
            (28, 16) if qtype == 28 => {
                let mut octets = [0u8; 16];
                octets.copy_from_slice(rdata);
                addresses.push(Ipv6Addr::from(octets).to_string());
            }
            (5, _) => cname = dns::name::to_string(msg, at).ok(),
            _ => {}
        }
    }
    (addresses, cname)
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

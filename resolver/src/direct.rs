//! Asking the one nameserver a job was given (the lookups without
//! `iterative`): a worker's kept connections, retries, the TCP fallback on
//! TC=1, and the second chance of a query whose kept connection the server
//! had closed.

use super::ask::{Ask, AskError, Question};
use super::board::{Nameserver, Scheduler};
use super::record::Outcome;
use super::shared::Shared;
use super::trace::TraceStep;
use super::transfer::transfer_from;
use super::turns::FirstTurn;
use dnsluice_core::dns;
use dnsluice_core::sync;
use dnsluice_net::{connect, Connection, DnsTransport, NetError};
use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

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

type Key = (usize, DnsTransport);

/// A worker's connections, by nameserver and transport. Each key has its own
/// lock, held while dialling, so jobs for one nameserver wait for the one
/// connection being opened to it, and jobs for others do not wait at all.
#[derive(Default)]
pub struct Connections {
    cells: std::sync::Mutex<HashMap<Key, Arc<tokio::sync::Mutex<Cell>>>>,
    tick: AtomicU64,
}

impl Connections {
    fn cell(&self, key: Key, fifo: bool) -> Arc<tokio::sync::Mutex<Cell>> {
        let mut cells = sync::lock(&self.cells);
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
        transport: DnsTransport,
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
        let cell = sync::lock(&self.cells).get(&key).cloned();
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
    transport: DnsTransport,
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

/// Asks a job's questions of its nameserver.
#[derive(Clone, Copy)]
pub struct DirectAsk<'a> {
    /// What the workers share.
    pub shared: &'a Shared,
    /// The worker's connections.
    pub connections: &'a Connections,
    /// The nameserver.
    pub ns: &'a Nameserver,
    /// The line named its nameserver (a failing one then gets one try).
    pub pinned: bool,
    /// When the name's budget (`--name-timeout`) runs out: no try starts after it.
    pub deadline: Instant,
    /// The name's first turn under `--rate`, taken before its budget started.
    pub first: &'a FirstTurn,
}

impl Ask for DirectAsk<'_> {
    fn ask(
        &self,
        question: Question<'_>,
        outcome: &mut Outcome,
    ) -> impl Future<Output = Result<Vec<u8>, AskError>> + Send {
        let asked = ask(self, question, outcome);
        async move { asked.await.map_err(AskError::from) }
    }

    fn transfer(
        &self,
        zone: &str,
        server: Option<IpAddr>,
        outcome: &mut Outcome,
    ) -> impl Future<Output = Result<Vec<Vec<u8>>, NetError>> + Send {
        transfer(self, zone, server, outcome)
    }

    fn pinned(&self) -> Option<IpAddr> {
        self.pinned.then(|| self.ns.endpoint.addr.ip())
    }
}

/// AXFR of `zone` from `server` (at the job's nameserver's port) or from
/// the job's nameserver itself; one try (a transfer is not retried).
async fn transfer(
    this: &DirectAsk<'_>,
    zone: &str,
    server: Option<IpAddr>,
    outcome: &mut Outcome,
) -> Result<Vec<Vec<u8>>, NetError> {
    let (shared, ns) = (this.shared, this.ns);
    shared.caps(Some(ns)).take(this.first).await;
    let mut endpoint = ns.endpoint.clone();
    if let Some(ip) = server {
        endpoint.addr = SocketAddr::new(ip, endpoint.addr.port());
    }
    if endpoint.transport == DnsTransport::Udp {
        endpoint.transport = DnsTransport::Tcp;
    }
    let setup = shared.setup_for(endpoint.transport);
    let config = &shared.config;
    transfer_from(endpoint, setup, config.query, config.timeout, zone, outcome).await
}

/// Sends one question with retries; the response, or the last error.
async fn ask(
    this: &DirectAsk<'_>,
    question: Question<'_>,
    outcome: &mut Outcome,
) -> Result<Vec<u8>, NetError> {
    let DirectAsk {
        shared,
        connections,
        ns,
        pinned,
        deadline,
        first,
    } = *this;
    let config = &shared.config;
    let mut query = Vec::with_capacity(64);
    let Question {
        name,
        qtype,
        qclass,
    } = question;
    dnsluice_net::query::build_in_class(0, name, qtype, qclass, &config.query, &mut query)
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
    // An answer with an RCODE of --retry-rcodes, kept in case no better comes.
    let mut refusal: Option<Vec<u8>> = None;
    for attempt in 0..tries {
        if attempt > 0 && Instant::now() >= deadline {
            break;
        }
        if attempt > 0 {
            shared.run.retries.fetch_add(1, Ordering::Relaxed);
        }
        outcome.attempts += 1;
        let started = Instant::now();
        let result = exchange_once(
            shared,
            connections,
            ns,
            config.transport,
            &query,
            first,
            deadline,
        )
        .await;
        note_step(
            outcome,
            ns,
            config.transport,
            question,
            attempt,
            &result,
            started,
        );
        match result {
            Ok(response) => {
                outcome.protocol = config.transport.protocol_name();
                let header = dns::Header::parse(&response);
                let truncated = header.is_some_and(|h| h.tc());
                let refused =
                    header.is_some_and(|h| config.retry_rcodes.contains(&(h.rcode() as u8)));
                if refused && attempt + 1 < tries {
                    ns.stats.refusals.fetch_add(1, Ordering::Relaxed);
                    refusal = Some(response);
                    continue;
                }
                if !(truncated && config.transport == DnsTransport::Udp && config.tcp_fallback) {
                    return Ok(response);
                }
                // TC=1 over UDP: ask again over TCP (RFC 7766 §5).
                shared.run.tcp_fallbacks.fetch_add(1, Ordering::Relaxed);
                outcome.attempts += 1;
                outcome.protocol = DnsTransport::Tcp.protocol_name();
                let started = Instant::now();
                let tcp = DnsTransport::Tcp;
                let result =
                    exchange_once(shared, connections, ns, tcp, &query, first, deadline).await;
                note_step(
                    outcome,
                    ns,
                    DnsTransport::Tcp,
                    question,
                    attempt,
                    &result,
                    started,
                );
                match result {
                    Ok(response) => return Ok(response),
                    Err(error) => last = error,
                }
            }
            Err(error) => last = error,
        }
    }
    refusal.ok_or(last)
}

/// Adds the exchange to the outcome's trace, when it collects one.
fn note_step(
    outcome: &mut Outcome,
    ns: &Nameserver,
    transport: DnsTransport,
    question: Question<'_>,
    attempt: u32,
    result: &Result<Vec<u8>, NetError>,
    started: Instant,
) {
    if let Some(trace) = &mut outcome.trace {
        // Names as ZDNS writes them in a trace: without the trailing dot.
        let name = match question.name.strip_suffix('.') {
            Some(n) if !n.is_empty() => n,
            _ => question.name,
        };
        trace.push(TraceStep {
            name: name.to_string(),
            qtype: question.qtype,
            qclass: question.qclass,
            nameserver: ns.endpoint.resolver_name(),
            protocol: transport.protocol_name(),
            depth: 1,
            layer: name.to_string(),
            cached: false,
            try_number: attempt,
            response: result.as_ref().ok().cloned(),
            error: result.as_ref().err().map(ToString::to_string),
            duration: started.elapsed(),
        });
    }
}

/// One exchange on a kept (or new) connection, with the counters, when
/// the caps (`--rate`) give it a turn before the name's `deadline` (else
/// a timeout, nothing sent). A query that finds its kept connection closed
/// by the server (closed or reset, or the write failed: the server timed
/// the idle connection out just before) is sent again once on a new
/// connection, without counting as an attempt (with a turn of its own).
async fn exchange_once(
    shared: &Shared,
    connections: &Connections,
    ns: &Nameserver,
    transport: DnsTransport,
    query: &[u8],
    first: &FirstTurn,
    deadline: Instant,
) -> Result<Vec<u8>, NetError> {
    let caps = shared.caps(Some(ns));
    caps.take(first).await;
    if Instant::now() >= deadline {
        return Err(NetError::Timeout);
    }
    match exchange_on_kept(shared, connections, ns, transport, query).await {
        Err((NetError::Closed(_) | NetError::Send(_), true)) => {
            shared.run.stale_redials.fetch_add(1, Ordering::Relaxed);
            caps.take(&FirstTurn::new(false)).await;
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
    transport: DnsTransport,
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
            sync::lock(&ns.stats.latency).record(exchange.latency);
        }
        Err(error) => {
            ns.record_health(false);
            if matches!(error, NetError::Timeout) {
                shared.run.timeouts.fetch_add(1, Ordering::Relaxed);
                ns.stats.timeouts.fetch_add(1, Ordering::Relaxed);
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

//! The DNS-over-HTTPS engine of `output.dnscli`: a tokio runtime owned by
//! the stage (h2 needs one), one connection per simulated client, at most
//! `inflight` queries outstanding. The synchronous chain hands it [`Job`]s
//! over a bounded channel and gets [`Outcome`]s back (when it asked for
//! responses). The connections are `dnsluice_net`'s tokio driver.

use super::outcome::Outcome;
use super::tally::Tally;
use dnsluice_core::sync;
use dnsluice_net::health::{Failure, Redial};
use dnsluice_net::{connect, ClientSetup, Connection, Endpoint, NetCounters, NetError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, Semaphore};

/// One query to send.
#[derive(Debug)]
pub struct Job {
    /// The simulated client that sends it.
    pub client: u32,
    /// The query (original id).
    pub query: Vec<u8>,
}

/// What every DoH query task shares.
pub struct DohShared {
    /// Where to send.
    pub endpoint: Endpoint,
    /// How to connect.
    pub setup: ClientSetup,
    /// The per-query timeout.
    pub timeout: Duration,
    /// One connection slot per client.
    pub clients: Vec<tokio::sync::Mutex<Slot>>,
    /// The counts.
    pub tally: Mutex<Tally>,
    /// The connection counters (shared with `setup`).
    pub counters: Arc<NetCounters>,
}

/// A client's connection, opened when first needed and reopened when broken.
#[derive(Default)]
pub struct Slot {
    connection: Option<Arc<Connection>>,
    /// The last connect failure, repeated for a while instead of redialling.
    redial: Redial,
}

impl DohShared {
    /// Locks the counts (a panic elsewhere cannot leave them inconsistent).
    pub fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        sync::lock(&self.tally)
    }
}

/// The client's usable connection in `slot`, connecting when there is none.
async fn connection(
    slot: &tokio::sync::Mutex<Slot>,
    endpoint: &Endpoint,
    setup: &ClientSetup,
) -> Result<Arc<Connection>, Failure> {
    let mut slot = slot.lock().await;
    if let Some(conn) = &slot.connection {
        if conn.broken().is_none() {
            return Ok(conn.clone());
        }
        slot.connection = None;
        NetCounters::bump(&setup.counters.connections_closed);
    }
    slot.redial.check(Instant::now())?;
    match connect(endpoint, setup).await {
        Ok(conn) => {
            let conn = Arc::new(conn);
            slot.connection = Some(conn.clone());
            slot.redial.connected();
            Ok(conn)
        }
        Err(e) => Err(slot.redial.failed(&e, Instant::now())),
    }
}

/// Now, in nanoseconds since the Unix epoch (0 if the clock is before it).
fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// One exchange on the client's connection in `slot`.
async fn exchange_on(
    slot: &tokio::sync::Mutex<Slot>,
    endpoint: &Endpoint,
    setup: &ClientSetup,
    query: &[u8],
    timeout: Duration,
) -> Result<Vec<u8>, Failure> {
    let conn = connection(slot, endpoint, setup).await?;
    conn.exchange(query, timeout)
        .await
        .map(|exchange| exchange.response)
        .map_err(|e: NetError| (e.kind(), e.to_string()))
}

/// Sends one query and counts what became of it.
pub async fn run_job(shared: &DohShared, job: Job) -> Outcome {
    let sent_ns = now_ns();
    let started = Instant::now();
    let slot = &shared.clients[job.client as usize % shared.clients.len()];
    let result = exchange_on(
        slot,
        &shared.endpoint,
        &shared.setup,
        &job.query,
        shared.timeout,
    )
    .await;
    let latency = started.elapsed();
    {
        let mut tally = shared.tally();
        match &result {
            Ok(answer) => tally.answered(super::tally::full_rcode_of(answer), latency),
            Err((kind, message)) => tally.failed(kind, message),
        }
    }
    Outcome {
        client: job.client,
        query: job.query,
        result,
        latency,
        sent_ns,
        transport: shared.endpoint.transport,
    }
}

/// Takes jobs until the channel closes, running at most `inflight` at once;
/// returns when every one has finished. Outcomes go to `outcomes` when given
/// (unbounded: none is dropped; see `DnsCli`).
pub async fn dispatch(
    shared: Arc<DohShared>,
    mut jobs: mpsc::Receiver<Job>,
    inflight: usize,
    outcomes: Option<mpsc::UnboundedSender<Outcome>>,
) {
    let permits = Arc::new(Semaphore::new(inflight));
    while let Some(job) = jobs.recv().await {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            break;
        };
        shared.tally().sent();
        let shared = shared.clone();
        let outcomes = outcomes.clone();
        tokio::spawn(async move {
            let outcome = run_job(&shared, job).await;
            if let Some(outcomes) = outcomes {
                // Unbounded: it fails only when the chain has gone, and nobody reads.
                let _ = outcomes.send(outcome);
            }
            drop(permit);
        });
    }
    // Every permit back: every query task has finished.
    let _ = permits.acquire_many(inflight as u32).await;
}

//! The asynchronous side of `output.dnscli`: a tokio runtime owned by the
//! stage, one connection slot per simulated client, at most `inflight`
//! queries outstanding. The synchronous chain hands it [`Job`]s over a bounded
//! channel and gets [`Outcome`]s back (when it asked for responses).

use super::tally::Tally;
use dnsluice_net::{connect, ClientSetup, Connection, Endpoint, NetCounters, NetError, Transport};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, Semaphore};

/// How long a client whose connect failed fails its queries at once before
/// it tries to connect again (so a dead server costs one attempt a second per
/// client, not one per query).
const RECONNECT_AFTER: Duration = Duration::from_secs(1);

/// One query to send.
#[derive(Debug)]
pub struct Job {
    /// The simulated client that sends it.
    pub client: u32,
    /// The query (original id).
    pub query: Vec<u8>,
}

/// What became of one query.
#[derive(Debug)]
pub struct Outcome {
    /// The job's client.
    pub client: u32,
    /// The query as given.
    pub query: Vec<u8>,
    /// The answer, or the kind and text of the error.
    pub result: Result<Vec<u8>, (&'static str, String)>,
    /// From the first write to the answer or the error.
    pub latency: Duration,
    /// When the query was taken up, in ns since the Unix epoch.
    pub sent_ns: i64,
    /// The transport that carried the final attempt.
    pub transport: Transport,
}

/// What every query task shares.
pub struct Shared {
    /// Where to send.
    pub endpoint: Endpoint,
    /// How to connect (the stage's transport).
    pub setup: ClientSetup,
    /// How to connect over TCP for retries of truncated UDP answers; `None`
    /// when those are not retried.
    pub tcp_retry: Option<(Endpoint, ClientSetup)>,
    /// The per-query timeout.
    pub timeout: Duration,
    /// One connection slot per client (and one for its TCP retries).
    pub clients: Vec<ClientSlots>,
    /// The counts.
    pub tally: Mutex<Tally>,
    /// The connection counters (shared with `setup`).
    pub counters: Arc<NetCounters>,
}

/// A client's connections, opened when first needed and reopened when broken.
#[derive(Default)]
pub struct ClientSlots {
    main: tokio::sync::Mutex<Slot>,
    tcp: tokio::sync::Mutex<Slot>,
}

#[derive(Default)]
struct Slot {
    connection: Option<Arc<Connection>>,
    /// The last connect failure: its time, kind and text.
    failed: Option<(Instant, &'static str, String)>,
}

impl Shared {
    /// Locks the counts (a panic elsewhere cannot leave them inconsistent).
    pub fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        self.tally.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The client's usable connection in `slot`, connecting when there is none.
async fn connection(
    slot: &tokio::sync::Mutex<Slot>,
    endpoint: &Endpoint,
    setup: &ClientSetup,
) -> Result<Arc<Connection>, (&'static str, String)> {
    let mut slot = slot.lock().await;
    if let Some(conn) = &slot.connection {
        if conn.broken().is_none() {
            return Ok(conn.clone());
        }
        slot.connection = None;
    }
    if let Some((when, kind, text)) = &slot.failed {
        if when.elapsed() < RECONNECT_AFTER {
            return Err((kind, text.clone()));
        }
    }
    match connect(endpoint, setup).await {
        Ok(conn) => {
            let conn = Arc::new(conn);
            slot.connection = Some(conn.clone());
            slot.failed = None;
            Ok(conn)
        }
        Err(e) => {
            let failure = (e.kind(), e.to_string());
            slot.failed = Some((Instant::now(), failure.0, failure.1.clone()));
            Err(failure)
        }
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
) -> Result<Vec<u8>, (&'static str, String)> {
    let conn = connection(slot, endpoint, setup).await?;
    conn.exchange(query, timeout)
        .await
        .map(|exchange| exchange.response)
        .map_err(|e: NetError| (e.kind(), e.to_string()))
}

/// Sends one query (retrying a truncated UDP answer over TCP when asked) and
/// counts what became of it.
pub async fn run_job(shared: &Shared, job: Job) -> Outcome {
    let sent_ns = now_ns();
    let started = Instant::now();
    let slots = &shared.clients[job.client as usize % shared.clients.len()];
    let mut transport = shared.endpoint.transport;
    let mut result = exchange_on(
        &slots.main,
        &shared.endpoint,
        &shared.setup,
        &job.query,
        shared.timeout,
    )
    .await;
    if let (Ok(answer), Some((endpoint, setup))) = (&result, &shared.tcp_retry) {
        if answer.get(2).is_some_and(|flags| flags & 0x02 != 0) {
            shared.tally().tcp_retry();
            transport = Transport::Tcp;
            result = exchange_on(&slots.tcp, endpoint, setup, &job.query, shared.timeout).await;
        }
    }
    let latency = started.elapsed();
    {
        let mut tally = shared.tally();
        match &result {
            Ok(answer) => tally.answered(answer, latency),
            Err((kind, message)) => tally.failed(kind, message),
        }
    }
    Outcome {
        client: job.client,
        query: job.query,
        result,
        latency,
        sent_ns,
        transport,
    }
}

/// Takes jobs until the channel closes, running at most `inflight` at once;
/// returns when every one has finished. Outcomes go to `outcomes` when given
/// (the channel is sized so that this never waits; see `DnsCli`).
pub async fn dispatch(
    shared: Arc<Shared>,
    mut jobs: mpsc::Receiver<Job>,
    inflight: usize,
    outcomes: Option<mpsc::Sender<Outcome>>,
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
                // Sized to never be full; if the chain has gone, nobody reads.
                let _ = outcomes.try_send(outcome);
            }
            drop(permit);
        });
    }
    // Every permit back: every query task has finished.
    let _ = permits.acquire_many(inflight as u32).await;
}

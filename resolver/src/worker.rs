//! Workers: take a job, resolve it over a kept (or, for the baselines, fresh)
//! connection with retries, and hand the result record on.

use super::board::Scheduler;
use super::direct::{Connections, DirectAsk};
use super::format::RecordStyle;
use super::iterative::IterativeAsk;
use super::job::Job;
use super::modules;
use super::record::{Finished, Outcome};
use super::shared::Shared;
use super::turns::FirstTurn;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// How long an idle worker sleeps before looking again, at most.
const IDLE_POLL: Duration = Duration::from_millis(100);

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
    // Under --rate and --rate-per-nameserver, the name's budget starts
    // with its first turn.
    let caps = shared.caps(shared.iterative.is_none().then_some(&*ns));
    caps.take_first().await;
    let first = FirstTurn::new(caps.any());
    let started = Instant::now();
    let start = Outcome {
        trace: shared.config.style.trace().then(Vec::new),
        ..Outcome::default()
    };
    let config = &shared.config;
    let mut outcome = match &shared.iterative {
        Some(resolver) => {
            let ask = IterativeAsk {
                resolver,
                deadline: started + resolver.config.name_timeout,
                first: &first,
            };
            modules::run(config.qtype, &config.module, &ask, &job.name, start).await
        }
        None => {
            let ask = DirectAsk {
                shared,
                connections,
                ns: &ns,
                pinned,
                deadline: started + config.name_timeout,
                first: &first,
            };
            let mut outcome =
                modules::run(config.qtype, &config.module, &ask, &job.name, start).await;
            outcome.nameserver = Some(ns.endpoint.resolver_name().into());
            outcome
        }
    };
    outcome.duration = started.elapsed();
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

/// A finished record for a line that never became a job.
pub fn bad_line_record(index: u64, name: &str, reason: &str, style: &RecordStyle) -> Finished {
    let outcome = Outcome {
        status: "ERROR".to_string(),
        error: Some(reason.to_string()),
        ..Outcome::default()
    };
    Finished::new(index, name, &outcome, style)
}

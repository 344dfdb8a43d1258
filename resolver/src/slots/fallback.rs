//! Names whose UDP answer came truncated (TC=1) are asked again over TCP
//! (RFC 7766 §5), off the engine's thread: a small tokio runtime, started
//! on the first such name, with one kept connection per nameserver that
//! every fallback to it shares (queries pipelined on it). The record is
//! written when the TCP answer comes, within what is left of the name's
//! budget; the engine has freed the name's slot by then.

use crate::ask::Failure;
use crate::format::RecordStyle;
use crate::record::{status_of, Batch, Finished, Outcome};
use crate::stats::RunCounters;
use crate::trace::TraceStep;
use dnsluice_net::{connect, ClientSetup, Connection, DnsTransport, Endpoint, NetError};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// A name the engine hands over.
pub struct Handover {
    /// Its input line's index.
    pub index: u64,
    /// The name.
    pub name: String,
    /// Its query (any id).
    pub query: Vec<u8>,
    /// The nameserver whose UDP answer was truncated.
    pub server: SocketAddr,
    /// Tries so far (UDP).
    pub attempts: u32,
    /// When the name came in.
    pub started: Instant,
    /// When its budget runs out.
    pub deadline: Instant,
    /// Its trace so far, when records carry one.
    pub trace: Option<Vec<TraceStep>>,
}

/// A kept connection to one nameserver, dialled once for every fallback
/// that needs it.
type Kept = Arc<tokio::sync::Mutex<Option<Arc<Connection>>>>;

/// What every fallback task shares.
struct Context {
    setup: ClientSetup,
    results: mpsc::Sender<Batch>,
    run: Arc<RunCounters>,
    style: RecordStyle,
    max_wait: Duration,
    kept: Mutex<HashMap<SocketAddr, Kept>>,
}

/// The TCP fallback; see the module docs.
pub struct Fallback {
    context: Arc<Context>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Fallback {
    /// A fallback whose records go to `results`; nothing runs before the
    /// first name.
    pub fn new(
        setup: ClientSetup,
        results: mpsc::Sender<Batch>,
        run: Arc<RunCounters>,
        style: RecordStyle,
        max_wait: Duration,
    ) -> Fallback {
        Fallback {
            context: Arc::new(Context {
                setup,
                results,
                run,
                style,
                max_wait,
                kept: Mutex::new(HashMap::new()),
            }),
            runtime: None,
        }
    }

    /// Asks `name` again over TCP.
    pub fn ask(&mut self, name: Handover) {
        let runtime = match &self.runtime {
            Some(runtime) => runtime,
            None => match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("tcp-fallback")
                .enable_all()
                .build()
            {
                Ok(runtime) => self.runtime.insert(runtime),
                Err(e) => {
                    let error = format!("cannot start the TCP fallback: {e}");
                    self.context
                        .write(name, Err(("ERROR", error)), Duration::ZERO);
                    return;
                }
            },
        };
        runtime.spawn(ask(self.context.clone(), name));
    }
}

/// One fallback: the kept connection (dialled if none, again once if the
/// server had closed it), one exchange, the record.
async fn ask(context: Arc<Context>, name: Handover) {
    let kept = dnsluice_core::sync::lock(&context.kept)
        .entry(name.server)
        .or_default()
        .clone();
    let wait = context
        .max_wait
        .min(name.deadline.saturating_duration_since(Instant::now()))
        .max(Duration::from_millis(1));
    let started = Instant::now();
    let mut result = Err(NetError::Timeout);
    // The names falling back to one server share its connection, dialled
    // by one of them while the others wait: each waits no longer than its
    // own budget (a server whose TCP is firewalled once held 3,000 names
    // for one dial's timeout each, one after another).
    let deadline = tokio::time::Instant::from_std(name.deadline);
    for _ in 0..2 {
        let dialled = tokio::time::timeout_at(deadline, connection(&context, &kept, name.server));
        let connection = match dialled.await {
            Ok(Ok(connection)) => connection,
            Ok(Err(e)) => {
                result = Err(e);
                break;
            }
            Err(_) => {
                result = Err(NetError::Timeout);
                break;
            }
        };
        result = connection.exchange(&name.query, wait).await;
        match &result {
            // The server closed the kept connection: once more on a new one.
            Err(NetError::Closed(_) | NetError::Send(_)) => *kept.lock().await = None,
            _ => break,
        }
    }
    let result = result
        .map(|exchange| exchange.response)
        .map_err(|e| (e.status(), e.to_string()));
    context.write(name, result, started.elapsed());
}

/// The kept connection to `server`, dialled when there is none (or it broke).
async fn connection(
    context: &Context,
    kept: &Kept,
    server: SocketAddr,
) -> Result<Arc<Connection>, NetError> {
    let mut kept = kept.lock().await;
    if let Some(connection) = kept.as_ref().filter(|c| c.broken().is_none()) {
        return Ok(connection.clone());
    }
    let endpoint = Endpoint {
        addr: server,
        transport: DnsTransport::Tcp,
        host: None,
        path: String::new(),
    };
    let connection = Arc::new(connect(&endpoint, &context.setup).await?);
    *kept = Some(connection.clone());
    Ok(connection)
}

impl Context {
    /// Writes the record of a fallback that got `result` after `took`.
    fn write(
        &self,
        name: Handover,
        result: Result<Vec<u8>, (&'static str, String)>,
        took: Duration,
    ) {
        let server = name.server.to_string();
        let mut trace = name.trace;
        if let Some(steps) = trace.as_mut() {
            let bare = name.name.strip_suffix('.').filter(|n| !n.is_empty());
            let shown = bare.unwrap_or(&name.name).to_string();
            steps.push(TraceStep {
                name: shown.clone(),
                qtype: dnsluice_net::protocol::question::first_question(&name.query)
                    .and_then(|q| q.get(q.len() - 4..q.len() - 2))
                    .map_or(0, |t| u16::from_be_bytes([t[0], t[1]])),
                qclass: dnsluice_net::query::CLASS_IN,
                nameserver: server.clone(),
                protocol: "tcp",
                depth: 1,
                layer: shown,
                cached: false,
                try_number: name.attempts,
                response: result.as_ref().ok().cloned(),
                error: result.as_ref().err().map(|(_, e)| e.clone()),
                duration: took,
            });
        }
        let (status, response, error) = match result {
            Ok(response) => (status_of(&response), Some(response), None),
            Err((status, error)) => (status.to_string(), None, Some(error)),
        };
        let outcome = Outcome {
            status,
            response,
            error,
            attempts: name.attempts + 1,
            duration: name.started.elapsed(),
            nameserver: Some(server.into()),
            protocol: "tcp",
            trace,
            ..Outcome::default()
        };
        self.run.finished(&outcome.status);
        let _ = self.results.send(vec![Finished::new(
            name.index,
            &name.name,
            &outcome,
            &self.style,
        )]);
    }
}

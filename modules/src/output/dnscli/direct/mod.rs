//! The direct engine of `output.dnscli`, for UDP, TCP and TLS: no runtime, no
//! task, timer or channel per query.
//!
//! Two threads share the clients' links. The chain's thread sends
//! ([`send`]): it picks the query's client, connects when the client has no
//! connection, records the query in the link's table and writes it. A
//! receiver thread ([`receive`]) waits on every socket at once, reads what
//! arrived, matches each answer to its query, counts it and, when the stage
//! hands responses on, queues the outcome for the chain's thread; it sweeps
//! the timeouts every tick ([`sweep`]). At most `inflight` queries are
//! outstanding ([`window`]). A truncated UDP answer goes back to the sender,
//! which retries the query over the client's TCP connection.
//!
//! The sockets, framing, TLS session, id allocation and matching are
//! `dnsluice_net`'s ([`dnsluice_net::poll_driver`], [`dnsluice_net::protocol`]);
//! this engine adds the replay's policies: clients, the window, batching,
//! TCP retries and the tally. Unlike the lookups it does not drop a stream on
//! which queries keep timing out: a replay measures a server that stops
//! answering, it does not route around it.

mod link;
mod receive;
mod send;
mod shared;
mod sweep;
mod window;

use super::outcome::Outcome;
use super::tally::Tally;
use dnsluice_core::sync::lock;
use dnsluice_net::{Endpoint, NetCounters, NetError, TlsOptions};
use link::Pending;
use shared::{now_ns, Core};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How to reach the server, and the TCP fallback for truncated UDP answers.
pub struct Plan {
    /// The server and the stage's transport (UDP, TCP or TLS).
    pub endpoint: Endpoint,
    /// The TLS options (certificate checks), for TLS.
    pub tls: TlsOptions,
    /// Retry truncated UDP answers over TCP.
    pub tcp_retry: bool,
    /// How long a connect and TLS handshake may take.
    pub connect_timeout: Duration,
    /// The per-query timeout.
    pub timeout: Duration,
    /// Clients (one socket or connection each, plus one TCP connection for retries).
    pub clients: u32,
    /// Queries outstanding at most: at first, and when grown (equal: no growth).
    pub inflight: (usize, usize),
    /// Queue every outcome for [`Direct::take_outcomes`] (see also
    /// [`Direct::keep_outcomes`]).
    pub keep_outcomes: bool,
    /// Queries a client holds before it sends them together (UDP: one
    /// `sendmmsg`, equal lengths as one GSO message; TCP: one write; TLS:
    /// one record); 1 sends each at once. Held queries also go out when the
    /// window fills and at the end.
    pub send_batch: usize,
}

/// The engine; see the module docs.
pub struct Direct {
    core: Arc<Core>,
    receiver: Option<JoinHandle<()>>,
}

impl Direct {
    /// Prepares the clients (no connection is opened before the first query)
    /// and starts the receiver thread.
    pub fn start(plan: Plan, counters: Arc<NetCounters>) -> Result<Direct, NetError> {
        let (core, poll) = Core::new(plan, counters)?;
        let core = Arc::new(core);
        let receiver_core = core.clone();
        let receiver = dnsluice_core::thread::named("dnscli-recv")
            .spawn(move || receive::receive_loop(&receiver_core, poll))
            .map_err(|e| NetError::TlsSetup(format!("cannot start the receiver thread: {e}")))?;
        Ok(Direct {
            core,
            receiver: Some(receiver),
        })
    }

    /// Sends `query` from `client`, first waiting while the window is full.
    pub fn submit(&mut self, client: u32, query: &[u8]) {
        let core = &*self.core;
        core.run_retries();
        core.wait_for_room();
        core.sent.fetch_add(1, Ordering::Relaxed);
        let pending = Pending {
            client,
            query: query.to_vec(),
            started: Instant::now(),
            sent_ns: now_ns(),
            retried: false,
        };
        core.send(core.main_link(client), pending);
    }

    /// Queues outcomes from now on (call before the first query).
    pub fn keep_outcomes(&self) {
        self.core.keep.store(true, Ordering::Relaxed);
    }

    /// The outcomes queued since the last call (when they are kept).
    pub fn take_outcomes(&self, into: &mut Vec<Outcome>) {
        if self.core.keep() {
            into.append(&mut lock(&self.core.outcomes));
        }
    }

    /// Waits until every query is answered, timed out or failed, and stops
    /// the receiver thread.
    pub fn finish(&mut self) {
        self.core.wait_for_all();
        self.stop_receiver(false);
    }

    fn stop_receiver(&mut self, abort: bool) {
        self.core.stop.store(true, Ordering::SeqCst);
        self.core.abort.store(abort, Ordering::SeqCst);
        let _ = self.core.waker.wake();
        if let Some(receiver) = self.receiver.take() {
            let _ = receiver.join();
        }
    }

    /// The window's limit now and its cap, and the times the sender found it
    /// full at its cap.
    pub fn window(&self) -> (usize, usize, u64) {
        let w = &self.core.window;
        (w.max(), w.cap(), w.times_bound())
    }

    /// The counts so far.
    pub fn tally(&self) -> Tally {
        let mut tally = lock(&self.core.tally).clone();
        tally.set_sent(self.core.sent.load(Ordering::Relaxed));
        tally
    }
}

impl Drop for Direct {
    fn drop(&mut self) {
        self.stop_receiver(true);
    }
}

//! The direct engine of `output.dnscli`, for UDP, TCP and TLS: no runtime, no
//! task, timer or channel per query.
//!
//! Two threads share the clients' sockets. The chain's thread sends: it
//! picks the query's client, connects when the client has no connection
//! (blocking, with the connect timeout), records the query in the client's
//! table and writes it straight to the socket (one `send` or `write` per query).
//! A receiver thread waits on every socket at once (epoll, through mio), reads
//! what arrived, matches each answer to its query by id and question, counts
//! it and, when the stage hands responses on, queues the outcome for the chain's
//! thread. Timeouts are swept by the receiver every [`tick`]: each client keeps
//! its deadlines in sending order (every query has the same timeout, so the
//! queue is sorted), so a sweep looks only at the front of each queue.
//!
//! At most `inflight` queries are outstanding: the sender waits on a condition
//! variable when the window is full, and the receiver wakes it only when it
//! said it is waiting. A truncated UDP answer goes back to the sender, which
//! retries the query over the client's TCP connection.

use super::engine::Outcome;
use super::tally::Tally;
use crate::output::udpcli::{gso_unsupported, send_some};
use dnsluice_net::ids::QueryIds;
use dnsluice_net::query::same_question;
use dnsluice_net::{tls, Endpoint, NetCounters, NetError, TlsOptions, Transport};
use mio::net::{TcpStream, UdpSocket};
use mio::{Events, Interest, Poll, Token, Waker};
use rustls::pki_types::ServerName;
use rustls::ClientConnection;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a client whose connect failed fails its queries at once before
/// it tries to connect again.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);

/// The receiver's own token (its waker); links use their index.
const WAKER: Token = Token(usize::MAX);

/// How often timeouts are swept: a twentieth of the timeout, between 1 and
/// 50 ms (so a timeout fires at most that much late).
fn tick(timeout: Duration) -> Duration {
    (timeout / 20).clamp(Duration::from_millis(1), Duration::from_millis(50))
}

/// Hashes a wire id (already random) to itself, spread over the word.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | u64::from(*b);
        }
    }
    fn write_u16(&mut self, n: u16) {
        self.0 = u64::from(n);
    }
}

type IdMap<V> = HashMap<u16, V, BuildHasherDefault<IdHasher>>;

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
    /// Queries outstanding at most.
    pub inflight: usize,
    /// Queue every outcome for [`Direct::take_outcomes`] (see also
    /// [`Direct::keep_outcomes`]).
    pub keep_outcomes: bool,
    /// Queries a client holds before it sends them together (UDP: one
    /// `sendmmsg`, equal lengths as one GSO message; TCP: one write; TLS:
    /// one record); 1 sends each at once. Held queries also go out when the
    /// window fills and at the end.
    pub send_batch: usize,
}

/// A query on the wire, waiting for its answer.
struct Pending {
    client: u32,
    /// The query as given (original id).
    query: Vec<u8>,
    /// When it was first written (a retry keeps the first attempt's time).
    started: Instant,
    sent_ns: i64,
    /// Matches the entry in the deadline queue.
    seq: u64,
}

/// An open socket or connection.
enum Conn {
    Udp(UdpSocket),
    Stream(Box<StreamConn>),
}

/// A TCP connection, TLS or not, with what is not yet written and what is
/// read but not yet a whole message.
struct StreamConn {
    tcp: TcpStream,
    tls: Option<ClientConnection>,
    /// Bytes for the socket not yet written (plain TCP; rustls keeps its own).
    out: Vec<u8>,
    /// TLS: framed queries held to go out together as one record.
    held: Vec<u8>,
    /// Received bytes (plaintext), from the start of an incomplete frame.
    inbuf: Vec<u8>,
}

/// One client's socket or connection and the queries on it.
struct LinkState {
    conn: Option<Conn>,
    /// The last connect failure: when, its kind and text.
    failed: Option<(Instant, &'static str, String)>,
    waiting: IdMap<Pending>,
    /// (deadline, wire id, seq), in sending order.
    deadlines: VecDeque<(Instant, u16, u64)>,
    ids: QueryIds,
    seq: u64,
    /// Queries written but held, not sent yet (see [`Plan::send_batch`]);
    /// they are in `waiting`.
    held: usize,
    /// UDP datagrams held (with their wire ids), back to back, and their
    /// (offset, length).
    outbox: Vec<u8>,
    outbox_offsets: Vec<(usize, usize)>,
    /// Send runs of equal-length datagrams as one segmented message (UDP
    /// GSO), until the kernel says it cannot.
    gso: bool,
}

impl LinkState {
    fn new() -> Self {
        LinkState {
            conn: None,
            failed: None,
            waiting: IdMap::default(),
            deadlines: VecDeque::new(),
            ids: QueryIds::default(),
            seq: 0,
            held: 0,
            outbox: Vec::new(),
            outbox_offsets: Vec::new(),
            gso: true,
        }
    }

    /// Adds `query`, with wire id `id`, to the datagrams to send.
    fn hold_datagram(&mut self, id: u16, query: &[u8]) {
        let at = self.outbox.len();
        self.outbox.extend_from_slice(query);
        self.outbox[at..at + 2].copy_from_slice(&id.to_be_bytes());
        self.outbox_offsets.push((at, query.len()));
    }

    /// Sends the held queries.
    fn send_held(&mut self) -> io::Result<()> {
        if self.held == 0 {
            return Ok(());
        }
        self.held = 0;
        let result = match &mut self.conn {
            Some(Conn::Udp(socket)) => {
                send_datagrams(socket, &self.outbox, &self.outbox_offsets, &mut self.gso)
            }
            Some(Conn::Stream(stream)) => stream.send_held(),
            None => Ok(()),
        };
        self.outbox.clear();
        self.outbox_offsets.clear();
        result
    }

    /// A wire id unique among the queries in flight, unpredictable.
    fn next_id(&mut self) -> Option<u16> {
        let waiting = &self.waiting;
        self.ids.next(waiting.len(), |id| waiting.contains_key(&id))
    }
}

struct Link {
    transport: Transport,
    state: Mutex<LinkState>,
}

/// What became of a query, before it is counted.
struct Done {
    pending: Pending,
    result: Result<Option<Vec<u8>>, (&'static str, String)>,
    /// The rcode, for an answer.
    rcode_answer: Option<[u8; 4]>,
    transport: Transport,
}

/// What both threads share.
struct Core {
    plan: Plan,
    tcp_endpoint: Endpoint,
    tls_config: Option<Arc<rustls::ClientConfig>>,
    server_name: Option<ServerName<'static>>,
    /// Per client: the main link, then (with TCP retries) its TCP link.
    links: Vec<Link>,
    registry: mio::Registry,
    waker: Waker,
    inflight: AtomicUsize,
    sender_waiting: AtomicBool,
    window: Mutex<()>,
    window_cv: Condvar,
    /// Finish once nothing is in flight.
    stop: AtomicBool,
    /// Queue outcomes (answers and errors) for the chain's thread.
    keep: AtomicBool,
    /// Finish now (the stage is dropped without finishing).
    abort: AtomicBool,
    sent: AtomicU64,
    tally: Mutex<Tally>,
    outcomes: Mutex<Vec<Outcome>>,
    /// Truncated UDP answers whose queries the sender retries over TCP.
    retries: Mutex<Vec<Pending>>,
    counters: Arc<NetCounters>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update under these locks is complete before the lock is released,
    // so a lock poisoned by a panic elsewhere still holds consistent data.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Now, in nanoseconds since the Unix epoch.
fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
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
        let transport = plan.endpoint.transport;
        let (tls_config, server_name) = if transport == Transport::Tls {
            let config = tls::client_config(&plan.tls, &[b"dot"])?;
            let name = tls::server_name(
                &plan.tls,
                plan.endpoint.host.as_deref(),
                plan.endpoint.addr.ip(),
            )?;
            (Some(config), Some(name))
        } else {
            (None, None)
        };
        let poll = Poll::new().map_err(|e| NetError::TlsSetup(format!("epoll: {e}")))?;
        let registry = poll
            .registry()
            .try_clone()
            .map_err(|e| NetError::TlsSetup(format!("epoll: {e}")))?;
        let waker =
            Waker::new(&registry, WAKER).map_err(|e| NetError::TlsSetup(format!("epoll: {e}")))?;
        let keep = plan.keep_outcomes;
        let retry_links = transport == Transport::Udp && plan.tcp_retry;
        let mut links = Vec::new();
        for _ in 0..plan.clients {
            links.push(Link {
                transport,
                state: Mutex::new(LinkState::new()),
            });
            if retry_links {
                links.push(Link {
                    transport: Transport::Tcp,
                    state: Mutex::new(LinkState::new()),
                });
            }
        }
        let tcp_endpoint = Endpoint {
            transport: Transport::Tcp,
            ..plan.endpoint.clone()
        };
        let core = Arc::new(Core {
            plan,
            tcp_endpoint,
            tls_config,
            server_name,
            links,
            registry,
            waker,
            inflight: AtomicUsize::new(0),
            sender_waiting: AtomicBool::new(false),
            window: Mutex::new(()),
            window_cv: Condvar::new(),
            stop: AtomicBool::new(false),
            keep: AtomicBool::new(keep),
            abort: AtomicBool::new(false),
            sent: AtomicU64::new(0),
            tally: Mutex::new(Tally::new()),
            outcomes: Mutex::new(Vec::new()),
            retries: Mutex::new(Vec::new()),
            counters,
        });
        let receiver_core = core.clone();
        let receiver = std::thread::Builder::new()
            .name("dnscli-recv".into())
            .spawn(move || receive_loop(&receiver_core, poll))
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
            seq: 0,
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
        let core = &*self.core;
        core.send_all_held();
        loop {
            core.run_retries();
            let guard = lock(&core.window);
            core.sender_waiting.store(true, Ordering::SeqCst);
            if core.inflight.load(Ordering::SeqCst) == 0 && lock(&core.retries).is_empty() {
                core.sender_waiting.store(false, Ordering::SeqCst);
                break;
            }
            let _ = core
                .window_cv
                .wait_timeout(guard, Duration::from_millis(20));
            core.sender_waiting.store(false, Ordering::SeqCst);
        }
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

impl Core {
    fn keep(&self) -> bool {
        self.keep.load(Ordering::Relaxed)
    }

    fn links_per_client(&self) -> usize {
        if self.links.len() > self.plan.clients as usize {
            2
        } else {
            1
        }
    }

    fn main_link(&self, client: u32) -> usize {
        (client % self.plan.clients) as usize * self.links_per_client()
    }

    /// Where a full window reopens: waking the sender for every answer would
    /// cost a context switch per query, so it waits until an eighth of the
    /// window (at most 64 queries) is free.
    fn low_water(&self) -> usize {
        let max = self.plan.inflight;
        max - (max / 8).clamp(1, 64)
    }

    /// Waits while `inflight` queries are outstanding (then until the window
    /// is down to [`Core::low_water`]), sending retries meanwhile.
    fn wait_for_room(&self) {
        if self.inflight.load(Ordering::SeqCst) < self.plan.inflight {
            return;
        }
        // The held queries go out before we wait for their answers.
        self.send_all_held();
        let low = self.low_water();
        loop {
            self.run_retries();
            let guard = lock(&self.window);
            self.sender_waiting.store(true, Ordering::SeqCst);
            if self.inflight.load(Ordering::SeqCst) <= low && lock(&self.retries).is_empty() {
                self.sender_waiting.store(false, Ordering::SeqCst);
                return;
            }
            // The timeout only guards against a lost wake-up; the receiver
            // notifies under the lock.
            let _ = self
                .window_cv
                .wait_timeout(guard, Duration::from_millis(100));
            self.sender_waiting.store(false, Ordering::SeqCst);
        }
    }

    /// Wakes the sender if it waits and there is room (or, with `force`,
    /// retries to send).
    fn wake_sender(&self, force: bool) {
        if self.sender_waiting.load(Ordering::SeqCst)
            && (force || self.inflight.load(Ordering::SeqCst) <= self.low_water())
        {
            let _guard = lock(&self.window);
            self.window_cv.notify_one();
        }
    }

    /// Sends the queries of truncated UDP answers again over TCP.
    fn run_retries(&self) {
        let retries = std::mem::take(&mut *lock(&self.retries));
        for pending in retries {
            let link = self.main_link(pending.client) + 1;
            self.send(link, pending);
        }
    }

    /// Writes `pending` on link `index`, connecting first if needed; a failure
    /// is counted at once. A query that is already in flight (a retry) keeps
    /// its place in the window.
    fn send(&self, index: usize, mut pending: Pending) {
        let link = &self.links[index];
        let retry = pending.seq != 0;
        let mut state = lock(&link.state);
        if let Err(failure) = self.ensure_connected(index, link.transport, &mut state) {
            drop(state);
            self.finish_one(Done {
                pending,
                result: Err(failure),
                rcode_answer: None,
                transport: link.transport,
            });
            if retry {
                self.release(1);
            }
            return;
        }
        let Some(id) = state.next_id() else {
            drop(state);
            self.finish_one(Done {
                pending,
                result: Err((
                    "bad_query",
                    "bad query: 65535 queries already in flight".into(),
                )),
                rcode_answer: None,
                transport: link.transport,
            });
            if retry {
                self.release(1);
            }
            return;
        };
        state.seq += 1;
        pending.seq = state.seq;
        let deadline = Instant::now() + self.plan.timeout;
        if !retry {
            pending.started = Instant::now();
            self.inflight.fetch_add(1, Ordering::SeqCst);
        }
        let seq = pending.seq;
        let batch = self.plan.send_batch;
        // A retry goes at once: its query has waited already.
        let hold = batch > 1 && !retry;
        let st = &mut *state;
        let written = match st.conn.as_mut() {
            Some(Conn::Udp(_)) if hold => {
                st.hold_datagram(id, &pending.query);
                Ok(())
            }
            Some(Conn::Udp(socket)) => send_datagram(socket, id, &pending.query),
            Some(Conn::Stream(stream)) => stream.write_query(id, &pending.query, hold),
            None => Err(io::Error::new(io::ErrorKind::NotConnected, "not connected")),
        };
        match written {
            Ok(()) => {
                NetCounters::bump(&self.counters.queries_sent);
                state.waiting.insert(id, pending);
                state.deadlines.push_back((deadline, id, seq));
                state.held += usize::from(hold);
                if state.held >= batch {
                    if let Err(e) = state.send_held() {
                        self.fail_link(link, state, e, None);
                    }
                }
            }
            Err(e) => self.fail_link(link, state, e, Some(pending)),
        }
    }

    /// A write on `link` failed with `e`: closes it, failing what waits on
    /// it (and `pending`, the query that was being written, if any).
    fn fail_link(
        &self,
        link: &Link,
        mut state: MutexGuard<'_, LinkState>,
        e: io::Error,
        pending: Option<Pending>,
    ) {
        let reason = format!("write failed: {e}");
        let mut failed = close_link(&mut state, link.transport, &reason);
        drop(state);
        if let Some(pending) = pending {
            failed.push(Done {
                pending,
                result: Err(("send", NetError::Send(e).to_string())),
                rcode_answer: None,
                transport: link.transport,
            });
        }
        let n = failed.len();
        self.finish_all(failed);
        self.release(n);
    }

    /// Sends every link's held datagrams (before waiting, and at the end).
    fn send_all_held(&self) {
        if self.plan.send_batch <= 1 {
            return;
        }
        for link in &self.links {
            let mut state = lock(&link.state);
            if let Err(e) = state.send_held() {
                self.fail_link(link, state, e, None);
            }
        }
    }

    /// Opens the link's socket or connection if it has none (unless a connect
    /// failed less than [`RECONNECT_AFTER`] ago).
    fn ensure_connected(
        &self,
        index: usize,
        transport: Transport,
        state: &mut LinkState,
    ) -> Result<(), (&'static str, String)> {
        if state.conn.is_some() {
            return Ok(());
        }
        if let Some((when, kind, text)) = &state.failed {
            if when.elapsed() < RECONNECT_AFTER {
                return Err((kind, text.clone()));
            }
        }
        match self.connect(index, transport) {
            Ok(conn) => {
                NetCounters::bump(&self.counters.connections_opened);
                state.conn = Some(conn);
                state.failed = None;
                Ok(())
            }
            Err(e) => {
                NetCounters::bump(&self.counters.connect_failures);
                let failure = (e.kind(), e.to_string());
                state.failed = Some((Instant::now(), failure.0, failure.1.clone()));
                Err(failure)
            }
        }
    }

    fn connect(&self, index: usize, transport: Transport) -> Result<Conn, NetError> {
        let endpoint = match transport {
            Transport::Tcp => &self.tcp_endpoint,
            _ => &self.plan.endpoint,
        };
        let addr = endpoint.addr;
        let name = endpoint.resolver_name();
        let connect_error = |error: io::Error| NetError::Connect {
            addr: name.clone(),
            error,
        };
        let token = Token(index);
        match transport {
            Transport::Udp => {
                let local: std::net::SocketAddr = if addr.is_ipv4() {
                    (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
                } else {
                    (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
                };
                let socket = std::net::UdpSocket::bind(local).map_err(connect_error)?;
                socket.connect(addr).map_err(connect_error)?;
                socket.set_nonblocking(true).map_err(connect_error)?;
                let mut socket = UdpSocket::from_std(socket);
                self.registry
                    .register(&mut socket, token, Interest::READABLE)
                    .map_err(connect_error)?;
                Ok(Conn::Udp(socket))
            }
            Transport::Tcp | Transport::Tls => {
                let mut tcp =
                    std::net::TcpStream::connect_timeout(&addr, self.plan.connect_timeout)
                        .map_err(connect_error)?;
                let _ = tcp.set_nodelay(true);
                let tls = match (&self.tls_config, &self.server_name, transport) {
                    (Some(config), Some(server_name), Transport::Tls) => {
                        Some(self.handshake(&mut tcp, config, server_name, &name)?)
                    }
                    _ => None,
                };
                tcp.set_nonblocking(true).map_err(connect_error)?;
                let mut tcp = TcpStream::from_std(tcp);
                self.registry
                    .register(&mut tcp, token, Interest::READABLE | Interest::WRITABLE)
                    .map_err(connect_error)?;
                Ok(Conn::Stream(Box::new(StreamConn {
                    tcp,
                    tls,
                    out: Vec::new(),
                    held: Vec::new(),
                    inbuf: Vec::new(),
                })))
            }
            Transport::Https => Err(NetError::TlsSetup(
                "the direct engine does not speak HTTPS".into(),
            )),
        }
    }

    /// A blocking TLS handshake on `tcp`, within the connect timeout.
    fn handshake(
        &self,
        tcp: &mut std::net::TcpStream,
        config: &Arc<rustls::ClientConfig>,
        server_name: &ServerName<'static>,
        name: &str,
    ) -> Result<ClientConnection, NetError> {
        let failed = |error: io::Error| NetError::Handshake {
            addr: name.to_string(),
            error,
        };
        let deadline = Instant::now() + self.plan.connect_timeout;
        let mut conn = ClientConnection::new(config.clone(), server_name.clone())
            .map_err(|e| failed(io::Error::new(io::ErrorKind::InvalidData, e)))?;
        while conn.is_handshaking() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(failed(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "handshake timed out",
                )));
            }
            tcp.set_read_timeout(Some(left)).map_err(failed)?;
            tcp.set_write_timeout(Some(left)).map_err(failed)?;
            conn.complete_io(tcp).map_err(failed)?;
        }
        // Whatever the handshake left to write (a ticket acknowledgement).
        while conn.wants_write() {
            conn.write_tls(tcp).map_err(failed)?;
        }
        tcp.set_read_timeout(None).map_err(failed)?;
        tcp.set_write_timeout(None).map_err(failed)?;
        NetCounters::bump(&self.counters.tls_handshakes);
        Ok(conn)
    }

    /// Counts `done` and queues its outcome.
    fn finish_one(&self, done: Done) {
        self.finish_all(vec![done]);
    }

    /// Counts every query in `done` and queues their outcomes.
    fn finish_all(&self, done: Vec<Done>) {
        if done.is_empty() {
            return;
        }
        let mut outcomes = Vec::new();
        {
            let mut tally = lock(&self.tally);
            for d in done {
                let latency = d.pending.started.elapsed();
                match (&d.result, d.rcode_answer) {
                    (Ok(_), Some(header)) => tally.answered(&header, latency),
                    (Ok(_), None) => tally.answered(&[0; 4], latency),
                    (Err((kind, message)), _) => tally.failed(kind, message),
                }
                if self.keep() {
                    outcomes.push(Outcome {
                        client: d.pending.client,
                        query: d.pending.query,
                        result: d.result.map(Option::unwrap_or_default),
                        latency,
                        sent_ns: d.pending.sent_ns,
                        transport: d.transport,
                    });
                }
            }
        }
        if !outcomes.is_empty() {
            lock(&self.outcomes).append(&mut outcomes);
        }
    }

    /// `n` queries left the window.
    fn release(&self, n: usize) {
        if n > 0 {
            self.inflight.fetch_sub(n, Ordering::SeqCst);
            self.wake_sender(false);
        }
    }
}

/// Sends one datagram with the wire id `id`, waiting (briefly, in poll) while
/// the socket buffer is full.
fn send_datagram(socket: &UdpSocket, id: u16, query: &[u8]) -> io::Result<()> {
    let mut datagram = [0u8; 1500];
    let mut large;
    let buf: &mut [u8] = if query.len() <= datagram.len() {
        &mut datagram[..query.len()]
    } else {
        large = query.to_vec();
        &mut large
    };
    buf.copy_from_slice(query);
    buf[..2].copy_from_slice(&id.to_be_bytes());
    loop {
        match socket.send(buf) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => wait_writable(socket)?,
            // An ICMP error from an earlier datagram: this one can still go.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Sends the datagrams at `offsets` in `data` (each with its wire id
/// already in place) with as few `sendmmsg` calls as the kernel allows,
/// runs of equal length as one GSO message while `gso` holds.
fn send_datagrams(
    socket: &UdpSocket,
    data: &[u8],
    offsets: &[(usize, usize)],
    gso: &mut bool,
) -> io::Result<()> {
    let mut next = 0;
    while next < offsets.len() {
        match send_some(socket, data, &offsets[next..], *gso) {
            Ok(n) => next += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => wait_writable(socket)?,
            Err(e) if *gso && gso_unsupported(&e) => *gso = false,
            // An ICMP error from an earlier datagram: these can still go.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Waits up to a second for `socket` to take more data.
fn wait_writable(socket: &impl std::os::fd::AsRawFd) -> io::Result<()> {
    let mut fd = libc::pollfd {
        fd: socket.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd, for the duration of the call.
    let n = unsafe { libc::poll(&mut fd, 1, 1000) };
    match n {
        n if n < 0 => {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(e)
            }
        }
        0 => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the socket stayed full for a second",
        )),
        _ => Ok(()),
    }
}

impl StreamConn {
    /// Queues one framed query with wire id `id` and, unless `hold`, writes
    /// what the socket takes (held queries go with the next write or
    /// [`StreamConn::send_held`]).
    fn write_query(&mut self, id: u16, query: &[u8], hold: bool) -> io::Result<()> {
        let len = u16::try_from(query.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "query over 65535 bytes"))?;
        let mut head = [0u8; 4];
        head[..2].copy_from_slice(&len.to_be_bytes());
        head[2..].copy_from_slice(&id.to_be_bytes());
        // TLS: into the held plaintext, written as one record; TCP: into the
        // bytes for the socket.
        let queue = if self.tls.is_some() {
            &mut self.held
        } else {
            &mut self.out
        };
        queue.extend_from_slice(&head);
        queue.extend_from_slice(&query[2..]);
        if hold {
            return Ok(());
        }
        self.send_held()
    }

    /// Writes the held queries (TLS: as one record) and what else is queued.
    fn send_held(&mut self) -> io::Result<()> {
        if let Some(tls) = &mut self.tls {
            if !self.held.is_empty() {
                tls.writer().write_all(&self.held)?;
                self.held.clear();
            }
        }
        self.flush()
    }

    /// Writes what is queued until the socket would block.
    fn flush(&mut self) -> io::Result<()> {
        match &mut self.tls {
            Some(tls) => {
                while tls.wants_write() {
                    match tls.write_tls(&mut self.tcp) {
                        Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
            }
            None => {
                let mut at = 0;
                while at < self.out.len() {
                    match self.tcp.write(&self.out[at..]) {
                        Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                        Ok(n) => at += n,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                self.out.drain(..at);
            }
        }
        Ok(())
    }

    /// Reads what arrived into `inbuf` (decrypting for TLS). `Err` carries why
    /// the connection is over.
    fn read_available(&mut self, scratch: &mut [u8]) -> Result<(), String> {
        loop {
            match &mut self.tls {
                Some(tls) => {
                    match tls.read_tls(&mut self.tcp) {
                        Ok(0) => return Err(self.ended()),
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => return Err(format!("receive failed: {e}")),
                    }
                    tls.process_new_packets()
                        .map_err(|e| format!("TLS error from the server: {e}"))?;
                    loop {
                        match tls.reader().read(scratch) {
                            Ok(0) => return Err(self.ended()),
                            Ok(n) => self.inbuf.extend_from_slice(&scratch[..n]),
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                            Err(e) => return Err(format!("receive failed: {e}")),
                        }
                    }
                    // Alerts or key updates rustls wants to answer.
                    self.flush().map_err(|e| format!("write failed: {e}"))?;
                }
                None => match self.tcp.read(scratch) {
                    Ok(0) => return Err(self.ended()),
                    Ok(n) => self.inbuf.extend_from_slice(&scratch[..n]),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(format!("receive failed: {e}")),
                },
            }
        }
    }

    /// Why the stream ended: cleanly between messages, or inside one.
    fn ended(&self) -> String {
        if self.inbuf.is_empty() {
            "the server closed the connection".to_string()
        } else {
            "the connection ended inside a message".to_string()
        }
    }
}

/// Marks the link's connection gone and fails every query on it.
fn close_link(state: &mut LinkState, transport: Transport, reason: &str) -> Vec<Done> {
    state.conn = None;
    state.deadlines.clear();
    state.held = 0;
    state.outbox.clear();
    state.outbox_offsets.clear();
    let message = NetError::Closed(reason.to_string()).to_string();
    state
        .waiting
        .drain()
        .map(|(_, pending)| Done {
            pending,
            result: Err(("closed", message.clone())),
            rcode_answer: None,
            transport,
        })
        .collect()
}

/// Matches `message` to the query waiting for it on `state`.
fn deliver(
    core: &Core,
    state: &mut LinkState,
    transport: Transport,
    message: &[u8],
    done: &mut Vec<Done>,
    retries: &mut Vec<Pending>,
) {
    if message.len() < 12 {
        NetCounters::bump(&core.counters.unmatched_responses);
        return;
    }
    let id = u16::from_be_bytes([message[0], message[1]]);
    let matches = state
        .waiting
        .get(&id)
        .is_some_and(|p| same_question(&p.query, message));
    if !matches {
        NetCounters::bump(&core.counters.unmatched_responses);
        return;
    }
    let Some(pending) = state.waiting.remove(&id) else {
        return;
    };
    let truncated = message[2] & 0x02 != 0;
    if truncated && transport == Transport::Udp && core.plan.tcp_retry {
        lock(&core.tally).tcp_retry();
        retries.push(pending);
        return;
    }
    let header = [pending.query[0], pending.query[1], message[2], message[3]];
    let answer = core.keep().then(|| {
        let mut answer = message.to_vec();
        answer[..2].copy_from_slice(&pending.query[..2]);
        answer
    });
    done.push(Done {
        pending,
        result: Ok(answer),
        rcode_answer: Some(header),
        transport,
    });
}

/// After a poll that found something, this many polls in a row look
/// without sleeping before the receiver sleeps in `epoll_wait`: while
/// answers stream in, the next one usually arrives within them, and each
/// sleep and wake-up costs a context switch (measured over UDP against knot:
/// 2.8-3.1 instead of 2.9-3.4 µs of CPU per query, and more queries per second).
const IDLE_POLLS: u32 = 4;

/// The receiver thread: reads answers, flushes writes, sweeps timeouts.
fn receive_loop(core: &Core, mut poll: Poll) {
    let mut events = Events::with_capacity(256);
    // Room for RECV_BATCH datagrams of any size (UDP), or one large read (TCP).
    let mut scratch = vec![0u8; RECV_BATCH * RECV_SLOT];
    let mut done = Vec::new();
    let mut retries = Vec::new();
    let tick = tick(core.plan.timeout);
    let mut next_sweep = Instant::now() + tick;
    // Empty polls in a row so far; below IDLE_POLLS the next poll does not sleep.
    let mut idle = 0u32;
    loop {
        let wait = if idle < IDLE_POLLS {
            Duration::ZERO
        } else {
            next_sweep.saturating_duration_since(Instant::now())
        };
        let polled = poll.poll(&mut events, Some(wait));
        if events.is_empty() {
            idle += 1;
        } else {
            idle = 0;
        }
        if let Err(e) = polled {
            if e.kind() != io::ErrorKind::Interrupted {
                // Nothing can be received any more: fail what is in flight.
                for link in &core.links {
                    let mut state = lock(&link.state);
                    done.extend(close_link(
                        &mut state,
                        link.transport,
                        &format!("epoll: {e}"),
                    ));
                }
            }
        }
        for event in events.iter() {
            let Some(link) = core.links.get(event.token().0) else {
                continue;
            };
            let mut state = lock(&link.state);
            let transport = link.transport;
            handle_event(
                core,
                &mut state,
                transport,
                event.is_writable(),
                &mut scratch,
                &mut done,
                &mut retries,
            );
        }
        if Instant::now() >= next_sweep {
            sweep(core, &mut done);
            next_sweep = Instant::now() + tick;
        }
        let n = done.len();
        if n > 0 {
            core.finish_all(std::mem::take(&mut done));
            core.release(n);
        }
        if !retries.is_empty() {
            lock(&core.retries).append(&mut retries);
            core.wake_sender(true);
        }
        if core.abort.load(Ordering::SeqCst)
            || (core.stop.load(Ordering::SeqCst) && core.inflight.load(Ordering::SeqCst) == 0)
        {
            return;
        }
    }
}

/// Datagrams read by one `recvmmsg`.
const RECV_BATCH: usize = 16;
/// Room for one datagram: the largest a UDP socket can receive.
const RECV_SLOT: usize = 65536;

/// Reads up to [`RECV_BATCH`] datagrams waiting on `socket` with one
/// `recvmmsg`, datagram `i` into `scratch[i * RECV_SLOT..]`, its length in
/// `lens[i]`; how many were read (an error, `WouldBlock` included, if none).
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn recv_batch(
    socket: &UdpSocket,
    scratch: &mut [u8],
    lens: &mut [usize; RECV_BATCH],
) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    let slots = (scratch.len() / RECV_SLOT).min(RECV_BATCH);
    // SAFETY: iovec and mmsghdr are plain C structs for which all-zero bytes
    // are a valid value (null pointers, zero lengths).
    let mut iovecs: [libc::iovec; RECV_BATCH] = unsafe { std::mem::zeroed() };
    let mut messages: [libc::mmsghdr; RECV_BATCH] = unsafe { std::mem::zeroed() };
    for i in 0..slots {
        iovecs[i].iov_base = scratch[i * RECV_SLOT..].as_mut_ptr() as *mut libc::c_void;
        iovecs[i].iov_len = RECV_SLOT;
        messages[i].msg_hdr.msg_iov = &mut iovecs[i];
        messages[i].msg_hdr.msg_iovlen = 1;
    }
    // SAFETY: each message points at its own RECV_SLOT bytes of `scratch`,
    // which outlive the call; the socket is connected (no address wanted).
    let n = unsafe {
        libc::recvmmsg(
            socket.as_raw_fd(),
            messages.as_mut_ptr(),
            slots as libc::c_uint,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = n as usize;
    for i in 0..n {
        lens[i] = (messages[i].msg_len as usize).min(RECV_SLOT);
    }
    Ok(n)
}

/// One `recv` (platforms without `recvmmsg`).
#[cfg(not(target_os = "linux"))]
fn recv_batch(
    socket: &UdpSocket,
    scratch: &mut [u8],
    lens: &mut [usize; RECV_BATCH],
) -> io::Result<usize> {
    lens[0] = socket.recv(&mut scratch[..RECV_SLOT])?;
    Ok(1)
}

/// Reads (and for streams, flushes) one link after an event.
fn handle_event(
    core: &Core,
    state: &mut LinkState,
    transport: Transport,
    writable: bool,
    scratch: &mut [u8],
    done: &mut Vec<Done>,
    retries: &mut Vec<Pending>,
) {
    let closed = match state.conn.take() {
        None => return,
        Some(Conn::Udp(socket)) => {
            let mut result = Ok(());
            let mut lens = [0usize; RECV_BATCH];
            loop {
                match recv_batch(&socket, scratch, &mut lens) {
                    Ok(n) => {
                        for (i, len) in lens[..n].iter().enumerate() {
                            let slot = &scratch[i * RECV_SLOT..i * RECV_SLOT + len];
                            deliver(core, state, transport, slot, done, retries);
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    // ICMP port unreachable and friends: the queries will time out.
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        result = Err(format!("receive failed: {e}"));
                        break;
                    }
                }
            }
            state.conn = Some(Conn::Udp(socket));
            result
        }
        Some(Conn::Stream(mut stream)) => {
            let mut result = Ok(());
            if writable {
                if let Err(e) = stream.flush() {
                    result = Err(format!("write failed: {e}"));
                }
            }
            if result.is_ok() {
                result = stream.read_available(scratch);
            }
            // Whole messages, even when the stream then ended.
            let mut at = 0;
            while let Some(prefix) = stream.inbuf.get(at..at + 2) {
                let len = usize::from(u16::from_be_bytes([prefix[0], prefix[1]]));
                let Some(message) = stream.inbuf.get(at + 2..at + 2 + len) else {
                    break;
                };
                deliver(core, state, transport, message, done, retries);
                at += 2 + len;
            }
            stream.inbuf.drain(..at);
            state.conn = Some(Conn::Stream(stream));
            result
        }
    };
    if let Err(reason) = closed {
        if let Some(conn) = state.conn.take() {
            deregister(core, conn);
        }
        done.extend(close_link(state, transport, &reason));
    }
}

fn deregister(core: &Core, conn: Conn) {
    let _ = match conn {
        Conn::Udp(mut socket) => core.registry.deregister(&mut socket),
        Conn::Stream(mut stream) => core.registry.deregister(&mut stream.tcp),
    };
}

/// Times out the queries whose deadline has passed, and drops the answered
/// ones from the front of every deadline queue.
fn sweep(core: &Core, done: &mut Vec<Done>) {
    if core.inflight.load(Ordering::SeqCst) == 0 {
        return;
    }
    let now = Instant::now();
    for link in &core.links {
        let mut state = lock(&link.state);
        while let Some(&(deadline, id, seq)) = state.deadlines.front() {
            let live = state.waiting.get(&id).is_some_and(|p| p.seq == seq);
            if !live {
                state.deadlines.pop_front();
                continue;
            }
            if deadline > now {
                break;
            }
            state.deadlines.pop_front();
            if let Some(pending) = state.waiting.remove(&id) {
                done.push(Done {
                    pending,
                    result: Err(("timeout", NetError::Timeout.to_string())),
                    rcode_answer: None,
                    transport: link.transport,
                });
            }
        }
    }
}

//! Connections to authoritative servers, kept and shared by every worker.
//!
//! With `--transport tcp` each authoritative server the run talks to gets
//! up to [`STREAMS_PER_AUTHORITY`] kept TCP connections, and every worker's
//! queries to that server travel on them in turn, pipelined (RFC 7766 §6.2.1.1; answers matched by id and question in
//! `dnsluice_net`'s multiplexer). That is the sticky idea carried to its end:
//! instead of routing names so that consecutive queries to one server come
//! from one worker, the connections themselves are shared, so a root or TLD
//! server sees a few connections for the whole run however many workers there are
//! (ZDNS cannot iterate over TCP with kept connections at all).
//!
//! Over UDP each server gets a connected socket from an ephemeral port the
//! kernel picks at random, replaced after [`UDP_QUERIES_PER_SOCKET`] queries,
//! so source ports keep changing (RFC 5452 §10) while the socket setup is not
//! paid per query; query ids are random per query (`dnsluice_net`'s ids).
//! The table is sharded by address with a lock per shard, held only to find
//! or insert a slot; dialling holds only the slot's own lock.
//!
//! An exchange (the wait for the slot, the dial, the answer) ends within
//! the time it is given, the name's budget included. A TCP dial that fails
//! (refused, unreachable, or no handshake in half `--timeout` or more) is
//! remembered for [`DIAL_MEMORY`]: the names that come meanwhile fail at
//! once instead of each dialling, and waiting its turn behind the others'
//! dials, again.

use dnsluice_core::sync;
use dnsluice_net::{
    connect, ClientSetup, Connection, DnsTransport, Endpoint, NetCounters, NetError,
};
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Queries one UDP socket carries before a new one (a new source port) replaces it.
pub const UDP_QUERIES_PER_SOCKET: u64 = 64;
/// Kept TCP connections per authoritative server, used in turn: a server
/// answers the queries of one connection one after another, so a busy one
/// (a TLD's) gets a few to answer in parallel.
pub const STREAMS_PER_AUTHORITY: u64 = 4;
/// Shards of the table (a power of two).
const SHARDS: usize = 32;
/// Most kept connections per shard; past this an idle one is dropped.
const MAX_PER_SHARD: usize = 128;
/// Connections of its own a query is asked on after the server closed the
/// shared one under it (each closed too: a server that resets them all).
const OWN_TRIES: u32 = 2;
/// How long a failed TCP dial to a server is remembered (unbound keeps a
/// server it could not reach for minutes; a scan must not wait out a dead
/// server's handshake once per name).
pub const DIAL_MEMORY: Duration = Duration::from_secs(30);
/// Failed dials remembered at most (past this, those whose time is up go;
/// when none has, the new one is not remembered).
const MAX_FAILED_DIALS: usize = 65_536;

/// Whether a failed dial's `error` is the server's or the network's (it
/// refused, did not answer, cannot be reached), not this host's (out of
/// descriptors, no local address to bind): only those are remembered.
fn said_by_the_network(error: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        error.kind(),
        ConnectionRefused
            | ConnectionReset
            | ConnectionAborted
            | TimedOut
            | HostUnreachable
            | NetworkUnreachable
    )
}

/// A dial that failed: until when it stands, and what the system said.
struct FailedDial {
    until: Instant,
    kind: std::io::ErrorKind,
    text: String,
}

/// A connection and how many queries it took.
struct Kept {
    connection: Connection,
    queries: AtomicU64,
}

type Cell = Arc<tokio::sync::Mutex<Option<Arc<Kept>>>>;

/// A server, the transport, and which of its kept connections.
type Key = (SocketAddr, DnsTransport, u64);

/// The kept connections; see the module docs.
pub struct Authorities {
    shards: Box<[Mutex<HashMap<Key, Cell>>]>,
    hasher: RandomState,
    udp: ClientSetup,
    tcp: ClientSetup,
    /// Socket counters (shared with the rest of the run).
    pub net: Arc<NetCounters>,
    /// Queries sent on a connection that had carried one before.
    pub reused: AtomicU64,
    /// Turns the queries to one server take over its kept connections.
    turn: AtomicU64,
    /// How long a dial may take (`--timeout`).
    connect_timeout: Duration,
    /// Stream dials that failed, by server and transport.
    failed_dials: Mutex<HashMap<(SocketAddr, DnsTransport), FailedDial>>,
    /// Dials not made because one to the same server had just failed.
    pub dials_spared: AtomicU64,
}

impl Authorities {
    /// A table whose connections open within `connect_timeout` and count in `net`.
    pub fn new(connect_timeout: Duration, net: Arc<NetCounters>) -> Result<Authorities, NetError> {
        let setup = |transport| {
            ClientSetup::new(
                transport,
                &dnsluice_net::TlsOptions::default(),
                connect_timeout,
                dnsluice_net::DohMethod::Post,
                net.clone(),
            )
        };
        Ok(Authorities {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: RandomState::new(),
            udp: setup(DnsTransport::Udp)?,
            tcp: setup(DnsTransport::Tcp)?,
            net,
            reused: AtomicU64::new(0),
            turn: AtomicU64::new(0),
            connect_timeout,
            failed_dials: Mutex::new(HashMap::new()),
            dials_spared: AtomicU64::new(0),
        })
    }

    /// The setup of TCP connections to authorities (for zone transfers).
    pub fn tcp_setup(&self) -> &ClientSetup {
        &self.tcp
    }

    fn cell(&self, key: Key) -> Cell {
        let index = self.hasher.hash_one(key) as usize & (SHARDS - 1);
        let mut shard = sync::lock(&self.shards[index]);
        if shard.len() >= MAX_PER_SHARD && !shard.contains_key(&key) {
            // An idle slot (nobody holds its cell) goes.
            if let Some(idle) = shard
                .iter()
                .find(|(_, cell)| Arc::strong_count(cell) == 1)
                .map(|(k, _)| *k)
            {
                shard.remove(&idle);
            }
        }
        shard.entry(key).or_default().clone()
    }

    /// The failed dial to `addr` over `transport` that still stands, as
    /// the error it gave.
    fn failed_dial(&self, addr: SocketAddr, transport: DnsTransport) -> Option<NetError> {
        let failed = sync::lock(&self.failed_dials);
        let dial = failed.get(&(addr, transport))?;
        (dial.until > Instant::now()).then(|| {
            self.dials_spared.fetch_add(1, Ordering::Relaxed);
            let text = format!(
                "{} (a dial in the last {}s failed so)",
                dial.text,
                DIAL_MEMORY.as_secs()
            );
            NetError::Connect {
                addr: addr.to_string(),
                error: std::io::Error::new(dial.kind, text),
            }
        })
    }

    /// Remembers that a dial to `addr` over `transport` failed with `error`.
    fn remember_failed_dial(
        &self,
        addr: SocketAddr,
        transport: DnsTransport,
        error: &std::io::Error,
    ) {
        let mut failed = sync::lock(&self.failed_dials);
        let now = Instant::now();
        if failed.len() >= MAX_FAILED_DIALS {
            failed.retain(|_, dial| dial.until > now);
            if failed.len() >= MAX_FAILED_DIALS {
                return;
            }
        }
        let dial = FailedDial {
            until: now + DIAL_MEMORY,
            kind: error.kind(),
            text: error.to_string(),
        };
        failed.insert((addr, transport), dial);
    }

    /// A usable connection to `addr` over `transport` by `deadline`: the
    /// kept one, or a new one. `Timeout` when the wait for the slot or the
    /// dial runs past the deadline.
    async fn get(
        &self,
        addr: SocketAddr,
        transport: DnsTransport,
        deadline: Instant,
    ) -> Result<Arc<Kept>, NetError> {
        let stream = transport.is_stream();
        let which = if stream {
            self.turn.fetch_add(1, Ordering::Relaxed) % STREAMS_PER_AUTHORITY
        } else {
            0
        };
        let cell = self.cell((addr, transport, which));
        let Ok(mut slot) = tokio::time::timeout_at(deadline.into(), cell.lock()).await else {
            return Err(NetError::Timeout);
        };
        if let Some(kept) = slot.as_ref() {
            let worn = transport == DnsTransport::Udp
                && kept.queries.load(Ordering::Relaxed) >= UDP_QUERIES_PER_SOCKET;
            if kept.connection.broken().is_none() && !worn {
                return Ok(kept.clone());
            }
        }
        *slot = None;
        let connection = self.dial(addr, transport, deadline).await?;
        let kept = Arc::new(Kept {
            connection,
            queries: AtomicU64::new(0),
        });
        *slot = Some(kept.clone());
        Ok(kept)
    }

    /// A new connection to `addr` over `transport` by `deadline`; a TCP
    /// dial that fails is remembered ([`DIAL_MEMORY`]), and one that failed
    /// (the one a caller waited behind, say) is not made again meanwhile.
    async fn dial(
        &self,
        addr: SocketAddr,
        transport: DnsTransport,
        deadline: Instant,
    ) -> Result<Connection, NetError> {
        let stream = transport.is_stream();
        if let Some(failed) = stream.then(|| self.failed_dial(addr, transport)).flatten() {
            return Err(failed);
        }
        let endpoint = Endpoint {
            addr,
            transport,
            host: None,
            path: String::new(),
        };
        let setup = if transport == DnsTransport::Udp {
            &self.udp
        } else {
            &self.tcp
        };
        let given = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout_at(deadline.into(), connect(&endpoint, setup)).await {
            Ok(Ok(connection)) => Ok(connection),
            Ok(Err(error)) => {
                if let NetError::Connect { error, .. } = &error {
                    if stream && said_by_the_network(error) {
                        self.remember_failed_dial(addr, transport, error);
                    }
                }
                Err(error)
            }
            Err(_) => {
                // No handshake in at least half the --timeout: remembered
                // as the dial's own timeout would be (one cut shorter by
                // the name's budget says little of the server).
                if stream && given * 2 >= self.connect_timeout {
                    let error = std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "no answer to the handshake",
                    );
                    self.remember_failed_dial(addr, transport, &error);
                }
                Err(NetError::Timeout)
            }
        }
    }

    /// Sends `query` to `addr` over `transport` and waits up to `timeout`
    /// in all (for the slot, the dial and the answer). When the server
    /// closes the shared connection under the query (a server that answers
    /// one query a connection, or closes idle ones, or resets), it is asked
    /// again on a connection of its own, at most [`OWN_TRIES`] times: a
    /// server that answers one query a connection answers it there.
    pub async fn exchange(
        &self,
        addr: SocketAddr,
        transport: DnsTransport,
        query: &[u8],
        timeout: Duration,
    ) -> Result<Vec<u8>, NetError> {
        let deadline = Instant::now() + timeout;
        let left = || {
            let left = deadline.saturating_duration_since(Instant::now());
            (!left.is_zero()).then_some(left).ok_or(NetError::Timeout)
        };
        let kept = self.get(addr, transport, deadline).await?;
        if kept.queries.fetch_add(1, Ordering::Relaxed) > 0 {
            self.reused.fetch_add(1, Ordering::Relaxed);
        }
        let mut closed = match kept.connection.exchange(query, left()?).await {
            Ok(exchange) => return Ok(exchange.response),
            Err(error @ (NetError::Closed(_) | NetError::Send(_))) if transport.is_stream() => {
                error
            }
            Err(error) => return Err(error),
        };
        drop(kept);
        for _ in 0..OWN_TRIES {
            let own = self.dial(addr, transport, deadline).await?;
            match own.exchange(query, left()?).await {
                Ok(exchange) => return Ok(exchange.response),
                Err(error @ (NetError::Closed(_) | NetError::Send(_))) => closed = error,
                Err(error) => return Err(error),
            }
        }
        Err(closed)
    }
}

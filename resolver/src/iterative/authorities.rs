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
use std::time::Duration;

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

    /// A usable connection to `addr` over `transport`: the kept one, or a new one.
    async fn get(&self, addr: SocketAddr, transport: DnsTransport) -> Result<Arc<Kept>, NetError> {
        let which = if transport.is_stream() {
            self.turn.fetch_add(1, Ordering::Relaxed) % STREAMS_PER_AUTHORITY
        } else {
            0
        };
        let cell = self.cell((addr, transport, which));
        let mut slot = cell.lock().await;
        if let Some(kept) = slot.as_ref() {
            let worn = transport == DnsTransport::Udp
                && kept.queries.load(Ordering::Relaxed) >= UDP_QUERIES_PER_SOCKET;
            if kept.connection.broken().is_none() && !worn {
                return Ok(kept.clone());
            }
        }
        *slot = None;
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
        let kept = Arc::new(Kept {
            connection: connect(&endpoint, setup).await?,
            queries: AtomicU64::new(0),
        });
        *slot = Some(kept.clone());
        Ok(kept)
    }

    /// Sends `query` to `addr` over `transport` and waits up to `timeout`.
    /// A kept connection the server had closed is re-opened once at once.
    pub async fn exchange(
        &self,
        addr: SocketAddr,
        transport: DnsTransport,
        query: &[u8],
        timeout: Duration,
    ) -> Result<Vec<u8>, NetError> {
        let mut second_chance = true;
        loop {
            let kept = self.get(addr, transport).await?;
            let used_before = kept.queries.fetch_add(1, Ordering::Relaxed) > 0;
            if used_before {
                self.reused.fetch_add(1, Ordering::Relaxed);
            }
            match kept.connection.exchange(query, timeout).await {
                Ok(exchange) => return Ok(exchange.response),
                Err(NetError::Closed(_) | NetError::Send(_))
                    if used_before && second_chance && transport.is_stream() =>
                {
                    second_chance = false;
                }
                Err(error) => return Err(error),
            }
        }
    }
}

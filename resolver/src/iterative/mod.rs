//! Iterative resolution from the root (`--iterative`), as an [`Ask`]: every
//! lookup module works over it unchanged.
//!
//! - [`hints`]: where a walk starts (a `named.root` file, `--name-servers`,
//!   or the IANA root servers).
//! - [`name`]: names as the resolver compares them (lower-cased wire form).
//! - [`message`]: responses decoded into owned records; the response handed
//!   back, composed from trusted records only.
//! - [`trust`]: what a response may be taken to mean (bailiwick, referrals
//!   strictly downward, CNAME and DNAME chains).
//! - [`delegation`]: zone cuts and the order their servers are asked in.
//! - [`cache`]: the cache every worker shares (sharded LRU, TTLs, RFC 2308).
//! - [`walk`]: one name's walk down the tree (steps, retries through a
//!   zone's servers, glueless nameservers, loops, budgets).
//! - [`authorities`]: kept, shared connections to authoritative servers.
//! - [`options`]: the options and the configuration made from them.
//! - [`summary`]: the counters at the end of a run.

pub mod authorities;
pub mod cache;
pub mod delegation;
pub mod hints;
pub mod message;
pub mod name;
pub mod options;
pub mod summary;
pub mod trust;
pub mod walk;

use super::ask::{Ask, AskError, Question};
use super::record::Outcome;
use super::transfer::transfer_from;
use super::turns::{Caps, FirstTurn, Turns};
use authorities::Authorities;
use cache::Cache;
use delegation::{Delegation, Shuffler};
use dnsluice_net::query::QueryOptions;
use dnsluice_net::{DnsTransport, Endpoint, NetCounters, NetError};
use message::Asked;
use name::Name;
pub use options::{IterativeConfig, IterativeOptions};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Zone depths counted apart in [`IterativeCounters::queries_by_level`]
/// (the last one holds every deeper level).
pub const LEVELS: usize = 6;

/// What the resolver counted, beside the cache's and the sockets' counters.
#[derive(Default)]
pub struct IterativeCounters {
    /// Queries sent to zones at each depth: the root (0), TLDs (1), ...
    pub queries_by_level: [AtomicU64; LEVELS],
    /// Referrals followed.
    pub referrals: AtomicU64,
    /// Responses from a server not used (REFUSED, SERVFAIL, upward referral, empty).
    pub lame_responses: AtomicU64,
    /// Queries to an authority that got no answer in time (the zone's next
    /// server is asked, and the silent ones again in the next round).
    pub timeouts: AtomicU64,
    /// Nameserver addresses looked up because a referral had no usable glue.
    pub glueless_lookups: AtomicU64,
    /// UDP answers with TC=1 asked again over TCP.
    pub tcp_fallbacks: AtomicU64,
    /// FORMERR or NOTIMP without EDNS to an EDNS query, asked again without
    /// EDNS (RFC 6891 section 7: how a server from before EDNS answers).
    pub edns_fallbacks: AtomicU64,
    /// Records dropped for being outside the bailiwick of the server asked.
    pub out_of_bailiwick: AtomicU64,
    /// Responses that could not be read (not a DNS message, another query's).
    pub malformed_responses: AtomicU64,
    /// Queries that failed on the network other than by a timeout (a
    /// refused or reset connection, an unreachable server).
    pub network_errors: AtomicU64,
}

/// Everything the walks share: configuration, cache, connections, counters.
pub struct Resolver {
    /// Iterative settings.
    pub config: IterativeConfig,
    /// The root delegation every walk without a closer cut starts from.
    pub roots: Arc<Delegation>,
    /// How queries travel to authorities (udp or tcp).
    pub transport: DnsTransport,
    /// The wait for each answer.
    pub network_timeout: Duration,
    /// Rounds through a zone's servers after the first, for those that timed out.
    pub retries: u32,
    /// EDNS of the queries (RD is always off).
    pub query: QueryOptions,
    /// Ask again over TCP on TC=1.
    pub tcp_fallback: bool,
    /// The shared cache.
    pub cache: Cache,
    /// Kept connections.
    pub authorities: Authorities,
    /// Server order.
    pub shuffler: Shuffler,
    /// Counters.
    pub counters: IterativeCounters,
    /// `--rate`, the run's cap, when there is one.
    pub turns: Option<Arc<Turns>>,
}

impl Resolver {
    /// A resolver over `transport`, its sockets counted in `net`.
    pub fn new(
        config: IterativeConfig,
        transport: DnsTransport,
        network_timeout: Duration,
        retries: u32,
        query: QueryOptions,
        tcp_fallback: bool,
        net: Arc<NetCounters>,
    ) -> Result<Resolver, NetError> {
        if !matches!(transport, DnsTransport::Udp | DnsTransport::Tcp) {
            return Err(NetError::TlsSetup(format!(
                "iterative resolution talks to authoritative servers over udp or tcp, not {}",
                transport.as_str()
            )));
        }
        Ok(Resolver {
            roots: Arc::new(config.roots.clone()),
            cache: Cache::new(config.cache_size),
            authorities: Authorities::new(network_timeout, net)?,
            config,
            transport,
            network_timeout,
            retries,
            query: QueryOptions {
                recursion_desired: false,
                ..query
            },
            tcp_fallback,
            shuffler: Shuffler::default(),
            counters: IterativeCounters::default(),
            turns: None,
        })
    }

    /// The same resolver, its queries held to `turns` (`--rate`).
    pub fn with_turns(self, turns: Option<Arc<Turns>>) -> Resolver {
        Resolver { turns, ..self }
    }

    /// Counts a query to a server of `zone`.
    fn count_query(&self, zone: &Name) {
        let level = zone.label_count().min(LEVELS - 1);
        self.counters.queries_by_level[level].fetch_add(1, Ordering::Relaxed);
    }
}

/// Asks one job's questions iteratively.
pub struct IterativeAsk<'a> {
    /// The shared resolver.
    pub resolver: &'a Resolver,
    /// When the job's budget (`--name-timeout`) runs out.
    pub deadline: Instant,
    /// The job's first turn under `--rate`, taken before its budget started.
    pub first: &'a FirstTurn,
}

impl Ask for IterativeAsk<'_> {
    fn ask(
        &self,
        question: Question<'_>,
        outcome: &mut Outcome,
    ) -> impl Future<Output = Result<Vec<u8>, AskError>> + Send {
        let name = Name::parse(question.name);
        let tracing = outcome.trace.is_some();
        async move {
            let name = name.map_err(|e| AskError {
                status: "ERROR",
                message: format!("bad name: {e}"),
            })?;
            let asked = Asked {
                name,
                qtype: question.qtype,
                qclass: question.qclass,
            };
            let mut walk = walk::Walk::new(self.resolver, self.deadline, tracing, self.first);
            let result = walk.resolve(&asked, 0).await;
            outcome.attempts += walk.queries;
            if let Some(protocol) = walk.protocol {
                outcome.protocol = protocol;
            }
            if let Some(server) = walk.last_server.take() {
                outcome.nameserver = Some(server.into());
            }
            if let Some(trace) = &mut outcome.trace {
                trace.append(&mut walk.steps);
            }
            let resolved = result?;
            Ok(message::compose(
                &asked,
                resolved.rcode,
                &resolved.answer,
                &resolved.authority,
            ))
        }
    }

    /// AXFR from `server` (an authority the module found by iterating), on
    /// the authorities' port, over TCP; lines cannot be pinned here.
    fn transfer(
        &self,
        zone: &str,
        server: Option<IpAddr>,
        outcome: &mut Outcome,
    ) -> impl Future<Output = Result<Vec<Vec<u8>>, NetError>> + Send {
        let (r, first) = (self.resolver, self.first);
        async move {
            let Some(ip) = server else {
                return Err(NetError::BadQuery(
                    "iterative lookups have no pinned nameserver to transfer from",
                ));
            };
            let endpoint = Endpoint {
                addr: SocketAddr::new(ip, r.config.port),
                transport: DnsTransport::Tcp,
                host: None,
                path: String::new(),
            };
            let caps = Caps {
                run: r.turns.as_deref(),
                nameserver: None,
            };
            caps.take(first).await;
            transfer_from(
                endpoint,
                r.authorities.tcp_setup(),
                r.query,
                r.network_timeout,
                zone,
                outcome,
            )
            .await
        }
    }
}

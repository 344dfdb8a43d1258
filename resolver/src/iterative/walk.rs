//! One name's walk down the tree: from the closest zone cut in the cache (or
//! the root), ask a server of the zone; follow referrals down; follow CNAMEs
//! and DNAMEs into other zones; look up the addresses of nameservers that
//! came without glue (a nested walk, bounded by `--max-depth`).
//!
//! Budgets: each step (one zone, its servers tried in turn) ends at
//! `--iteration-timeout`, the whole name (nested walks included) at
//! `--name-timeout`, and every wait for an answer at `--timeout` but never
//! past either deadline, so timeouts cannot multiply down the levels (ZDNS
//! issue #524). Loops end with `CIRCULAR`: a CNAME chain that comes back to
//! a name, or a question asked again while it is being resolved (a glueless
//! nameserver whose address needs the zone it serves).

use super::delegation::{not_askable, Delegation, Plan};
use trace::{describe, Sent};

mod trace;
use super::message::{rcodes, types, Asked, Reply, Rr};
use super::name::Name;
use super::trust::{judge, Lame, Verdict};
use super::Resolver;
use crate::ask::AskError;
use crate::trace::TraceStep;
use crate::turns::{Caps, FirstTurn};
use dnsluice_core::dns::mnemonic;
use dnsluice_net::query::QueryOptions;
use dnsluice_net::{DnsTransport, NetError};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most CNAME/DNAME hops across zones for one question (unbound allows 11 restarts).
const MAX_CHAIN: usize = 12;
/// Most problems listed in an error message.
const MAX_PROBLEMS: usize = 4;

/// The result of a walk: what the composed response carries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resolved {
    /// RCODE: NOERROR or NXDOMAIN.
    pub rcode: u16,
    /// The chain and the answer RRset.
    pub answer: Vec<Rr>,
    /// The SOA of a negative answer.
    pub authority: Vec<Rr>,
}

fn failure(status: &'static str, message: String) -> AskError {
    AskError { status, message }
}

/// One job's walk state; see the module docs.
pub struct Walk<'a> {
    r: &'a Resolver,
    deadline: Instant,
    tracing: bool,
    /// The job's first turn under `--rate`.
    first: &'a FirstTurn,
    /// Questions being resolved (outermost first).
    pending: Vec<Asked>,
    /// Queries sent.
    pub queries: u32,
    /// The transport of the last answer.
    pub protocol: Option<&'static str>,
    /// The last server that answered (`ip:port`).
    pub last_server: Option<String>,
    /// The steps, when tracing.
    pub steps: Vec<TraceStep>,
}

type Boxed<'s, T> = Pin<Box<dyn Future<Output = T> + Send + 's>>;

/// What a query to one server came to.
enum Tried {
    /// The response, decoded, and as it came (kept for a trace).
    Reply(Reply, Option<Vec<u8>>),
    Failed(NetError),
    Unusable(String),
    /// Not sent: the next turn under `--rate` comes after the step's time.
    NoTurn,
}

impl<'a> Walk<'a> {
    /// A walk for one job, ending at `deadline`; its first query uses
    /// the job's `first` turn under `--rate`.
    pub fn new(
        r: &'a Resolver,
        deadline: Instant,
        tracing: bool,
        first: &'a FirstTurn,
    ) -> Walk<'a> {
        Walk {
            r,
            deadline,
            tracing,
            first,
            pending: Vec::new(),
            queries: 0,
            protocol: None,
            last_server: None,
            steps: Vec::new(),
        }
    }

    /// Resolves `asked`; `depth` is how deep in nested lookups this is.
    pub fn resolve<'s>(
        &'s mut self,
        asked: &'s Asked,
        depth: u32,
    ) -> Boxed<'s, Result<Resolved, AskError>> {
        Box::pin(async move {
            if depth > self.r.config.max_depth {
                return Err(failure(
                    "ERROR",
                    format!(
                        "max depth {} reached (--max-depth)",
                        self.r.config.max_depth
                    ),
                ));
            }
            if self.pending.contains(asked) {
                return Err(failure(
                    "CIRCULAR",
                    format!(
                        "circular query: {} {} is needed to resolve itself",
                        asked.name,
                        mnemonic::rtype(asked.qtype)
                    ),
                ));
            }
            self.pending.push(asked.clone());
            let result = self.follow_chain(asked, depth).await;
            self.pending.pop();
            result
        })
    }

    /// Resolves `asked.name`, then each CNAME or DNAME target in turn.
    async fn follow_chain(&mut self, asked: &Asked, depth: u32) -> Result<Resolved, AskError> {
        let mut chain: Vec<Rr> = Vec::new();
        let mut current = asked.name.clone();
        let mut visited = vec![current.clone()];
        loop {
            let verdict = match self.r.cache.answer(&current, asked.qtype, asked.qclass) {
                Some(verdict) => {
                    self.note_cached(depth, &current, asked, &verdict);
                    verdict
                }
                None => {
                    self.descend(&current, asked.qtype, asked.qclass, depth)
                        .await?
                }
            };
            let (rcode, more, authority) = match verdict {
                Verdict::Answer(records) => (rcodes::NOERROR, records, None),
                Verdict::NoData { chain: more, soa } => (rcodes::NOERROR, more, soa),
                Verdict::NxDomain { chain: more, soa } => (rcodes::NXDOMAIN, more, soa),
                Verdict::Alias {
                    chain: more,
                    target,
                } => {
                    if visited.contains(&target) {
                        return Err(failure("CIRCULAR", format!("CNAME loop: back at {target}")));
                    }
                    if visited.len() > MAX_CHAIN {
                        return Err(failure("SERVFAIL", format!("more than {MAX_CHAIN} CNAMEs")));
                    }
                    visited.push(target.clone());
                    chain.extend(more);
                    current = target;
                    continue;
                }
                Verdict::Referral(_) | Verdict::Lame(_) => {
                    return Err(failure(
                        "ERROR",
                        "internal: a step ended without a verdict".into(),
                    ))
                }
            };
            chain.extend(more);
            return Ok(Resolved {
                rcode,
                answer: chain,
                authority: authority.into_iter().collect(),
            });
        }
    }

    /// Asks zone after zone, from the closest known cut down, until a
    /// server answers for `name`; caches every cut and the final verdict.
    async fn descend(
        &mut self,
        name: &Name,
        qtype: u16,
        qclass: u16,
        depth: u32,
    ) -> Result<Verdict, AskError> {
        // DS lives on the parent side of a cut: start above the name.
        let start = match (qtype, name.parent()) {
            (types::DS, Some(parent)) => parent,
            _ => name.clone(),
        };
        let mut zone = self
            .r
            .cache
            .closest_delegation(&start)
            .unwrap_or_else(|| self.r.roots.clone());
        let mut referrals = 0;
        loop {
            let verdict = self.ask_zone(&zone, name, qtype, qclass, depth).await?;
            let Verdict::Referral(referral) = verdict else {
                self.r.cache.put_answer(name, qtype, qclass, &verdict);
                return Ok(verdict);
            };
            referrals += 1;
            self.r.counters.referrals.fetch_add(1, Ordering::Relaxed);
            if depth + referrals > self.r.config.max_depth {
                return Err(failure(
                    "ERROR",
                    format!(
                        "max depth {} reached at {} (--max-depth)",
                        self.r.config.max_depth, referral.zone
                    ),
                ));
            }
            let next = Arc::new(Delegation::from_referral(&referral));
            self.r.cache.put_delegation(next.clone(), referral.ttl);
            zone = next;
        }
    }

    /// One step: the zone's servers in random order (glueless ones looked up
    /// when those with addresses are used up), rounds again for those that
    /// timed out (`--retries`), until one gives a usable response.
    async fn ask_zone(
        &mut self,
        zone: &Delegation,
        name: &Name,
        qtype: u16,
        qclass: u16,
        depth: u32,
    ) -> Result<Verdict, AskError> {
        let step_deadline = (Instant::now() + self.r.config.iteration_timeout).min(self.deadline);
        let families = self.r.config.families;
        let Plan {
            mut candidates,
            mut glueless,
            mut problems,
        } = zone.plan(families, &self.r.shuffler);
        let (mut timed_out, mut lame, mut empty, mut circular) = (false, false, false, false);
        let mut try_number = 0;
        'rounds: for round in 0..=self.r.retries {
            let mut again = Vec::new();
            let mut next = 0;
            loop {
                if next == candidates.len() {
                    let Some(ns) = glueless.pop().filter(|_| round == 0) else {
                        break;
                    };
                    if ns.is_at_or_below(&zone.zone) {
                        // Only the zone itself could give its address.
                        problems.push(format!("{ns}: in the zone, without usable glue"));
                        continue;
                    }
                    match self.addresses_of(&ns, depth).await {
                        Ok(addrs) => {
                            for addr in addrs {
                                if !candidates.contains(&addr) {
                                    candidates.push(addr);
                                }
                            }
                        }
                        Err(e) => {
                            circular |= e.status == "CIRCULAR";
                            problems.push(format!("{ns}: {}", e.message));
                        }
                    }
                    continue;
                }
                let addr = candidates[next];
                next += 1;
                if Instant::now() >= step_deadline {
                    timed_out = true;
                    break 'rounds;
                }
                let started = Instant::now();
                let tried = self
                    .query(zone, addr, name, qtype, qclass, step_deadline)
                    .await;
                let (verdict, result, response) = match tried {
                    Tried::Reply(reply, raw) => {
                        let verdict = judge(&reply, &zone.zone, name, qtype);
                        let text = describe(&verdict);
                        (Some(verdict), text, raw)
                    }
                    Tried::Failed(NetError::Timeout) => {
                        self.r.counters.timeouts.fetch_add(1, Ordering::Relaxed);
                        timed_out = true;
                        again.push(addr);
                        (None, "timeout".to_string(), None)
                    }
                    Tried::Failed(error) => {
                        let errors = &self.r.counters.network_errors;
                        errors.fetch_add(1, Ordering::Relaxed);
                        (None, error.to_string(), None)
                    }
                    Tried::Unusable(why) => {
                        let malformed = &self.r.counters.malformed_responses;
                        malformed.fetch_add(1, Ordering::Relaxed);
                        (None, why, None)
                    }
                    Tried::NoTurn => {
                        // The name's time or the step's, whichever ends first.
                        let (status, which) = if step_deadline >= self.deadline {
                            ("TIMEOUT", "--name-timeout")
                        } else {
                            ("ITERATIVE_TIMEOUT", "--iteration-timeout")
                        };
                        let why =
                            format!("no turn under --rate before {which} at zone {}", zone.zone);
                        return Err(failure(status, why));
                    }
                };
                let step = Sent {
                    zone,
                    name,
                    qtype,
                    qclass,
                    addr,
                    try_number,
                    started,
                };
                let failed = verdict.is_none() || matches!(verdict, Some(Verdict::Lame(_)));
                self.note_step(depth, step, response, failed.then_some(&result));
                try_number += 1;
                match verdict {
                    Some(Verdict::Lame(kind)) => {
                        self.r
                            .counters
                            .lame_responses
                            .fetch_add(1, Ordering::Relaxed);
                        lame |= kind != Lame::Empty;
                        empty |= kind == Lame::Empty;
                    }
                    Some(verdict) => return Ok(verdict),
                    None => {}
                }
                problems.push(format!("{addr}: {result}"));
            }
            if again.is_empty() {
                break;
            }
            candidates = again;
        }
        problems.truncate(MAX_PROBLEMS);
        let problems = problems.join("; ");
        let now = Instant::now();
        let zone_name = &zone.zone;
        Err(if now >= self.deadline {
            failure(
                "TIMEOUT",
                format!("name timeout at zone {zone_name} (--name-timeout): {problems}"),
            )
        } else if timed_out && now >= step_deadline {
            failure(
                "ITERATIVE_TIMEOUT",
                format!("iteration timeout at zone {zone_name} (--iteration-timeout): {problems}"),
            )
        } else if lame {
            failure(
                "SERVFAIL",
                format!("no server of zone {zone_name} answered usably: {problems}"),
            )
        } else if circular {
            failure(
                "CIRCULAR",
                format!("the nameservers of zone {zone_name} need it: {problems}"),
            )
        } else if timed_out {
            failure(
                "TIMEOUT",
                format!("every server of zone {zone_name} timed out: {problems}"),
            )
        } else if empty {
            failure(
                "ERROR",
                format!("NOERROR without answer or authority from zone {zone_name}: {problems}"),
            )
        } else if try_number == 0 && problems.is_empty() {
            failure(
                "SERVFAIL",
                format!("no usable address for any nameserver of zone {zone_name}"),
            )
        } else {
            failure(
                "SERVFAIL",
                format!("every server of zone {zone_name} failed: {problems}"),
            )
        })
    }

    /// The addresses of a nameserver that came without glue (a nested walk).
    async fn addresses_of(&mut self, ns: &Name, depth: u32) -> Result<Vec<IpAddr>, AskError> {
        self.r
            .counters
            .glueless_lookups
            .fetch_add(1, Ordering::Relaxed);
        let mut first_error = None;
        for qtype in self.r.config.families.lookup_types() {
            let asked = Asked {
                name: ns.clone(),
                qtype,
                qclass: 1,
            };
            match self.resolve(&asked, depth + 1).await {
                Ok(resolved) => {
                    let found: Vec<IpAddr> = resolved
                        .answer
                        .iter()
                        .filter(|rr| rr.rtype == qtype)
                        .filter_map(Rr::address)
                        .collect();
                    let families = &self.r.config.families;
                    let addrs: Vec<IpAddr> = found
                        .iter()
                        .copied()
                        .filter(|a| families.allows(a))
                        .collect();
                    if !addrs.is_empty() {
                        return Ok(addrs);
                    }
                    if !found.is_empty() {
                        first_error.get_or_insert(failure("SERVFAIL", not_askable(ns, &found)));
                    }
                }
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        Err(first_error.unwrap_or_else(|| failure("ERROR", format!("{ns} has no address"))))
    }

    /// Sends the question to `addr` (a server of `zone`), over TCP again on
    /// TC=1, and once more without EDNS when the server does not know it.
    async fn query(
        &mut self,
        zone: &Delegation,
        addr: IpAddr,
        name: &Name,
        qtype: u16,
        qclass: u16,
        step_deadline: Instant,
    ) -> Tried {
        let r = self.r;
        let mut query = Vec::with_capacity(name.wire().len() + 32);
        dnsluice_net::query::build_wire(0, name.wire(), qtype, qclass, &r.query, &mut query);
        let server = SocketAddr::new(addr, r.config.port);
        let mut transport = r.transport;
        let mut with_edns = r.query.edns_udp_size.is_some();
        loop {
            let caps = Caps {
                run: r.turns.as_deref(),
                nameserver: None,
            };
            // A turn (--rate) after the step's time would be lost: none is taken.
            if !caps.take_before(self.first, Some(step_deadline)).await {
                return Tried::NoTurn;
            }
            // The wait for the turn came out of the step's time.
            let left = step_deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Tried::Failed(NetError::Timeout);
            }
            let timeout = r.network_timeout.min(left).max(Duration::from_millis(1));
            self.queries += 1;
            r.count_query(&zone.zone);
            let response = match r
                .authorities
                .exchange(server, transport, &query, timeout)
                .await
            {
                Ok(response) => response,
                Err(error) => return Tried::Failed(error),
            };
            let reply = match Reply::decode(&response) {
                Ok(reply) => reply,
                Err(bad) => return Tried::Unusable(bad.to_string()),
            };
            let raw = self.tracing.then_some(response);
            self.protocol = Some(transport.protocol_name());
            self.last_server = Some(server.to_string());
            if reply.truncated && transport == DnsTransport::Udp && r.tcp_fallback {
                r.counters.tcp_fallbacks.fetch_add(1, Ordering::Relaxed);
                transport = DnsTransport::Tcp;
                continue;
            }
            if with_edns && refuses_edns(&reply) {
                r.counters.edns_fallbacks.fetch_add(1, Ordering::Relaxed);
                with_edns = false;
                let plain = QueryOptions {
                    edns_udp_size: None,
                    dnssec_ok: false,
                    ..r.query
                };
                dnsluice_net::query::build_wire(0, name.wire(), qtype, qclass, &plain, &mut query);
                continue;
            }
            let outside = reply
                .answer
                .iter()
                .chain(&reply.authority)
                .chain(&reply.additional)
                .filter(|rr| !rr.owner.is_at_or_below(&zone.zone))
                .count();
            r.counters
                .out_of_bailiwick
                .fetch_add(outside as u64, Ordering::Relaxed);
            return Tried::Reply(reply, raw);
        }
    }
}

/// How a server from before EDNS answers a query with an OPT record
/// (RFC 6891 section 7): FORMERR (or NOTIMP) and no OPT of its own.
fn refuses_edns(reply: &Reply) -> bool {
    !reply.edns && matches!(reply.rcode, rcodes::FORMERR | rcodes::NOTIMP)
}

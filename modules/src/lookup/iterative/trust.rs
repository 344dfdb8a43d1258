//! What a response from a zone's server may be taken to mean, under the trust
//! rules: only records at or below the zone the server was asked about are
//! looked at (RFC 2181 §5.4.1: anything else in its answer is no more than
//! gossip, and is dropped: never used, never cached), and a referral must be
//! for a zone strictly below that one and above the name asked (no upward or
//! sideways referrals).

use super::message::{rcodes, types, Reply, Rr};
use super::name::Name;
use std::net::IpAddr;

/// How many CNAME and DNAME steps one response may take a name through.
const MAX_CHAIN_IN_RESPONSE: usize = 16;

/// What one response says about `(name, qtype)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The records: the chain of CNAMEs and DNAMEs from the name asked, then
    /// the RRset of the type asked at its end.
    Answer(Vec<Rr>),
    /// A chain that leaves what this response can say: ask again for `target`.
    Alias {
        /// The CNAME and DNAME records on the way (synthesized CNAMEs included).
        chain: Vec<Rr>,
        /// Where the chain points.
        target: Name,
    },
    /// The name (or the chain's end) exists but has no records of the type.
    NoData {
        /// The chain on the way, if any.
        chain: Vec<Rr>,
        /// The zone's SOA, when the server gave it.
        soa: Option<Rr>,
    },
    /// The name (or the chain's end) does not exist.
    NxDomain {
        /// The chain on the way, if any.
        chain: Vec<Rr>,
        /// The zone's SOA, when the server gave it.
        soa: Option<Rr>,
    },
    /// Ask the servers of a zone further down.
    Referral(Referral),
    /// This server is no use for the zone: ask another one.
    Lame(Lame),
}

/// A delegation to a zone below the one asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Referral {
    /// The child zone.
    pub zone: Name,
    /// Its nameservers' names.
    pub nameservers: Vec<Name>,
    /// Addresses given for them (in the bailiwick of the server asked only).
    pub glue: Vec<(Name, IpAddr)>,
    /// The NS RRset's TTL.
    pub ttl: u32,
}

/// Why a server's response is not used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lame {
    /// An RCODE other than NOERROR and NXDOMAIN (REFUSED, SERVFAIL, ...).
    Rcode(u16),
    /// A referral to a zone at or above the one asked, or beside it.
    UpwardReferral,
    /// NOERROR with no answer, no referral and no sign of authority.
    Empty,
}

/// Reads `reply`, from a server of `zone`, to the question `(name, qtype)`.
pub fn judge(reply: &Reply, zone: &Name, name: &Name, qtype: u16) -> Verdict {
    if reply.rcode != rcodes::NOERROR && reply.rcode != rcodes::NXDOMAIN {
        return Verdict::Lame(Lame::Rcode(reply.rcode));
    }
    let inside = |rr: &&Rr| rr.owner.is_at_or_below(zone);
    let answer: Vec<&Rr> = reply.answer.iter().filter(inside).collect();
    let soa = reply
        .authority
        .iter()
        .filter(inside)
        .find(|rr| rr.rtype == types::SOA && name_or_chain_under(&rr.owner, name))
        .cloned();
    let (chain, end) = follow(&answer, name, qtype);
    let end = match end {
        ChainEnd::Found(records) => {
            let mut all = chain;
            all.extend(records);
            return Verdict::Answer(all);
        }
        ChainEnd::Loop(target) | ChainEnd::At(target) => target,
    };
    let chained = !chain.is_empty();
    if chained && !end.is_at_or_below(zone) {
        // Out of this zone: what the server says about the target is gossip.
        return Verdict::Alias { chain, target: end };
    }
    if reply.rcode == rcodes::NXDOMAIN {
        return Verdict::NxDomain { chain, soa };
    }
    if chained {
        // In the zone, but the server gave nothing for the target: it may be
        // below a cut in this zone. Ask for it afresh.
        return match soa {
            Some(soa) if reply.authoritative => Verdict::NoData {
                chain,
                soa: Some(soa),
            },
            _ => Verdict::Alias { chain, target: end },
        };
    }
    if let Some(referral) = referral(reply, zone, name) {
        return referral;
    }
    if soa.is_some() || reply.authoritative {
        return Verdict::NoData { chain, soa };
    }
    if reply.authority.iter().any(|rr| rr.rtype == types::NS) {
        // NS records, none for a zone below this one: a referral up or aside.
        return Verdict::Lame(Lame::UpwardReferral);
    }
    Verdict::Lame(Lame::Empty)
}

/// Whether an SOA owned by `owner` can speak for `name`: `name` is at or
/// below it.
fn name_or_chain_under(owner: &Name, name: &Name) -> bool {
    name.is_at_or_below(owner)
}

/// The referral in `reply`, if its authority section has an NS RRset for a
/// zone strictly below `zone` (NS records for other zones are not looked
/// at): a good one when `name` is at or below that zone, else lame (sideways).
fn referral(reply: &Reply, zone: &Name, name: &Name) -> Option<Verdict> {
    let first = reply
        .authority
        .iter()
        .find(|rr| rr.rtype == types::NS && rr.owner.is_below(zone))?;
    let child = first.owner.clone();
    if !name.is_at_or_below(&child) {
        return Some(Verdict::Lame(Lame::UpwardReferral));
    }
    let ns_records = reply
        .authority
        .iter()
        .filter(|rr| rr.rtype == types::NS && rr.owner == child);
    let mut nameservers = Vec::new();
    let mut ttl = u32::MAX;
    for rr in ns_records {
        if let Some(target) = rr.target() {
            if !nameservers.contains(&target) {
                nameservers.push(target);
            }
            ttl = ttl.min(rr.ttl);
        }
    }
    if nameservers.is_empty() {
        return Some(Verdict::Lame(Lame::Empty));
    }
    let glue = reply
        .additional
        .iter()
        .filter(|rr| rr.owner.is_at_or_below(zone) && nameservers.contains(&rr.owner))
        .filter_map(|rr| Some((rr.owner.clone(), rr.address()?)))
        .collect();
    Some(Verdict::Referral(Referral {
        zone: child,
        nameservers,
        glue,
        ttl,
    }))
}

/// Where a chain through one answer section ends.
enum ChainEnd {
    /// The RRset of the type asked, at the chain's end.
    Found(Vec<Rr>),
    /// The chain ends at this name without it.
    At(Name),
    /// The chain came back to a name it had passed (or got too long).
    Loop(Name),
}

/// Follows CNAMEs and DNAMEs from `name` through `answer`; the chain's
/// records and where it ends.
fn follow(answer: &[&Rr], name: &Name, qtype: u16) -> (Vec<Rr>, ChainEnd) {
    let mut chain = Vec::new();
    let mut current = name.clone();
    let mut seen = vec![current.clone()];
    loop {
        let here: Vec<Rr> = answer
            .iter()
            .filter(|rr| rr.owner == current && (qtype == types::ANY || rr.rtype == qtype))
            .map(|rr| (*rr).clone())
            .collect();
        if !here.is_empty() {
            return (chain, ChainEnd::Found(here));
        }
        let Some(next) = step(answer, &current, &mut chain) else {
            return (chain, ChainEnd::At(current));
        };
        if seen.contains(&next) || seen.len() > MAX_CHAIN_IN_RESPONSE {
            return (chain, ChainEnd::Loop(next));
        }
        seen.push(next.clone());
        current = next;
    }
}

/// One CNAME or DNAME step from `current`: its records pushed on `chain`,
/// and the next name.
fn step(answer: &[&Rr], current: &Name, chain: &mut Vec<Rr>) -> Option<Name> {
    // A DNAME above the name rules it (the server's CNAME is synthesized from it).
    let Some(dname) = answer
        .iter()
        .find(|rr| rr.rtype == types::DNAME && current.is_below(&rr.owner))
    else {
        let cname = answer
            .iter()
            .find(|rr| rr.rtype == types::CNAME && rr.owner == *current)?;
        let target = cname.target()?;
        chain.push((*cname).clone());
        return Some(target);
    };
    let target = current.substitute(&dname.owner, &dname.target()?)?;
    chain.push((*dname).clone());
    // The CNAME the server synthesized, or ours (RFC 6672 §3.1: its TTL is the DNAME's).
    let synthesized = answer
        .iter()
        .find(|rr| rr.rtype == types::CNAME && rr.owner == *current)
        .map(|rr| (*rr).clone())
        .unwrap_or_else(|| Rr {
            owner: current.clone(),
            rtype: types::CNAME,
            class: dname.class,
            ttl: dname.ttl,
            rdata: target.wire().into(),
        });
    chain.push(synthesized);
    Some(target)
}

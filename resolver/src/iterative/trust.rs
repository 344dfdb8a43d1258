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
    /// A referral to a zone at or above the one asked, or beside it (or
    /// any answer for a name outside the zone: the server cannot speak for it).
    UpwardReferral,
    /// NOERROR with no answer, no referral and no sign of authority.
    Empty,
}

/// Reads `reply`, from a server of `zone`, to the question `(name, qtype)`.
pub fn judge(reply: &Reply, zone: &Name, name: &Name, qtype: u16) -> Verdict {
    if reply.rcode != rcodes::NOERROR && reply.rcode != rcodes::NXDOMAIN {
        return Verdict::Lame(Lame::Rcode(reply.rcode));
    }
    if !name.is_at_or_below(zone) {
        return Verdict::Lame(Lame::UpwardReferral);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn n(text: &str) -> Name {
        Name::parse(text).unwrap()
    }

    fn rr(owner: &str, rtype: u16, rdata: &[u8]) -> Rr {
        Rr {
            owner: n(owner),
            rtype,
            class: 1,
            ttl: 3600,
            rdata: rdata.into(),
        }
    }

    fn to(owner: &str, rtype: u16, target: &str) -> Rr {
        rr(owner, rtype, n(target).wire())
    }

    fn a(owner: &str, last: u8) -> Rr {
        rr(owner, types::A, &[192, 0, 2, last])
    }

    fn soa(owner: &str) -> Rr {
        let mut rdata = n(&format!("ns.{owner}")).wire().to_vec();
        rdata.extend_from_slice(n(&format!("h.{owner}")).wire());
        rdata.extend_from_slice(&[0; 20]);
        rr(owner, types::SOA, &rdata)
    }

    fn reply(answer: Vec<Rr>, authority: Vec<Rr>, additional: Vec<Rr>) -> Reply {
        Reply {
            authoritative: true,
            answer,
            authority,
            additional,
            ..Reply::default()
        }
    }

    #[test]
    fn records_outside_the_bailiwick_are_dropped() {
        // poison.com's server answers, and slips in records for other zones.
        let r = reply(
            vec![a("www.poison.com", 80), a("www.victim.com", 66)],
            vec![to("com", types::NS, "ns1.poison.com")],
            vec![a("a.nic.com", 1)],
        );
        assert_eq!(
            judge(&r, &n("poison.com"), &n("www.poison.com"), types::A),
            Verdict::Answer(vec![a("www.poison.com", 80)])
        );
        // Asked for the victim, the same server's answer is gossip.
        assert_eq!(
            judge(&r, &n("poison.com"), &n("www.victim.com"), types::A),
            Verdict::Lame(Lame::UpwardReferral)
        );
    }

    #[test]
    fn referrals_go_down_with_in_bailiwick_glue_only() {
        let mut r = reply(
            vec![],
            vec![
                to("example.com", types::NS, "ns1.example.com"),
                to("example.com", types::NS, "ns.example.net"),
            ],
            vec![a("ns1.example.com", 1), a("ns.example.net", 2)],
        );
        r.authoritative = false;
        let Verdict::Referral(referral) = judge(&r, &n("com"), &n("www.example.com"), types::A)
        else {
            panic!("a referral");
        };
        assert_eq!(referral.zone, n("example.com"));
        assert_eq!(
            referral.nameservers,
            [n("ns1.example.com"), n("ns.example.net")]
        );
        // ns.example.net's address from a com server is not trusted.
        assert_eq!(
            referral.glue,
            [(n("ns1.example.com"), "192.0.2.1".parse().unwrap())]
        );
        // The same delegation, asked of example.com's own server: not below it.
        assert_eq!(
            judge(&r, &n("example.com"), &n("www.example.com"), types::A),
            Verdict::Lame(Lame::UpwardReferral)
        );
        // Sideways: a referral to a zone the name is not in.
        assert_eq!(
            judge(&r, &n("com"), &n("www.other.com"), types::A),
            Verdict::Lame(Lame::UpwardReferral)
        );
        // Upward: the root's NS from a com server.
        let mut up = reply(
            vec![],
            vec![to(".", types::NS, "a.root-servers.net")],
            vec![],
        );
        up.authoritative = false;
        assert_eq!(
            judge(&up, &n("com"), &n("www.example.com"), types::A),
            Verdict::Lame(Lame::UpwardReferral)
        );
    }

    #[test]
    fn a_cname_out_of_the_zone_is_followed_afresh() {
        // The target's address in the same answer is not the zone's to give.
        let r = reply(
            vec![
                to("www.a.com", types::CNAME, "www.b.net"),
                a("www.b.net", 9),
            ],
            vec![],
            vec![],
        );
        assert_eq!(
            judge(&r, &n("a.com"), &n("www.a.com"), types::A),
            Verdict::Alias {
                chain: vec![to("www.a.com", types::CNAME, "www.b.net")],
                target: n("www.b.net"),
            }
        );
        // Asked for the CNAME itself, it is the answer.
        assert_eq!(
            judge(&r, &n("a.com"), &n("www.a.com"), types::CNAME),
            Verdict::Answer(vec![to("www.a.com", types::CNAME, "www.b.net")])
        );
    }

    #[test]
    fn a_dname_gets_its_cname_synthesized() {
        let r = reply(
            vec![to("old.a.com", types::DNAME, "new.b.net")],
            vec![],
            vec![],
        );
        assert_eq!(
            judge(&r, &n("a.com"), &n("www.old.a.com"), types::A),
            Verdict::Alias {
                chain: vec![
                    to("old.a.com", types::DNAME, "new.b.net"),
                    to("www.old.a.com", types::CNAME, "www.new.b.net"),
                ],
                target: n("www.new.b.net"),
            }
        );
    }

    #[test]
    fn negative_lame_and_empty_answers() {
        let mut nx = reply(vec![], vec![soa("a.com")], vec![]);
        nx.rcode = rcodes::NXDOMAIN;
        assert_eq!(
            judge(&nx, &n("a.com"), &n("x.a.com"), types::A),
            Verdict::NxDomain {
                chain: vec![],
                soa: Some(soa("a.com"))
            }
        );
        let nodata = reply(vec![], vec![soa("a.com")], vec![]);
        assert_eq!(
            judge(&nodata, &n("a.com"), &n("a.com"), 15),
            Verdict::NoData {
                chain: vec![],
                soa: Some(soa("a.com"))
            }
        );
        let mut refused = reply(vec![], vec![], vec![]);
        refused.rcode = 5;
        assert_eq!(
            judge(&refused, &n("a.com"), &n("a.com"), types::A),
            Verdict::Lame(Lame::Rcode(5))
        );
        let mut empty = reply(vec![], vec![], vec![]);
        empty.authoritative = false;
        assert_eq!(
            judge(&empty, &n("a.com"), &n("a.com"), types::A),
            Verdict::Lame(Lame::Empty)
        );
    }
}

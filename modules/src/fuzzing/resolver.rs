//! The `resolver_reply` target: an authoritative server's response as the
//! iterative resolver reads and judges it.

use dnsluice_resolver::iterative::message::{Reply, Rr};
use dnsluice_resolver::iterative::name::Name;
use dnsluice_resolver::iterative::trust::{judge, Verdict};

/// One selector byte, then a DNS response. The question's name (or
/// `www.example.com.` when there is none) is what was asked; the selector
/// picks the zone of the server asked among the name's ancestors, and the
/// QTYPE asked (the question's, or A). `Reply::decode` must not panic, and
/// what `judge` keeps must be in the bailiwick of the zone asked: every
/// record of an answer, chain or SOA at or below the zone, a referral's
/// child strictly below it and at or above the name, its glue at or below
/// the zone and owned by one of its nameservers.
pub fn resolver_reply(data: &[u8]) {
    let Some((&selector, msg)) = data.split_first() else {
        return;
    };
    let Ok(reply) = Reply::decode(msg) else {
        return;
    };
    let (name, qtype) = match Name::from_message(msg, 12) {
        Some((name, end)) if end + 2 <= msg.len() => {
            (name, u16::from_be_bytes([msg[end], msg[end + 1]]))
        }
        _ => (Name::parse("www.example.com.").expect("a valid name"), 1),
    };
    let zones: Vec<Name> = name.ancestors().collect();
    let zone = &zones[usize::from(selector) % zones.len()];
    let inside = |rr: &Rr| {
        assert!(
            rr.owner.is_at_or_below(zone),
            "{:?} kept from a server of {:?}",
            rr.owner,
            zone
        )
    };
    match judge(&reply, zone, &name, qtype) {
        Verdict::Answer(records) => records.iter().for_each(inside),
        Verdict::Alias { chain, .. } => chain.iter().for_each(inside),
        Verdict::NoData { chain, soa } | Verdict::NxDomain { chain, soa } => {
            chain.iter().chain(soa.iter()).for_each(inside)
        }
        Verdict::Referral(referral) => {
            assert!(referral.zone.is_below(zone), "{referral:?} under {zone:?}");
            assert!(name.is_at_or_below(&referral.zone), "{referral:?}");
            assert!(!referral.nameservers.is_empty(), "{referral:?}");
            for (owner, _) in &referral.glue {
                assert!(owner.is_at_or_below(zone), "glue {owner:?} from {zone:?}");
                assert!(referral.nameservers.contains(owner), "{referral:?}");
            }
        }
        Verdict::Lame(_) => {}
    }
}

//! `ALOOKUP`: A and AAAA for a name, following CNAME chains the server did
//! not follow itself.

use crate::ask::{fail, Ask, Question};
use crate::record::{self, Outcome};
use dnsluice_core::dns::{self, Section};
use std::net::{Ipv4Addr, Ipv6Addr};

/// Most CNAMEs followed by `ALOOKUP`.
const MAX_CNAME_HOPS: usize = 8;

/// `ALOOKUP`: the addresses of `name` of `types` (A = 1, AAAA = 28), as
/// [`resolve`] finds them, in the record's `ipv4_addresses` and
/// `ipv6_addresses`.
pub async fn addresses<A: Ask>(ask: &A, name: &str, types: &[u16], outcome: Outcome) -> Outcome {
    let mut outcome = outcome;
    let found = resolve(ask, name, types, &mut outcome).await;
    outcome.addresses = Some(found);
    outcome
}

/// The addresses of `name` (IPv4, IPv6) of `types`, following CNAME chains:
/// within each answer by owner name, and with a new query when the server
/// stopped at a CNAME it is not authoritative for. A loop or a chain longer
/// than [`MAX_CNAME_HOPS`] is an error (in `outcome`); addresses found
/// before an error are kept. `outcome.status` is the first answer's status
/// unless a later one failed.
pub async fn resolve<A: Ask>(
    ask: &A,
    name: &str,
    types: &[u16],
    outcome: &mut Outcome,
) -> (Vec<String>, Vec<String>) {
    let mut found = (Vec::new(), Vec::new());
    'types: for &qtype in types {
        let mut target = canonical(name);
        let mut visited = vec![target.clone()];
        loop {
            let response = match ask.ask(Question::new(&target, qtype), outcome).await {
                Ok(response) => response,
                Err(error) => {
                    fail(outcome, &error);
                    break 'types;
                }
            };
            let status = record::status_of(&response);
            // The first answer's status, unless a later link of the chain fails.
            if outcome.status.is_empty() || status != "NOERROR" {
                outcome.status = status;
            }
            let (end, addresses) = follow_chain(&response, &target, qtype, &mut visited);
            let list = if qtype == 1 {
                &mut found.0
            } else {
                &mut found.1
            };
            list.extend(addresses);
            match end {
                ChainEnd::Done => break,
                // `visited` holds the name asked for and each CNAME's target.
                ChainEnd::Follow(next) if visited.len() - 1 <= MAX_CNAME_HOPS => target = next,
                ChainEnd::Follow(_) => {
                    outcome.status = "ERROR".to_string();
                    outcome.error = Some(format!("more than {MAX_CNAME_HOPS} CNAMEs"));
                    break 'types;
                }
                ChainEnd::Loop(at) => {
                    outcome.status = "ERROR".to_string();
                    outcome.error = Some(format!("CNAME loop at {at}"));
                    break 'types;
                }
            }
        }
    }
    found
}

/// Lower-case presentation form with the trailing dot.
pub fn canonical(name: &str) -> String {
    let mut s = name.to_ascii_lowercase();
    if !s.ends_with('.') {
        s.push('.');
    }
    s
}

/// How far an answer took a CNAME chain.
enum ChainEnd {
    /// Addresses found, or the chain ends without them.
    Done,
    /// The answer stops at a CNAME target: ask for it.
    Follow(String),
    /// A CNAME leads back to a name already on the chain.
    Loop(String),
}

/// Walks the answer section from `start`: CNAMEs by owner name, then the
/// records of `qtype` owned by the chain's last name.
fn follow_chain(
    msg: &[u8],
    start: &str,
    qtype: u16,
    visited: &mut Vec<String>,
) -> (ChainEnd, Vec<String>) {
    let answers: Vec<_> = dns::records(msg)
        .filter(|r| r.section == Section::Answer)
        .collect();
    let owner = |r: &dns::Record| {
        dns::name::to_string(msg, r.name as usize)
            .map(|n| canonical(&n))
            .ok()
    };
    let mut current = start.to_string();
    while let Some(cname) = answers
        .iter()
        .find(|r| r.rtype == 5 && owner(r).as_deref() == Some(current.as_str()))
    {
        let Ok(next) = dns::name::to_string(msg, cname.rdata_at as usize) else {
            break;
        };
        let next = canonical(&next);
        if visited.contains(&next) {
            return (ChainEnd::Loop(next), Vec::new());
        }
        visited.push(next.clone());
        current = next;
    }
    let addresses: Vec<String> = answers
        .iter()
        .filter(|r| r.rtype == qtype && owner(r).as_deref() == Some(current.as_str()))
        .filter_map(|r| address_text(msg, r))
        .collect();
    if addresses.is_empty() && current != start {
        (ChainEnd::Follow(current), addresses)
    } else {
        (ChainEnd::Done, addresses)
    }
}

/// An A or AAAA record's address as text.
pub fn address_text(msg: &[u8], record: &dns::Record) -> Option<String> {
    let at = record.rdata_at as usize;
    let rdata = msg.get(at..at + usize::from(record.rdata_len))?;
    match rdata.len() {
        4 => Some(Ipv4Addr::from(<[u8; 4]>::try_from(rdata).ok()?).to_string()),
        16 => Some(Ipv6Addr::from(<[u8; 16]>::try_from(rdata).ok()?).to_string()),
        _ => None,
    }
}

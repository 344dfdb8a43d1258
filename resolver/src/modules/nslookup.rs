//! `NSLOOKUP`: the name's NS records, each nameserver with its addresses:
//! from the response's additional section when the server sent them, else
//! looked up (A only unless `ipv6_lookup`, as in ZDNS).

use super::alookup::{self, address_text, canonical};
use super::{single, ModuleOptions, TYPE_A, TYPE_AAAA};
use crate::ask::{Ask, Question};
use crate::record::Outcome;
use crate::results::{Host, ModuleData};
use dnsluice_core::dns::{self, Section};

/// The record type NS.
const TYPE_NS: u16 = 2;

/// Looks up `name`'s nameservers and their addresses.
pub async fn run<A: Ask>(
    ask: &A,
    name: &str,
    options: &ModuleOptions,
    outcome: Outcome,
) -> Outcome {
    let mut outcome = single(ask, Question::new(name, TYPE_NS), outcome).await;
    let hosts = match outcome.response.take() {
        Some(response) if outcome.status == "NOERROR" => {
            let types = options.address_types(&[TYPE_A]);
            with_addresses(ask, &response, &types, &mut outcome).await
        }
        _ => Vec::new(),
    };
    outcome.data = Some(ModuleData::NameServers(hosts));
    outcome
}

/// The nameservers the NS answers of `response` name, each with its
/// addresses of `types` (glue first, else a lookup through `ask`).
pub async fn with_addresses<A: Ask>(
    ask: &A,
    response: &[u8],
    types: &[u16],
    outcome: &mut Outcome,
) -> Vec<Host> {
    let mut hosts = Vec::new();
    for (name, ttl) in ns_targets(response) {
        let glue = |qtype: u16| glue_of(response, &name, qtype);
        let mut host = Host {
            name: name.trim_end_matches('.').to_string(),
            ttl,
            ..Host::default()
        };
        let mut missing = Vec::new();
        for &qtype in types {
            let found = glue(qtype);
            if found.is_empty() {
                missing.push(qtype);
            } else if qtype == TYPE_A {
                host.ipv4 = found;
            } else {
                host.ipv6 = found;
            }
        }
        if !missing.is_empty() {
            let mut inner = outcome.child();
            let (v4, v6) = alookup::resolve(ask, &host.name, &missing, &mut inner).await;
            if missing.contains(&TYPE_A) {
                host.ipv4 = v4;
            }
            if missing.contains(&TYPE_AAAA) {
                host.ipv6 = v6;
            }
            outcome.absorb(inner);
        }
        hosts.push(host);
    }
    hosts
}

/// The targets (canonical, with the dot) and TTLs of the NS answers.
fn ns_targets(msg: &[u8]) -> Vec<(String, u32)> {
    dns::records(msg)
        .filter(|r| r.section == Section::Answer && r.rtype == TYPE_NS)
        .filter_map(|r| {
            let target = dns::name::to_string(msg, r.rdata_at as usize).ok()?;
            Some((canonical(&target), r.ttl))
        })
        .collect()
}

/// The addresses of `qtype` the additional section gives `name`.
fn glue_of(msg: &[u8], name: &str, qtype: u16) -> Vec<String> {
    dns::records(msg)
        .filter(|r| r.section == Section::Additional && r.rtype == qtype)
        .filter(|r| {
            dns::name::to_string(msg, r.name as usize).is_ok_and(|owner| canonical(&owner) == name)
        })
        .filter_map(|r| address_text(msg, &r))
        .collect()
}

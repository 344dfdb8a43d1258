//! `MXLOOKUP`: the name's MX records, each exchange with its addresses
//! (looked up; A only unless `ipv6_lookup`, as in ZDNS).

use super::alookup::{self, canonical};
use super::{single, ModuleOptions, TYPE_A};
use crate::ask::{Ask, Question};
use crate::record::Outcome;
use crate::results::{Host, MailExchange, ModuleData};
use dnsluice_core::dns::{self, mnemonic, Section};

/// The record type MX.
const TYPE_MX: u16 = 15;

/// Looks up `name`'s mail exchanges and their addresses. A response that is
/// not NOERROR leaves `data` out, as ZDNS does.
pub async fn run<A: Ask>(
    ask: &A,
    name: &str,
    options: &ModuleOptions,
    outcome: Outcome,
) -> Outcome {
    let mut outcome = single(ask, Question::new(name, TYPE_MX), outcome).await;
    let Some(response) = outcome.response.take() else {
        return outcome;
    };
    if outcome.status != "NOERROR" {
        return outcome;
    }
    let types = options.address_types(&[TYPE_A]);
    let mut exchanges = Vec::new();
    for (preference, exchange, ttl, class) in mx_answers(&response) {
        let host_name = exchange.trim_end_matches('.').to_string();
        let mut inner = outcome.child();
        let (ipv4, ipv6) = alookup::resolve(ask, &host_name, &types, &mut inner).await;
        // ZDNS keeps the addresses only of a lookup that succeeded.
        let ok = inner.status == "NOERROR";
        outcome.absorb(inner);
        exchanges.push(MailExchange {
            host: Host {
                name: host_name,
                ttl,
                ipv4: if ok { ipv4 } else { Vec::new() },
                ipv6: if ok { ipv6 } else { Vec::new() },
            },
            preference,
            class,
        });
    }
    outcome.data = Some(ModuleData::MailExchanges(exchanges));
    outcome
}

/// (preference, exchange, TTL, class) of each MX answer.
fn mx_answers(msg: &[u8]) -> Vec<(u16, String, u32, String)> {
    dns::records(msg)
        .filter(|r| r.section == Section::Answer && r.rtype == TYPE_MX && r.rdata_len >= 3)
        .filter_map(|r| {
            let at = r.rdata_at as usize;
            let preference = u16::from_be_bytes([*msg.get(at)?, *msg.get(at + 1)?]);
            let exchange = dns::name::to_string(msg, at + 2).ok()?;
            Some((
                preference,
                canonical(&exchange),
                r.ttl,
                mnemonic::class(r.class).into_owned(),
            ))
        })
        .collect()
}

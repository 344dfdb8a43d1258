//! `AXFR`: a zone's records, transferred (RFC 5936) from each of its
//! nameservers (NSLOOKUP first, each server's first IPv4 address, as ZDNS
//! does), or from the nameserver the input line pinned. One record for the
//! zone: per server its address, `Status` and every record, or the error.

use super::nslookup;
use super::{single, ModuleOptions, TYPE_A};
use crate::ask::{Ask, Question};
use crate::record::Outcome;
use crate::results::{ModuleData, ServerTransfer};
use std::net::IpAddr;

/// Transfers `zone` from its nameservers.
pub async fn run<A: Ask>(
    ask: &A,
    zone: &str,
    options: &ModuleOptions,
    outcome: Outcome,
) -> Outcome {
    let servers: Vec<Option<IpAddr>> = match ask.pinned() {
        Some(_) => vec![None],
        None => {
            let mut outcome = single(ask, Question::new(zone, 2), outcome).await;
            let Some(response) = outcome.response.take() else {
                return outcome;
            };
            if outcome.status != "NOERROR" {
                return outcome;
            }
            let types = options.address_types(&[TYPE_A]);
            let hosts = nslookup::with_addresses(ask, &response, &types, &mut outcome).await;
            let servers = hosts
                .iter()
                .filter_map(|h| h.ipv4.first()?.parse::<IpAddr>().ok())
                .map(Some)
                .collect();
            return transfer_all(ask, zone, servers, outcome).await;
        }
    };
    transfer_all(ask, zone, servers, outcome).await
}

/// One transfer per server, in order.
async fn transfer_all<A: Ask>(
    ask: &A,
    zone: &str,
    servers: Vec<Option<IpAddr>>,
    mut outcome: Outcome,
) -> Outcome {
    let mut transfers = Vec::new();
    for server in servers {
        let address = server
            .or_else(|| ask.pinned())
            .map_or_else(String::new, |ip| ip.to_string());
        let result = ask.transfer(zone, server, &mut outcome).await;
        transfers.push(match result {
            Ok(messages) => ServerTransfer {
                server: address,
                status: "NOERROR".to_string(),
                error: None,
                messages,
            },
            Err(error) => ServerTransfer {
                server: address,
                status: "ERROR".to_string(),
                error: Some(error.to_string()),
                messages: Vec::new(),
            },
        });
    }
    // The zone's record is NOERROR; each server's transfer has its own status.
    outcome.status = "NOERROR".to_string();
    outcome.data = Some(ModuleData::Transfers(transfers));
    outcome
}

//! A zone transfer (AXFR) from one server, for either way of asking
//! ([`super::direct`] and [`super::iterative`]): the query, the counting and
//! the trace step; the messages come from `dnsluice_net::transfer`.

use super::record::Outcome;
use super::trace::TraceStep;
use dnsluice_net::query::QueryOptions;
use dnsluice_net::{ClientSetup, Endpoint, NetError};
use std::time::{Duration, Instant};

/// The AXFR query type.
const TYPE_AXFR: u16 = 252;

/// AXFR of `zone` from `endpoint` (TCP, or TLS), one try, counted and traced
/// in `outcome`: the messages in order.
pub async fn transfer_from(
    endpoint: Endpoint,
    setup: &ClientSetup,
    query_options: QueryOptions,
    timeout: Duration,
    zone: &str,
    outcome: &mut Outcome,
) -> Result<Vec<Vec<u8>>, NetError> {
    let mut query = Vec::with_capacity(64);
    let options = QueryOptions {
        recursion_desired: false,
        ..query_options
    };
    dnsluice_net::query::build(0, zone, TYPE_AXFR, &options, &mut query)
        .map_err(|_| NetError::BadQuery("the zone's name cannot be encoded"))?;
    outcome.attempts += 1;
    outcome.protocol = endpoint.transport.protocol_name();
    let started = Instant::now();
    let result = dnsluice_net::transfer(&endpoint, setup, &query, timeout).await;
    if let Some(trace) = &mut outcome.trace {
        trace.push(TraceStep {
            name: zone.to_string(),
            qtype: TYPE_AXFR,
            qclass: dnsluice_net::query::CLASS_IN,
            nameserver: endpoint.resolver_name(),
            protocol: endpoint.transport.protocol_name(),
            depth: 1,
            layer: zone.to_string(),
            response: result
                .as_ref()
                .ok()
                .and_then(|t| t.messages.first().cloned()),
            error: result.as_ref().err().map(ToString::to_string),
            duration: started.elapsed(),
            ..TraceStep::default()
        });
    }
    result.map(|t| t.messages)
}

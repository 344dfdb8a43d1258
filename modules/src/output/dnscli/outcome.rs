//! What became of one query, as both engines report it, and how it goes on
//! down a chain as an [`Object::Response`].

use dnsluice_core::{Object, Receiver, Response, StageError};
use dnsluice_net::DnsTransport;
use std::time::Duration;

/// What became of one query.
#[derive(Debug)]
pub struct Outcome {
    /// The job's client.
    pub client: u32,
    /// The query as given.
    pub query: Vec<u8>,
    /// The answer, or the kind and text of the error.
    pub result: Result<Vec<u8>, (&'static str, String)>,
    /// From the first write to the answer or the error.
    pub latency: Duration,
    /// When the query was taken up, in ns since the Unix epoch.
    pub sent_ns: i64,
    /// The transport that carried the final attempt.
    pub transport: DnsTransport,
}

/// Passes `outcome` to `receiver` as an [`Object::Response`].
pub(super) fn hand_on(
    outcome: &Outcome,
    server: &str,
    receiver: &mut dyn Receiver,
) -> Result<(), StageError> {
    receiver.receive(&mut response_of(outcome, server))
}

/// `outcome` as an [`Object::Response`] from `server`.
pub(super) fn response_of<'a>(outcome: &'a Outcome, server: &'a str) -> Object<'a> {
    let (answer, error_kind, error) = match &outcome.result {
        Ok(answer) => (Some(answer.as_slice()), None, ""),
        Err((kind, text)) => (None, Some(*kind), text.as_str()),
    };
    Object::Response(Response {
        query: &outcome.query,
        answer,
        error_kind,
        error,
        latency_ns: outcome.latency.as_nanos() as u64,
        sent_ns: outcome.sent_ns,
        client: outcome.client,
        server,
        transport: outcome.transport.as_str(),
    })
}

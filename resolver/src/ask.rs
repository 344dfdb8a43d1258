//! The seam between what a lookup does with answers and how its questions
//! reach a server.
//!
//! A lookup module (`ALOOKUP`'s CNAME following, and the modules that chain
//! several questions per name) asks through an [`Ask`]; it does not know
//! whether the question goes to the one nameserver the job was given
//! ([`super::direct::DirectAsk`]: retries, the TCP fallback, kept
//! connections) or is resolved from the root (an iterative resolver
//! implements [`Ask`] the same way). Each implementation counts what it does
//! in the job's [`Outcome`] (`attempts`, `protocol`) and, when the outcome
//! collects a trace (`outcome.trace` is `Some`), adds a
//! [`super::trace::TraceStep`] for every exchange.
//!
//! Zone transfers (AXFR) are a streaming exchange of their own: many
//! messages for one query, over TCP. [`Ask::transfer`] does one, from a
//! given address or from the nameserver the job's line pinned
//! ([`Ask::pinned`]).

use super::record::Outcome;
use dnsluice_net::NetError;
use std::future::Future;
use std::net::IpAddr;

/// Why a question got no response: the status the record gets (ZDNS's:
/// `TIMEOUT`, `ERROR`, and from the iterative resolver `ITERATIVE_TIMEOUT`,
/// `CIRCULAR`, `SERVFAIL`) and what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskError {
    /// The record's status.
    pub status: &'static str,
    /// What went wrong, for the record's `error`.
    pub message: String,
}

impl std::fmt::Display for AskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for AskError {}

impl From<NetError> for AskError {
    fn from(error: NetError) -> AskError {
        AskError {
            status: error.status(),
            message: error.to_string(),
        }
    }
}

/// One question of a lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Question<'a> {
    /// The name, in presentation form (`www.example.com` or with the dot).
    pub name: &'a str,
    /// The record type (1 for A, 28 for AAAA, 252 for AXFR, ...).
    pub qtype: u16,
    /// The class: 1 (IN), or 3 (CH) for `version.bind`.
    pub qclass: u16,
}

impl<'a> Question<'a> {
    /// A question of class IN.
    pub fn new(name: &'a str, qtype: u16) -> Self {
        Question {
            name,
            qtype,
            qclass: dnsluice_net::query::CLASS_IN,
        }
    }
}

/// Asks questions for one job.
pub trait Ask: Sync {
    /// Asks `question`; the response (a whole DNS message), or the last error
    /// after the tries the configuration allows.
    fn ask(
        &self,
        question: Question<'_>,
        outcome: &mut Outcome,
    ) -> impl Future<Output = Result<Vec<u8>, AskError>> + Send;

    /// Transfers `zone` (AXFR, RFC 5936, over TCP, or TLS when that is the
    /// transport) from `server`, at the port this Ask's nameservers listen
    /// on (53 for authorities found by iterating), or with `server` `None`
    /// from the nameserver the job's line pinned. The messages in order,
    /// the first opening and the last closing with the zone's SOA.
    fn transfer(
        &self,
        zone: &str,
        server: Option<IpAddr>,
        outcome: &mut Outcome,
    ) -> impl Future<Output = Result<Vec<Vec<u8>>, NetError>> + Send;

    /// The address of the nameserver the job's line named (`name,server`),
    /// when it named one: AXFR then transfers from it alone, without
    /// looking up the zone's nameservers.
    fn pinned(&self) -> Option<IpAddr> {
        None
    }
}

/// A failure a record can report: its status and its text.
pub trait Failure: std::fmt::Display {
    /// The record's status (`TIMEOUT`, `ERROR`, `CIRCULAR`, ...).
    fn status(&self) -> &'static str;
}

impl Failure for AskError {
    fn status(&self) -> &'static str {
        self.status
    }
}

impl Failure for NetError {
    fn status(&self) -> &'static str {
        match self {
            NetError::Timeout => "TIMEOUT",
            _ => "ERROR",
        }
    }
}

/// Records `error` in `outcome`: its status and its text.
pub fn fail(outcome: &mut Outcome, error: &impl Failure) {
    outcome.status = error.status().to_string();
    outcome.error = Some(error.to_string());
}

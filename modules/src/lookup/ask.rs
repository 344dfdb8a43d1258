//! The seam between what a lookup does with answers and how its questions
//! reach a server.
//!
//! A lookup module (`ALOOKUP`'s CNAME following, and the modules that chain
//! several questions per name) asks through an [`Ask`]; it does not know
//! whether the question goes to the one nameserver the job was given
//! ([`super::direct::DirectAsk`]: retries, the TCP fallback, kept
//! connections) or is resolved from the root (an iterative resolver
//! implements [`Ask`] the same way). Each implementation counts what it does
//! in the job's [`Outcome`] (`attempts`, `protocol`).

use super::record::Outcome;
use dnsluice_net::NetError;
use std::future::Future;

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
    ) -> impl Future<Output = Result<Vec<u8>, NetError>> + Send;
}

/// Records `error` in `outcome`: the status ZDNS gives it (`TIMEOUT`, else
/// `ERROR`) and its text.
pub fn fail(outcome: &mut Outcome, error: &NetError) {
    outcome.status = match error {
        NetError::Timeout => "TIMEOUT",
        _ => "ERROR",
    }
    .to_string();
    outcome.error = Some(error.to_string());
}

//! The seam between what a lookup does with answers and how its questions
//! reach a server.
//!
//! A lookup module (`ALOOKUP`'s CNAME following, and the modules that chain
//! several questions per name) asks through an [`Ask`]; it does not know
//! whether the question goes to the one nameserver the job was given
//! ([`super::direct::DirectAsk`]: retries, the TCP fallback, kept
//! connections) or is resolved from the root (an iterative resolver
//! implements [`Ask`] the same way). Each implementation counts what it does
//! in the job's [`Outcome`] (`attempts`, `protocol`, `trace`).

use super::record::Outcome;
use dnsluice_net::NetError;
use std::future::Future;

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
            status: match error {
                NetError::Timeout => "TIMEOUT",
                _ => "ERROR",
            },
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
}

/// Records `error` in `outcome`: its status and its text.
pub fn fail(outcome: &mut Outcome, error: &AskError) {
    outcome.status = error.status.to_string();
    outcome.error = Some(error.message.clone());
}

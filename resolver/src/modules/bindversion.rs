//! `BINDVERSION`: what the server says its version is (`version.bind`,
//! class CH, type TXT), the first TXT answer's text.

use super::txt::first_match;
use crate::ask::{Ask, Question};
use crate::record::Outcome;
use crate::results::ModuleData;
use dnsluice_net::query::CLASS_CH;

/// Asks the server for `version.bind` (the input line's name is not used).
pub async fn run<A: Ask>(ask: &A, outcome: Outcome) -> Outcome {
    let question = Question {
        name: "VERSION.BIND",
        qtype: 16,
        qclass: CLASS_CH,
    };
    first_match(ask, question, outcome, |_| true, ModuleData::Version).await
}

//! What a lookup does with a name: one question, or a module that asks
//! several (`ALOOKUP`), through an [`Ask`] (one nameserver, or iteratively
//! from the root).

pub mod alookup;

use super::ask::{fail, Ask, Question};
use super::qtype::LookupType;
use super::record::{self, Outcome};

/// Looks `name` up as `qtype` says, asking through `ask`.
pub async fn run<A: Ask>(qtype: LookupType, ask: &A, name: &str) -> Outcome {
    match qtype {
        LookupType::Single(qtype) => {
            let mut outcome = Outcome::default();
            match ask.ask(Question::new(name, qtype), &mut outcome).await {
                Ok(response) => {
                    outcome.status = record::status_of(&response);
                    outcome.response = Some(response);
                }
                Err(error) => fail(&mut outcome, &error),
            }
            outcome
        }
        LookupType::Addresses => alookup::addresses(ask, name).await,
    }
}

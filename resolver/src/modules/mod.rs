//! What a lookup does with a name: one question, or one of ZDNS's modules
//! (named in [`super::qtype::ZDNS_MODULES`]) that ask several, through an
//! [`Ask`] (one nameserver, or iteratively from the root), each in a file
//! here named for it ([`alookup`], [`mxlookup`], ...) and started by [`run`].
//! A module only asks through its [`Ask`], so every module runs unchanged
//! whichever way the questions travel.

pub mod alookup;
pub mod axfr;
pub mod bindversion;
pub mod caa;
pub mod dmarc;
pub mod mxlookup;
pub mod nslookup;
pub mod spf;
mod txt;

use super::ask::{fail, Ask, Question};
use super::qtype::LookupType;
use super::record::{self, Outcome};

/// The record type A.
pub const TYPE_A: u16 = 1;
/// The record type AAAA.
pub const TYPE_AAAA: u16 = 28;

/// The modules' options (ZDNS's `--ipv4-lookup` and `--ipv6-lookup`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModuleOptions {
    /// Look up A records of the hosts a module finds.
    pub ipv4_lookup: bool,
    /// Look up AAAA records of the hosts a module finds.
    pub ipv6_lookup: bool,
}

impl ModuleOptions {
    /// The address types to look up: those asked for, or when neither is,
    /// `default` (ZDNS's NSLOOKUP and MXLOOKUP: A only; our ALOOKUP: both).
    pub fn address_types(&self, default: &'static [u16]) -> Vec<u16> {
        match (self.ipv4_lookup, self.ipv6_lookup) {
            (false, false) => default.to_vec(),
            (v4, v6) => [(v4, TYPE_A), (v6, TYPE_AAAA)]
                .iter()
                .filter(|(on, _)| *on)
                .map(|(_, t)| *t)
                .collect(),
        }
    }
}

/// Looks `name` up as `qtype` says, asking through `ask`. `outcome` is the
/// start (with `trace` set to `Some` to collect the exchanges).
pub async fn run<A: Ask>(
    qtype: LookupType,
    options: &ModuleOptions,
    ask: &A,
    name: &str,
    outcome: Outcome,
) -> Outcome {
    match qtype {
        LookupType::Single(qtype) => single(ask, Question::new(name, qtype), outcome).await,
        LookupType::Addresses => {
            let types = options.address_types(&[TYPE_A, TYPE_AAAA]);
            alookup::addresses(ask, name, &types, outcome).await
        }
        LookupType::NameServers => nslookup::run(ask, name, options, outcome).await,
        LookupType::MailExchanges => mxlookup::run(ask, name, options, outcome).await,
        LookupType::Transfer => axfr::run(ask, name, options, outcome).await,
        LookupType::BindVersion => bindversion::run(ask, outcome).await,
        LookupType::Spf => spf::run(ask, name, outcome).await,
        LookupType::Dmarc => dmarc::run(ask, name, outcome).await,
        LookupType::RelevantCaa => caa::run(ask, name, outcome).await,
    }
}

/// One question: the response and its status, or the error.
pub async fn single<A: Ask>(ask: &A, question: Question<'_>, mut outcome: Outcome) -> Outcome {
    match ask.ask(question, &mut outcome).await {
        Ok(response) => {
            outcome.status = record::status_of(&response);
            outcome.response = Some(response);
        }
        Err(error) => fail(&mut outcome, &error),
    }
    outcome
}

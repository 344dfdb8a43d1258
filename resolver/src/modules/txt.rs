//! The TXT record that SPF, DMARC and BINDVERSION report: the first answer
//! whose text (as ZDNS keeps it: strings joined by newlines, escaped as
//! miekg/dns escapes them) a rule accepts.

use super::single;
use crate::ask::{Ask, Question};
use crate::record::Outcome;
use crate::results::ModuleData;
use dnsluice_core::dns::{self, Section};
use dnsluice_json::rdata::zdns_txt;

/// ZDNS's error when no answer passes.
pub const NO_RECORD: &str = "no such TXT record found";

/// Asks `question` and keeps the first TXT answer `accept` takes, as
/// `make(text)`; status `NORECORD` when there is none, the response's when
/// it is not NOERROR.
pub async fn first_match<A: Ask>(
    ask: &A,
    question: Question<'_>,
    outcome: Outcome,
    accept: impl Fn(&str) -> bool,
    make: impl Fn(Option<String>) -> ModuleData,
) -> Outcome {
    let mut outcome = single(ask, question, outcome).await;
    let Some(response) = outcome.response.take() else {
        outcome.data = Some(make(None));
        return outcome;
    };
    let found = if outcome.status == "NOERROR" {
        texts(&response).into_iter().find(|t| accept(t))
    } else {
        None
    };
    if outcome.status == "NOERROR" && found.is_none() {
        outcome.status = "NORECORD".to_string();
        outcome.error = Some(NO_RECORD.to_string());
    }
    outcome.data = Some(make(found));
    outcome
}

/// The TXT answers of `msg`, each as ZDNS's text.
fn texts(msg: &[u8]) -> Vec<String> {
    dns::records(msg)
        .filter(|r| r.section == Section::Answer && r.rtype == 16)
        .filter_map(|r| {
            let at = r.rdata_at as usize;
            let mut rdata = msg.get(at..at + usize::from(r.rdata_len))?;
            let mut strings = Vec::new();
            while let Some((&len, rest)) = rdata.split_first() {
                let part = rest.get(..usize::from(len))?;
                strings.push(part);
                rdata = &rest[usize::from(len)..];
            }
            Some(zdns_txt(strings))
        })
        .collect()
}

//! `SPF`: the name's TXT record that starts `v=spf1` (any case), as ZDNS's
//! `(?i)^v=spf1` finds it (so `v=spf10` passes too; ZDNS's rule, kept).

use super::txt::first_match;
use crate::ask::{Ask, Question};
use crate::record::Outcome;
use crate::results::ModuleData;

/// Looks up `name`'s SPF record.
pub async fn run<A: Ask>(ask: &A, name: &str, outcome: Outcome) -> Outcome {
    let question = Question::new(name, 16);
    first_match(ask, question, outcome, is_spf, |t| {
        ModuleData::Text("spf", t)
    })
    .await
}

/// Whether `text` starts `v=spf1`, ignoring case.
pub fn is_spf(text: &str) -> bool {
    text.get(..6)
        .is_some_and(|p| p.eq_ignore_ascii_case("v=spf1"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_prefix_in_any_case() {
        assert!(super::is_spf("v=spf1 -all"));
        assert!(super::is_spf("V=SPF1"));
        assert!(super::is_spf("v=spf10"));
        assert!(!super::is_spf(" v=spf1"));
        assert!(!super::is_spf("v=spf"));
        assert!(!super::is_spf("spf1 v="));
    }
}

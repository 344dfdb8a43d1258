//! `DMARC`: the name's TXT record (ask for `_dmarc.example.com`) that
//! starts as ZDNS's `^[vV][\t ]*=[\t ]*DMARC1[\t ]*;` says.

use super::txt::first_match;
use crate::ask::{Ask, Question};
use crate::record::Outcome;
use crate::results::ModuleData;

/// Looks up `name`'s DMARC record.
pub async fn run<A: Ask>(ask: &A, name: &str, outcome: Outcome) -> Outcome {
    let question = Question::new(name, 16);
    first_match(ask, question, outcome, is_dmarc, |t| {
        ModuleData::Text("dmarc", t)
    })
    .await
}

/// Whether `text` starts `v=DMARC1;`, with tabs or spaces around `=` and
/// before `;`, `v` in either case, `DMARC1` exactly.
pub fn is_dmarc(text: &str) -> bool {
    let blank = |c: char| c == ' ' || c == '\t';
    let Some(rest) = text.strip_prefix(['v', 'V']) else {
        return false;
    };
    let Some(rest) = rest.trim_start_matches(blank).strip_prefix('=') else {
        return false;
    };
    let Some(rest) = rest.trim_start_matches(blank).strip_prefix("DMARC1") else {
        return false;
    };
    rest.trim_start_matches(blank).starts_with(';')
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_prefix_as_zdns_matches_it() {
        assert!(super::is_dmarc("v=DMARC1; p=none"));
        assert!(super::is_dmarc("V \t= DMARC1\t;p=none"));
        assert!(!super::is_dmarc("v=dmarc1; p=none"));
        assert!(!super::is_dmarc("v=DMARC1 p=none"));
        assert!(!super::is_dmarc("v=DMARC2; p=none"));
        assert!(!super::is_dmarc(" v=DMARC1;"));
    }
}

//! `CAALOOKUP` (ours; ZDNS has no such module): the CAA RRset relevant to a
//! name, as a certification authority looks for it (RFC 8659 §3). CAA is
//! asked at the name, then at its parent, and so on up to (not including)
//! the root, until an answer holds CAA records. The record is the response
//! that held them (their owner says where the RRset was found; a CNAME
//! followed on the way is among the answers); when no name up to the
//! top-level domain has one, the top-level domain's answer: NOERROR and no
//! CAA record, so any CA may issue. An error on the way (SERVFAIL, a
//! timeout) ends the climb with that status: a CA must not issue then.

use super::single;
use crate::ask::{Ask, Question};
use crate::record::Outcome;
use dnsluice_core::dns::{self, Section};

/// The CAA record type (RFC 8659).
pub const TYPE_CAA: u16 = 257;

/// Looks up the CAA RRset relevant to `name`.
pub async fn run<A: Ask>(ask: &A, name: &str, mut outcome: Outcome) -> Outcome {
    let mut at = name.trim_end_matches('.');
    loop {
        outcome = single(ask, Question::new(at, TYPE_CAA), outcome).await;
        let found = outcome.response.as_deref().is_some_and(holds_caa);
        let climb = match outcome.status.as_str() {
            "NOERROR" => !found,
            "NXDOMAIN" => true,
            _ => false,
        };
        match parent(at) {
            Some(up) if climb => at = up,
            _ => return outcome,
        }
    }
}

/// The name one label up, `None` above a top-level domain (the root is not
/// asked).
fn parent(name: &str) -> Option<&str> {
    name.split_once('.')
        .map(|(_, up)| up)
        .filter(|up| !up.is_empty())
}

/// Whether `msg`'s answer section holds a CAA record.
fn holds_caa(msg: &[u8]) -> bool {
    dns::records(msg).any(|r| r.section == Section::Answer && r.rtype == TYPE_CAA)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_climb_stops_below_the_root() {
        assert_eq!(parent("a.b.example.com"), Some("b.example.com"));
        assert_eq!(parent("example.com"), Some("com"));
        assert_eq!(parent("com"), None);
    }
}

//! Does this response answer that query? The question test of RFC 5452 §9.1
//! (with the id, which [`super::inflight`] looks up): the response repeats
//! the query's first question, names compared without regard to ASCII case
//! (RFC 1035 §2.3.3, RFC 4343), type and class exactly.

/// The id of a DNS message (its first two bytes); `None` if it is shorter.
pub fn id_of(msg: &[u8]) -> Option<u16> {
    msg.get(..2).map(|b| u16::from_be_bytes([b[0], b[1]]))
}

/// Writes `id` over the first two bytes of `msg` (which must have them).
pub fn set_id(msg: &mut [u8], id: u16) {
    msg[..2].copy_from_slice(&id.to_be_bytes());
}

/// The question section's first entry in `msg` (name in wire form, type, class),
/// when it is there uncompressed; `None` for a message without one.
pub fn first_question(msg: &[u8]) -> Option<&[u8]> {
    if msg.len() < 12 || u16::from_be_bytes([msg[4], msg[5]]) == 0 {
        return None;
    }
    let mut at = 12;
    loop {
        let len = *msg.get(at)? as usize;
        if len == 0 {
            at += 1;
            break;
        }
        if len > 63 {
            return None; // a pointer or a reserved label type: not a plain name
        }
        at += 1 + len;
    }
    msg.get(12..at + 4)
}

/// Whether two questions (as [`first_question`] returns them) are the same:
/// names equal without regard to ASCII case, type and class equal exactly.
pub fn question_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len()
        && a.len() >= 4
        && a[..a.len() - 4].eq_ignore_ascii_case(&b[..b.len() - 4])
        && a[a.len() - 4..] == b[b.len() - 4..]
}

/// Whether `response` answers a query whose first question is `asked` (as
/// [`first_question`] gives it): the same question, or, for an error, no
/// question in the response at all (QDCOUNT 0: some servers drop it from
/// errors such as FORMERR, and then the id alone decides). A NOERROR
/// without the question asked answers nothing: only the id would vouch
/// for it.
pub fn answers(asked: Option<&[u8]>, response: &[u8]) -> bool {
    match (asked, first_question(response)) {
        (Some(q), Some(r)) => question_eq(q, r),
        // A query without a question: so is its answer.
        (None, None) => response.len() >= 12 && u16::from_be_bytes([response[4], response[5]]) == 0,
        (Some(_), None) => {
            response.len() >= 12
                && u16::from_be_bytes([response[4], response[5]]) == 0
                && response[3] & 0x0f != 0
        }
        (None, Some(_)) => false,
    }
}

/// [`answers`] for a whole query.
pub fn same_question(query: &[u8], response: &[u8]) -> bool {
    answers(first_question(query), response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::query::{build, QueryOptions};

    #[test]
    fn questions_match_without_case() {
        let mut q = Vec::new();
        build(7, "Example.COM", 1, &QueryOptions::default(), &mut q).unwrap();
        let mut r = Vec::new();
        build(7, "example.com", 1, &QueryOptions::default(), &mut r).unwrap();
        assert!(same_question(&q, &r));
        let mut other = Vec::new();
        build(7, "example.org", 1, &QueryOptions::default(), &mut other).unwrap();
        assert!(!same_question(&q, &other));
        build(7, "example.com", 28, &QueryOptions::default(), &mut other).unwrap();
        assert!(!same_question(&q, &other));
        // Type 65 (HTTPS) and 97 differ only by ASCII case as bytes: not the same.
        build(7, "example.com", 65, &QueryOptions::default(), &mut q).unwrap();
        build(7, "example.com", 97, &QueryOptions::default(), &mut other).unwrap();
        assert!(!same_question(&q, &other));
        // A bare header without a question (FORMERR style) is accepted,
        // not a NOERROR one (it would end the name on its id alone).
        assert!(same_question(&q, &[0, 7, 0x81, 1, 0, 0, 0, 0, 0, 0, 0, 0]));
        assert!(!same_question(
            &q,
            &[0, 7, 0x81, 0x80, 0, 0, 0, 0, 0, 0, 0, 0]
        ));
    }
}

//! The answers a rate limiter gives instead of forwarding a query: REFUSED,
//! or an empty truncated response (RRL's "slip"), made from the query's
//! header and question alone.

use crate::spec::Over;

/// The response to `query` that `over` asks for; `None` when the query is
/// not a DNS query with one whole question (it is then dropped).
pub fn answer(query: &[u8], over: Over) -> Option<Vec<u8>> {
    if query.len() < 12 || query[2] & 0x80 != 0 || query[4..6] != [0, 1] {
        return None;
    }
    let end = question_end(query)?;
    let mut response = query[..end].to_vec();
    // QR=1, keep OPCODE and RD; AA, TC, RA, Z, AD, CD and RCODE from scratch.
    response[2] = 0x80 | (query[2] & 0x79);
    response[3] = 0;
    match over {
        Over::Refused => response[3] = 5,
        Over::Truncate => response[2] |= 0x02,
        Over::Drop => return None,
    }
    // One question, nothing else.
    response[6..12].fill(0);
    Some(response)
}

/// Where the first question ends: after its name (uncompressed labels, as a
/// query's is) and its type and class.
fn question_end(message: &[u8]) -> Option<usize> {
    let mut at = 12;
    loop {
        let len = usize::from(*message.get(at)?);
        if len == 0 {
            at += 1;
            break;
        }
        if len > 63 {
            return None;
        }
        at += 1 + len;
    }
    (at + 4 <= message.len()).then_some(at + 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `example.com. A` with id 0xbeef, RD, and an OPT record after it.
    fn query() -> Vec<u8> {
        let mut q = vec![0xbe, 0xef, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1];
        q.extend_from_slice(b"\x07example\x03com\x00\x00\x01\x00\x01");
        q.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0]);
        q
    }

    #[test]
    fn refused_and_truncated_answers_repeat_the_question_only() {
        let q = query();
        let r = answer(&q, Over::Refused).unwrap();
        assert_eq!(&r[..2], &[0xbe, 0xef]);
        assert_eq!(r[2], 0x81, "QR and RD");
        assert_eq!(r[3] & 0x0f, 5, "REFUSED");
        assert_eq!(&r[4..12], &[0, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&r[12..], b"\x07example\x03com\x00\x00\x01\x00\x01");
        let t = answer(&q, Over::Truncate).unwrap();
        assert_eq!(t[2], 0x83, "QR, TC and RD");
        assert_eq!(t[3], 0, "NOERROR");
        assert!(answer(&q, Over::Drop).is_none());
        // A response, or a cut question, gets nothing.
        let mut response = q.clone();
        response[2] |= 0x80;
        assert!(answer(&response, Over::Refused).is_none());
        assert!(answer(&q[..20], Over::Refused).is_none());
    }
}

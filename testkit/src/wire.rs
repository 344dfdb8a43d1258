//! Just enough of the DNS wire format (RFC 1035) for the fault servers and
//! for tests: build a query, read what a server needs from it, build a
//! response, and read the id, rcode, TC bit and A records of a response.
//!
//! Every reader returns `None` on a message too short or malformed; nothing
//! here panics on input.

use std::net::Ipv4Addr;

/// RR type A.
pub const TYPE_A: u16 = 1;
/// RR type AAAA.
pub const TYPE_AAAA: u16 = 28;
/// RR type OPT (EDNS).
pub const TYPE_OPT: u16 = 41;
/// RCODE NOERROR.
pub const NOERROR: u8 = 0;
/// RCODE SERVFAIL.
pub const SERVFAIL: u8 = 2;
/// RCODE NXDOMAIN.
pub const NXDOMAIN: u8 = 3;
/// RCODE REFUSED.
pub const REFUSED: u8 = 5;

const QR: u16 = 0x8000;
const AA: u16 = 0x0400;
const TC: u16 = 0x0200;
const RD: u16 = 0x0100;
const OPCODE: u16 = 0x7800;
const HEADER: usize = 12;
/// The TTL of every record the fault servers answer with.
const TTL: u32 = 60;

/// A query for `name` (dotted, a trailing dot optional) of type `qtype`,
/// class IN, RD set; `edns_udp_size` adds an OPT record offering that size.
///
/// # Panics
///
/// When a label of `name` is empty or longer than 63 bytes.
pub fn query(id: u16, name: &str, qtype: u16, edns_udp_size: Option<u16>) -> Vec<u8> {
    let mut msg = Vec::with_capacity(64);
    let arcount = u16::from(edns_udp_size.is_some());
    for field in [id, RD, 1, 0, 0, arcount] {
        msg.extend_from_slice(&field.to_be_bytes());
    }
    for label in name
        .trim_end_matches('.')
        .split('.')
        .filter(|_| name != ".")
    {
        assert!(
            (1..=63).contains(&label.len()),
            "bad label `{label}` in `{name}`"
        );
        msg.push(label.len() as u8);
        msg.extend_from_slice(label.as_bytes());
    }
    msg.push(0);
    msg.extend_from_slice(&qtype.to_be_bytes());
    msg.extend_from_slice(&1u16.to_be_bytes());
    if let Some(size) = edns_udp_size {
        push_opt(&mut msg, size);
    }
    msg
}

/// What a server reads from a query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query<'a> {
    /// The message id.
    pub id: u16,
    /// The header flags (second 16-bit word).
    pub flags: u16,
    /// The first question as on the wire: name, type, class.
    pub question: &'a [u8],
    /// The first label of the question's name, lowercased (`""` for the root).
    pub first_label: String,
    /// The UDP payload size of the query's OPT record, if it has one.
    pub edns_udp_size: Option<u16>,
}

/// Reads a query with at least one question.
pub fn parse_query(msg: &[u8]) -> Option<Query<'_>> {
    let word = |i: usize| Some(u16::from_be_bytes([*msg.get(i)?, *msg.get(i + 1)?]));
    let (qdcount, ancount, nscount, arcount) = (word(4)?, word(6)?, word(8)?, word(10)?);
    if qdcount == 0 {
        return None;
    }
    let name_end = skip_name(msg, HEADER)?;
    let question_end = name_end + 4;
    let question = msg.get(HEADER..question_end)?;
    let first = usize::from(msg[HEADER]);
    let first_label =
        String::from_utf8_lossy(msg.get(HEADER + 1..HEADER + 1 + first)?).to_lowercase();
    let mut pos = question_end;
    for _ in 1..qdcount {
        pos = skip_name(msg, pos)? + 4;
    }
    let mut edns_udp_size = None;
    for i in 0..usize::from(ancount) + usize::from(nscount) + usize::from(arcount) {
        let (rtype, class, next) = record_at(msg, pos)?;
        if rtype == TYPE_OPT && i >= usize::from(ancount) + usize::from(nscount) {
            edns_udp_size = Some(class);
        }
        pos = next;
    }
    Some(Query {
        id: word(0)?,
        flags: word(2)?,
        question,
        first_label,
        edns_udp_size,
    })
}

/// A response to `query`: same id, opcode, RD and question, AA set, the
/// given `rcode` and `tc`, and one A record per address in `answers` (owner:
/// the question's name). It has an OPT record when the query had one.
pub fn response(query: &Query<'_>, id: u16, rcode: u8, tc: bool, answers: &[Ipv4Addr]) -> Vec<u8> {
    let mut flags = QR | AA | (query.flags & (OPCODE | RD)) | u16::from(rcode & 0x0f);
    if tc {
        flags |= TC;
    }
    let counts = [
        1,
        answers.len() as u16,
        0,
        u16::from(query.edns_udp_size.is_some()),
    ];
    let mut msg = Vec::with_capacity(HEADER + query.question.len() + answers.len() * 16 + 11);
    for field in [id, flags].into_iter().chain(counts) {
        msg.extend_from_slice(&field.to_be_bytes());
    }
    msg.extend_from_slice(query.question);
    for addr in answers {
        msg.extend_from_slice(&[0xc0, HEADER as u8]); // pointer to the question's name
        msg.extend_from_slice(&TYPE_A.to_be_bytes());
        msg.extend_from_slice(&1u16.to_be_bytes());
        msg.extend_from_slice(&TTL.to_be_bytes());
        msg.extend_from_slice(&4u16.to_be_bytes());
        msg.extend_from_slice(&addr.octets());
    }
    if query.edns_udp_size.is_some() {
        push_opt(&mut msg, 1232);
    }
    msg
}

/// RR type CNAME.
pub const TYPE_CNAME: u16 = 5;

/// A NOERROR response to `query` (as [`response`] builds it) whose answer
/// is one CNAME from the question's name to `label` under the same parent
/// (`cname3.f.` with `label` `cname2` → `cname2.f.`), and nothing else.
///
/// # Panics
///
/// When `label` is empty or longer than 63 bytes.
pub fn cname_response(query: &Query<'_>, label: &str) -> Vec<u8> {
    assert!((1..=63).contains(&label.len()), "bad label `{label}`");
    let mut msg = response(query, query.id, NOERROR, false, &[]);
    // The question's name minus its first label is the parent.
    let name_end = query.question.len() - 4;
    let parent = &query.question[1 + usize::from(query.question[0])..name_end];
    let mut target = vec![label.len() as u8];
    target.extend_from_slice(label.as_bytes());
    target.extend_from_slice(parent);
    let mut record = vec![0xc0, HEADER as u8]; // owner: the question's name
    record.extend_from_slice(&TYPE_CNAME.to_be_bytes());
    record.extend_from_slice(&1u16.to_be_bytes());
    record.extend_from_slice(&TTL.to_be_bytes());
    record.extend_from_slice(&(target.len() as u16).to_be_bytes());
    record.extend_from_slice(&target);
    // The answer goes right after the question, before any OPT record.
    let at = HEADER + query.question.len();
    msg.splice(at..at, record);
    msg[6..8].copy_from_slice(&1u16.to_be_bytes()); // ANCOUNT
    msg
}

/// The id of a message.
pub fn id(msg: &[u8]) -> Option<u16> {
    Some(u16::from_be_bytes([*msg.first()?, *msg.get(1)?]))
}

/// The (4-bit header) RCODE of a message.
pub fn rcode(msg: &[u8]) -> Option<u8> {
    Some(msg.get(3)? & 0x0f)
}

/// Whether a message has the TC (truncated) bit set.
pub fn is_truncated(msg: &[u8]) -> Option<bool> {
    Some(msg.get(2)? & 0x02 != 0)
}

/// The addresses of the A records in a response's answer section, in order.
pub fn a_records(msg: &[u8]) -> Option<Vec<Ipv4Addr>> {
    let word = |i: usize| Some(u16::from_be_bytes([*msg.get(i)?, *msg.get(i + 1)?]));
    let mut pos = HEADER;
    for _ in 0..word(4)? {
        pos = skip_name(msg, pos)? + 4;
    }
    let mut found = Vec::new();
    for _ in 0..word(6)? {
        let (rtype, _, next) = record_at(msg, pos)?;
        if rtype == TYPE_A && next - pos >= 4 {
            let rdata: [u8; 4] = msg.get(next - 4..next)?.try_into().ok()?;
            found.push(Ipv4Addr::from(rdata));
        }
        pos = next;
    }
    Some(found)
}

/// The offset just past the (possibly compressed) name at `pos`.
fn skip_name(msg: &[u8], mut pos: usize) -> Option<usize> {
    loop {
        let len = *msg.get(pos)?;
        match len {
            0 => return Some(pos + 1),
            l if l & 0xc0 == 0xc0 => return (pos + 2 <= msg.len()).then_some(pos + 2),
            l if l & 0xc0 != 0 => return None,
            l => pos += 1 + usize::from(l),
        }
    }
}

/// The type and class of the record at `pos`, and the offset past it.
fn record_at(msg: &[u8], pos: usize) -> Option<(u16, u16, usize)> {
    let fixed = skip_name(msg, pos)?;
    let word = |i: usize| Some(u16::from_be_bytes([*msg.get(i)?, *msg.get(i + 1)?]));
    let next = fixed + 10 + usize::from(word(fixed + 8)?);
    (next <= msg.len()).then_some((word(fixed)?, word(fixed + 2)?, next))
}

/// Appends an OPT record (root owner, no options) offering `udp_size`.
fn push_opt(msg: &mut Vec<u8>, udp_size: u16) {
    msg.push(0);
    msg.extend_from_slice(&TYPE_OPT.to_be_bytes());
    msg.extend_from_slice(&udp_size.to_be_bytes());
    msg.extend_from_slice(&[0, 0, 0, 0, 0, 0]); // extended rcode, version, flags, rdlen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_round_trip() {
        let q = query(0x1234, "Late300.Example.", TYPE_A, Some(1232));
        let parsed = parse_query(&q).unwrap();
        assert_eq!(parsed.id, 0x1234);
        assert_eq!(parsed.first_label, "late300");
        assert_eq!(parsed.edns_udp_size, Some(1232));
        let addrs = [Ipv4Addr::new(192, 0, 2, 1), Ipv4Addr::new(192, 0, 2, 2)];
        let r = response(&parsed, 7, NXDOMAIN, true, &addrs);
        assert_eq!(id(&r), Some(7));
        assert_eq!(rcode(&r), Some(NXDOMAIN));
        assert_eq!(is_truncated(&r), Some(true));
        assert_eq!(a_records(&r).unwrap(), addrs);
        assert_eq!(
            parse_query(&query(1, "x", TYPE_A, None))
                .unwrap()
                .edns_udp_size,
            None
        );
    }

    #[test]
    fn a_cname_answer_points_under_the_same_parent() {
        let q = query(9, "cname3.f", TYPE_A, Some(1232));
        let parsed = parse_query(&q).unwrap();
        let r = cname_response(&parsed, "cname2");
        assert_eq!(id(&r), Some(9));
        assert!(a_records(&r).unwrap().is_empty());
        // Header, question, then the CNAME: owner pointer, type, class, TTL, length, target.
        let answer = &r[HEADER + parsed.question.len()..];
        assert_eq!(&answer[..4], [0xc0, 12, 0, 5]);
        assert_eq!(&answer[10..12], [0, 10]);
        assert_eq!(&answer[12..22], b"\x06cname2\x01f\x00");
        assert_eq!(&r[6..8], [0, 1]);
        assert_eq!(&r[10..12], [0, 1], "the OPT record stays");
    }

    #[test]
    fn malformed_is_none() {
        let q = query(1, "a.b", TYPE_A, None);
        for n in 0..q.len() {
            assert_eq!(parse_query(&q[..n]), None, "prefix of {n} bytes");
        }
        assert_eq!(a_records(&[0; 5]), None);
    }
}

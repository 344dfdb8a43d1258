//! Where a TCP stream can be picked up again after a gap (bytes that were
//! never captured, or a capture that starts in the middle of a connection):
//! at a segment that starts with a plausible length-prefixed DNS message.
//! tshark, suricata and dnscap pick up the same way; the checks here are
//! ours: a length of at least a header, a header whose opcode is assigned and
//! whose counts fit in that length, a first name that reads as labels as far
//! as it was captured, and, when the whole message is in the segment, a
//! message that scans without error.

use dnsluice_core::dns::{name, scan, DnsError, Header};

/// Opcodes IANA has assigned (QUERY, IQUERY, STATUS, NOTIFY, UPDATE, DSO).
const ASSIGNED_OPCODES: [u8; 6] = [0, 1, 2, 4, 5, 6];
/// The smallest question (the root name, QTYPE, QCLASS) and record (root,
/// TYPE, CLASS, TTL, RDLENGTH), in bytes.
const MIN_QUESTION: usize = 5;
const MIN_RECORD: usize = 11;

/// Does a segment whose payload is `payload` start a message? A segment
/// holding only the length (or less than a header after it) passes on the
/// length alone: the message is checked when it is complete
/// ([`plausible_message`]).
pub fn starts_message(payload: &[u8]) -> bool {
    let Some(prefix) = payload.get(..2) else {
        return false;
    };
    let len = usize::from(u16::from_be_bytes([prefix[0], prefix[1]]));
    if len < Header::LEN {
        return false;
    }
    let body = &payload[2..];
    match body.get(..len) {
        Some(message) => plausible_message(message),
        None if body.len() < Header::LEN => true,
        None => plausible_header(body, len),
    }
}

/// Is `message` (without its length prefix) a DNS message: a plausible
/// header and a scan that finds no problem?
pub fn plausible_message(message: &[u8]) -> bool {
    plausible_header(message, message.len()) && scan(message, false).error.is_none()
}

/// A header at the start of `bytes` of a message of `len` bytes: an
/// assigned opcode, the Z bit clear, and counts whose smallest encoding
/// fits in the message.
fn plausible_header(bytes: &[u8], len: usize) -> bool {
    let Some(header) = Header::parse(bytes) else {
        return false;
    };
    let z = bytes[3] & 0x40 != 0;
    let records =
        usize::from(header.ancount) + usize::from(header.nscount) + usize::from(header.arcount);
    let smallest = Header::LEN + usize::from(header.qdcount) * MIN_QUESTION + records * MIN_RECORD;
    if !ASSIGNED_OPCODES.contains(&header.opcode()) || z || smallest > len {
        return false;
    }
    // The first name after the header reads as labels, as far as it goes.
    let names = header.qdcount > 0 || records > 0;
    !names
        || bytes.len() <= Header::LEN
        || matches!(
            name::skip(bytes, Header::LEN),
            Ok(_) | Err((DnsError::LabelPastEnd, _))
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A query for `google.com.` type A, with its length prefix.
    fn query() -> Vec<u8> {
        let mut message = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        message.extend_from_slice(b"\x06google\x03com\x00\x00\x01\x00\x01");
        [(message.len() as u16).to_be_bytes().to_vec(), message].concat()
    }

    #[test]
    fn a_whole_message_a_header_or_a_length_alone_start_a_message() {
        let q = query();
        assert!(starts_message(&q));
        assert!(starts_message(&q[..2]), "the length alone");
        assert!(
            starts_message(&q[..16]),
            "length and header, no question yet"
        );
        // The same bytes two further on (a segment that lost its length
        // prefix): the id read as a length, and `oogle` as a label.
        assert!(!starts_message(&q[2..]));
        // A length shorter than a header, a reserved opcode, the Z bit, counts that do not fit.
        assert!(!starts_message(&[0, 11, 0, 0]));
        let mut opcode = q.clone();
        opcode[4] = 0x18; // opcode 3
        assert!(!starts_message(&opcode));
        let mut z = q.clone();
        z[5] = 0x40;
        assert!(!starts_message(&z));
        let mut counts = q.clone();
        counts[9] = 9; // ANCOUNT 9 in 28 bytes
        assert!(!starts_message(&counts[..16]));
        // Counts that fit, but the first name starts with a reserved label type (0x40).
        let mut label_type = vec![0, 100, 0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        label_type.extend_from_slice(b"oogle");
        assert!(!starts_message(&label_type));
        // A whole message must scan: a QNAME label running past the end does not.
        let mut label = q.clone();
        label[14] = 60; // the first label's length
        assert!(!starts_message(&label));
    }
}

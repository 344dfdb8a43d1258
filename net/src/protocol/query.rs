//! Building queries: the header, a name in wire form, the question, EDNS
//! (RFC 1035 §4.1, RFC 6891 §6).

/// The RR type code of OPT (EDNS).
const TYPE_OPT: u16 = 41;

/// How to build a query.
#[derive(Clone, Copy, Debug)]
pub struct QueryOptions {
    /// Set RD (recursion desired).
    pub recursion_desired: bool,
    /// Add an EDNS OPT record advertising this UDP payload size; `None` for no EDNS.
    pub edns_udp_size: Option<u16>,
    /// Set the DO bit (DNSSEC OK) in EDNS.
    pub dnssec_ok: bool,
}

impl Default for QueryOptions {
    fn default() -> Self {
        QueryOptions {
            recursion_desired: true,
            edns_udp_size: Some(1232),
            dnssec_ok: false,
        }
    }
}

/// Why a name cannot be put in a query.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// An empty label (`a..b`).
    #[error("empty label")]
    EmptyLabel,
    /// A label longer than 63 bytes.
    #[error("label longer than 63 bytes")]
    LabelTooLong,
    /// A name longer than 255 bytes on the wire.
    #[error("name longer than 255 bytes")]
    NameTooLong,
    /// A `\` escape that is not `\X` or `\DDD` (0-255).
    #[error("bad escape")]
    BadEscape,
}

/// Appends `name` (presentation form, `\.` and `\DDD` escapes, trailing dot
/// optional, `.` for the root) to `out` in wire form.
pub fn push_name(name: &str, out: &mut Vec<u8>) -> Result<(), NameError> {
    let start = out.len();
    let bytes = name.as_bytes();
    if bytes == b"." || bytes.is_empty() {
        out.push(0);
        return Ok(());
    }
    let mut i = 0;
    let mut label_at = out.len();
    out.push(0);
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'.' => {
                close_label(out, label_at)?;
                if i + 1 == bytes.len() {
                    // The trailing dot: the root label follows below.
                    label_at = usize::MAX;
                    break;
                }
                label_at = out.len();
                out.push(0);
                i += 1;
                continue;
            }
            b'\\' => {
                let (byte, used) = unescape(&bytes[i + 1..]).ok_or(NameError::BadEscape)?;
                out.push(byte);
                i += 1 + used;
                continue;
            }
            _ => out.push(b),
        }
        i += 1;
    }
    if label_at != usize::MAX {
        close_label(out, label_at)?;
    }
    out.push(0);
    if out.len() - start > 255 {
        return Err(NameError::NameTooLong);
    }
    Ok(())
}

fn close_label(out: &mut [u8], label_at: usize) -> Result<(), NameError> {
    let len = out.len() - label_at - 1;
    if len == 0 {
        return Err(NameError::EmptyLabel);
    }
    if len > 63 {
        return Err(NameError::LabelTooLong);
    }
    out[label_at] = len as u8;
    Ok(())
}

/// Decodes the escape after a backslash: the byte and how many input bytes it used.
fn unescape(rest: &[u8]) -> Option<(u8, usize)> {
    let first = *rest.first()?;
    if first.is_ascii_digit() {
        let digits = rest.get(..3)?;
        if !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let value = digits
            .iter()
            .fold(0u32, |v, d| v * 10 + u32::from(d - b'0'));
        return u8::try_from(value).ok().map(|v| (v, 3));
    }
    Some((first, 1))
}

/// Builds a query for `name`/`qtype`/class IN with `id` into `out` (cleared first).
pub fn build(
    id: u16,
    name: &str,
    qtype: u16,
    options: &QueryOptions,
    out: &mut Vec<u8>,
) -> Result<(), NameError> {
    build_in_class(id, name, qtype, CLASS_IN, options, out)
}

/// The class of Internet queries.
pub const CLASS_IN: u16 = 1;
/// The CHAOS class (`version.bind`, `hostname.bind`).
pub const CLASS_CH: u16 = 3;

/// [`build`] for a question of class `qclass` (CH for `version.bind`).
pub fn build_in_class(
    id: u16,
    name: &str,
    qtype: u16,
    qclass: u16,
    options: &QueryOptions,
    out: &mut Vec<u8>,
) -> Result<(), NameError> {
    out.clear();
    push_header(id, options, out);
    push_name(name, out)?;
    push_question_end(qtype, qclass, options, out);
    Ok(())
}

/// [`build_in_class`] for a name already in wire form (`name_wire`:
/// uncompressed labels ending with the root's zero octet).
pub fn build_wire(
    id: u16,
    name_wire: &[u8],
    qtype: u16,
    qclass: u16,
    options: &QueryOptions,
    out: &mut Vec<u8>,
) {
    out.clear();
    push_header(id, options, out);
    out.extend_from_slice(name_wire);
    push_question_end(qtype, qclass, options, out);
}

fn push_header(id: u16, options: &QueryOptions, out: &mut Vec<u8>) {
    let flags: u16 = if options.recursion_desired { 0x0100 } else { 0 };
    let arcount: u16 = u16::from(options.edns_udp_size.is_some());
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&[0, 1, 0, 0, 0, 0]);
    out.extend_from_slice(&arcount.to_be_bytes());
}

/// QTYPE, QCLASS and the EDNS record.
fn push_question_end(qtype: u16, qclass: u16, options: &QueryOptions, out: &mut Vec<u8>) {
    out.extend_from_slice(&qtype.to_be_bytes());
    out.extend_from_slice(&qclass.to_be_bytes());
    if let Some(size) = options.edns_udp_size {
        out.push(0); // root owner
        out.extend_from_slice(&TYPE_OPT.to_be_bytes());
        out.extend_from_slice(&size.to_be_bytes());
        let ttl: u32 = if options.dnssec_ok { 0x8000 } else { 0 };
        out.extend_from_slice(&ttl.to_be_bytes());
        out.extend_from_slice(&0u16.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_matches_dig_wire_form() {
        // RFC 1035 §4.1: header (id, flags with RD=1, QDCOUNT=1, other counts 0),
        // then the question: labels, type A, class IN.
        let mut out = Vec::new();
        let options = QueryOptions {
            edns_udp_size: None,
            ..QueryOptions::default()
        };
        build(0x1234, "www.example.com", 1, &options, &mut out).unwrap();
        let expected: &[u8] = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\
            \x03www\x07example\x03com\x00\x00\x01\x00\x01";
        assert_eq!(out, expected);
    }

    #[test]
    fn a_chaos_question_carries_its_class() {
        // What `dig @server version.bind CH TXT +norec +noedns` sends: type
        // TXT (16), class CH (3, RFC 1035 §3.2.4).
        let mut out = Vec::new();
        let options = QueryOptions {
            recursion_desired: false,
            edns_udp_size: None,
            ..QueryOptions::default()
        };
        build_in_class(7, "version.bind", 16, CLASS_CH, &options, &mut out).unwrap();
        let expected: &[u8] = b"\x00\x07\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\
            \x07version\x04bind\x00\x00\x10\x00\x03";
        assert_eq!(out, expected);
    }

    #[test]
    fn a_wire_name_builds_the_same_query() {
        let options = QueryOptions::default();
        let (mut from_text, mut from_wire) = (Vec::new(), Vec::new());
        build_in_class(9, "www.example.com", 28, CLASS_IN, &options, &mut from_text).unwrap();
        build_wire(
            9,
            b"\x03www\x07example\x03com\x00",
            28,
            CLASS_IN,
            &options,
            &mut from_wire,
        );
        assert_eq!(from_text, from_wire);
    }

    #[test]
    fn edns_record_is_appended() {
        let mut out = Vec::new();
        let options = QueryOptions {
            edns_udp_size: Some(1232),
            dnssec_ok: true,
            ..QueryOptions::default()
        };
        build(1, "a.", 28, &options, &mut out).unwrap();
        assert_eq!(&out[10..12], &[0, 1]); // ARCOUNT
        assert_eq!(
            &out[out.len() - 11..],
            &[0, 0, 41, 0x04, 0xd0, 0, 0, 0x80, 0, 0, 0]
        );
    }

    #[test]
    fn names_with_escapes_and_limits() {
        let mut out = Vec::new();
        push_name("a\\.b.c.", &mut out).unwrap();
        assert_eq!(out, b"\x03a.b\x01c\x00");
        out.clear();
        push_name("\\065\\ x", &mut out).unwrap();
        assert_eq!(out, b"\x03A x\x00");
        out.clear();
        push_name(".", &mut out).unwrap();
        assert_eq!(out, b"\x00");
        assert_eq!(
            push_name("a..b", &mut Vec::new()),
            Err(NameError::EmptyLabel)
        );
        assert_eq!(
            push_name(&"x".repeat(64), &mut Vec::new()),
            Err(NameError::LabelTooLong)
        );
        let long = vec!["abcdefghi"; 30].join(".");
        assert_eq!(
            push_name(&long, &mut Vec::new()),
            Err(NameError::NameTooLong)
        );
        assert_eq!(
            push_name("a\\25", &mut Vec::new()),
            Err(NameError::BadEscape)
        );
        assert_eq!(
            push_name("a\\256", &mut Vec::new()),
            Err(NameError::BadEscape)
        );
    }
}

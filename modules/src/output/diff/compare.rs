//! Two DNS answers compared field by field, as respdiff's msgdiff does:
//! the header's opcode, rcode (extended by EDNS) and flags, the question,
//! each section's records as a set (owner names without case, TTLs left
//! out, RDATA in presentation form with names decompressed, so two
//! servers' compression and record order make no difference), and EDNS
//! (version, DO, payload size and options, cookies and padding aside: they
//! differ between servers by design). An answer that is an error (a
//! timeout, a refused connection) differs from any message under `error`.

use dnsluice_core::dns::{name, questions, rdata, records, scan, Section, TYPE_OPT};

/// The fields compared, in the order they are reported.
pub const FIELDS: [&str; 9] = [
    "error",
    "opcode",
    "rcode",
    "flags",
    "question",
    "answer",
    "authority",
    "additional",
    "edns",
];

/// EDNS options that differ between servers by design: COOKIE (10) and
/// PADDING (12).
const UNCOMPARED_OPTIONS: [u16; 2] = [10, 12];

/// What one server gave for a query: a message, or an error's kind.
pub type Answer<'a> = Result<&'a [u8], &'a str>;

/// EDNS as compared: version, DO, payload size, options (code, data).
type Edns = (u8, bool, u16, Vec<(u16, Vec<u8>)>);

/// The comparable form of one answer.
#[derive(Debug, PartialEq, Eq)]
struct Shape {
    opcode: u8,
    rcode: u16,
    /// AA, TC, RD, RA, AD, CD.
    flags: [bool; 6],
    question: Vec<(String, u16, u16)>,
    sections: [Vec<(String, u16, u16, String)>; 3],
    edns: Option<Edns>,
}

fn shape(msg: &[u8]) -> Option<Shape> {
    let info = scan(msg, false);
    let h = info.header?;
    let lower = |at: u32| {
        name::to_string(msg, at as usize)
            .unwrap_or_else(|_| "<bad name>".into())
            .to_ascii_lowercase()
    };
    let mut question: Vec<_> = questions(msg)
        .map(|q| (lower(q.name), q.qtype, q.qclass))
        .collect();
    question.sort();
    let mut sections: [Vec<(String, u16, u16, String)>; 3] = Default::default();
    let mut text = Vec::new();
    for r in records(msg) {
        if r.rtype == TYPE_OPT && r.section == Section::Additional {
            continue; // compared as EDNS
        }
        text.clear();
        rdata::write(msg, &r, &mut text);
        let i = match r.section {
            Section::Answer => 0,
            Section::Authority => 1,
            Section::Additional => 2,
        };
        sections[i].push((
            lower(r.name),
            r.rtype,
            r.class,
            String::from_utf8_lossy(&text).into_owned(),
        ));
    }
    for s in &mut sections {
        s.sort();
        s.dedup();
    }
    let edns = info.edns.map(|e| {
        let mut options = Vec::new();
        let at = e.options_at as usize;
        let mut rest = msg
            .get(at..at + usize::from(e.options_len))
            .unwrap_or_default();
        while rest.len() >= 4 {
            let code = u16::from_be_bytes([rest[0], rest[1]]);
            let len = usize::from(u16::from_be_bytes([rest[2], rest[3]])).min(rest.len() - 4);
            if !UNCOMPARED_OPTIONS.contains(&code) {
                options.push((code, rest[4..4 + len].to_vec()));
            }
            rest = &rest[4 + len..];
        }
        options.sort();
        (e.version, e.dnssec_ok(), e.udp_size, options)
    });
    Some(Shape {
        opcode: h.opcode(),
        rcode: info.rcode(),
        flags: [h.aa(), h.tc(), h.rd(), h.ra(), h.ad(), h.cd()],
        question,
        sections,
        edns,
    })
}

/// The fields (of [`FIELDS`]) in which `a` and `b` differ; empty when they agree.
pub fn differences(a: Answer<'_>, b: Answer<'_>) -> Vec<&'static str> {
    let (a, b) = match (a, b) {
        (Err(x), Err(y)) => return if x == y { vec![] } else { vec!["error"] },
        (Ok(a), Ok(b)) => (shape(a), shape(b)),
        _ => return vec!["error"],
    };
    let (a, b) = match (a, b) {
        (Some(a), Some(b)) => (a, b),
        (None, None) => return vec![],
        _ => return vec!["error"],
    };
    let mut out = Vec::new();
    let checks = [
        ("opcode", a.opcode != b.opcode),
        ("rcode", a.rcode != b.rcode),
        ("flags", a.flags != b.flags),
        ("question", a.question != b.question),
        ("answer", a.sections[0] != b.sections[0]),
        ("authority", a.sections[1] != b.sections[1]),
        ("additional", a.sections[2] != b.sections[2]),
        ("edns", a.edns != b.edns),
    ];
    for (field, differs) in checks {
        if differs {
            out.push(field);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A response to `name` A with one A record `ip` at `ttl`, its owner
    /// compressed or not, with an OPT record of `udp` when given.
    fn answer(
        name_case: &str,
        ip: [u8; 4],
        ttl: u32,
        compressed: bool,
        udp: Option<u16>,
    ) -> Vec<u8> {
        let mut m = vec![0, 1, 0x84, 0, 0, 1, 0, 1, 0, 0, 0, u8::from(udp.is_some())];
        for label in name_case.split('.') {
            m.push(label.len() as u8);
            m.extend_from_slice(label.as_bytes());
        }
        m.extend_from_slice(&[0, 0, 1, 0, 1]);
        if compressed {
            m.extend_from_slice(&[0xc0, 12]);
        } else {
            for label in name_case.split('.') {
                m.push(label.len() as u8);
                m.extend_from_slice(label.as_bytes());
            }
            m.push(0);
        }
        m.extend_from_slice(&[0, 1, 0, 1]);
        m.extend_from_slice(&ttl.to_be_bytes());
        m.extend_from_slice(&[0, 4]);
        m.extend_from_slice(&ip);
        if let Some(size) = udp {
            m.extend_from_slice(&[0, 0, 41]);
            m.extend_from_slice(&size.to_be_bytes());
            m.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
        }
        m
    }

    #[test]
    fn case_ttl_and_compression_make_no_difference() {
        let a = answer("www.example", [192, 0, 2, 1], 300, true, None);
        let b = answer("WWW.example", [192, 0, 2, 1], 60, false, None);
        assert_eq!(differences(Ok(&a), Ok(&b)), Vec::<&str>::new());
    }

    #[test]
    fn each_field_under_its_name() {
        let a = answer("www.example", [192, 0, 2, 1], 300, true, Some(1232));
        let other_ip = answer("www.example", [192, 0, 2, 2], 300, true, Some(1232));
        assert_eq!(differences(Ok(&a), Ok(&other_ip)), ["answer"]);
        let mut nx = a.clone();
        nx[3] = 3;
        assert_eq!(differences(Ok(&a), Ok(&nx)), ["rcode"]);
        let mut not_aa = a.clone();
        not_aa[2] = 0x80;
        assert_eq!(differences(Ok(&a), Ok(&not_aa)), ["flags"]);
        let other_size = answer("www.example", [192, 0, 2, 1], 300, true, Some(4096));
        assert_eq!(differences(Ok(&a), Ok(&other_size)), ["edns"]);
        let no_edns = answer("www.example", [192, 0, 2, 1], 300, true, None);
        assert_eq!(differences(Ok(&a), Ok(&no_edns)), ["edns"]);
        assert_eq!(differences(Ok(&a), Err("timeout")), ["error"]);
        assert_eq!(
            differences(Err("timeout"), Err("timeout")),
            Vec::<&str>::new()
        );
    }
}

//! Two DNS answers compared field by field, as respdiff's msgdiff does:
//! the header's opcode, rcode (extended by EDNS) and flags, the question,
//! each section's records as a set (owner names without case, TTLs left
//! out, RDATA in presentation form with names decompressed, so two
//! servers' compression and record order make no difference), and EDNS
//! (version, DO, payload size and options, cookies and padding aside: they
//! differ between servers by design). An answer that is an error (a
//! timeout, a refused connection) differs from any message under `error`.

use dnsluice_core::dns::{mnemonic, name, questions, rdata, records, scan, Section, TYPE_OPT};

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

/// A field in which two answers differ, with each side's value as text
/// (the summary's most common differences).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Mismatch {
    /// One of [`FIELDS`].
    pub field: &'static str,
    /// The first answer's value.
    pub a: String,
    /// The other answer's value.
    pub b: String,
}

/// At most this many characters of a value in a [`Mismatch`].
const VALUE_CHARS: usize = 160;

fn mismatch(field: &'static str, a: String, b: String) -> Mismatch {
    let cut = |mut v: String| {
        if let Some((at, _)) = v.char_indices().nth(VALUE_CHARS) {
            v.truncate(at);
            v.push_str("...");
        }
        v
    };
    Mismatch {
        field,
        a: cut(a),
        b: cut(b),
    }
}

fn flags_text(f: &[bool; 6]) -> String {
    let names = ["aa", "tc", "rd", "ra", "ad", "cd"];
    let set: Vec<&str> = names
        .iter()
        .zip(f)
        .filter(|(_, on)| **on)
        .map(|(n, _)| *n)
        .collect();
    set.join(" ")
}

fn records_text(records: &[(String, u16, u16, String)]) -> String {
    if records.is_empty() {
        return "none".into();
    }
    let texts: Vec<String> = records
        .iter()
        .map(|(name, rtype, _, data)| format!("{name} {} {data}", mnemonic::rtype(*rtype)))
        .collect();
    texts.join("; ")
}

fn edns_text(e: &Option<Edns>) -> String {
    match e {
        None => "none".into(),
        Some((version, dnssec_ok, size, options)) => {
            let codes: Vec<String> = options.iter().map(|(c, _)| c.to_string()).collect();
            format!(
                "version {version} do {dnssec_ok} size {size} options [{}]",
                codes.join(",")
            )
        }
    }
}

fn side_text(answer: &Answer<'_>, shape: &Option<Shape>) -> String {
    match (answer, shape) {
        (Err(kind), _) => (*kind).to_string(),
        (Ok(_), None) => "unparsable message".into(),
        (Ok(_), Some(_)) => "answer".into(),
    }
}

/// The fields (of [`FIELDS`], in that order) in which `a` and `b` differ,
/// with their values; empty when they agree.
pub fn mismatches(a: Answer<'_>, b: Answer<'_>) -> Vec<Mismatch> {
    let (sa, sb) = (a.ok().and_then(shape), b.ok().and_then(shape));
    let (x, y) = match (&sa, &sb) {
        (Some(x), Some(y)) => (x, y),
        _ if a == b || (sa.is_none() && sb.is_none() && a.is_ok() && b.is_ok()) => return vec![],
        _ => return vec![mismatch("error", side_text(&a, &sa), side_text(&b, &sb))],
    };
    let mut out = Vec::new();
    let mut check = |field: &'static str, differs: bool, text: &dyn Fn(&Shape) -> String| {
        if differs {
            out.push(mismatch(field, text(x), text(y)));
        }
    };
    check("opcode", x.opcode != y.opcode, &|s| {
        mnemonic::opcode(s.opcode).into_owned()
    });
    check("rcode", x.rcode != y.rcode, &|s| {
        mnemonic::rcode(s.rcode).into_owned()
    });
    check("flags", x.flags != y.flags, &|s| flags_text(&s.flags));
    check("question", x.question != y.question, &|s| {
        let q: Vec<String> = s
            .question
            .iter()
            .map(|(n, t, _)| format!("{n} {}", mnemonic::rtype(*t)))
            .collect();
        q.join("; ")
    });
    for (i, field) in ["answer", "authority", "additional"]
        .into_iter()
        .enumerate()
    {
        check(field, x.sections[i] != y.sections[i], &|s| {
            records_text(&s.sections[i])
        });
    }
    check("edns", x.edns != y.edns, &|s| edns_text(&s.edns));
    out
}

/// The fields (of [`FIELDS`]) in which `a` and `b` differ; empty when they agree.
pub fn differences(a: Answer<'_>, b: Answer<'_>) -> Vec<&'static str> {
    mismatches(a, b).into_iter().map(|m| m.field).collect()
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
        assert_eq!(differences(Err("timeout"), Err("refused")), ["error"]);
    }

    #[test]
    fn mismatches_carry_both_values() {
        let a = answer("www.example", [192, 0, 2, 1], 300, true, None);
        let mut nx = answer("www.example", [192, 0, 2, 2], 300, true, None);
        nx[3] = 3;
        let rcode = Mismatch {
            field: "rcode",
            a: "NOERROR".into(),
            b: "NXDOMAIN".into(),
        };
        let answer = Mismatch {
            field: "answer",
            a: "www.example. A 192.0.2.1".into(),
            b: "www.example. A 192.0.2.2".into(),
        };
        assert_eq!(mismatches(Ok(&a), Ok(&nx)), [rcode, answer]);
        let e = mismatches(Ok(&a), Err("timeout"));
        assert_eq!(
            (e[0].field, e[0].a.as_str(), e[0].b.as_str()),
            ("error", "answer", "timeout")
        );
    }
}

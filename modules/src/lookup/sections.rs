//! A response's sections as lookup records show them: each record with
//! `name` (no trailing dot), `type`, `class`, `ttl` (from normal
//! verbosity on), its RDATA's fields ([`crate::json::rdata`]), and
//! `answer`: in dnsluice's records always the presentation form (as `dig`
//! prints it), in ZDNS's only for the types ZDNS gives an `answer`, in its
//! text (TXT strings joined by newlines, ...). ZDNS's records show the EDNS
//! OPT record among the additionals; ours leave it out.

use super::format::RecordStyle;
use crate::json::rdata::{self, Style, Written};
use crate::json::{push_json_str, Fields};
use dnsluice_core::dns::{self, mnemonic, Record, Section};

/// The three sections' keys.
pub const SECTIONS: [(&str, Section); 3] = [
    ("answers", Section::Answer),
    ("authorities", Section::Authority),
    ("additionals", Section::Additional),
];

/// Writes the sections of `msg` into the open object `f`: all three as
/// arrays in dnsluice's shape; in ZDNS's, only those with records.
pub fn write_sections(msg: &[u8], style: &RecordStyle, f: &mut Fields, out: &mut Vec<u8>) {
    for (key, section) in SECTIONS {
        let in_section = |r: &Record| r.section == section;
        if style.zdns() && !dns::records(msg).any(|r| in_section(&r)) {
            continue;
        }
        f.key(out, key);
        write_records(msg, dns::records(msg).filter(in_section), style, out);
    }
}

/// Writes `records` (of `msg`) as a JSON array.
pub fn write_records(
    msg: &[u8],
    records: impl Iterator<Item = Record>,
    style: &RecordStyle,
    out: &mut Vec<u8>,
) {
    out.push(b'[');
    let mut first = true;
    for record in records {
        if record.rtype == dns::TYPE_OPT && !style.zdns() {
            continue;
        }
        if !std::mem::take(&mut first) {
            out.push(b',');
        }
        write_record(msg, &record, style, out);
    }
    out.push(b']');
}

/// One record as an object.
pub fn write_record(msg: &[u8], record: &Record, style: &RecordStyle, out: &mut Vec<u8>) {
    let mut f = Fields::new();
    out.push(b'{');
    if record.rtype == dns::TYPE_OPT {
        write_edns(record, &mut f, out);
        out.push(b'}');
        return;
    }
    let mut owner = Vec::new();
    let _ = dns::name::write(msg, record.name as usize, &mut owner);
    if owner.len() > 1 && owner.last() == Some(&b'.') {
        owner.pop();
    }
    f.key(out, "name");
    push_json_str(&owner, out);
    // ZDNS's CERT and SSHFP records carry their own `type` (the
    // certificate's or the fingerprint's) in place of the record's.
    if !(style.zdns() && matches!(record.rtype, TYPE_CERT | TYPE_SSHFP)) {
        f.string(out, "type", &mnemonic::rtype(record.rtype));
    }
    f.string(out, "class", &mnemonic::class(record.class));
    if style.normal() {
        f.num(out, "ttl", u64::from(record.ttl));
    }
    if style.zdns() {
        if let Written::Answer(text) = rdata::write_fields(msg, record, Style::Zdns, &mut f, out) {
            f.string(out, "answer", &text);
        }
    } else {
        let mut text = Vec::new();
        dns::rdata::write(msg, record, &mut text);
        f.key(out, "answer");
        push_json_str(&text, out);
        rdata::write_fields(msg, record, Style::Native, &mut f, out);
    }
    out.push(b'}');
}

const TYPE_CERT: u16 = 37;
const TYPE_SSHFP: u16 = 44;

/// ZDNS's EDNS object: `type` (`EDNS` and the version), `version`, `flags`
/// (`do` or empty), `udpsize`.
fn write_edns(record: &Record, f: &mut Fields, out: &mut Vec<u8>) {
    let version = (record.ttl >> 16) & 0xff;
    f.string(out, "type", &format!("EDNS{version}"));
    f.num(out, "version", u64::from(version));
    let dnssec_ok = record.ttl & 0x8000 != 0;
    f.string(out, "flags", if dnssec_ok { "do" } else { "" });
    f.num(out, "udpsize", u64::from(record.class));
}

/// The header flags as ZDNS writes them (`error_code`: the RCODE).
pub fn flags_json(h: &dns::Header) -> String {
    format!(
        "{{\"response\":{},\"opcode\":{},\"authoritative\":{},\"truncated\":{},\"recursion_desired\":{},\"recursion_available\":{},\"authenticated\":{},\"checking_disabled\":{},\"error_code\":{}}}",
        h.qr(),
        h.opcode(),
        h.aa(),
        h.tc(),
        h.rd(),
        h.ra(),
        h.ad(),
        h.cd(),
        h.rcode()
    )
}

//! A response's sections as lookup records show them: each record with
//! `name` (no trailing dot), `type`, `class`, `ttl` (from normal
//! verbosity on), its RDATA's fields ([`dnsluice_json::rdata`]), and
//! `answer`: in dnsluice's records always the presentation form (as `dig`
//! prints it), in ZDNS's only for the types ZDNS gives an `answer`, in its
//! text (TXT strings joined by newlines, ...). ZDNS's records show the EDNS
//! OPT record among the additionals; ours leave it out.

use super::format::RecordStyle;
use dnsluice_core::dns::{self, mnemonic, Record, Section};
use dnsluice_json::rdata::{self, Style, Written};
use dnsluice_json::{push_json_str, Fields};

/// The three sections' keys.
pub const SECTIONS: [(&str, Section); 3] = [
    ("answers", Section::Answer),
    ("authorities", Section::Authority),
    ("additionals", Section::Additional),
];

/// Writes the sections of `msg` into the open object `f`: all three as
/// arrays in dnsluice's shape; in ZDNS's, only those with records. The
/// records come in section order, so one pass over the message writes all
/// three.
pub fn write_sections(msg: &[u8], style: &RecordStyle, f: &mut Fields, out: &mut Vec<u8>) {
    let mut records = dns::records(msg).peekable();
    for (key, section) in SECTIONS {
        // Records of a section the iterator passed (out of order) are not
        // written; a message's sections are in order.
        while records.next_if(|r| r.section < section).is_some() {}
        let has_records = records.peek().is_some_and(|r| r.section == section);
        if style.zdns() && !has_records {
            continue;
        }
        f.key(out, key);
        let in_section = std::iter::from_fn(|| records.next_if(|r| r.section == section));
        write_records(msg, in_section, style, out);
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

thread_local! {
    /// Room for a record's owner name and answer before they are escaped
    /// into the record (kept from record to record).
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
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
    SCRATCH.with_borrow_mut(|owner| {
        owner.clear();
        let _ = dns::name::write(msg, record.name as usize, owner);
        if owner.len() > 1 && owner.last() == Some(&b'.') {
            owner.pop();
        }
        f.key(out, "name");
        push_json_str(owner, out);
    });
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
        SCRATCH.with_borrow_mut(|text| {
            text.clear();
            dns::rdata::write(msg, record, text);
            f.key(out, "answer");
            push_json_str(text, out);
        });
        if rdata::has_fields(record.rtype) {
            rdata::write_fields(msg, record, Style::Native, &mut f, out);
        }
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

/// Writes the header flags as ZDNS writes them (`error_code`: the RCODE),
/// as the value of the field `key` of `f`.
pub fn write_flags(h: &dns::Header, key: &str, f: &mut Fields, out: &mut Vec<u8>) {
    f.key(out, key);
    let mut flags = Fields::new();
    let boolean = |set: bool| if set { "true" } else { "false" };
    out.push(b'{');
    flags.raw(out, "response", boolean(h.qr()));
    flags.num(out, "opcode", u64::from(h.opcode()));
    for (name, set) in [
        ("authoritative", h.aa()),
        ("truncated", h.tc()),
        ("recursion_desired", h.rd()),
        ("recursion_available", h.ra()),
        ("authenticated", h.ad()),
        ("checking_disabled", h.cd()),
    ] {
        flags.raw(out, name, boolean(set));
    }
    flags.num(out, "error_code", u64::from(h.rcode()));
    out.push(b'}');
}

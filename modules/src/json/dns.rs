//! The `dns` object of a JSON line: header, flags, sections, EDNS, errors.

use dnsluice_core::dns::{mnemonic, name, questions, rdata, records, Section, TYPE_OPT};
use dnsluice_core::DnsMessage;
use dnsluice_json::{push_bool, push_json_text, push_padded, push_short, push_u64, Fields};
use std::io::Write;

/// Appends `,"dns":{...}` (and `,"dns_error":{...}` when the message has a
/// problem). `scratch` is reused for the names and RDATA that need escapes.
pub fn write_dns(m: &DnsMessage<'_>, out: &mut Vec<u8>, scratch: &mut Vec<u8>) {
    let info = &m.info();
    out.extend_from_slice(b",\"dns\":{");
    let mut f = Fields::new();
    // A message shorter than a header still shows the id and flags it has.
    if let Some(h) = info.header.or(info.partial_header) {
        f.num(out, "id", u64::from(h.id));
        f.raw(out, "qr", if h.qr() { "true" } else { "false" });
        f.string(out, "opcode", &mnemonic::opcode(h.opcode()));
        f.string(out, "rcode", &mnemonic::rcode(info.rcode()));
        f.key(out, "flags");
        let set = [h.aa(), h.tc(), h.rd(), h.ra(), h.ad(), h.cd()];
        let bits = set
            .iter()
            .rev()
            .fold(0, |bits, &on| bits << 1 | usize::from(on));
        let (text, len) = &FLAGS[bits];
        push_padded(out, text, *len);
    }
    if let Some(h) = info.header {
        for (key, n) in [
            ("qdcount", h.qdcount),
            ("ancount", h.ancount),
            ("nscount", h.nscount),
            ("arcount", h.arcount),
        ] {
            f.num(out, key, u64::from(n));
        }
        f.key(out, "question");
        out.push(b'[');
        for (i, q) in questions(m.bytes).enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"name\":");
            write_name(m.bytes, q.name as usize, scratch, out);
            push_type_and_class(q.qtype, q.qclass, out);
            out.push(b'}');
        }
        out.push(b']');
        write_sections(m.bytes, &mut f, scratch, out);
        if let Some(edns) = info.edns {
            f.key(out, "edns");
            out.extend_from_slice(b"{\"version\":");
            push_u64(out, u64::from(edns.version));
            out.extend_from_slice(b",\"udp_size\":");
            push_u64(out, u64::from(edns.udp_size));
            out.extend_from_slice(b",\"do\":");
            push_bool(edns.dnssec_ok(), out);
            out.extend_from_slice(b",\"ext_rcode\":");
            push_u64(out, u64::from(edns.ext_rcode));
            out.extend_from_slice(b",\"options\":[");
            write_edns_options(
                m.bytes,
                edns.options_at as usize,
                usize::from(edns.options_len),
                out,
            );
            out.extend_from_slice(b"]}");
        }
    }
    out.push(b'}');
    if let Some(error) = info.error {
        let _ = write!(
            out,
            ",\"dns_error\":{{\"kind\":\"{}\",\"offset\":{}}}",
            error.as_str(),
            info.error_offset
        );
    }
}

/// The header's flags as the `flags` object, `{"aa":false,...,"cd":true}`,
/// for each of the 64 ways its six flags can be set (bit 0 `aa`, then `tc`,
/// `rd`, `ra`, `ad`, bit 5 `cd`), made at compile time, each padded to
/// [`FLAGS_ROOM`] bytes with its length: one copy a message instead of
/// twelve pieces with a capacity test each.
const FLAGS: [([u8; FLAGS_ROOM], usize); 64] = flags_table();

/// Room for the longest `flags` object (67 bytes, every flag false).
const FLAGS_ROOM: usize = 72;

/// Makes [`FLAGS`].
const fn flags_table() -> [([u8; FLAGS_ROOM], usize); 64] {
    const NAMES: [[u8; 2]; 6] = [*b"aa", *b"tc", *b"rd", *b"ra", *b"ad", *b"cd"];
    let mut table = [([0u8; FLAGS_ROOM], 0usize); 64];
    let mut bits = 0;
    while bits < 64 {
        let mut text = [0u8; FLAGS_ROOM];
        let mut len = put(&mut text, 0, b"{");
        let mut flag = 0;
        while flag < 6 {
            if flag > 0 {
                len = put(&mut text, len, b",");
            }
            let [a, b] = NAMES[flag];
            len = put(&mut text, len, &[b'"', a, b, b'"', b':']);
            let on = bits >> flag & 1 == 1;
            len = put(&mut text, len, if on { b"true" } else { b"false" });
            flag += 1;
        }
        len = put(&mut text, len, b"}");
        table[bits] = (text, len);
        bits += 1;
    }
    table
}

/// Writes `bytes` into `text` at `at` (at compile time); where they end.
const fn put(text: &mut [u8; FLAGS_ROOM], at: usize, bytes: &[u8]) -> usize {
    let mut i = 0;
    while i < bytes.len() {
        text[at + i] = bytes[i];
        i += 1;
    }
    at + bytes.len()
}

/// `,"type":"A","class":"IN"` (mnemonics, or TYPEn and CLASSn: nothing to escape).
fn push_type_and_class(rtype: u16, class: u16, out: &mut Vec<u8>) {
    out.extend_from_slice(b",\"type\":\"");
    push_short(out, mnemonic::rtype(rtype).as_bytes());
    out.extend_from_slice(b"\",\"class\":\"");
    push_short(out, mnemonic::class(class).as_bytes());
    out.push(b'"');
}

/// A name as a JSON string, or `null` when it does not parse.
fn write_name(msg: &[u8], at: usize, scratch: &mut Vec<u8>, out: &mut Vec<u8>) {
    if push_json_text(out, scratch, |into| name::write(msg, at, into)).is_err() {
        out.extend_from_slice(b"null");
    }
}

/// `"answer":[...],"authority":[...],"additional":[...]` in one walk over the
/// records (they come in section order).
fn write_sections(msg: &[u8], f: &mut Fields, scratch: &mut Vec<u8>, out: &mut Vec<u8>) {
    let mut records = records(msg).filter(|r| r.rtype != TYPE_OPT).peekable();
    for section in [Section::Answer, Section::Authority, Section::Additional] {
        f.key(out, section_key(section));
        out.push(b'[');
        let mut first = true;
        while let Some(r) = records.next_if(|r| r.section == section) {
            if !std::mem::take(&mut first) {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"name\":");
            write_name(msg, r.name as usize, scratch, out);
            push_type_and_class(r.rtype, r.class, out);
            out.extend_from_slice(b",\"ttl\":");
            push_u64(out, u64::from(r.ttl));
            out.extend_from_slice(b",\"data\":");
            let _ = push_json_text(out, scratch, |into| {
                rdata::write(msg, &r, into);
                Ok::<(), ()>(())
            });
            out.push(b'}');
        }
        out.push(b']');
    }
}

fn section_key(section: Section) -> &'static str {
    match section {
        Section::Answer => "answer",
        Section::Authority => "authority",
        Section::Additional => "additional",
    }
}

/// EDNS options: `{"code":10,"name":"COOKIE","data":"hex"}` each.
fn write_edns_options(msg: &[u8], at: usize, len: usize, out: &mut Vec<u8>) {
    let Some(options) = msg.get(at..at + len) else {
        return;
    };
    let mut pos = 0;
    let mut first = true;
    while let Some(head) = options.get(pos..pos + 4) {
        let code = u16::from_be_bytes([head[0], head[1]]);
        let size = usize::from(u16::from_be_bytes([head[2], head[3]]));
        let Some(value) = options.get(pos + 4..pos + 4 + size) else {
            break;
        };
        if !first {
            out.push(b',');
        }
        first = false;
        out.extend_from_slice(b"{\"code\":");
        push_u64(out, u64::from(code));
        if let Some(name) = mnemonic::edns_option(code) {
            out.extend_from_slice(b",\"name\":\"");
            push_short(out, name.as_bytes());
            out.push(b'"');
        }
        out.extend_from_slice(b",\"data\":\"");
        rdata::push_hex(value, out);
        out.extend_from_slice(b"\"}");
        pos += 4 + size;
    }
}

#[cfg(test)]
mod tests {
    use super::FLAGS;

    /// Each of the 64 entries is the object the six flags make, in the
    /// header's order, written out here flag by flag, and JSON that
    /// `serde_json` reads back to the same six booleans.
    #[test]
    fn the_flags_table_holds_every_setting_of_the_six_flags() {
        let names = ["aa", "tc", "rd", "ra", "ad", "cd"];
        for (bits, (text, len)) in FLAGS.iter().enumerate() {
            let on = |flag: usize| bits >> flag & 1 == 1;
            let pairs: Vec<String> = (0..6)
                .map(|f| format!("\"{}\":{}", names[f], on(f)))
                .collect();
            let expected = format!("{{{}}}", pairs.join(","));
            let written = std::str::from_utf8(&text[..*len]).unwrap();
            assert_eq!(written, expected, "bits {bits:06b}");
            let parsed: serde_json::Value = serde_json::from_str(written).unwrap();
            for (flag, name) in names.iter().enumerate() {
                assert_eq!(parsed[name], on(flag), "bits {bits:06b}, {name}");
            }
        }
    }
}

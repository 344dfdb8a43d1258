//! The RDATA of a lookup record as structured JSON fields, with ZDNS 2.x's
//! field names and values (DNSKEY `flags`/`protocol`/`algorithm`/
//! `public_key`, DS `key_tag`/`digest`, ...), or for the types ZDNS gives a
//! plain `answer` (A, AAAA, NS, CNAME, DNAME, PTR, MX, TXT, ...) that text.
//!
//! Decoding is hickory-proto's (this is the cold path of lookups; the
//! capture path keeps its own zero-copy parser). LOC and URI are decoded
//! here by hand because hickory-proto 0.26 has no type for them; both are
//! a few fixed fields (RFC 1876, RFC 7553). DNSKEY's protocol octet is read
//! from the RDATA too: hickory checks it but does not keep it.

use super::fields::{push_json_str, Fields};
use dnsluice_core::dns::{mnemonic, Record};
use hickory_proto::dnssec::rdata::DNSSECRData;
use hickory_proto::rr::rdata::svcb::{SvcParamKey, SvcParamValue, SVCB};
use hickory_proto::rr::{RData, RecordType};
use hickory_proto::serialize::binary::{BinDecoder, Restrict};
use std::net::Ipv6Addr;

mod loc;

/// Who reads the fields: dnsluice's own records, or ZDNS's shape, where
/// CERT's and SSHFP's `type` stands for the certificate or fingerprint type
/// (ZDNS's field shadows the record type) and ours are `cert_type` and
/// `fingerprint_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// dnsluice's records.
    Native,
    /// ZDNS 2.x's records.
    Zdns,
}

/// What [`write_fields`] did with a record.
#[derive(Debug, PartialEq, Eq)]
pub enum Written {
    /// A type ZDNS shows as `answer` text (and maybe `preference`): the text.
    Answer(String),
    /// Structured fields were written.
    Fields,
    /// A type ZDNS does not decode, or RDATA that did not decode: nothing
    /// was written.
    Nothing,
}

/// Whether [`write_fields`] writes fields for a record of type `rtype` (not
/// for A, AAAA, NS, CNAME, PTR and TXT: their RDATA is their answer alone).
pub fn has_fields(rtype: u16) -> bool {
    !matches!(rtype, 1 | 28 | 2 | 5 | 12 | 16)
}

/// Writes `record`'s RDATA fields into the open object `f` (`out` holds it).
pub fn write_fields(
    msg: &[u8],
    record: &Record,
    style: Style,
    f: &mut Fields,
    out: &mut Vec<u8>,
) -> Written {
    let at = record.rdata_at as usize;
    let Some(rdata) = msg.get(at..at + usize::from(record.rdata_len)) else {
        return Written::Nothing;
    };
    match record.rtype {
        29 => return loc::write(rdata, f, out),
        256 => return write_uri(rdata, f, out),
        _ => {}
    }
    let Ok(at16) = u16::try_from(at) else {
        return Written::Nothing;
    };
    let mut decoder = BinDecoder::new(msg).clone(at16);
    let Ok(data) = RData::read(
        &mut decoder,
        RecordType::from(record.rtype),
        Restrict::new(record.rdata_len),
    ) else {
        return Written::Nothing;
    };
    let name = |n: &hickory_proto::rr::Name| n.to_string();
    match &data {
        RData::A(a) => Written::Answer(a.0.to_string()),
        RData::AAAA(aaaa) => Written::Answer(zdns_ipv6(aaaa.0)),
        RData::NS(n) => Written::Answer(name(&n.0)),
        RData::CNAME(n) => Written::Answer(name(&n.0)),
        RData::PTR(n) => Written::Answer(name(&n.0)),
        RData::MX(mx) => {
            f.num(out, "preference", u64::from(mx.preference));
            Written::Answer(name(&mx.exchange))
        }
        RData::TXT(txt) => Written::Answer(zdns_txt(txt.txt_data.iter().map(|s| &s[..]))),
        RData::SOA(soa) => {
            f.string(out, "ns", trim_dot(&name(&soa.mname)));
            f.string(out, "mbox", trim_dot(&name(&soa.rname)));
            f.num(out, "serial", u64::from(soa.serial));
            f.num(out, "refresh", soa.refresh as u64);
            f.num(out, "retry", soa.retry as u64);
            f.num(out, "expire", soa.expire as u64);
            f.num(out, "min_ttl", u64::from(soa.minimum));
            Written::Fields
        }
        RData::SRV(srv) => {
            f.num(out, "priority", u64::from(srv.priority));
            f.num(out, "weight", u64::from(srv.weight));
            f.num(out, "port", u64::from(srv.port));
            f.string(out, "target", &name(&srv.target));
            Written::Fields
        }
        RData::CAA(caa) => {
            f.string(out, "tag", &caa.tag);
            f.string(out, "value", &String::from_utf8_lossy(&caa.value));
            let flag = u8::from(caa.issuer_critical) << 7 | caa.reserved_flags;
            f.num(out, "flag", u64::from(flag));
            Written::Fields
        }
        RData::HINFO(h) => {
            f.string(out, "cpu", &zdns_txt([&h.cpu[..]]));
            f.string(out, "os", &zdns_txt([&h.os[..]]));
            Written::Fields
        }
        RData::NAPTR(n) => {
            f.num(out, "order", u64::from(n.order));
            f.num(out, "preference", u64::from(n.preference));
            f.string(out, "flags", &zdns_txt([&n.flags[..]]));
            f.string(out, "service", &zdns_txt([&n.services[..]]));
            f.string(out, "regexp", &zdns_txt([&n.regexp[..]]));
            f.string(out, "replacement", &name(&n.replacement));
            Written::Fields
        }
        RData::TLSA(t) => {
            write_tlsa(t, ["cert_usage", "selector", "matching_type"], f, out);
            Written::Fields
        }
        RData::SMIMEA(s) => {
            write_tlsa(&s.0, ["usage", "selector", "matching_type"], f, out);
            Written::Fields
        }
        RData::SSHFP(s) => {
            f.num(out, "algorithm", u64::from(u8::from(s.algorithm)));
            let key = match style {
                Style::Zdns => "type",
                Style::Native => "fingerprint_type",
            };
            f.num(out, key, u64::from(u8::from(s.fingerprint_type)));
            f.string(out, "fingerprint", &hex(&s.fingerprint));
            Written::Fields
        }
        RData::CERT(c) => {
            let key = match style {
                Style::Zdns => "type",
                Style::Native => "cert_type",
            };
            f.string(out, key, cert_type_name(u16::from(c.cert_type)));
            f.num(out, "keytag", u64::from(c.key_tag));
            f.string(out, "algorithm", algorithm_name(u8::from(c.algorithm)));
            f.string(out, "certificate", &base64(&c.cert_data));
            Written::Fields
        }
        RData::SVCB(s) => {
            write_svcb(s, f, out);
            Written::Fields
        }
        RData::HTTPS(h) => {
            write_svcb(&h.0, f, out);
            Written::Fields
        }
        RData::DNSSEC(d) => write_dnssec(d, rdata, f, out),
        _ if record.rtype == 39 => {
            // DNAME: hickory-proto 0.26 keeps it as unknown RDATA; the target
            // is a name that may be compressed.
            match dnsluice_core::dns::name::to_string(msg, at) {
                Ok(target) => Written::Answer(with_dot(target)),
                Err(_) => Written::Nothing,
            }
        }
        _ => Written::Nothing,
    }
}

/// The DNSSEC types.
fn write_dnssec(d: &DNSSECRData, rdata: &[u8], f: &mut Fields, out: &mut Vec<u8>) -> Written {
    match d {
        DNSSECRData::DNSKEY(_) | DNSSECRData::CDNSKEY(_) => {
            // flags(2) protocol(1) algorithm(1) key: the fields as they are.
            if rdata.len() < 4 {
                return Written::Nothing;
            }
            f.num(
                out,
                "flags",
                u64::from(u16::from_be_bytes([rdata[0], rdata[1]])),
            );
            f.num(out, "protocol", u64::from(rdata[2]));
            f.num(out, "algorithm", u64::from(rdata[3]));
            f.string(out, "public_key", &base64(&rdata[4..]));
        }
        DNSSECRData::DS(_) | DNSSECRData::CDS(_) => {
            if rdata.len() < 4 {
                return Written::Nothing;
            }
            f.num(
                out,
                "key_tag",
                u64::from(u16::from_be_bytes([rdata[0], rdata[1]])),
            );
            f.num(out, "algorithm", u64::from(rdata[2]));
            f.num(out, "digest_type", u64::from(rdata[3]));
            f.string(out, "digest", &hex(&rdata[4..]));
        }
        DNSSECRData::RRSIG(sig) => {
            let input = sig.input();
            f.num(
                out,
                "type_covered",
                u64::from(u16::from(input.type_covered)),
            );
            f.num(out, "algorithm", u64::from(u8::from(input.algorithm)));
            f.num(out, "labels", u64::from(input.num_labels));
            f.num(out, "original_ttl", u64::from(input.original_ttl));
            f.string(out, "expiration", &sig_time(input.sig_expiration.get()));
            f.string(out, "inception", &sig_time(input.sig_inception.get()));
            f.num(out, "keytag", u64::from(input.key_tag));
            f.string(out, "signer_name", &input.signer_name.to_string());
            f.string(out, "signature", &base64(sig.sig()));
        }
        DNSSECRData::NSEC(nsec) => {
            f.string(
                out,
                "next_domain",
                trim_dot(&nsec.next_domain_name().to_string()),
            );
            f.string(out, "type_bit_map", &type_list(nsec.type_bit_maps()));
        }
        DNSSECRData::NSEC3(n) => {
            f.num(
                out,
                "hash_algorithm",
                u64::from(u8::from(n.hash_algorithm())),
            );
            f.num(out, "flags", u64::from(n.flags()));
            f.num(out, "iterations", u64::from(n.iterations()));
            f.num(out, "salt_length", n.salt().len() as u64);
            f.string(out, "salt", &hex(n.salt()));
            f.num(out, "hash_length", n.next_hashed_owner_name().len() as u64);
            f.string(out, "next_domain", &base32hex(n.next_hashed_owner_name()));
            f.string(out, "type_bit_map", &type_list(n.type_bit_maps()));
        }
        DNSSECRData::NSEC3PARAM(n) => {
            // ZDNS writes NSEC3PARAM in its NSEC3 shape with salt_length,
            // hash_length, next_domain and type_bit_map left empty.
            f.num(
                out,
                "hash_algorithm",
                u64::from(u8::from(n.hash_algorithm())),
            );
            f.num(out, "flags", u64::from(n.flags()));
            f.num(out, "iterations", u64::from(n.iterations()));
            f.num(out, "salt_length", 0);
            f.string(out, "salt", &hex(n.salt()));
            f.num(out, "hash_length", 0);
            f.string(out, "next_domain", "");
            f.string(out, "type_bit_map", "");
        }
        _ => return Written::Nothing,
    }
    Written::Fields
}

fn write_tlsa(
    t: &hickory_proto::rr::rdata::TLSA,
    keys: [&str; 3],
    f: &mut Fields,
    out: &mut Vec<u8>,
) {
    f.num(out, keys[0], u64::from(u8::from(t.cert_usage)));
    f.num(out, keys[1], u64::from(u8::from(t.selector)));
    f.num(out, keys[2], u64::from(u8::from(t.matching)));
    f.string(out, "certificate", &hex(&t.cert_data));
}

/// SVCB and HTTPS (RFC 9460): `svcparams` as ZDNS writes them (left out
/// when there are none).
fn write_svcb(s: &SVCB, f: &mut Fields, out: &mut Vec<u8>) {
    f.num(out, "priority", u64::from(s.svc_priority));
    f.string(out, "target", &s.target_name.to_string());
    if s.svc_params.is_empty() {
        return;
    }
    f.key(out, "svcparams");
    out.push(b'{');
    let mut p = Fields::new();
    for (key, value) in &s.svc_params {
        let key_name = match key {
            SvcParamKey::Mandatory => "mandatory".to_string(),
            SvcParamKey::Alpn => "alpn".to_string(),
            SvcParamKey::NoDefaultAlpn => "no-default-alpn".to_string(),
            SvcParamKey::Port => "port".to_string(),
            SvcParamKey::Ipv4Hint => "ipv4hint".to_string(),
            SvcParamKey::EchConfigList => "ech".to_string(),
            SvcParamKey::Ipv6Hint => "ipv6hint".to_string(),
            other => format!("key{}", u16::from(*other)),
        };
        p.key(out, &key_name);
        match value {
            SvcParamValue::Mandatory(m) => {
                let keys: Vec<String> = m.0.iter().map(|k| k.to_string()).collect();
                push_strings(keys.iter().map(String::as_str), out);
            }
            SvcParamValue::Alpn(a) => push_strings(a.0.iter().map(String::as_str), out),
            SvcParamValue::NoDefaultAlpn => out.extend_from_slice(b"true"),
            SvcParamValue::Port(port) => out.extend_from_slice(port.to_string().as_bytes()),
            SvcParamValue::Ipv4Hint(h) => {
                let ips: Vec<String> = h.0.iter().map(|a| a.0.to_string()).collect();
                push_strings(ips.iter().map(String::as_str), out);
            }
            SvcParamValue::Ipv6Hint(h) => {
                let ips: Vec<String> = h.0.iter().map(|a| zdns_ipv6(a.0)).collect();
                push_strings(ips.iter().map(String::as_str), out);
            }
            SvcParamValue::EchConfigList(e) => push_json_str(base64(&e.0).as_bytes(), out),
            SvcParamValue::Unknown(u) => push_json_str(base64(&u.0).as_bytes(), out),
        }
    }
    out.push(b'}');
}

/// URI (RFC 7553): priority, weight, then the target (the rest of the RDATA).
fn write_uri(rdata: &[u8], f: &mut Fields, out: &mut Vec<u8>) -> Written {
    if rdata.len() < 4 {
        return Written::Nothing;
    }
    f.num(
        out,
        "priority",
        u64::from(u16::from_be_bytes([rdata[0], rdata[1]])),
    );
    f.num(
        out,
        "weight",
        u64::from(u16::from_be_bytes([rdata[2], rdata[3]])),
    );
    f.string(out, "target", &String::from_utf8_lossy(&rdata[4..]));
    Written::Fields
}

fn push_strings<'a>(items: impl Iterator<Item = &'a str>, out: &mut Vec<u8>) {
    out.push(b'[');
    for (i, s) in items.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_json_str(s.as_bytes(), out);
    }
    out.push(b']');
}

/// Character-strings as ZDNS (miekg/dns) keeps them: `"` and `\` escaped
/// with a backslash, bytes outside printable ASCII as `\DDD`, several
/// strings joined by newlines.
pub fn zdns_txt<'a>(strings: impl IntoIterator<Item = &'a [u8]>) -> String {
    let mut s = String::new();
    for (i, part) in strings.into_iter().enumerate() {
        if i > 0 {
            s.push('\n');
        }
        for &b in part {
            match b {
                b'"' | b'\\' => {
                    s.push('\\');
                    s.push(b as char);
                }
                b' '..=b'~' => s.push(b as char),
                _ => s.push_str(&format!("\\{b:03}")),
            }
        }
    }
    s
}

/// An IPv6 address as ZDNS writes it: IPv4-mapped and IPv4-compatible
/// addresses end in dotted IPv4 (`::ffff:192.0.2.1`, `::192.0.2.1`).
pub fn zdns_ipv6(ip: Ipv6Addr) -> String {
    let o = ip.octets();
    if !ip.is_loopback() && !ip.is_unspecified() && o[..10].iter().all(|&b| b == 0) {
        let v4 = std::net::Ipv4Addr::new(o[12], o[13], o[14], o[15]);
        if o[10..12] == [0xff, 0xff] {
            return format!("::ffff:{v4}");
        }
        if o[10..12] == [0, 0] {
            return format!("::{v4}");
        }
    }
    ip.to_string()
}

fn trim_dot(name: &str) -> &str {
    if name.len() > 1 {
        name.strip_suffix('.').unwrap_or(name)
    } else {
        name
    }
}

fn with_dot(mut name: String) -> String {
    if !name.ends_with('.') {
        name.push('.');
    }
    name
}

/// Record types by mnemonic, space separated (NSEC type bit maps).
fn type_list(types: impl Iterator<Item = RecordType>) -> String {
    types
        .map(|t| mnemonic::rtype(u16::from(t)).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// An RRSIG time (seconds since the epoch, mod 2^32) as YYYYMMDDHHMMSS,
/// UTC (RFC 4034 §3.2).
fn sig_time(secs: u32) -> String {
    let days = i64::from(secs / 86400);
    let rem = secs % 86400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}{m:02}{d:02}{:02}{:02}{:02}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian
/// (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn hex(bytes: &[u8]) -> String {
    data_encoding::HEXLOWER.encode(bytes)
}

fn base64(bytes: &[u8]) -> String {
    data_encoding::BASE64.encode(bytes)
}

fn base32hex(bytes: &[u8]) -> String {
    data_encoding::BASE32HEX_NOPAD.encode(bytes)
}

/// CERT types by number (RFC 4398 §2.1), as ZDNS names them ("" if unknown).
fn cert_type_name(t: u16) -> &'static str {
    match t {
        1 => "PKIX",
        2 => "SPKI",
        3 => "PGP",
        4 => "IPKIX",
        5 => "ISPKI",
        6 => "IPGP",
        7 => "ACPKIX",
        8 => "IACPKIX",
        253 => "URI",
        254 => "OID",
        _ => "",
    }
}

/// DNSSEC algorithm numbers (RFC 8624 and the IANA registry), as ZDNS
/// names them in CERT records ("" if unknown).
fn algorithm_name(a: u8) -> &'static str {
    match a {
        1 => "RSAMD5",
        2 => "DH",
        3 => "DSA",
        5 => "RSASHA1",
        6 => "DSA-NSEC3-SHA1",
        7 => "RSASHA1-NSEC3-SHA1",
        8 => "RSASHA256",
        10 => "RSASHA512",
        12 => "ECC-GOST",
        13 => "ECDSAP256SHA256",
        14 => "ECDSAP384SHA384",
        15 => "ED25519",
        16 => "ED448",
        252 => "INDIRECT",
        253 => "PRIVATEDNS",
        254 => "PRIVATEOID",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_times_are_utc_calendar_dates() {
        // 2030-01-01T00:00:00Z and 2024-01-02T03:04:05Z, as `date -u -d @N +%s` gives them.
        assert_eq!(sig_time(1_893_456_000), "20300101000000");
        assert_eq!(sig_time(1_704_164_645), "20240102030405");
        assert_eq!(sig_time(0), "19700101000000");
        // Leap day.
        assert_eq!(sig_time(951_782_400), "20000229000000");
    }

    #[test]
    fn text_and_addresses_as_zdns_writes_them() {
        assert_eq!(
            zdns_txt([&b"a\"b\\c"[..], &b"tab\there\xc3\xa9"[..]]),
            "a\\\"b\\\\c\ntab\\009here\\195\\169"
        );
        assert_eq!(
            zdns_ipv6("::ffff:192.0.2.1".parse().unwrap()),
            "::ffff:192.0.2.1"
        );
        assert_eq!(zdns_ipv6("::192.0.2.1".parse().unwrap()), "::192.0.2.1");
        assert_eq!(zdns_ipv6("::1".parse().unwrap()), "::1");
        assert_eq!(zdns_ipv6("2001:db8::1".parse().unwrap()), "2001:db8::1");
    }
}

//! RDATA in presentation form, for the types people read most; everything
//! else (and anything that does not parse) in the RFC 3597 generic form
//! `\# LENGTH HEX`.

use super::name;
use super::scan::Record;
use crate::wire::be16;
use std::io::Write;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Appends the record's RDATA in presentation form.
pub fn write(msg: &[u8], record: &Record, out: &mut Vec<u8>) {
    let start = record.rdata_at as usize;
    let rdata = &msg[start..start + usize::from(record.rdata_len)];
    let mark = out.len();
    if write_typed(msg, record.rtype, start, rdata, out).is_none() {
        out.truncate(mark);
        write_generic(rdata, out);
    }
}

/// `\# LENGTH HEX` (RFC 3597 §5).
pub fn write_generic(rdata: &[u8], out: &mut Vec<u8>) {
    let _ = write!(out, "\\# {}", rdata.len());
    if !rdata.is_empty() {
        out.push(b' ');
        push_hex(rdata, out);
    }
}

/// Appends lower-case hex digits.
pub fn push_hex(bytes: &[u8], out: &mut Vec<u8>) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)]);
        out.push(DIGITS[usize::from(b & 0xf)]);
    }
}

/// A name inside RDATA that must end exactly at `end`-or-before; returns where it ends.
fn name_in(msg: &[u8], at: usize, end: usize, out: &mut Vec<u8>) -> Option<usize> {
    let after = name::write(msg, at, out).ok()?;
    (after <= end).then_some(after)
}

/// An IPv4 address in dotted decimal, without the formatting machinery.
fn write_ipv4(octets: [u8; 4], out: &mut Vec<u8>) {
    for (i, octet) in octets.into_iter().enumerate() {
        if i > 0 {
            out.push(b'.');
        }
        if octet >= 100 {
            out.push(b'0' + octet / 100);
        }
        if octet >= 10 {
            out.push(b'0' + octet / 10 % 10);
        }
        out.push(b'0' + octet % 10);
    }
}

fn write_typed(
    msg: &[u8],
    rtype: u16,
    start: usize,
    rdata: &[u8],
    out: &mut Vec<u8>,
) -> Option<()> {
    let end = start + rdata.len();
    match rtype {
        // A
        1 => {
            let octets: [u8; 4] = rdata.try_into().ok()?;
            write_ipv4(octets, out);
        }
        // AAAA
        28 => {
            let octets: [u8; 16] = rdata.try_into().ok()?;
            let _ = write!(out, "{}", Ipv6Addr::from(octets));
        }
        // NS, CNAME, PTR, DNAME: one name
        2 | 5 | 12 | 39 => {
            (name_in(msg, start, end, out)? == end).then_some(())?;
        }
        // MX: preference, exchange
        15 => {
            let _ = write!(out, "{} ", be16(rdata, 0)?);
            (name_in(msg, start + 2, end, out)? == end).then_some(())?;
        }
        // SOA: mname rname serial refresh retry expire minimum
        6 => {
            let after = name_in(msg, start, end, out)?;
            out.push(b' ');
            let after = name_in(msg, after, end, out)?;
            let numbers = msg.get(after..end).filter(|n| n.len() == 20)?;
            for chunk in numbers.chunks_exact(4) {
                let _ = write!(out, " {}", u32::from_be_bytes(chunk.try_into().ok()?));
            }
        }
        // TXT (and SPF): character-strings
        16 | 99 => {
            let mut pos = 0;
            while pos < rdata.len() {
                let len = usize::from(rdata[pos]);
                let text = rdata.get(pos + 1..pos + 1 + len)?;
                if pos > 0 {
                    out.push(b' ');
                }
                push_quoted(text, out);
                pos += 1 + len;
            }
        }
        // SRV: priority weight port target
        33 => {
            let _ = write!(
                out,
                "{} {} {} ",
                be16(rdata, 0)?,
                be16(rdata, 2)?,
                be16(rdata, 4)?
            );
            (name_in(msg, start + 6, end, out)? == end).then_some(())?;
        }
        // CAA: flags tag "value"
        257 => {
            let flags = *rdata.first()?;
            let tag_len = usize::from(*rdata.get(1)?);
            let tag = rdata.get(2..2 + tag_len)?;
            let _ = write!(out, "{flags} ");
            name::push_label(tag, out);
            out.push(b' ');
            push_quoted(&rdata[2 + tag_len..], out);
        }
        // SVCB, HTTPS (RFC 9460): priority, target, parameters
        64 | 65 => {
            let _ = write!(out, "{} ", be16(rdata, 0)?);
            let mut pos = name_in(msg, start + 2, end, out)? - start;
            while pos < rdata.len() {
                let key = be16(rdata, pos)?;
                let len = usize::from(be16(rdata, pos + 2)?);
                let value = rdata.get(pos + 4..pos + 4 + len)?;
                out.push(b' ');
                write_svc_param(key, value, out)?;
                pos += 4 + len;
            }
        }
        // DS, CDS: key tag, algorithm, digest type, digest
        43 | 59 => {
            let digest = rdata.get(4..)?;
            let _ = write!(out, "{} {} {} ", be16(rdata, 0)?, rdata[2], rdata[3]);
            push_hex(digest, out);
        }
        _ => return None,
    }
    Some(())
}

/// The name of SvcParamKey `key` (RFC 9460 §14.3.2), or `None` for `keyNNNNN`.
fn svc_key_name(key: u16) -> Option<&'static str> {
    Some(match key {
        0 => "mandatory",
        1 => "alpn",
        2 => "no-default-alpn",
        3 => "port",
        4 => "ipv4hint",
        5 => "ech",
        6 => "ipv6hint",
        _ => return None,
    })
}

/// One SvcParam as `key=value` (RFC 9460 §2.1); `None` when its value is malformed.
fn write_svc_param(key: u16, value: &[u8], out: &mut Vec<u8>) -> Option<()> {
    match svc_key_name(key) {
        Some(name) => out.extend_from_slice(name.as_bytes()),
        None => {
            let _ = write!(out, "key{key}");
        }
    }
    match key {
        // mandatory: a list of keys
        0 => {
            out.push(b'=');
            for (i, k) in value.chunks(2).enumerate() {
                let k: [u8; 2] = k.try_into().ok()?;
                if i > 0 {
                    out.push(b',');
                }
                let k = u16::from_be_bytes(k);
                match svc_key_name(k) {
                    Some(name) => out.extend_from_slice(name.as_bytes()),
                    None => {
                        let _ = write!(out, "key{k}");
                    }
                }
            }
        }
        // alpn: length-prefixed protocol ids, `,` and `\` escaped
        1 => {
            out.push(b'=');
            let mut pos = 0;
            while pos < value.len() {
                let len = usize::from(value[pos]);
                let id = value.get(pos + 1..pos + 1 + len)?;
                if pos > 0 {
                    out.push(b',');
                }
                name::push_escaped(id, b",\\\"", 0x21, out);
                pos += 1 + len;
            }
        }
        // no-default-alpn: no value
        2 => (value.is_empty()).then_some(())?,
        // port
        3 => {
            let _ = write!(out, "={}", be16(value, 0).filter(|_| value.len() == 2)?);
        }
        // ipv4hint, ipv6hint: address lists
        4 | 6 => {
            let size = if key == 4 { 4 } else { 16 };
            if value.is_empty() || !value.len().is_multiple_of(size) {
                return None;
            }
            out.push(b'=');
            for (i, a) in value.chunks_exact(size).enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                let _ = match size {
                    4 => write!(out, "{}", Ipv4Addr::from(<[u8; 4]>::try_from(a).ok()?)),
                    _ => write!(out, "{}", Ipv6Addr::from(<[u8; 16]>::try_from(a).ok()?)),
                };
            }
        }
        // ech: base64
        5 => {
            out.push(b'=');
            push_base64(value, out);
        }
        // anything else: the value as a quoted string
        _ => {
            out.push(b'=');
            push_quoted(value, out);
        }
    }
    Some(())
}

/// Standard base64 with padding (RFC 4648 §4).
fn push_base64(bytes: &[u8], out: &mut Vec<u8>) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]);
            } else {
                out.push(b'=');
            }
        }
    }
}

/// A character-string in double quotes, with `"` and `\` escaped and
/// non-printable bytes as `\DDD`.
fn push_quoted(text: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    name::push_escaped(text, b"\"\\", 0x20, out);
    out.push(b'"');
}

//! The fields of an object view, named as in `output.json`.
//!
//! [`field`] computes a scalar field without allocating (strings are slices of
//! the object or of a reused scratch buffer); [`table`] builds the fields that
//! are Lua tables (sections, EDNS, flags, VLAN ids), on demand.

use dnsluice_core::dns::{mnemonic, name, questions, rdata, records, Section, TYPE_OPT};
use dnsluice_core::wire::Transport;
use dnsluice_core::{DnsMessage, Object};
use mlua::{Lua, Value};
use std::borrow::Cow;
use std::io::Write;

/// Every field name, for "no such field" errors.
pub const NAMES: &str = "frame ts ts_ns caplen len link vlan ip src dst transport sport dport \
    payload_len payload truncated layer_error dns dns_len; dns: id qr opcode rcode flags qdcount \
    ancount nscount arcount qname qtype qclass opcode_code rcode_code qtype_code qclass_code \
    question answer authority additional edns error bytes; methods: copy";

/// The fields of an object (of its packet), as in [`NAMES`].
pub const PACKET_FIELDS: &[&str] = &[
    "frame",
    "ts",
    "ts_ns",
    "caplen",
    "len",
    "link",
    "vlan",
    "ip",
    "src",
    "dst",
    "transport",
    "sport",
    "dport",
    "payload_len",
    "payload",
    "truncated",
    "layer_error",
    "dns",
    "dns_len",
];

/// The fields of an object's DNS part, as in [`NAMES`]. No name is in both lists.
pub const DNS_FIELDS: &[&str] = &[
    "id",
    "qr",
    "opcode",
    "rcode",
    "flags",
    "qdcount",
    "ancount",
    "nscount",
    "arcount",
    "qname",
    "qtype",
    "qclass",
    "opcode_code",
    "rcode_code",
    "qtype_code",
    "qclass_code",
    "question",
    "answer",
    "authority",
    "additional",
    "edns",
    "error",
    "bytes",
];

/// A field named once (by [`resolve`]) and read from many objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldKey {
    /// The name, as [`field`] takes it.
    pub name: &'static [u8],
    /// A field of the DNS part ([`DNS_FIELDS`]) rather than of the object.
    pub dns: bool,
}

/// The field called `name`, whether the object's or its DNS part's (the
/// names differ), or `None` when there is no such field.
pub fn resolve(name: &[u8]) -> Option<FieldKey> {
    let find = |list: &[&'static str], dns| {
        list.iter()
            .find(|n| n.as_bytes() == name)
            .map(|n| FieldKey {
                name: n.as_bytes(),
                dns,
            })
    };
    find(PACKET_FIELDS, false).or_else(|| find(DNS_FIELDS, true))
}

/// One field's value, before it is pushed to Lua.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Field<'a> {
    /// `nil`.
    Nil,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float.
    Num(f64),
    /// A string borrowed from the object or static.
    Str(&'a [u8]),
    /// A string written to the scratch buffer.
    Scratch,
    /// The DNS view of the object.
    Dns,
    /// A table, built by [`table`].
    Table,
    /// Not a field (maybe a method).
    Unknown,
}

fn cow<'a>(text: Cow<'static, str>, scratch: &mut Vec<u8>) -> Field<'a> {
    match text {
        Cow::Borrowed(s) => Field::Str(s.as_bytes()),
        Cow::Owned(s) => {
            scratch.clear();
            scratch.extend_from_slice(s.as_bytes());
            Field::Scratch
        }
    }
}

fn opt<T>(value: Option<T>, f: impl FnOnce(T) -> i64) -> Field<'static> {
    value.map_or(Field::Nil, |v| Field::Int(f(v)))
}

/// The field `key` of `obj` (of its DNS part when `dns`).
pub fn field<'a>(obj: &Object<'a>, dns: bool, key: &[u8], scratch: &mut Vec<u8>) -> Field<'a> {
    match (dns, obj) {
        (true, Object::Dns(m)) => dns_field(m, key, scratch),
        (true, _) => Field::Unknown,
        (false, _) => packet_field(obj, key, scratch),
    }
}

fn packet_field<'a>(obj: &Object<'a>, key: &[u8], scratch: &mut Vec<u8>) -> Field<'a> {
    let Some(p) = obj.packet() else {
        return Field::Unknown;
    };
    let (transport, ports) = match obj {
        Object::Dns(m) => (m.flow.transport, Some((m.flow.sport, m.flow.dport))),
        _ => (
            p.layers.transport,
            matches!(p.layers.transport, Transport::Udp | Transport::Tcp)
                .then_some((p.layers.sport, p.layers.dport)),
        ),
    };
    let addr = |a: Option<std::net::IpAddr>, scratch: &mut Vec<u8>| match a {
        Some(a) => {
            scratch.clear();
            let _ = write!(scratch, "{a}");
            Field::Scratch
        }
        None => Field::Nil,
    };
    match key {
        b"frame" => Field::Int(p.meta.frame as i64),
        b"ts" => p
            .meta
            .ts_ns
            .map_or(Field::Nil, |t| Field::Num(t as f64 / 1e9)),
        b"ts_ns" => opt(p.meta.ts_ns, |t| t),
        b"caplen" => Field::Int(p.data.len() as i64),
        b"len" => Field::Int(i64::from(p.meta.len)),
        b"link" => match p.meta.link.name() {
            Some(n) => Field::Str(n.as_bytes()),
            None => {
                scratch.clear();
                let _ = write!(scratch, "{}", p.meta.link);
                Field::Scratch
            }
        },
        b"vlan" if p.layers.vlan_count > 0 => Field::Table,
        b"vlan" => Field::Nil,
        b"ip" => opt(p.layers.ip_version(), i64::from),
        b"src" => addr(p.src(), scratch),
        b"dst" => addr(p.dst(), scratch),
        b"transport" => transport.name().map_or(Field::Nil, |n| cow(n, scratch)),
        b"sport" => opt(ports, |(s, _)| i64::from(s)),
        b"dport" => opt(ports, |(_, d)| i64::from(d)),
        b"payload_len" => Field::Int(i64::from(p.layers.payload_len)),
        b"payload" => Field::Str(p.payload()),
        b"truncated" => Field::Bool(p.layers.truncated),
        b"layer_error" => p
            .layers
            .error
            .map_or(Field::Nil, |e| Field::Str(e.as_str().as_bytes())),
        b"dns" => match obj {
            Object::Dns(_) => Field::Dns,
            _ => Field::Nil,
        },
        b"dns_len" => match obj {
            Object::Dns(m) => Field::Int(m.bytes.len() as i64),
            _ => Field::Nil,
        },
        _ => Field::Unknown,
    }
}

fn dns_field<'a>(m: &DnsMessage<'a>, key: &[u8], scratch: &mut Vec<u8>) -> Field<'a> {
    let info = m.info();
    let partial = info.header.or(info.partial_header);
    let question = info.question;
    let counts = |f: fn(&dnsluice_core::dns::Header) -> u16| opt(info.header, |h| i64::from(f(&h)));
    match key {
        b"id" => opt(partial, |h| i64::from(h.id)),
        b"qr" => partial.map_or(Field::Nil, |h| Field::Bool(h.qr())),
        b"opcode" => partial.map_or(Field::Nil, |h| cow(mnemonic::opcode(h.opcode()), scratch)),
        b"opcode_code" => opt(partial, |h| i64::from(h.opcode())),
        b"rcode" => partial.map_or(Field::Nil, |_| cow(mnemonic::rcode(info.rcode()), scratch)),
        b"rcode_code" => opt(partial, |_| i64::from(info.rcode())),
        b"flags" => partial.map_or(Field::Nil, |_| Field::Table),
        b"qdcount" => counts(|h| h.qdcount),
        b"ancount" => counts(|h| h.ancount),
        b"nscount" => counts(|h| h.nscount),
        b"arcount" => counts(|h| h.arcount),
        b"qname" => match question {
            Some(q) => {
                scratch.clear();
                match name::write(m.bytes, q.name as usize, scratch) {
                    Ok(_) => Field::Scratch,
                    Err(_) => Field::Nil,
                }
            }
            None => Field::Nil,
        },
        b"qtype" => question.map_or(Field::Nil, |q| cow(mnemonic::rtype(q.qtype), scratch)),
        b"qclass" => question.map_or(Field::Nil, |q| cow(mnemonic::class(q.qclass), scratch)),
        b"qtype_code" => opt(question, |q| i64::from(q.qtype)),
        b"qclass_code" => opt(question, |q| i64::from(q.qclass)),
        b"question" | b"answer" | b"authority" | b"additional" => {
            info.header.map_or(Field::Nil, |_| Field::Table)
        }
        b"edns" => info.edns.map_or(Field::Nil, |_| Field::Table),
        b"error" => info
            .error
            .map_or(Field::Nil, |e| Field::Str(e.as_str().as_bytes())),
        b"bytes" => Field::Str(m.bytes),
        _ => Field::Unknown,
    }
}

/// A scalar field as an mlua value (for owned copies).
pub fn to_value(lua: &Lua, field: Field<'_>, scratch: &[u8]) -> mlua::Result<Value> {
    Ok(match field {
        Field::Nil | Field::Dns | Field::Table | Field::Unknown => Value::Nil,
        Field::Bool(b) => Value::Boolean(b),
        Field::Int(i) => Value::Integer(i as mlua::Integer),
        Field::Num(x) => Value::Number(x),
        Field::Str(s) => Value::String(lua.create_string(s)?),
        Field::Scratch => Value::String(lua.create_string(scratch)?),
    })
}

fn name_value(lua: &Lua, msg: &[u8], at: u32, scratch: &mut Vec<u8>) -> mlua::Result<Value> {
    scratch.clear();
    match name::write(msg, at as usize, scratch) {
        Ok(_) => Ok(Value::String(lua.create_string(&*scratch)?)),
        Err(_) => Ok(Value::Nil),
    }
}

/// Builds the table-valued field `key` (see [`Field::Table`]).
pub fn table(lua: &Lua, obj: &Object<'_>, dns: bool, key: &str) -> mlua::Result<Value> {
    let mut scratch = Vec::new();
    match (dns, obj) {
        (false, _) if key == "vlan" => {
            let vlans = obj.packet().map(|p| p.layers.vlans()).unwrap_or_default();
            Ok(Value::Table(
                lua.create_sequence_from(vlans.iter().copied())?,
            ))
        }
        (true, Object::Dns(m)) => {
            let info = m.info();
            let msg = m.bytes;
            match key {
                "flags" => {
                    let Some(h) = info.header.or(info.partial_header) else {
                        return Ok(Value::Nil);
                    };
                    let t = lua.create_table()?;
                    for (k, v) in [
                        ("aa", h.aa()),
                        ("tc", h.tc()),
                        ("rd", h.rd()),
                        ("ra", h.ra()),
                        ("ad", h.ad()),
                        ("cd", h.cd()),
                    ] {
                        t.set(k, v)?;
                    }
                    Ok(Value::Table(t))
                }
                "question" => {
                    let t = lua.create_table()?;
                    for q in questions(msg) {
                        let e = lua.create_table()?;
                        e.set("name", name_value(lua, msg, q.name, &mut scratch)?)?;
                        e.set("type", mnemonic::rtype(q.qtype).as_ref())?;
                        e.set("class", mnemonic::class(q.qclass).as_ref())?;
                        t.push(e)?;
                    }
                    Ok(Value::Table(t))
                }
                "answer" | "authority" | "additional" => {
                    let section = match key {
                        "answer" => Section::Answer,
                        "authority" => Section::Authority,
                        _ => Section::Additional,
                    };
                    let t = lua.create_table()?;
                    for r in records(msg).filter(|r| r.section == section && r.rtype != TYPE_OPT) {
                        let e = lua.create_table()?;
                        e.set("name", name_value(lua, msg, r.name, &mut scratch)?)?;
                        e.set("type", mnemonic::rtype(r.rtype).as_ref())?;
                        e.set("class", mnemonic::class(r.class).as_ref())?;
                        e.set("ttl", r.ttl)?;
                        scratch.clear();
                        rdata::write(msg, &r, &mut scratch);
                        e.set("data", lua.create_string(&scratch)?)?;
                        t.push(e)?;
                    }
                    Ok(Value::Table(t))
                }
                "edns" => {
                    let Some(edns) = info.edns else {
                        return Ok(Value::Nil);
                    };
                    let t = lua.create_table()?;
                    t.set("version", edns.version)?;
                    t.set("udp_size", edns.udp_size)?;
                    t.set("do", edns.dnssec_ok())?;
                    t.set("ext_rcode", edns.ext_rcode)?;
                    let options = lua.create_table()?;
                    let at = edns.options_at as usize;
                    let data = msg
                        .get(at..at + usize::from(edns.options_len))
                        .unwrap_or_default();
                    for (code, value) in edns_options(data) {
                        let o = lua.create_table()?;
                        o.set("code", code)?;
                        o.set("name", mnemonic::edns_option(code))?;
                        scratch.clear();
                        rdata::push_hex(value, &mut scratch);
                        o.set("data", lua.create_string(&scratch)?)?;
                        options.push(o)?;
                    }
                    t.set("options", options)?;
                    Ok(Value::Table(t))
                }
                _ => Ok(Value::Nil),
            }
        }
        _ => Ok(Value::Nil),
    }
}

/// The (code, value) pairs of EDNS options; stops at one that runs past the end.
fn edns_options(data: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut pos = 0;
    std::iter::from_fn(move || {
        let head = data.get(pos..pos + 4)?;
        let code = u16::from_be_bytes([head[0], head[1]]);
        let size = usize::from(u16::from_be_bytes([head[2], head[3]]));
        let value = data.get(pos + 4..pos + 4 + size)?;
        pos += 4 + size;
        Some((code, value))
    })
}

/// `tostring(obj)`: a one-line description.
pub fn describe(obj: &Object<'_>, dns: bool) -> String {
    let mut scratch = Vec::new();
    let mut text = |key: &[u8]| match field(obj, dns, key, &mut scratch) {
        Field::Str(s) => String::from_utf8_lossy(s).into_owned(),
        Field::Scratch => String::from_utf8_lossy(&scratch).into_owned(),
        Field::Int(i) => i.to_string(),
        _ => "-".to_string(),
    };
    if dns {
        format!(
            "dns id {} {} {} {}",
            text(b"id"),
            text(b"qname"),
            text(b"qtype"),
            text(b"rcode")
        )
    } else {
        format!(
            "object frame {} {} {} -> {}",
            text(b"frame"),
            text(b"transport"),
            text(b"src"),
            text(b"dst")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_lists_match_the_names_and_do_not_overlap() {
        // NAMES is "packet fields; dns: DNS fields; methods: copy" (`dns` is
        // both a field and a heading there).
        let mut listed: Vec<&str> = NAMES
            .split([' ', ';', ':'])
            .filter(|w| !w.is_empty() && !["methods", "copy"].contains(w))
            .collect();
        listed.sort_unstable();
        listed.dedup();
        let mut both: Vec<&str> = PACKET_FIELDS.iter().chain(DNS_FIELDS).copied().collect();
        both.sort_unstable();
        let count = both.len();
        both.dedup();
        assert_eq!(both.len(), count, "a name in both lists");
        assert_eq!(both, listed);
        for name in PACKET_FIELDS {
            assert_eq!(
                resolve(name.as_bytes()).map(|k| k.dns),
                Some(false),
                "{name}"
            );
        }
        for name in DNS_FIELDS {
            assert_eq!(
                resolve(name.as_bytes()).map(|k| k.dns),
                Some(true),
                "{name}"
            );
        }
        assert_eq!(resolve(b"copy"), None);
        assert_eq!(resolve(b"nope"), None);
    }
}

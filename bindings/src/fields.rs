//! The fields of an object view, named as in `output.json`.
//!
//! [`field`] gives a scalar field without allocating: numbers and booleans
//! from the object's [`Record`], strings as slices of the object or of a
//! reused scratch buffer; [`table`] builds the fields that are Lua tables
//! (sections, EDNS options, flags, VLAN ids), on demand.

use crate::record::{self, Record};
use crate::wide::Wide;
use dnsluice_core::dns::{mnemonic, name, questions, rdata, records, Section, TYPE_OPT};
use dnsluice_core::Object;
use mlua::{Lua, Value};
use std::borrow::Cow;
use std::io::Write;

/// Every field name, for "no such field" errors.
pub const NAMES: &str =
    "frame ts ts_ns ts_sec ts_nsec caplen len link vlan ip src dst transport sport dport \
    payload_len payload truncated layer_error dns dns_len; dns: id qr opcode rcode aa tc rd ra ad \
    cd flags qdcount ancount nscount arcount qname qtype qclass opcode_code rcode_code qtype_code \
    qclass_code question answer authority additional edns error bytes; edns: version udp_size do \
    ext_rcode options; methods: copy";

/// The fields of an object (of its packet), as in [`NAMES`].
pub const PACKET_FIELDS: &[&str] = &[
    "frame",
    "ts",
    "ts_ns",
    "ts_sec",
    "ts_nsec",
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

/// The fields of an object's DNS part, as in [`NAMES`].
pub const DNS_FIELDS: &[&str] = &[
    "id",
    "qr",
    "opcode",
    "rcode",
    "aa",
    "tc",
    "rd",
    "ra",
    "ad",
    "cd",
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

/// The fields of a DNS message's EDNS part (`m.edns`), as in [`NAMES`].
pub const EDNS_FIELDS: &[&str] = &["version", "udp_size", "do", "ext_rcode", "options"];

/// Which part of an object a view stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The object (its packet).
    Packet,
    /// Its DNS message (`obj.dns`).
    Dns,
    /// The message's EDNS (`obj.dns.edns`).
    Edns,
}

impl Part {
    /// The list of the part's field names. No name is in two lists.
    pub fn names(self) -> &'static [&'static str] {
        match self {
            Part::Packet => PACKET_FIELDS,
            Part::Dns => DNS_FIELDS,
            Part::Edns => EDNS_FIELDS,
        }
    }
}

/// A field named once (by [`resolve`]) and read from many objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldKey {
    /// The name, as [`field`] takes it.
    pub name: &'static [u8],
    /// The part it belongs to.
    pub part: Part,
}

/// The field called `name`, of whichever part has it (the names differ), or
/// `None` when there is no such field.
pub fn resolve(name: &[u8]) -> Option<FieldKey> {
    [Part::Packet, Part::Dns, Part::Edns]
        .into_iter()
        .find_map(|part| {
            part.names()
                .iter()
                .find(|n| n.as_bytes() == name)
                .map(|n| FieldKey {
                    name: n.as_bytes(),
                    part,
                })
        })
}

/// One field's value, before it is pushed to Lua.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Field<'a> {
    /// `nil`.
    Nil,
    /// A boolean.
    Bool(bool),
    /// An integer that a double holds exactly (32 bits or fewer).
    Int(i64),
    /// A 64-bit integer, handed over exactly in both builds (see [`Wide`]).
    Wide(i64, Wide),
    /// A float.
    Num(f64),
    /// A string borrowed from the object or static.
    Str(&'a [u8]),
    /// A string written to the scratch buffer.
    Scratch,
    /// A view of another part of the object (`dns`, `edns`).
    View(Part),
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

/// `f(record)` as an integer when `record` has all of `bits`, else `nil`.
fn int_if(r: &Record, bits: u32, f: impl FnOnce(&Record) -> i64) -> Field<'static> {
    if r.has(bits) {
        Field::Int(f(r))
    } else {
        Field::Nil
    }
}

/// A flag bit of the header, when the flags are there.
fn flag(r: &Record, mask: u16) -> Field<'static> {
    if r.has(record::HAS_FLAGS) {
        Field::Bool(r.flags & mask != 0)
    } else {
        Field::Nil
    }
}

/// The field `key` of `obj` (of its `part`); `rec` is the object's record.
pub fn field<'a>(
    obj: &Object<'a>,
    rec: &Record,
    part: Part,
    key: &[u8],
    scratch: &mut Vec<u8>,
) -> Field<'a> {
    match (part, obj) {
        (Part::Packet, _) if rec.has(record::HAS_PACKET) => packet_field(obj, rec, key, scratch),
        (Part::Dns, Object::Dns(m)) => dns_field(m, rec, key, scratch),
        (Part::Edns, Object::Dns(_)) if rec.has(record::HAS_EDNS) => edns_field(rec, key),
        _ => Field::Unknown,
    }
}

fn packet_field<'a>(
    obj: &Object<'a>,
    rec: &Record,
    key: &[u8],
    scratch: &mut Vec<u8>,
) -> Field<'a> {
    let addr = |a: Option<std::net::IpAddr>, scratch: &mut Vec<u8>| match a {
        Some(a) => {
            scratch.clear();
            let _ = write!(scratch, "{a}");
            Field::Scratch
        }
        None => Field::Nil,
    };
    let Some(p) = obj.packet() else {
        return Field::Unknown;
    };
    match key {
        b"frame" => Field::Wide(rec.frame, Wide::Fit),
        b"ts" if rec.has(record::HAS_TS) => Field::Num(rec.ts_ns as f64 / 1e9),
        b"ts_ns" if rec.has(record::HAS_TS) => Field::Wide(rec.ts_ns, Wide::Always),
        b"ts_sec" if rec.has(record::HAS_TS) => Field::Int(rec.ts_sec),
        b"ts_nsec" if rec.has(record::HAS_TS) => Field::Int(i64::from(rec.ts_nsec)),
        b"ts" | b"ts_ns" | b"ts_sec" | b"ts_nsec" => Field::Nil,
        b"caplen" => Field::Int(i64::from(rec.caplen)),
        b"len" => Field::Int(i64::from(rec.len)),
        b"link" => match p.meta.link.name() {
            Some(n) => Field::Str(n.as_bytes()),
            None => {
                scratch.clear();
                let _ = write!(scratch, "{}", p.meta.link);
                Field::Scratch
            }
        },
        b"vlan" if rec.has(record::HAS_VLAN) => Field::Table,
        b"vlan" => Field::Nil,
        b"ip" => int_if(rec, record::HAS_IP, |r| i64::from(r.ip)),
        b"src" => addr(p.src(), scratch),
        b"dst" => addr(p.dst(), scratch),
        b"transport" => transport_name(rec.transport).map_or(Field::Nil, |n| cow(n, scratch)),
        b"sport" => int_if(rec, record::HAS_PORTS, |r| i64::from(r.sport)),
        b"dport" => int_if(rec, record::HAS_PORTS, |r| i64::from(r.dport)),
        b"payload_len" => Field::Int(i64::from(rec.payload_len)),
        b"payload" => Field::Str(p.payload()),
        b"truncated" => Field::Bool(rec.has(record::TRUNCATED)),
        b"layer_error" => p
            .layers
            .error
            .map_or(Field::Nil, |e| Field::Str(e.as_str().as_bytes())),
        b"dns" if rec.has(record::IS_DNS) => Field::View(Part::Dns),
        b"dns" => Field::Nil,
        b"dns_len" => int_if(rec, record::IS_DNS, |r| i64::from(r.dns_len)),
        _ => Field::Unknown,
    }
}

/// The name of a [`Record::transport`] code.
pub fn transport_name(code: u16) -> Option<Cow<'static, str>> {
    use dnsluice_core::wire::Transport;
    match code {
        0 => None,
        1 => Transport::Udp.name(),
        2 => Transport::Tcp.name(),
        n => Transport::Other((n - 256) as u8).name(),
    }
}

fn dns_field<'a>(
    m: &dnsluice_core::DnsMessage<'a>,
    rec: &Record,
    key: &[u8],
    scratch: &mut Vec<u8>,
) -> Field<'a> {
    use record::{HAS_FLAGS, HAS_HEADER, HAS_QUESTION};
    let flags = rec.has(HAS_FLAGS);
    let question = rec.has(HAS_QUESTION);
    match key {
        b"id" => int_if(rec, HAS_FLAGS, |r| i64::from(r.id)),
        b"qr" => flag(rec, 0x8000),
        b"aa" => flag(rec, 0x0400),
        b"tc" => flag(rec, 0x0200),
        b"rd" => flag(rec, 0x0100),
        b"ra" => flag(rec, 0x0080),
        b"ad" => flag(rec, 0x0020),
        b"cd" => flag(rec, 0x0010),
        b"opcode" if flags => cow(mnemonic::opcode(opcode(rec)), scratch),
        b"opcode_code" => int_if(rec, HAS_FLAGS, |r| i64::from(opcode(r))),
        b"rcode" if flags => cow(mnemonic::rcode(rec.rcode), scratch),
        b"rcode_code" => int_if(rec, HAS_FLAGS, |r| i64::from(r.rcode)),
        b"flags" if flags => Field::Table,
        b"qdcount" => int_if(rec, HAS_HEADER, |r| i64::from(r.qdcount)),
        b"ancount" => int_if(rec, HAS_HEADER, |r| i64::from(r.ancount)),
        b"nscount" => int_if(rec, HAS_HEADER, |r| i64::from(r.nscount)),
        b"arcount" => int_if(rec, HAS_HEADER, |r| i64::from(r.arcount)),
        b"qname" if question => qname(m, rec, scratch),
        b"qtype" if question => cow(mnemonic::rtype(rec.qtype), scratch),
        b"qclass" if question => cow(mnemonic::class(rec.qclass), scratch),
        b"qtype_code" => int_if(rec, HAS_QUESTION, |r| i64::from(r.qtype)),
        b"qclass_code" => int_if(rec, HAS_QUESTION, |r| i64::from(r.qclass)),
        b"question" | b"answer" | b"authority" | b"additional" if rec.has(HAS_HEADER) => {
            Field::Table
        }
        b"edns" if rec.has(record::HAS_EDNS) => Field::View(Part::Edns),
        b"error" => m
            .info()
            .error
            .map_or(Field::Nil, |e| Field::Str(e.as_str().as_bytes())),
        b"bytes" => Field::Str(m.bytes),
        b"opcode" | b"rcode" | b"flags" | b"qname" | b"qtype" | b"qclass" | b"question"
        | b"answer" | b"authority" | b"additional" | b"edns" => Field::Nil,
        _ => Field::Unknown,
    }
}

/// The `qname` field of a DNS object, as [`field`] gives it, without looking
/// the key up (the LuaJIT views ask for it by number, once per query read).
#[cfg(feature = "luajit")]
pub fn qname_of<'a>(obj: &Object<'a>, rec: &Record, scratch: &mut Vec<u8>) -> Field<'a> {
    match obj {
        Object::Dns(m) if rec.has(record::HAS_QUESTION) => qname(m, rec, scratch),
        Object::Dns(_) => Field::Nil,
        _ => Field::Unknown,
    }
}

/// The first question's name in presentation form, in `scratch`.
fn qname<'a>(m: &dnsluice_core::DnsMessage<'a>, rec: &Record, scratch: &mut Vec<u8>) -> Field<'a> {
    scratch.clear();
    match name::write(m.bytes, rec.qname_at as usize, scratch) {
        Ok(_) => Field::Scratch,
        Err(_) => Field::Nil,
    }
}

fn opcode(r: &Record) -> u8 {
    ((r.flags >> 11) & 0xf) as u8
}

fn edns_field(rec: &Record, key: &[u8]) -> Field<'static> {
    match key {
        b"version" => Field::Int(i64::from(rec.edns_version)),
        b"udp_size" => Field::Int(i64::from(rec.udp_size)),
        b"do" => Field::Bool(rec.edns_do != 0),
        b"ext_rcode" => Field::Int(i64::from(rec.ext_rcode)),
        b"options" => Field::Table,
        _ => Field::Unknown,
    }
}

/// A scalar field as an mlua value (for owned copies).
pub fn to_value(lua: &Lua, field: Field<'_>, scratch: &[u8]) -> mlua::Result<Value> {
    Ok(match field {
        Field::Nil | Field::View(_) | Field::Table | Field::Unknown => Value::Nil,
        Field::Bool(b) => Value::Boolean(b),
        Field::Int(i) => Value::Integer(i as mlua::Integer),
        Field::Wide(i, how) => crate::wide::value(lua, i, how)?,
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

/// Builds the table-valued field `key` of `obj`'s `part` (see [`Field::Table`]).
pub fn table(lua: &Lua, obj: &Object<'_>, part: Part, key: &str) -> mlua::Result<Value> {
    let mut scratch = Vec::new();
    match (part, obj) {
        (Part::Packet, _) if key == "vlan" => {
            let vlans = obj.packet().map(|p| p.layers.vlans()).unwrap_or_default();
            Ok(Value::Table(
                lua.create_sequence_from(vlans.iter().copied())?,
            ))
        }
        (Part::Edns, Object::Dns(m)) if key == "options" => {
            let Some(edns) = m.info().edns else {
                return Ok(Value::Nil);
            };
            let options = lua.create_table()?;
            let at = edns.options_at as usize;
            let data = m
                .bytes
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
            Ok(Value::Table(options))
        }
        (Part::Dns, Object::Dns(m)) => {
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

/// `tostring(obj)`: a one-line description of `obj`'s `part`.
pub fn describe(obj: &Object<'_>, part: Part) -> String {
    let rec = Record::of(obj, 0);
    let mut scratch = Vec::new();
    let mut text = |key: &[u8]| match field(obj, &rec, part, key, &mut scratch) {
        Field::Str(s) => String::from_utf8_lossy(s).into_owned(),
        Field::Scratch => String::from_utf8_lossy(&scratch).into_owned(),
        Field::Int(i) => i.to_string(),
        _ => "-".to_string(),
    };
    if part == Part::Edns {
        format!(
            "edns version {} udp_size {}",
            text(b"version"),
            text(b"udp_size")
        )
    } else if part == Part::Dns {
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
        // NAMES is "packet fields; dns: DNS fields; edns: EDNS fields;
        // methods: copy" (`dns` and `edns` are fields and headings there).
        let mut listed: Vec<&str> = NAMES
            .split([' ', ';', ':'])
            .filter(|w| !w.is_empty() && !["methods", "copy"].contains(w))
            .collect();
        listed.sort_unstable();
        listed.dedup();
        let mut all: Vec<&str> = PACKET_FIELDS
            .iter()
            .chain(DNS_FIELDS)
            .chain(EDNS_FIELDS)
            .copied()
            .collect();
        all.sort_unstable();
        let count = all.len();
        all.dedup();
        assert_eq!(all.len(), count, "a name in two lists");
        assert_eq!(all, listed);
        for part in [Part::Packet, Part::Dns, Part::Edns] {
            for name in part.names() {
                assert_eq!(
                    resolve(name.as_bytes()).map(|k| k.part),
                    Some(part),
                    "{name}"
                );
            }
        }
        assert_eq!(resolve(b"copy"), None);
        assert_eq!(resolve(b"nope"), None);
    }
}

//! `filter.select`: keeps (or, with `invert`, drops) the objects that match
//! every criterion given; a list matches when any of its entries does.
//! DNS criteria (qr, opcode, qtype, qname, rcode) only match DNS messages.
//!
//! ```toml
//! [[stage]]
//! module = "filter.select"
//! qr = "query"                       # "query" or "response"
//! qtype = ["A", "AAAA", "TYPE65"]
//! qname_suffix = ["example.com"]     # label-aligned, case-insensitive
//! rcode = ["NXDOMAIN", "SERVFAIL"]
//! transport = "udp"
//! src = ["192.0.2.0/24", "2001:db8::/32"]
//! ```

use dnsluice_core::dns::{mnemonic, name};
use dnsluice_core::registry::{Factory, ModuleEntry, OptionDoc, StageOptions};
use dnsluice_core::wire::Transport;
use dnsluice_core::{Filter, FilterStage, Object, Producer, Receiver, StageError, StageStats};
use serde::Deserialize;
use std::net::IpAddr;
use std::sync::Arc;

const MODULE: &str = "filter.select";

/// Options of `filter.select`, as written in TOML.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelectOptions {
    /// `"query"` or `"response"`.
    #[serde(default)]
    pub qr: Option<String>,
    /// Opcodes (mnemonics or numbers).
    #[serde(default)]
    pub opcode: Vec<String>,
    /// Query types (mnemonics or `TYPEnnn`).
    #[serde(default)]
    pub qtype: Vec<String>,
    /// Exact query names (case-insensitive).
    #[serde(default)]
    pub qname: Vec<String>,
    /// Query name suffixes, on label boundaries (case-insensitive).
    #[serde(default)]
    pub qname_suffix: Vec<String>,
    /// Response codes (mnemonics or numbers, extended included).
    #[serde(default)]
    pub rcode: Vec<String>,
    /// `"udp"` or `"tcp"`.
    #[serde(default)]
    pub transport: Option<String>,
    /// Source addresses or prefixes.
    #[serde(default)]
    pub src: Vec<String>,
    /// Destination addresses or prefixes.
    #[serde(default)]
    pub dst: Vec<String>,
    /// Addresses or prefixes on either side.
    #[serde(default)]
    pub address: Vec<String>,
    /// Keep what does *not* match instead.
    #[serde(default)]
    pub invert: bool,
}

const OPTIONS: &[OptionDoc] = &[
    OptionDoc {
        name: "qr",
        kind: "string",
        default: "any",
        help: "\"query\" or \"response\"",
    },
    OptionDoc {
        name: "opcode",
        kind: "array",
        default: "any",
        help: "opcodes, e.g. [\"QUERY\", \"NOTIFY\"]",
    },
    OptionDoc {
        name: "qtype",
        kind: "array",
        default: "any",
        help: "query types, e.g. [\"A\", \"AAAA\", \"TYPE65\"]",
    },
    OptionDoc {
        name: "qname",
        kind: "array",
        default: "any",
        help: "exact query names (case-insensitive)",
    },
    OptionDoc {
        name: "qname_suffix",
        kind: "array",
        default: "any",
        help: "query name suffixes on label boundaries (case-insensitive)",
    },
    OptionDoc {
        name: "rcode",
        kind: "array",
        default: "any",
        help: "response codes, e.g. [\"NXDOMAIN\"] (extended codes included)",
    },
    OptionDoc {
        name: "transport",
        kind: "string",
        default: "any",
        help: "\"udp\" or \"tcp\"",
    },
    OptionDoc {
        name: "src",
        kind: "array",
        default: "any",
        help: "source addresses or prefixes, e.g. [\"192.0.2.0/24\"]",
    },
    OptionDoc {
        name: "dst",
        kind: "array",
        default: "any",
        help: "destination addresses or prefixes",
    },
    OptionDoc {
        name: "address",
        kind: "array",
        default: "any",
        help: "addresses or prefixes on either side",
    },
    OptionDoc {
        name: "invert",
        kind: "bool",
        default: "false",
        help: "keep what does not match instead",
    },
];

/// An address prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    address: IpAddr,
    bits: u8,
}

impl Prefix {
    /// Parses `192.0.2.0/24`, `2001:db8::/32` or a bare address.
    pub fn parse(text: &str) -> Option<Prefix> {
        let (address, bits) = match text.split_once('/') {
            Some((a, b)) => (a.parse::<IpAddr>().ok()?, b.parse::<u8>().ok()?),
            None => {
                let a = text.parse::<IpAddr>().ok()?;
                (a, if a.is_ipv4() { 32 } else { 128 })
            }
        };
        let max = if address.is_ipv4() { 32 } else { 128 };
        (bits <= max).then_some(Prefix { address, bits })
    }

    /// Does `other` lie in this prefix?
    pub fn contains(&self, other: IpAddr) -> bool {
        match (self.address, other) {
            (IpAddr::V4(p), IpAddr::V4(a)) => bits_match(&p.octets(), &a.octets(), self.bits),
            (IpAddr::V6(p), IpAddr::V6(a)) => bits_match(&p.octets(), &a.octets(), self.bits),
            _ => false,
        }
    }
}

fn bits_match(prefix: &[u8], address: &[u8], bits: u8) -> bool {
    let whole = usize::from(bits / 8);
    let rest = bits % 8;
    prefix[..whole] == address[..whole]
        && (rest == 0 || (prefix[whole] ^ address[whole]) >> (8 - rest) == 0)
}

/// A name as lower-case labels, from its presentation form as output.json
/// prints it (`\.` is a dot inside a label, `\DDD` a byte, `\X` the character X).
fn labels_of(text: &str) -> Vec<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut labels = vec![Vec::new()];
    let mut i = 0;
    while i < bytes.len() {
        let digits = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(u8::is_ascii_digit));
        let (byte, step) = match (bytes[i], digits) {
            (b'\\', Some(d)) => (std::str::from_utf8(d).ok().and_then(|d| d.parse().ok()), 4),
            (b'\\', None) if i + 1 < bytes.len() => (Some(bytes[i + 1]), 2),
            (b'.', _) => (None, 1),
            (b, _) => (Some(b), 1),
        };
        match byte {
            Some(b) => labels
                .last_mut()
                .expect("never empty")
                .push(b.to_ascii_lowercase()),
            None => labels.push(Vec::new()),
        }
        i += step;
    }
    labels.retain(|l| !l.is_empty());
    labels
}

/// The compiled criteria.
#[derive(Debug, Default)]
pub struct Select {
    qr: Option<bool>,
    opcodes: Vec<u8>,
    qtypes: Vec<u16>,
    qnames: Vec<Vec<Vec<u8>>>,
    suffixes: Vec<Vec<Vec<u8>>>,
    rcodes: Vec<u16>,
    transport: Option<Transport>,
    src: Vec<Prefix>,
    dst: Vec<Prefix>,
    either: Vec<Prefix>,
    invert: bool,
    input: u64,
    kept: u64,
}

fn each<T>(
    key: &str,
    values: &[String],
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Vec<T>, StageError> {
    values
        .iter()
        .map(|v| {
            parse(v).ok_or_else(|| {
                StageError::option(MODULE, Some(key), format!("`{v}` is not a valid {key}"))
            })
        })
        .collect()
}

impl Select {
    /// Compiles the options, naming the key of any value that does not parse.
    pub fn new(o: &SelectOptions) -> Result<Self, StageError> {
        let qr = match o.qr.as_deref() {
            None => None,
            Some("query") => Some(false),
            Some("response") => Some(true),
            Some(other) => {
                return Err(StageError::option(
                    MODULE,
                    Some("qr"),
                    format!("`{other}`: expected \"query\" or \"response\""),
                ))
            }
        };
        let transport = match o.transport.as_deref() {
            None => None,
            Some("udp") => Some(Transport::Udp),
            Some("tcp") => Some(Transport::Tcp),
            Some(other) => {
                return Err(StageError::option(
                    MODULE,
                    Some("transport"),
                    format!("`{other}`: expected \"udp\" or \"tcp\""),
                ))
            }
        };
        Ok(Select {
            qr,
            opcodes: each("opcode", &o.opcode, mnemonic::opcode_from_str)?,
            qtypes: each("qtype", &o.qtype, mnemonic::rtype_from_str)?,
            qnames: o.qname.iter().map(|n| labels_of(n)).collect(),
            suffixes: o.qname_suffix.iter().map(|n| labels_of(n)).collect(),
            rcodes: each("rcode", &o.rcode, mnemonic::rcode_from_str)?,
            transport,
            src: each("src", &o.src, Prefix::parse)?,
            dst: each("dst", &o.dst, Prefix::parse)?,
            either: each("address", &o.address, Prefix::parse)?,
            invert: o.invert,
            ..Default::default()
        })
    }

    fn needs_dns(&self) -> bool {
        self.qr.is_some()
            || !self.opcodes.is_empty()
            || !self.qtypes.is_empty()
            || !self.qnames.is_empty()
            || !self.suffixes.is_empty()
            || !self.rcodes.is_empty()
    }

    /// Does `obj` match every criterion?
    pub fn matches(&self, obj: &Object<'_>) -> bool {
        let Some(packet) = obj.packet() else {
            return false;
        };
        let message = obj.dns();
        let transport = message.map_or(packet.layers.transport, |m| m.flow.transport);
        let (src, dst) = (packet.src(), packet.dst());
        if self.transport.is_some_and(|t| t != transport) {
            return false;
        }
        let within = |prefixes: &[Prefix], address: Option<IpAddr>| {
            prefixes.is_empty() || address.is_some_and(|a| prefixes.iter().any(|p| p.contains(a)))
        };
        if !within(&self.src, src) || !within(&self.dst, dst) {
            return false;
        }
        // (An empty list admits anything, so this only bites when `address` is given.)
        if !(within(&self.either, src) || within(&self.either, dst)) {
            return false;
        }
        if !self.needs_dns() {
            return true;
        }
        let Some(m) = message else { return false };
        let info = m.info();
        let Some(header) = info.header.or(info.partial_header) else {
            return false;
        };
        if self.qr.is_some_and(|qr| qr != header.qr())
            || (!self.opcodes.is_empty() && !self.opcodes.contains(&header.opcode()))
            || (!self.rcodes.is_empty() && !self.rcodes.contains(&info.rcode()))
        {
            return false;
        }
        if self.qtypes.is_empty() && self.qnames.is_empty() && self.suffixes.is_empty() {
            return true;
        }
        let Some(question) = info.question else {
            return false;
        };
        if !self.qtypes.is_empty() && !self.qtypes.contains(&question.qtype) {
            return false;
        }
        if self.qnames.is_empty() && self.suffixes.is_empty() {
            return true;
        }
        // The QNAME's labels, without allocating (a name has at most 127).
        let mut labels: [&[u8]; 128] = [&[]; 128];
        let Ok(count) = name::labels(m.bytes, question.name as usize, &mut labels) else {
            return false;
        };
        let labels = &labels[..count.min(128)];
        let same = |a: &[u8], b: &[u8]| a.eq_ignore_ascii_case(b);
        let exact = self
            .qnames
            .iter()
            .any(|n| n.len() == labels.len() && n.iter().zip(labels).all(|(a, b)| same(a, b)));
        let suffix = self.suffixes.iter().any(|s| {
            s.len() <= labels.len()
                && s.iter()
                    .rev()
                    .zip(labels.iter().rev())
                    .all(|(a, b)| same(a, b))
        });
        exact || suffix
    }
}

impl Filter for Select {
    fn process<R: Receiver + ?Sized>(
        &mut self,
        obj: &mut Object<'_>,
        out: &mut R,
    ) -> Result<(), StageError> {
        self.input += 1;
        if self.matches(obj) != self.invert {
            self.kept += 1;
            out.receive(obj)?;
        }
        Ok(())
    }

    fn stats(&self) -> StageStats {
        let mut stats = StageStats::new(MODULE);
        stats.output = self.kept;
        stats.add_counter("dropped", self.input - self.kept);
        stats
    }
}

/// The registry entry.
pub fn entry() -> ModuleEntry {
    fn build(opts: &StageOptions) -> Result<Select, StageError> {
        Select::new(&opts.parse()?)
    }
    ModuleEntry {
        name: MODULE,
        summary: "keep (or drop) objects by qr, opcode, qtype, qname, rcode, transport, addresses",
        options: OPTIONS,
        factory: Factory::Filter {
            push: Arc::new(|opts, next: Box<dyn Receiver>| {
                Ok(Box::new(FilterStage::new(build(opts)?, next)) as Box<dyn Receiver>)
            }),
            pull: Arc::new(|opts, prev: Box<dyn Producer>| {
                Ok(Box::new(FilterStage::new(build(opts)?, prev)) as Box<dyn Producer>)
            }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes() {
        let p = Prefix::parse("192.0.2.0/24").unwrap();
        assert!(p.contains("192.0.2.77".parse().unwrap()));
        assert!(!p.contains("192.0.3.1".parse().unwrap()));
        assert!(!p.contains("2001:db8::1".parse().unwrap()));
        let p = Prefix::parse("2001:db8::/33").unwrap();
        assert!(p.contains("2001:db8:7fff::1".parse().unwrap()));
        assert!(!p.contains("2001:db8:8000::1".parse().unwrap()));
        assert!(Prefix::parse("10.0.0.1")
            .unwrap()
            .contains("10.0.0.1".parse().unwrap()));
        assert!(Prefix::parse("0.0.0.0/0")
            .unwrap()
            .contains("203.0.113.9".parse().unwrap()));
        assert_eq!(Prefix::parse("10.0.0.0/33"), None);
        assert_eq!(Prefix::parse("nonsense"), None);
    }

    #[test]
    fn names_are_read_as_output_json_prints_them() {
        assert_eq!(
            labels_of("WWW.Example.COM."),
            [b"www".to_vec(), b"example".to_vec(), b"com".to_vec()]
        );
        assert_eq!(
            labels_of("a\\.b.sp\\032ace"),
            [b"a.b".to_vec(), b"sp ace".to_vec()]
        );
        assert_eq!(labels_of("x\\255."), [vec![b'x', 255]]);
        assert!(labels_of(".").is_empty());
    }

    #[test]
    fn bad_values_name_their_key() {
        let o = SelectOptions {
            qtype: vec!["AAAA".into(), "NOPE".into()],
            ..Default::default()
        };
        let e = Select::new(&o).unwrap_err().to_string();
        assert!(e.contains("`qtype`") && e.contains("NOPE"), "{e}");
        let o = SelectOptions {
            qr: Some("answers".into()),
            ..Default::default()
        };
        assert!(Select::new(&o).unwrap_err().to_string().contains("`qr`"));
        let o = SelectOptions {
            src: vec!["1.2.3.4/40".into()],
            ..Default::default()
        };
        assert!(Select::new(&o).unwrap_err().to_string().contains("`src`"));
    }
}

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
use dnsluice_core::registry::{ModuleEntry, Parallel};
use dnsluice_core::wire::Transport;
use dnsluice_core::{FlatMap, Object, Receiver, StageError, StageStats};
use dnsluice_options::{text_option, Choice, Options};
use std::net::IpAddr;

const MODULE: &str = "filter.select";

/// Options of `filter.select`, as written in TOML. Absent criteria match anything.
#[derive(Debug, Default, Options)]
pub struct SelectOptions {
    /// Queries or responses.
    pub qr: Option<QueryOrResponse>,
    /// Opcodes (mnemonics or numbers), e.g. `["QUERY", "NOTIFY"]`.
    #[option(default)]
    pub opcode: Vec<String>,
    /// Query types (mnemonics or `TYPEnnn`), e.g. `["A", "AAAA", "TYPE65"]`.
    #[option(default)]
    pub qtype: Vec<String>,
    /// Exact query names (case-insensitive).
    #[option(default)]
    pub qname: Vec<String>,
    /// Query name suffixes, on label boundaries (case-insensitive).
    #[option(default)]
    pub qname_suffix: Vec<String>,
    /// Response codes (mnemonics or numbers, extended codes included), e.g. `["NXDOMAIN"]`.
    #[option(default)]
    pub rcode: Vec<String>,
    /// The transport the message came over.
    pub transport: Option<SelectTransport>,
    /// Source addresses or prefixes, e.g. `["192.0.2.0/24"]`.
    #[option(default)]
    pub src: Vec<Prefix>,
    /// Destination addresses or prefixes.
    #[option(default)]
    pub dst: Vec<Prefix>,
    /// Addresses or prefixes on either side.
    #[option(default)]
    pub address: Vec<Prefix>,
    /// Keep what does *not* match instead.
    #[option(default)]
    pub invert: bool,
}

/// The `qr` criterion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Choice)]
pub enum QueryOrResponse {
    /// Queries (QR=0).
    Query,
    /// Responses (QR=1).
    Response,
}

/// The `transport` criterion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Choice)]
pub enum SelectTransport {
    /// DNS over UDP.
    Udp,
    /// DNS over TCP.
    Tcp,
}

/// An address prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    address: IpAddr,
    bits: u8,
}

impl std::str::FromStr for Prefix {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        Prefix::parse(text).ok_or_else(|| format!("`{text}` is not an address or prefix"))
    }
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.address, self.bits)
    }
}

text_option!(Prefix, "address or prefix");

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
        let qr = o.qr.map(|qr| qr == QueryOrResponse::Response);
        let transport = o.transport.map(|t| match t {
            SelectTransport::Udp => Transport::Udp,
            SelectTransport::Tcp => Transport::Tcp,
        });
        Ok(Select {
            qr,
            opcodes: each("opcode", &o.opcode, mnemonic::opcode_from_str)?,
            qtypes: each("qtype", &o.qtype, mnemonic::rtype_from_str)?,
            qnames: o.qname.iter().map(|n| labels_of(n)).collect(),
            suffixes: o.qname_suffix.iter().map(|n| labels_of(n)).collect(),
            rcodes: each("rcode", &o.rcode, mnemonic::rcode_from_str)?,
            transport,
            src: o.src.clone(),
            dst: o.dst.clone(),
            either: o.address.clone(),
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

impl FlatMap for Select {
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
    ModuleEntry::flat_map(
        MODULE,
        "keep (or drop) objects by qr, opcode, qtype, qname, rcode, transport, addresses",
        |o: SelectOptions| Select::new(&o),
    )
    .parallel(Parallel::Any)
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

    /// Builds the filter from options written as TOML, as a pipeline does.
    fn select(text: &str) -> Result<Select, StageError> {
        let table: toml::Table = toml::from_str(text).unwrap();
        Select::new(&dnsluice_core::registry::StageOptions::new(MODULE, table).parse()?)
    }

    #[test]
    fn bad_values_name_their_key() {
        let e = select("qtype = [\"AAAA\", \"NOPE\"]")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`qtype`") && e.contains("NOPE"), "{e}");
        assert!(select("qr = \"answers\"")
            .unwrap_err()
            .to_string()
            .contains("`qr`"));
        assert!(select("src = [\"1.2.3.4/40\"]")
            .unwrap_err()
            .to_string()
            .contains("`src`"));
    }
}

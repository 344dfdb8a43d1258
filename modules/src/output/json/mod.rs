//! `output.json`: one JSON object per packet or DNS message (JSON lines), on
//! stdout or to a file.
//!
//! The field names are a public contract: later versions add fields, never
//! rename these: `frame`, `ts`, `caplen`, `len`, `link`, `vlan`, `ip`, `src`,
//! `dst`, `transport`, `sport`, `dport`, `payload_len`, `fragment`,
//! `truncated`, `layer_error`, `l3_protocol`, `llc`; for DNS messages also
//! `dns_len`, `reassembled`, `dns` (see `dns.rs`) and `dns_error`. A client's
//! response (`output.dnscli`) has its own shape (see `response.rs`).

use dnsluice_core::registry::ModuleEntry;
use dnsluice_core::time::write_rfc3339_ns;
use dnsluice_options::Options;
mod dns;
mod response;

use dnsluice_core::wire::{Network, Transport};
use dnsluice_core::{Object, Origin, Packet, Receiver, StageError, StageStats, Text, TextKind};
use std::fs::File;
use std::io::{self, Write};
use std::path::PathBuf;

/// Options of `output.json`.
#[derive(Debug, Options)]
pub struct JsonOptions {
    /// The output file, or `-` for standard output.
    #[option(default = PathBuf::from("-"))]
    pub path: PathBuf,
}

/// Bytes buffered before a write.
const FLUSH_AT: usize = 256 * 1024;

/// Writes JSON lines.
pub struct JsonLines {
    path: PathBuf,
    out: Box<dyn Write>,
    line: Vec<u8>,
    /// Reused for names and RDATA before escaping (no allocation per message).
    scratch: Vec<u8>,
    objects: u64,
}

impl JsonLines {
    /// Writes to `path` (`-` is standard output).
    pub fn create(path: PathBuf) -> Result<Self, StageError> {
        let out: Box<dyn Write> = if path.as_os_str() == "-" {
            Box::new(io::stdout())
        } else {
            Box::new(File::create(&path).map_err(|e| StageError::io(&path, e))?)
        };
        Ok(JsonLines {
            path,
            out,
            line: Vec::with_capacity(FLUSH_AT + 4096),
            scratch: Vec::with_capacity(512),
            objects: 0,
        })
    }

    fn flush_buffer(&mut self) -> Result<(), StageError> {
        let result = self.out.write_all(&self.line);
        self.line.clear();
        result.map_err(|e| StageError::io(&self.path, e))
    }
}

/// Writes `"key":value` pairs, with the commas between them.
pub struct Fields {
    first: bool,
}

impl Fields {
    /// At the start of an object (after its `{`).
    pub fn new() -> Self {
        Fields { first: true }
    }

    /// Writes `,"key":` (no comma before the first key).
    pub fn key(&mut self, out: &mut Vec<u8>, key: &str) {
        if !std::mem::take(&mut self.first) {
            out.push(b',');
        }
        out.push(b'"');
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(b"\":");
    }

    /// A number.
    pub fn num(&mut self, out: &mut Vec<u8>, key: &str, value: u64) {
        self.key(out, key);
        out.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
    }

    /// A string (escaped).
    pub fn string(&mut self, out: &mut Vec<u8>, key: &str, value: &str) {
        self.key(out, key);
        push_json_str(value.as_bytes(), out);
    }

    /// Raw JSON text (`true`, `null`, an object written by the caller).
    pub fn raw(&mut self, out: &mut Vec<u8>, key: &str, value: &str) {
        self.key(out, key);
        out.extend_from_slice(value.as_bytes());
    }
}

impl Default for Fields {
    fn default() -> Self {
        Self::new()
    }
}

/// A record is already one JSON object and is written as it is; a line becomes
/// `{"line":N,"text":"..."}`.
fn write_text(t: &Text<'_>, out: &mut Vec<u8>) {
    match t.kind {
        TextKind::Record => out.extend_from_slice(t.text.as_bytes()),
        TextKind::Line => {
            let mut f = Fields::new();
            out.push(b'{');
            f.num(out, "line", t.number);
            f.string(out, "text", t.text);
            out.push(b'}');
        }
    }
}

/// Appends `text` as a JSON string: quotes, backslashes and control bytes
/// escaped; other bytes as they are (callers pass ASCII or UTF-8).
pub fn push_json_str(text: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in text {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0..=0x1f | 0x7f => {
                let _ = write!(out, "\\u{b:04x}");
            }
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

/// Appends the JSON object for one object: a packet, or a DNS message with
/// the fields of the packet that carried it (without the newline).
/// `scratch` is reused for names and RDATA before they are escaped.
pub fn write_object(obj: &Object<'_>, out: &mut Vec<u8>, scratch: &mut Vec<u8>) {
    if let Object::Text(t) = obj {
        write_text(t, out);
        return;
    }
    let Some(p) = obj.packet() else { return };
    let message = obj.dns();
    let mut f = Fields::new();
    out.push(b'{');
    f.num(out, "frame", p.meta.frame);
    f.key(out, "ts");
    match p.meta.ts_ns {
        Some(ts) => {
            out.push(b'"');
            write_rfc3339_ns(ts, out);
            out.push(b'"');
        }
        None => out.extend_from_slice(b"null"),
    }
    f.num(out, "caplen", p.data.len() as u64);
    f.num(out, "len", u64::from(p.meta.len));
    f.key(out, "link");
    let _ = write!(out, "\"{}\"", p.meta.link);
    let l = &p.layers;
    if l.vlan_count > 0 {
        f.key(out, "vlan");
        out.push(b'[');
        for (i, id) in l.vlans().iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(itoa::Buffer::new().format(*id).as_bytes());
        }
        out.push(b']');
    }
    if l.tunnels > 0 {
        write_tunnels(p, &mut f, out);
    }
    match l.network {
        Network::NonIp(protocol) => f.num(out, "l3_protocol", u64::from(protocol)),
        Network::Llc => f.raw(out, "llc", "true"),
        _ => {}
    }
    if let Some(version) = l.ip_version() {
        f.num(out, "ip", u64::from(version));
        if let (Some(src), Some(dst)) = (p.src(), p.dst()) {
            f.key(out, "src");
            let _ = write!(out, "\"{src}\"");
            f.key(out, "dst");
            let _ = write!(out, "\"{dst}\"");
        }
    }
    // A DNS message's transport is its flow's (for a reassembled datagram the
    // last fragment's own header has no ports).
    let (transport, sport, dport) = match message {
        Some(m) => (m.flow.transport, m.flow.sport, m.flow.dport),
        None => (l.transport, l.sport, l.dport),
    };
    if let Some(name) = transport.name() {
        f.string(out, "transport", &name);
        if matches!(transport, Transport::Udp | Transport::Tcp) {
            f.num(out, "sport", u64::from(sport));
            f.num(out, "dport", u64::from(dport));
        }
        // The carrying packet's payload (a DNS message's own length is `dns_len`).
        f.num(out, "payload_len", u64::from(l.payload_len));
    }
    if let Some(fr) = l.fragment {
        f.key(out, "fragment");
        let _ = write!(
            out,
            "{{\"id\":{},\"offset\":{},\"more\":{},\"protocol\":{},\"atomic\":{}}}",
            fr.id, fr.offset, fr.more, fr.protocol, fr.atomic
        );
    }
    if l.truncated {
        f.raw(out, "truncated", "true");
    }
    if let Some(e) = l.error {
        f.string(out, "layer_error", e.as_str());
    }
    if let Some(m) = message {
        f.num(out, "dns_len", m.bytes.len() as u64);
        match m.origin {
            Origin::TcpReassembled { segments } => {
                f.key(out, "reassembled");
                let _ = write!(out, "{{\"from\":\"tcp\",\"segments\":{segments}}}");
            }
            Origin::IpReassembled { fragments } => {
                f.key(out, "reassembled");
                let _ = write!(out, "{{\"from\":\"ip\",\"fragments\":{fragments}}}");
            }
            _ => {}
        }
        dns::write_dns(m, out, scratch);
    }
    out.push(b'}');
}

/// `"tunnel":[{"type":"gre","src":...,"dst":...,"key":7}, ...]`, outermost first.
fn write_tunnels(p: &Packet<'_>, f: &mut Fields, out: &mut Vec<u8>) {
    f.key(out, "tunnel");
    out.push(b'[');
    for (i, t) in p.tunnels().iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let _ = write!(out, "{{\"type\":\"{}\"", t.kind.as_str());
        if let (Some(src), Some(dst)) = (t.src(p.data), t.dst(p.data)) {
            let _ = write!(out, ",\"src\":\"{src}\",\"dst\":\"{dst}\"");
        }
        if let Some(id) = t.id {
            let _ = write!(out, ",\"{}\":{id}", t.kind.id_name());
        }
        out.push(b'}');
    }
    out.push(b']');
}

impl Receiver for JsonLines {
    fn receive(&mut self, obj: &mut Object<'_>) -> Result<(), StageError> {
        self.objects += 1;
        if let Object::Response(r) = obj {
            response::write_response(r, &mut self.line, &mut self.scratch);
            self.line.push(b'\n');
        } else {
            let start = self.line.len();
            write_object(obj, &mut self.line, &mut self.scratch);
            if self.line.len() > start {
                self.line.push(b'\n');
            }
        }
        if self.line.len() >= FLUSH_AT {
            self.flush_buffer()?;
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<(), StageError> {
        self.flush_buffer()?;
        self.out.flush().map_err(|e| StageError::io(&self.path, e))
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        let mut stats = StageStats::new("output.json");
        stats.input = self.objects;
        stats.output = self.objects;
        out.push(stats);
    }
}

/// The registry entry.
pub fn entry() -> ModuleEntry {
    ModuleEntry::output(
        "output.json",
        "write one JSON object per packet (JSON lines) to stdout or a file",
        |o: JsonOptions| Ok(Box::new(JsonLines::create(o.path)?)),
    )
}

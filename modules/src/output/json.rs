//! `output.json`: one JSON object per packet (JSON lines), on stdout or to a file.
//!
//! The field names are a public contract: later versions add fields, never
//! rename these: `frame`, `ts`, `caplen`, `len`, `link`, `vlan`, `ip`, `src`,
//! `dst`, `transport`, `sport`, `dport`, `payload_len`, `fragment`.

use dnsluice_core::registry::{Factory, ModuleEntry, OptionDoc, StageOptions};
use dnsluice_core::time::write_rfc3339_ns;
use dnsluice_core::wire::Network;
use dnsluice_core::{Object, Packet, Receiver, StageError, StageStats};
use serde::Deserialize;
use std::fs::File;
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::Arc;

/// Options of `output.json`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonOptions {
    /// Where to write: a file, or `-` for standard output.
    #[serde(default = "stdout_path")]
    pub path: PathBuf,
}

fn stdout_path() -> PathBuf {
    PathBuf::from("-")
}

const OPTIONS: &[OptionDoc] = &[OptionDoc {
    name: "path",
    kind: "string",
    default: "\"-\"",
    help: "output file, or \"-\" for standard output",
}];

/// Bytes buffered before a write.
const FLUSH_AT: usize = 256 * 1024;

/// Writes JSON lines.
pub struct JsonLines {
    path: PathBuf,
    out: Box<dyn Write>,
    line: Vec<u8>,
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
            objects: 0,
        })
    }

    fn flush_buffer(&mut self) -> Result<(), StageError> {
        let result = self.out.write_all(&self.line);
        self.line.clear();
        result.map_err(|e| StageError::io(&self.path, e))
    }
}

/// Appends the JSON object for one packet (without the newline).
pub fn write_packet(p: &Packet<'_>, out: &mut Vec<u8>) {
    let mut num = itoa::Buffer::new();
    let mut field = |out: &mut Vec<u8>, name: &str, value: u64| {
        out.extend_from_slice(b",\"");
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"\":");
        out.extend_from_slice(num.format(value).as_bytes());
    };
    out.extend_from_slice(b"{\"frame\":");
    out.extend_from_slice(itoa::Buffer::new().format(p.meta.frame).as_bytes());
    out.extend_from_slice(b",\"ts\":");
    match p.meta.ts_ns {
        Some(ts) => {
            out.push(b'"');
            write_rfc3339_ns(ts, out);
            out.push(b'"');
        }
        None => out.extend_from_slice(b"null"),
    }
    field(out, "caplen", p.data.len() as u64);
    field(out, "len", u64::from(p.meta.len));
    out.extend_from_slice(b",\"link\":\"");
    let _ = write!(out, "{}", p.meta.link);
    out.push(b'"');
    let l = &p.layers;
    if l.vlan_count > 0 {
        out.extend_from_slice(b",\"vlan\":[");
        for (i, id) in l.vlans().iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(itoa::Buffer::new().format(*id).as_bytes());
        }
        out.push(b']');
    }
    match l.network {
        Network::NonIp(protocol) => field(out, "l3_protocol", u64::from(protocol)),
        Network::Llc => out.extend_from_slice(b",\"llc\":true"),
        _ => {}
    }
    if let Some(version) = l.ip_version() {
        field(out, "ip", u64::from(version));
        if let (Some(src), Some(dst)) = (p.src(), p.dst()) {
            let _ = write!(out, ",\"src\":\"{src}\",\"dst\":\"{dst}\"");
        }
    }
    if let Some(name) = l.transport.name() {
        out.extend_from_slice(b",\"transport\":\"");
        out.extend_from_slice(name.as_bytes());
        out.push(b'"');
        if matches!(
            l.transport,
            dnsluice_core::wire::Transport::Udp | dnsluice_core::wire::Transport::Tcp
        ) {
            field(out, "sport", u64::from(l.sport));
            field(out, "dport", u64::from(l.dport));
        }
        field(out, "payload_len", u64::from(l.payload_len));
    }
    if let Some(f) = l.fragment {
        let _ = write!(
            out,
            ",\"fragment\":{{\"id\":{},\"offset\":{},\"more\":{},\"protocol\":{},\"atomic\":{}}}",
            f.id, f.offset, f.more, f.protocol, f.atomic
        );
    }
    if l.truncated {
        out.extend_from_slice(b",\"truncated\":true");
    }
    if let Some(e) = l.error {
        out.extend_from_slice(b",\"layer_error\":\"");
        out.extend_from_slice(e.as_str().as_bytes());
        out.push(b'"');
    }
    out.push(b'}');
}

impl Receiver for JsonLines {
    fn receive(&mut self, obj: &Object<'_>) -> Result<(), StageError> {
        self.objects += 1;
        if let Some(p) = obj.packet() {
            write_packet(p, &mut self.line);
            self.line.push(b'\n');
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
    ModuleEntry {
        name: "output.json",
        summary: "write one JSON object per packet (JSON lines) to stdout or a file",
        options: OPTIONS,
        factory: Factory::Output(Arc::new(|opts: &StageOptions| {
            let o: JsonOptions = opts.parse()?;
            Ok(Box::new(JsonLines::create(o.path)?) as Box<dyn Receiver>)
        })),
    }
}

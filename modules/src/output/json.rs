//! `output.json`: one JSON object per packet or DNS message (JSON lines), on
//! stdout or to a file.
//!
//! The field names are a public contract: later versions add fields, never
//! rename these: `frame`, `ts`, `caplen`, `len`, `link`, `vlan`, `tunnel`, `ip`, `src`,
//! `dst`, `transport`, `sport`, `dport`, `payload_len`, `fragment`,
//! `truncated`, `layer_error`, `l3_protocol`, `llc`; for DNS messages also
//! `dns_len`, `reassembled`, `dns` and `dns_error`. A client's response
//! (`output.dnscli`) has its own shape. The encoding is in [`crate::json`].

use crate::json::{write_object, write_response};
use dnsluice_core::registry::ModuleEntry;
use dnsluice_core::{Object, Receiver, StageError, StageStats};
use dnsluice_options::Options;
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

impl Receiver for JsonLines {
    fn receive(&mut self, obj: &mut Object<'_>) -> Result<(), StageError> {
        self.objects += 1;
        if let Object::Response(r) = obj {
            write_response(r, &mut self.line, &mut self.scratch);
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

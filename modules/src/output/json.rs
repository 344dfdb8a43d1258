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
use dnsluice_core::merge::{self, LaneWriter};
use dnsluice_core::registry::{ModuleEntry, Parallel};
use dnsluice_core::{Object, Receiver, StageError, StageStats};
use dnsluice_options::Options;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Options of `output.json`.
#[derive(Debug, Options)]
pub struct JsonOptions {
    /// The output file, or `-` for standard output.
    #[option(default = PathBuf::from("-"))]
    pub path: PathBuf,
    /// Append to the file instead of replacing it. A last line cut short (a
    /// run killed while writing it) is cut off first, so the file holds
    /// whole lines (`dnsluice lookup --resume`).
    #[option(default)]
    pub append: bool,
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
    /// Bytes of a cut-short last line removed before appending.
    cut_bytes: u64,
    /// In a worker thread of a split: the lane of the threads' shared
    /// stream, written in place object by object (then `out` is unused).
    lane: Option<LaneWriter>,
}

impl JsonLines {
    /// Writes to `path` (`-` is standard output). In a worker thread of a
    /// split, the threads share one stream (see [`dnsluice_core::merge`]).
    pub fn create(path: PathBuf) -> Result<Self, StageError> {
        let open = |path: &Path| -> Result<Box<dyn Write + Send>, StageError> {
            Ok(if path.as_os_str() == "-" {
                Box::new(io::stdout())
            } else {
                Box::new(File::create(path).map_err(|e| StageError::io(path, e))?)
            })
        };
        if let Some(lane) = merge::claim(&path, || open(&path)) {
            return Ok(JsonLines::writing_to(path, Box::new(io::sink()), 0).in_lane(lane?));
        }
        let out = open(&path)?;
        Ok(JsonLines::writing_to(path, out, 0))
    }

    /// Appends to `path` (made when missing), after cutting off a last line
    /// cut short; `-` is standard output.
    pub fn append(path: PathBuf) -> Result<Self, StageError> {
        if path.as_os_str() == "-" {
            return JsonLines::create(path);
        }
        let cut = std::cell::Cell::new(0);
        let open = |path: &Path| -> Result<Box<dyn Write + Send>, StageError> {
            let mut file = File::options()
                .create(true)
                .read(true)
                .append(true)
                .open(path)
                .map_err(|e| StageError::io(path, e))?;
            cut.set(cut_partial_line(&mut file).map_err(|e| StageError::io(path, e))?);
            Ok(Box::new(file))
        };
        if let Some(lane) = merge::claim(&path, || open(&path)) {
            let lane = lane?;
            let lines = JsonLines::writing_to(path, Box::new(io::sink()), cut.get());
            return Ok(lines.in_lane(lane));
        }
        let out = open(&path)?;
        Ok(JsonLines::writing_to(path, out, cut.get()))
    }

    fn writing_to(path: PathBuf, out: Box<dyn Write>, cut_bytes: u64) -> Self {
        JsonLines {
            path,
            out,
            line: Vec::with_capacity(FLUSH_AT + 4096),
            scratch: Vec::with_capacity(512),
            objects: 0,
            cut_bytes,
            lane: None,
        }
    }

    /// Writes into a thread's lane of a shared stream, object by object
    /// (the lane marks where each object's bytes end).
    fn in_lane(mut self, lane: LaneWriter) -> Self {
        self.lane = Some(lane);
        self
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
        if let Some(lane) = &mut self.lane {
            let scratch = &mut self.scratch;
            lane.append(|bytes| write_line(obj, bytes, scratch));
            return Ok(());
        }
        write_line(obj, &mut self.line, &mut self.scratch);
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
        stats.add_counter("cut_bytes", self.cut_bytes);
        out.push(stats);
    }
}

/// Appends `obj`'s line to `out` (nothing for an object without one).
fn write_line(obj: &Object<'_>, out: &mut Vec<u8>, scratch: &mut Vec<u8>) {
    if let Object::Response(r) = obj {
        write_response(r, out, scratch);
        out.push(b'\n');
    } else {
        let start = out.len();
        write_object(obj, out, scratch);
        if out.len() > start {
            out.push(b'\n');
        }
    }
}

/// The registry entry.
pub fn entry() -> ModuleEntry {
    ModuleEntry::output(
        "output.json",
        "write one JSON object per packet (JSON lines) to stdout or a file",
        |o: JsonOptions| {
            Ok(Box::new(if o.append {
                JsonLines::append(o.path)?
            } else {
                JsonLines::create(o.path)?
            }))
        },
    )
    // The threads share one stream (dnsluice_core::merge).
    .parallel(Parallel::Any)
    .costly()
}

/// Cuts the file after its last newline (a line a killed run left cut
/// short); the bytes cut. Reads the file's tail backwards in blocks.
fn cut_partial_line(file: &mut File) -> io::Result<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let total = file.metadata()?.len();
    let mut end = total;
    let mut block = [0u8; 4096];
    while end > 0 {
        let start = end.saturating_sub(block.len() as u64);
        let chunk = &mut block[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(chunk)?;
        if let Some(at) = chunk.iter().rposition(|b| *b == b'\n') {
            let keep = start + at as u64 + 1;
            file.set_len(keep)?;
            return Ok(total - keep);
        }
        end = start;
    }
    file.set_len(0)?;
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appending_cuts_a_last_line_cut_short_first() {
        let dir = testkit::temp_dir("append");
        let path = dir.join("out.jsonl");
        let long = format!("{{\"name\":\"{}\"}}\n", "x".repeat(5000));
        for (before, cut) in [
            (format!("{long}{{\"name\":\"c.exa"), 14),
            (long.clone(), 0),
            ("{\"na".to_string(), 4),
            (format!("{long}{}", "y".repeat(9000)), 9000),
        ] {
            std::fs::write(&path, &before).unwrap();
            let mut out = JsonLines::append(path.clone()).unwrap();
            assert_eq!(out.cut_bytes, cut);
            let kept = &before[..before.len() - cut as usize];
            out.out.write_all(b"{\"name\":\"new\"}\n").unwrap();
            out.finish().unwrap();
            let after = std::fs::read_to_string(&path).unwrap();
            assert_eq!(after, format!("{kept}{{\"name\":\"new\"}}\n"));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! `input.mmpcap`: reads a pcap/pcapng file through a memory map. Packets are
//! views into the map: no copy, no syscall per packet.

use super::{CaptureReader, RecordSource};
use dnsluice_core::registry::{Factory, ModuleEntry, OptionDoc, StageOptions};
use dnsluice_core::{Producer, StageError};
use memmap2::{Advice, Mmap};
use serde::Deserialize;
use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// Options of `input.mmpcap`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MmpcapOptions {
    /// The capture file.
    pub path: PathBuf,
}

const OPTIONS: &[OptionDoc] = &[OptionDoc {
    name: "path",
    kind: "string",
    default: "",
    help: "capture file (pcap or pcapng) to map into memory",
}];

/// The registry entry.
pub fn entry() -> ModuleEntry {
    ModuleEntry {
        name: "input.mmpcap",
        summary: "read a pcap/pcapng file through mmap (fastest; zero-copy)",
        options: OPTIONS,
        factory: Factory::Input(Arc::new(|opts: &StageOptions| {
            let o: MmpcapOptions = opts.parse()?;
            Ok(Box::new(open(o.path)?) as Box<dyn Producer>)
        })),
    }
}

/// A memory-mapped file as a [`RecordSource`].
pub struct MappedFile {
    map: Option<Mmap>,
    position: usize,
}

impl RecordSource for MappedFile {
    fn window(&self) -> &[u8] {
        self.map.as_deref().map(|m| &m[self.position..]).unwrap_or_default()
    }
    fn consume(&mut self, n: usize) {
        self.position += n;
    }
    fn fill(&mut self, _needed: usize) -> io::Result<bool> {
        Ok(false)
    }
    fn offset(&self) -> u64 {
        self.position as u64
    }
}

/// Opens `path` for reading through a memory map.
pub fn open(path: PathBuf) -> Result<CaptureReader<MappedFile>, StageError> {
    let file = File::open(&path).map_err(|e| StageError::io(&path, e))?;
    let size = file.metadata().map_err(|e| StageError::io(&path, e))?.len();
    let map = if size == 0 {
        None
    } else {
        // SAFETY: the map is read-only and every byte is treated as untrusted
        // input (all reads are bounds-checked). The one hazard of mapping a file,
        // another process truncating it while we read, is the same as for any
        // mmap-based reader (dnsjit's included) and is documented in the README.
        #[allow(unsafe_code)]
        let map = unsafe { Mmap::map(&file) }.map_err(|e| StageError::io(&path, e))?;
        // Advice is a hint; a kernel that refuses it changes nothing.
        let _ = map.advise(Advice::Sequential);
        Some(map)
    };
    CaptureReader::new("input.mmpcap", path, MappedFile { map, position: 0 })
}

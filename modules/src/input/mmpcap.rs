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
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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

/// How far ahead of the current record the map is prefetched, in bytes.
pub const READ_AHEAD: usize = 4096;
/// The map's pages are set up (`MADV_POPULATE_READ`) this many bytes at a time.
const POPULATE_CHUNK: usize = 8 << 20;
/// How far the page-table thread may run ahead of the walk: far enough
/// never to be caught, near enough that on a file larger than memory the
/// pages it brings in are still there when the walk gets to them.
const POPULATE_LEAD: usize = 256 << 20;

/// A memory-mapped file as a [`RecordSource`].
pub struct MappedFile {
    map: Arc<Mmap>,
    position: usize,
    /// The walk tells the page-table thread where it is when it gets here.
    report_at: usize,
    populator: Populator,
}

impl MappedFile {
    /// Tells the page-table thread where the walk is (once per chunk).
    #[cold]
    #[inline(never)]
    fn report_position(&mut self) {
        self.populator
            .walked
            .store(self.position, Ordering::Relaxed);
        self.report_at = self.position + POPULATE_CHUNK;
    }
}

impl RecordSource for MappedFile {
    fn window(&self) -> &[u8] {
        self.map.get(self.position..).unwrap_or_default()
    }
    #[inline]
    fn consume(&mut self, n: usize) {
        self.position += n;
        // Prefetch the map a little ahead of the walk. Each record header's
        // address depends on the previous record's length, so without this every
        // new cache line is a stall; a prefetch ahead lets the CPU fetch them
        // while we parse (measured: ~1.7x on the record walk alone). Two lines
        // per record: a record is about as long as a line and a half, so one
        // prefetch per record left every third line to a stall.
        if let Some(ahead) = self.map.get(self.position + READ_AHEAD..) {
            prefetch(ahead);
            prefetch(ahead.get(64..).unwrap_or_default());
        }
        if self.position >= self.report_at {
            self.report_position();
        }
    }
    fn fill(&mut self, _needed: usize) -> io::Result<bool> {
        Ok(false)
    }
    fn offset(&self) -> u64 {
        self.position as u64
    }
}

/// A thread that sets up the map's page tables (`MADV_POPULATE_READ`, a
/// chunk at a time) ahead of the walk. Done by the walking thread itself, this
/// kernel work was a fifth of the time of a chain that parses DNS (a page
/// fault per 64 KiB, or one call per chunk); on a thread of its own it
/// overlaps the walk. On a kernel without MADV_POPULATE_READ (before Linux
/// 5.14) the thread stops at once and pages fault in as usual.
struct Populator {
    /// Where the walk is (updated once per chunk).
    walked: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Populator {
    fn start(map: Arc<Mmap>) -> Populator {
        let walked = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (w, s) = (walked.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("mmpcap-pages".into())
            .spawn(move || populate(&map, &w, &s))
            .ok(); // No thread: pages fault in as the walk reaches them.
        Populator {
            walked,
            stop,
            thread,
        }
    }
}

/// The page-table thread's loop.
fn populate(map: &Mmap, walked: &AtomicUsize, stop: &AtomicBool) {
    let mut at = 0;
    while at < map.len() && !stop.load(Ordering::Relaxed) {
        if at > walked.load(Ordering::Relaxed) + POPULATE_LEAD {
            std::thread::sleep(std::time::Duration::from_millis(1));
            continue;
        }
        let len = POPULATE_CHUNK.min(map.len() - at);
        if map.advise_range(Advice::PopulateRead, at, len).is_err() {
            return;
        }
        at += len;
    }
}

impl Drop for Populator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Asks the CPU to bring the cache line at the start of `bytes` in (a hint;
/// nothing on targets other than x86_64). Public for `benches/floor.rs`,
/// which walks a map the same way.
#[inline(always)]
pub fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults and has no effect on
    // memory; the pointer comes from a live slice anyway. SSE is part of the
    // x86_64 baseline, so the target feature is always present.
    #[allow(unsafe_code)]
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(bytes.as_ptr().cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// Opens `path` for reading through a memory map.
pub fn open(path: PathBuf) -> Result<CaptureReader<MappedFile>, StageError> {
    let file = File::open(&path).map_err(|e| StageError::io(&path, e))?;
    let metadata = file.metadata().map_err(|e| StageError::io(&path, e))?;
    if metadata.is_dir() {
        return Err(StageError::format(
            &path,
            "is a directory, not a capture file",
        ));
    }
    let size = metadata.len();
    if size == 0 {
        return Err(StageError::format(
            &path,
            "empty file: not a pcap or pcapng capture",
        ));
    }
    // SAFETY: the map is read-only and every byte is treated as untrusted
    // input (all reads are bounds-checked). The one hazard of mapping a file,
    // another process truncating it while we read, is the same as for any
    // mmap-based reader (dnsjit's included) and is documented in the README.
    #[allow(unsafe_code)]
    let map = unsafe { Mmap::map(&file) }.map_err(|e| StageError::io(&path, e))?;
    // Advice is a hint; a kernel that refuses it changes nothing.
    let _ = map.advise(Advice::Sequential);
    let map = Arc::new(map);
    let source = MappedFile {
        map: map.clone(),
        position: 0,
        report_at: POPULATE_CHUNK,
        populator: Populator::start(map),
    };
    CaptureReader::new("input.mmpcap", path, source)
}

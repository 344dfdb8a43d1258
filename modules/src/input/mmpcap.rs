//! `input.mmpcap`: reads a pcap/pcapng file through a memory map. Packets are
//! views into the map: no copy, no syscall per packet. A compressed capture
//! (zstd, lz4, gzip, xz) is decompressed from the map on a thread of its
//! own, and its packets are views into the decompressed buffer.

use super::decompress::{DecoderAt, Decompressed};
use super::reader::ReadElsewhere;
use super::CaptureReader;
use crate::format::compression::Compression;
use crate::format::stream::{BufferedStream, RecordSource};
use dnsluice_core::registry::{ModuleEntry, Parallel};
use dnsluice_core::{InputParts, Producer, StageError};
use dnsluice_options::Options;
use memmap2::{Advice, Mmap};
use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

mod helper;
pub mod parts;
use helper::Helper;
use parts::MappedParts;

/// Options of `input.mmpcap`.
#[derive(Debug, Options)]
pub struct MmpcapOptions {
    /// The capture file (pcap or pcapng, plain or compressed with zstd, lz4,
    /// gzip or xz) to map into memory; `-` (standard input) and pipes
    /// (`<(zstdcat f)`), which cannot be mapped, are read with buffered
    /// reads instead, with a note.
    pub path: PathBuf,
    /// Run a helper thread that maps the file's pages ahead of the walk and
    /// releases what the walk is done with (false: one thread).
    #[option(default = true)]
    pub helper: bool,
    /// When a split's threads read the capture in parts (`threads = N`, a
    /// file not compressed), about this many KiB of records a part: each thread
    /// walks a part's record headers, then runs its packets.
    #[option(default = DEFAULT_PART_KIB, range = 1..=(1 << 20))]
    pub part_kib: u32,
}

/// The registry entry.
pub fn entry() -> ModuleEntry {
    ModuleEntry::input(
        "input.mmpcap",
        "read a pcap/pcapng file through mmap (fastest; zero-copy)",
        |o: MmpcapOptions| {
            if let Some(what) = unmappable(&o.path) {
                let chunk = super::fpcap::DEFAULT_BUFFER_KIB * 1024;
                let mut reader = super::fpcap::open_as("input.mmpcap", o.path, chunk, true)?;
                reader.note(format!(
                    "input.mmpcap: {what} cannot be memory-mapped: read with buffered reads (as input.fpcap does)"
                ));
                return Ok(Box::new(reader));
            }
            open_any(o.path, o.helper, o.part_kib as usize * 1024)
        },
    )
    // A file: the stages after it may run in threads (`threads = auto`).
    .parallel(Parallel::Any)
}

/// What `path` is when it is no file that can be mapped: standard input
/// (`-`), or a pipe, a socket or a device (`<(zstdcat f)`, a FIFO), which
/// are read as a stream instead. (A file that cannot be opened is left to
/// the map's own error.)
fn unmappable(path: &std::path::Path) -> Option<String> {
    if path.as_os_str() == "-" {
        return Some("standard input".into());
    }
    let metadata = std::fs::metadata(path).ok()?;
    (!metadata.is_file() && !metadata.is_dir())
        .then(|| format!("{} is not a regular file (a pipe?): it", path.display()))
}

/// Read in parts, about how many KiB of records a part holds: a few
/// thousand DNS packets, a millisecond or two of a thread's work, small
/// enough to stay in the core's cache between the walk and the reading.
pub const DEFAULT_PART_KIB: u32 = 512;

/// How far ahead of the current record the map is prefetched, in bytes.
pub const READ_AHEAD: usize = 2048;
/// Without a helper, the walk sets up page tables itself this many bytes at
/// a time (`MADV_POPULATE_READ`): one call per chunk instead of a page fault
/// per 64 KiB.
const POPULATE_CHUNK: usize = 8 << 20;

/// A memory-mapped file as a [`RecordSource`].
pub struct MappedFile {
    map: Arc<Mmap>,
    position: usize,
    /// When the walk gets here, it tells the helper where it is, or (without
    /// one) sets up the next chunk's page tables.
    report_at: usize,
    /// Without a helper: page tables are set up below here.
    populated: usize,
    /// About how many bytes of records a part holds, read in parts.
    part_bytes: usize,
    helper: Option<Helper>,
}

impl MappedFile {
    /// Tells the helper where the walk is (every [`helper::REPORT_EVERY`]
    /// bytes), or, without one, sets up the page tables of the next chunk
    /// once the walk is half way into the current one. (A kernel without
    /// MADV_POPULATE_READ, before Linux 5.14, refuses it; pages then fault
    /// in as usual.) Out of line: it runs once per many records, and its
    /// system call would cost the per-record path registers.
    #[cold]
    #[inline(never)]
    fn report_position(&mut self) {
        if let Some(helper) = &self.helper {
            helper.tell(self.position);
            self.report_at = self.position + helper::REPORT_EVERY;
            return;
        }
        let len = POPULATE_CHUNK.min(self.map.len() - self.populated);
        let _ = self
            .map
            .advise_range(Advice::PopulateRead, self.populated, len);
        self.populated += len;
        self.report_at = if self.populated < self.map.len() {
            self.populated - len / 2
        } else {
            usize::MAX
        };
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
        prefetch(&self.map, self.position + READ_AHEAD);
        prefetch(&self.map, self.position + READ_AHEAD + 64);
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
    fn total(&self) -> Option<u64> {
        Some(self.map.len() as u64)
    }
}

/// Asks the CPU to bring in the cache line of `bytes[at]` (a hint; nothing
/// on targets other than x86_64). `at` may lie past the end of `bytes`: the
/// address is only computed, never read, so the walks ask for the lines
/// ahead of them without a bounds check (two compares and selects a
/// record each, 8 instructions a packet on `dns-parse`, the ninth
/// session's section of `docs/benchmarks.md`). Public for
/// `benches/floor.rs`, which walks a map on one thread, prefetching one
/// line per record.
#[inline(always)]
pub fn prefetch(bytes: &[u8], at: usize) {
    let line = bytes.as_ptr().wrapping_add(at);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults, whatever the address
    // (one no page maps is dropped), and has no effect on memory. SSE is part
    // of the x86_64 baseline, so the target feature is always present.
    #[allow(unsafe_code)]
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(line.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = line;
}

/// Opens `path` through a memory map: a plain capture as [`open_with`]
/// does, a compressed one decompressed from the map on a thread of its own.
pub fn open_any(
    path: PathBuf,
    helper: bool,
    part_bytes: usize,
) -> Result<Box<dyn Producer>, StageError> {
    let map = map_file(&path)?;
    let compression = Compression::detect(&map);
    if compression == Compression::None {
        let mut reader = walk_map(path, map, helper)?;
        reader.source_mut().part_bytes = part_bytes;
        reader.readable_in_parts(hand_over_parts);
        return Ok(Box::new(reader));
    }
    let bytes = MapBytes { map, at: 0 };
    // A map's bytes are always there: the decoder's thread is waited for.
    let at = DecoderAt::choose(super::decoder_thread::decoder_gets_a_thread(), true);
    let decoder =
        Decompressed::new(compression, bytes, at).map_err(|e| StageError::io(&path, e))?;
    let cut_off = Some(decoder.cut_off());
    let stream = BufferedStream::new(Box::new(decoder), 1 << 20)
        .shared()
        .decompressed_from(compression, cut_off);
    Ok(Box::new(CaptureReader::new("input.mmpcap", path, stream)?))
}

/// Hands a mapped capture (pcap or pcapng) that has read nothing yet over to be
/// read in parts by a split's threads ([`MappedParts`]; see
/// `Producer::parts`): the walk is then at the end of the map, and the
/// reader only waits and says how far the parts' reading has got.
fn hand_over_parts(
    reader: &mut CaptureReader<MappedFile>,
) -> Option<(Arc<dyn ReadElsewhere>, InputParts)> {
    let (format, path, source) = reader.format_at_start()?;
    let parts = Arc::new(MappedParts::new(
        path.to_path_buf(),
        source.map.clone(),
        format,
        source.position,
        source.part_bytes,
        source.helper.take(),
    ));
    source.position = source.map.len();
    source.report_at = usize::MAX;
    Some((parts.clone(), Box::new(parts)))
}

/// A map read as a stream, for a decoder: [`BufRead::fill_buf`] hands out
/// the rest of the map, so the compressed bytes are not copied.
struct MapBytes {
    map: Arc<Mmap>,
    at: usize,
}

impl io::Read for MapBytes {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let rest = &self.map[self.at..];
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.at += n;
        Ok(n)
    }
}

impl io::BufRead for MapBytes {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        Ok(&self.map[self.at..])
    }
    fn consume(&mut self, n: usize) {
        self.at = (self.at + n).min(self.map.len());
    }
}

/// Opens `path` for reading through a memory map, with the helper thread.
pub fn open(path: PathBuf) -> Result<CaptureReader<MappedFile>, StageError> {
    open_with(path, true)
}

/// Opens `path` for reading through a memory map. With `helper`, a second
/// thread keeps the map ready ahead of the walk (pages faulted in) and
/// drops the page tables behind it; without, the walk sets
/// up page tables itself, a chunk at a time.
pub fn open_with(path: PathBuf, helper: bool) -> Result<CaptureReader<MappedFile>, StageError> {
    let map = map_file(&path)?;
    walk_map(path, map, helper)
}

/// Maps `path` (read-only, sequential advice).
fn map_file(path: &std::path::Path) -> Result<Arc<Mmap>, StageError> {
    let file = File::open(path).map_err(|e| StageError::io(path, e))?;
    let metadata = file.metadata().map_err(|e| StageError::io(path, e))?;
    if metadata.is_dir() {
        return Err(StageError::format(
            path,
            "is a directory, not a capture file",
        ));
    }
    let size = metadata.len();
    if size == 0 {
        return Err(StageError::format(
            path,
            "empty file: not a pcap or pcapng capture",
        ));
    }
    // SAFETY: the map is read-only and every byte is treated as untrusted
    // input (all reads are bounds-checked). The one hazard of mapping a file,
    // another process truncating it while we read, is the same as for any
    // mmap-based reader (dnsjit's included) and is documented in the README.
    #[allow(unsafe_code)]
    let map = unsafe { Mmap::map(&file) }.map_err(|e| StageError::io(path, e))?;
    // Advice is a hint; a kernel that refuses it changes nothing.
    let _ = map.advise(Advice::Sequential);
    Ok(Arc::new(map))
}

/// Walks the records of a mapped plain capture.
fn walk_map(
    path: PathBuf,
    map: Arc<Mmap>,
    helper: bool,
) -> Result<CaptureReader<MappedFile>, StageError> {
    // Its packets' bytes may cross to other threads by reference.
    let shared: dnsluice_core::shared::SharedBytes = map.clone();
    dnsluice_core::shared::publish(&shared);
    let helper = if helper {
        Helper::start(map.clone())
    } else {
        None
    };
    let source = MappedFile {
        map,
        position: 0,
        report_at: 0,
        populated: 0,
        part_bytes: DEFAULT_PART_KIB as usize * 1024,
        helper,
    };
    CaptureReader::new("input.mmpcap", path, source)
}

//! `input.fpcap`: reads a pcap/pcapng file or standard input (`path = "-"`)
//! with large buffered reads, so `tcpdump -w - | dnsluice run ...` works.
//! A file or stream compressed with zstd, lz4, gzip or xz is decompressed
//! on the way (told from its first bytes: [`super::decompress`]).

use super::decompress::{decompressed, DecoderAt};
use super::until_stop;
use super::CaptureReader;
use crate::format::compression::Compression;
use crate::format::stream::BufferedStream;
use dnsluice_core::registry::{ModuleEntry, Parallel};
use dnsluice_core::StageError;
use dnsluice_options::Options;
use std::path::PathBuf;

/// Options of `input.fpcap`.
#[derive(Debug, Options)]
pub struct FpcapOptions {
    /// The capture file (pcap or pcapng, plain or compressed with zstd,
    /// lz4, gzip or xz), or `-` for standard input.
    pub path: PathBuf,
    /// The size of each read, in KiB (at most 1 GiB).
    #[option(default = DEFAULT_BUFFER_KIB, range = 1..=(1 << 20))]
    pub buffer_kib: usize,
    /// Decompress a compressed capture on a thread of its own when the
    /// machine has a core for it (not when `--jobs` already fills the cores);
    /// false: always on the reading thread.
    #[option(default = true)]
    pub decompress_thread: bool,
}

/// The default size of each read, in KiB.
pub const DEFAULT_BUFFER_KIB: usize = 1024;

/// The registry entry.
pub fn entry() -> ModuleEntry {
    ModuleEntry::input(
        "input.fpcap",
        "read a pcap/pcapng file or stdin with buffered reads",
        |o: FpcapOptions| {
            Ok(Box::new(open_with(
                o.path,
                o.buffer_kib * 1024,
                o.decompress_thread,
            )?))
        },
    )
    // A file: the stages after it may run in threads (`threads = auto`).
    .parallel(Parallel::Any)
}

/// Opens `path` (or stdin for `-`) for buffered reading in chunks of `chunk`
/// bytes, decompressing on a thread of its own.
pub fn open(path: PathBuf, chunk: usize) -> Result<CaptureReader<BufferedStream>, StageError> {
    open_with(path, chunk, true)
}

/// Opens `path` (or stdin for `-`) for buffered reading in chunks of `chunk`
/// bytes; a compressed capture is decompressed, on its own thread with
/// `decompress_thread`.
pub fn open_with(
    path: PathBuf,
    chunk: usize,
    decompress_thread: bool,
) -> Result<CaptureReader<BufferedStream>, StageError> {
    open_as("input.fpcap", path, chunk, decompress_thread)
}

/// [`open_with`] for the module named `module` (`input.mmpcap` reads stdin this way).
pub fn open_as(
    module: &'static str,
    path: PathBuf,
    chunk: usize,
    decompress_thread: bool,
) -> Result<CaptureReader<BufferedStream>, StageError> {
    // The reader, and the size of a regular file (whose reads always return).
    let source = until_stop::open(&path).map_err(|e| StageError::io(&path, e))?;
    let metadata = source.metadata.as_ref().ok();
    if metadata.is_some_and(|m| m.is_dir()) {
        return Err(StageError::format(
            &path,
            "is a directory, not a capture file",
        ));
    }
    // The size of a regular file (whose reads always return).
    let total = metadata.filter(|m| m.is_file()).map(|m| m.len());
    let reader = source.reader;
    let thread = decompress_thread && super::decoder_thread::decoder_gets_a_thread();
    let at = DecoderAt::choose(thread, total.is_some());
    let opened = decompressed(reader, at).map_err(|e| StageError::io(&path, e))?;
    // A compressed file's size says nothing of how long its plain stream is.
    let total = total.filter(|_| opened.compression == Compression::None);
    let stream = BufferedStream::new(opened.reader, chunk)
        .shared()
        .decompressed_from(opened.compression, opened.cut_off)
        .with_total(total);
    CaptureReader::new(module, path, stream)
}

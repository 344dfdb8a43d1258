//! Compressed captures for every input: the compression is told from the
//! stream's first bytes ([`Compression::detect`]), and [`decompressed`]
//! wraps the stream in its decoder, on a thread of its own when a core is
//! free for it ([`super::decoder_thread`]), so
//! the record walk ([`super::CaptureReader`]) sees plain pcap or pcapng.
//!
//! The decoders (docs/operators.md says why these, docs/benchmarks.md
//! measures the zstd and lz4 ones):
//! `zstd` (libzstd, C), `lz4_flex` (pure Rust, LZ4 frame format; frames
//! one after another and cut-off streams told by [`super::lz4_frames`]),
//! `flate2` on the `zlib-rs` backend (pure Rust; gzip, several members
//! read as one stream as `gzip -d` does) and `liblzma` (C; xz, several
//! streams too).
//!
//! A decoder on a thread of its own is waited for when the stream ends
//! (it has sent its last chunk, so it is ending), which makes its
//! processor-time note ([`crate::cpu`]) part of the run's summary every
//! time. A reader dropped before the end (the chain stopped early) waits
//! for it too when the source is a regular file, whose reads always
//! return: the thread stops at its next chunk. Reading a pipe, it is left
//! to stop on its own, since a read of a pipe may never return
//! ([`DecoderAt`]).
//!
//! A stream that ends inside a frame is a truncated file: the data ends
//! there, with a note ([`Decompressed::cut_off`]) that the walk turns into a
//! warning naming the file and how far it got. Any other decoder error
//! (bad checksum, bad block) is an error that says the stream is corrupt.

use crate::format::compression::{Compression, CutOff, MAGIC_LEN};
use dnsluice_core::sync;
use std::io::{self, BufRead, BufReader, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Decompressed bytes handed from the decoding thread at a time.
const CHUNK: usize = 1 << 20;
/// Chunks in flight between the threads (the decoder runs this far ahead).
const CHUNKS_AHEAD: usize = 4;

/// Decompressed bytes asked of a decoder in one call, at most. A decoder
/// that meets corrupt data returns an error for the whole call and drops
/// what it had decoded in it: asked for a megabyte at a time, a corrupt
/// block lost up to a megabyte of good records before it; asked this much,
/// at most this much (the zstd tool, which writes as it decodes, keeps
/// all). Some 32,000 calls for 2 GB of capture, next to nothing.
const DECODE_PIECE: usize = 64 << 10;

/// A decoder asked at most [`DECODE_PIECE`] bytes a call.
struct InPieces<D>(D);

impl<D: Read> Read for InPieces<D> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let piece = buf.len().min(DECODE_PIECE);
        self.0.read(&mut buf[..piece])
    }
}

/// A compressed stream as plain bytes: [`Read`] gives the decompressed
/// data; at its end, [`Decompressed::cut_off`] says whether the stream was
/// cut off inside a frame.
pub struct Decompressed {
    compression: Compression,
    inner: Inner,
    /// Compressed bytes the decoder has read.
    compressed_read: Arc<AtomicU64>,
    /// Decompressed bytes handed out.
    decompressed: u64,
    /// Set when the stream ended inside a frame.
    cut_off: CutOff,
}

enum Inner {
    /// Decoding on the reading thread.
    Here(Box<dyn Read + Send>),
    /// Decoding on a thread of its own.
    Thread(ThreadReader),
}

/// Where a compressed stream's decoder runs ([`decompressed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecoderAt {
    /// On the thread that reads the stream.
    Reader,
    /// On a thread of its own. `source_ends`: the source is a regular file,
    /// whose reads always return, so a reader dropped before the end waits
    /// for the thread to stop; else (a pipe, a terminal) the thread is left
    /// to stop on its own at its next chunk.
    OwnThread {
        /// The source is a regular file.
        source_ends: bool,
    },
}

impl DecoderAt {
    /// On a thread of its own when `thread`, reading a regular file when
    /// `source_ends`.
    pub fn choose(thread: bool, source_ends: bool) -> DecoderAt {
        match thread {
            true => DecoderAt::OwnThread { source_ends },
            false => DecoderAt::Reader,
        }
    }
}

/// A stream opened by [`decompressed`].
pub struct Opened {
    /// The plain bytes.
    pub reader: Box<dyn Read + Send>,
    /// What the stream was compressed with.
    pub compression: Compression,
    /// The decoder's note of a truncated stream (`None` when not compressed).
    pub cut_off: Option<CutOff>,
}

/// Peeks at the start of `source` and, when it is compressed, returns the
/// decoder over it (running where `at` says); a stream that is not
/// compressed comes back as it was (with the peeked bytes in front).
pub fn decompressed(mut source: Box<dyn Read + Send>, at: DecoderAt) -> io::Result<Opened> {
    let mut head = Vec::with_capacity(MAGIC_LEN);
    while head.len() < MAGIC_LEN {
        let mut byte = [0u8; MAGIC_LEN];
        let want = MAGIC_LEN - head.len();
        match source.read(&mut byte[..want]) {
            Ok(0) => break,
            Ok(n) => head.extend_from_slice(&byte[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let compression = Compression::detect(&head);
    let whole: Box<dyn Read + Send> = Box::new(io::Cursor::new(head).chain(source));
    if compression == Compression::None {
        return Ok(Opened {
            reader: whole,
            compression,
            cut_off: None,
        });
    }
    let buffered = BufReader::with_capacity(CHUNK, whole);
    let decoder = Decompressed::new(compression, buffered, at)?;
    Ok(Opened {
        cut_off: Some(decoder.cut_off()),
        reader: Box::new(decoder),
        compression,
    })
}

/// Counts the compressed bytes read through it.
struct Counting<R> {
    inner: R,
    read: Arc<AtomicU64>,
}

impl<R: BufRead> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Counting<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }
    fn consume(&mut self, n: usize) {
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        self.inner.consume(n);
    }
}

/// The decoder for `compression` reading from `source`.
fn decoder<R: BufRead + Send + 'static>(
    compression: Compression,
    source: R,
) -> io::Result<Box<dyn Read + Send>> {
    Ok(match compression {
        Compression::Zstd => {
            let mut d = zstd::stream::read::Decoder::with_buffer(source)?;
            // Frames of any window the format allows (the CLI's --long up to 2 GiB).
            d.window_log_max(31)?;
            Box::new(InPieces(d))
        }
        Compression::Lz4 => Box::new(InPieces(super::lz4_frames::Lz4Frames::new(source))),
        Compression::Gzip => Box::new(InPieces(flate2::bufread::MultiGzDecoder::new(source))),
        Compression::Xz => Box::new(InPieces(liblzma::bufread::XzDecoder::new_multi_decoder(
            source,
        ))),
        Compression::None => Box::new(source),
    })
}

impl Decompressed {
    /// Decodes `source` (compressed with `compression`), running where `at`
    /// says.
    pub fn new<R: BufRead + Send + 'static>(
        compression: Compression,
        source: R,
        at: DecoderAt,
    ) -> io::Result<Self> {
        let compressed_read = Arc::new(AtomicU64::new(0));
        let counted = Counting {
            inner: source,
            read: compressed_read.clone(),
        };
        let decoder = decoder(compression, counted)?;
        let inner = match at {
            DecoderAt::OwnThread { source_ends } => {
                Inner::Thread(ThreadReader::start(decoder, source_ends)?)
            }
            DecoderAt::Reader => Inner::Here(decoder),
        };
        Ok(Decompressed {
            compression,
            inner,
            compressed_read,
            decompressed: 0,
            cut_off: Arc::new(Mutex::new(None)),
        })
    }

    /// A handle on the note left when the stream ends inside a frame (it
    /// stays readable after the reader is moved away).
    pub fn cut_off(&self) -> CutOff {
        self.cut_off.clone()
    }

    /// What a decoder error means: the end of a truncated stream (noted;
    /// the data ends) or corruption (an error saying so).
    fn failed(&mut self, e: io::Error) -> io::Result<usize> {
        let name = self.compression.name();
        let compressed = self.compressed_read.load(Ordering::Relaxed);
        if e.kind() == io::ErrorKind::UnexpectedEof {
            let note = format!(
                "the {name} stream is cut off after {compressed} compressed bytes ({} bytes decompressed: {e})",
                self.decompressed
            );
            *sync::lock(&self.cut_off) = Some(note);
            return Ok(0);
        }
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "corrupt {name} stream (after {compressed} compressed bytes, {} decompressed): {e}",
                self.decompressed
            ),
        ))
    }
}

impl Read for Decompressed {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let got = match &mut self.inner {
            Inner::Here(decoder) => decoder.read(buf),
            Inner::Thread(thread) => thread.read(buf),
        };
        match got {
            Ok(n) => {
                self.decompressed += n as u64;
                Ok(n)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Err(e),
            Err(e) => self.failed(e),
        }
    }
}

/// A chunk of decoded bytes, or how the decoding ended.
type Chunk = io::Result<Vec<u8>>;

/// Reads from a decoder running on its own thread: the thread fills chunks
/// of [`CHUNK`] bytes, at most [`CHUNKS_AHEAD`] ahead, and the chunks go
/// back to it for reuse, so nothing is allocated after the start.
struct ThreadReader {
    full: Receiver<Chunk>,
    empty: SyncSender<Vec<u8>>,
    current: Vec<u8>,
    at: usize,
    /// The decoder's error, handed out once the data before it is read.
    ended: Option<io::Error>,
    done: bool,
    /// The decoding thread, until it is waited for.
    thread: Option<JoinHandle<()>>,
    /// The source is a regular file: dropped before the end, the reader
    /// waits for the thread.
    source_ends: bool,
}

impl ThreadReader {
    fn start(mut decoder: Box<dyn Read + Send>, source_ends: bool) -> io::Result<Self> {
        let (full_tx, full) = sync_channel::<Chunk>(CHUNKS_AHEAD);
        let (empty, empty_rx) = sync_channel::<Vec<u8>>(CHUNKS_AHEAD + 2);
        for _ in 0..CHUNKS_AHEAD + 1 {
            let _ = empty.try_send(vec![0; CHUNK]);
        }
        let thread = dnsluice_core::thread::named("decompress").spawn(move || {
            let _cpu = crate::cpu::note_at_end();
            while let Ok(mut chunk) = empty_rx.recv() {
                chunk.resize(CHUNK, 0);
                let (filled, end) = fill(decoder.as_mut(), &mut chunk);
                chunk.truncate(filled);
                if filled > 0 && full_tx.send(Ok(chunk)).is_err() {
                    return;
                }
                match end {
                    None => {}
                    Some(Ok(())) => {
                        let _ = full_tx.send(Ok(Vec::new()));
                        return;
                    }
                    Some(Err(e)) => {
                        let _ = full_tx.send(Err(e));
                        return;
                    }
                }
            }
        })?;
        Ok(ThreadReader {
            full,
            empty,
            current: Vec::new(),
            at: 0,
            ended: None,
            done: false,
            thread: Some(thread),
            source_ends,
        })
    }

    /// Waits for the decoding thread to end, once (it has sent its last
    /// chunk or its error, or its channels are closed).
    fn wait_for_thread(&mut self) {
        if let Some(thread) = self.thread.take() {
            // A panic on that thread has already said itself; the reader
            // has seen the channel close.
            let _ = thread.join();
        }
    }
}

/// Fills `chunk` from `decoder`: the bytes filled, and how the decoder
/// ended if it did (`Some(Ok)`: its end; `Some(Err)`: an error).
fn fill(decoder: &mut dyn Read, chunk: &mut [u8]) -> (usize, Option<io::Result<()>>) {
    let mut filled = 0;
    while filled < chunk.len() {
        match decoder.read(&mut chunk[filled..]) {
            Ok(0) => return (filled, Some(Ok(()))),
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (filled, Some(Err(e))),
        }
    }
    (filled, None)
}

impl Read for ThreadReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.current.len() {
            if let Some(e) = self.ended.take() {
                self.done = true;
                return Err(e);
            }
            if self.done {
                return Ok(0);
            }
            let used = std::mem::take(&mut self.current);
            if used.capacity() > 0 {
                let _ = self.empty.try_send(used);
            }
            self.at = 0;
            match self.full.recv() {
                Ok(Ok(chunk)) if chunk.is_empty() => {
                    self.done = true;
                    self.wait_for_thread();
                }
                Ok(Ok(chunk)) => self.current = chunk,
                Ok(Err(e)) => {
                    self.ended = Some(e);
                    self.wait_for_thread();
                }
                Err(_) => {
                    self.wait_for_thread();
                    return Err(io::Error::other("the decompressing thread stopped"));
                }
            }
        }
        let n = buf.len().min(self.current.len() - self.at);
        buf[..n].copy_from_slice(&self.current[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

impl Drop for ThreadReader {
    fn drop(&mut self) {
        // Closing both channels stops the thread at its next chunk. Reading
        // a file, it gets there; reading a pipe, it may be blocked in a read
        // that never returns, so it is not waited for.
        drop(std::mem::replace(&mut self.full, sync_channel(0).1));
        drop(std::mem::replace(&mut self.empty, sync_channel(0).0));
        if self.source_ends {
            self.wait_for_thread();
        }
        drop(self.thread.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    fn read_all(bytes: Vec<u8>, thread: bool) -> (io::Result<Vec<u8>>, Option<String>) {
        let at = DecoderAt::choose(thread, true);
        let opened = decompressed(Box::new(io::Cursor::new(bytes)), at).unwrap();
        assert_eq!(opened.compression, Compression::Gzip);
        let mut reader = opened.reader;
        let mut out = Vec::new();
        let result = reader.read_to_end(&mut out).map(|_| out);
        let note = opened.cut_off.unwrap().lock().unwrap().clone();
        (result, note)
    }

    #[test]
    fn both_modes_give_the_data_across_chunks() {
        // Three chunks and a bit, and two gzip members read as one stream.
        let data: Vec<u8> = (0..CHUNK * 3 + 777).map(|i| (i * 7 % 251) as u8).collect();
        let mut packed = gzip(&data[..1000]);
        packed.extend(gzip(&data[1000..]));
        for thread in [false, true] {
            let (got, note) = read_all(packed.clone(), thread);
            assert!(got.unwrap() == data, "thread {thread}");
            assert_eq!(note, None);
        }
    }

    #[test]
    fn a_cut_stream_ends_with_a_note_and_a_corrupt_one_with_an_error() {
        let data: Vec<u8> = (0..200_000u32).flat_map(|i| i.to_le_bytes()).collect();
        let packed = gzip(&data);
        for thread in [false, true] {
            let (got, note) = read_all(packed[..packed.len() / 2].to_vec(), thread);
            let got = got.unwrap();
            assert!(!got.is_empty() && data.starts_with(&got));
            let note = note.unwrap();
            assert!(
                note.starts_with("the gzip stream is cut off after"),
                "{note}"
            );
            let mut corrupt = packed.clone();
            let n = corrupt.len();
            corrupt[n - 8] ^= 1; // the CRC-32 of the member
            let (got, _) = read_all(corrupt, thread);
            let e = got.unwrap_err();
            assert!(e.to_string().starts_with("corrupt gzip stream"), "{e}");
        }
    }

    #[test]
    fn a_plain_stream_comes_back_whole() {
        for data in [&b""[..], b"ab", b"\xd4\xc3\xb2\xa1 a pcap header and more"] {
            let at = DecoderAt::OwnThread { source_ends: true };
            let opened = decompressed(Box::new(io::Cursor::new(data.to_vec())), at).unwrap();
            assert_eq!(opened.compression, Compression::None);
            let mut out = Vec::new();
            opened.reader.take(1000).read_to_end(&mut out).unwrap();
            assert_eq!(out, data);
        }
    }

    /// A compressed source that says when the decoding thread has let go
    /// of it (its drop takes a while, as a thread's end may), and that can
    /// stand for a pipe: after `open` bytes, a read waits for `gate`.
    struct Watched {
        bytes: io::Cursor<Vec<u8>>,
        open: u64,
        gate: Option<std::sync::mpsc::Receiver<()>>,
        dropped: Arc<std::sync::atomic::AtomicBool>,
    }

    impl Read for Watched {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.bytes.position() >= self.open {
                if let Some(gate) = &self.gate {
                    let _ = gate.recv();
                    return Ok(0);
                }
            }
            let room = self.open.saturating_sub(self.bytes.position()) as usize;
            let n = buf.len().min(room);
            self.bytes.read(&mut buf[..n])
        }
    }

    impl Drop for Watched {
        fn drop(&mut self) {
            std::thread::sleep(std::time::Duration::from_millis(200));
            self.dropped.store(true, Ordering::SeqCst);
        }
    }

    /// The reader of a gzip stream of several chunks, decoded on a thread
    /// of its own, from a [`Watched`] source that opens `open` of its bytes
    /// (the rest after `gate`, if any); the source's flag, set once it is
    /// dropped; the plain length.
    fn watched(
        open: Option<u64>,
        gate: Option<std::sync::mpsc::Receiver<()>>,
        source_ends: bool,
    ) -> (
        Box<dyn Read + Send>,
        Arc<std::sync::atomic::AtomicBool>,
        usize,
    ) {
        // Bytes that do not compress, so that the compressed stream's
        // bytes stand for as many plain ones.
        let mut rng = testkit::rng::Rng(0x2545_f491);
        let data: Vec<u8> = (0..CHUNK * 3).map(|_| rng.next_u64() as u8).collect();
        let packed = gzip(&data);
        let source = Watched {
            open: open.unwrap_or(packed.len() as u64),
            bytes: io::Cursor::new(packed),
            gate,
            dropped: Arc::default(),
        };
        let dropped = source.dropped.clone();
        let at = DecoderAt::OwnThread { source_ends };
        let reader = decompressed(Box::new(source), at).unwrap().reader;
        (reader, dropped, data.len())
    }

    #[test]
    fn the_decoding_thread_has_ended_when_the_stream_has() {
        let (mut reader, dropped, len) = watched(None, None, false);
        let mut out = Vec::new();
        reader.read_to_end(&mut out).unwrap();
        assert_eq!(out.len(), len);
        // Waited for at the end, even reading what may be a pipe: the
        // thread let go of its source before the last read returned.
        assert!(dropped.load(Ordering::SeqCst));
    }

    #[test]
    fn a_reader_dropped_early_waits_for_its_thread_on_a_file_only() {
        // A file: dropped after the first bytes, the reader waits for the
        // thread, which stops at its next chunk.
        let (mut reader, dropped, _) = watched(None, None, true);
        reader.read_exact(&mut [0; 100]).unwrap();
        drop(reader);
        assert!(dropped.load(Ordering::SeqCst));

        // A pipe whose writer is silent after half the stream (the first
        // chunk's worth and more): the thread is blocked in a read, and the
        // drop does not wait for it.
        let (open_gate, gate) = std::sync::mpsc::channel();
        let (mut reader, dropped, _) = watched(Some(CHUNK as u64 * 3 / 2), Some(gate), false);
        reader.read_exact(&mut [0; 100]).unwrap();
        let (done, dropping) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            drop(reader);
            let _ = done.send(());
        });
        let waited = dropping.recv_timeout(std::time::Duration::from_secs(30));
        assert!(
            waited.is_ok(),
            "the drop waited for a thread blocked in a read"
        );
        assert!(!dropped.load(Ordering::SeqCst));
        // The pipe ends: the thread ends on its own.
        open_gate.send(()).unwrap();
        let start = std::time::Instant::now();
        while !dropped.load(Ordering::SeqCst) {
            assert!(start.elapsed().as_secs() < 30, "the thread never ended");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

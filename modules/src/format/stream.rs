//! Bytes a reader walks: the [`RecordSource`] window the record and frame
//! readers look at, and [`BufferedStream`], a growable read buffer over any
//! [`Read`] (a file, standard input, a socket, a decoder) that gives one.
//! The capture inputs (`input.fpcap`, `input.mmpcap` on a compressed file)
//! and the Frame Streams readers (`input.dnstap`, `output.dnstap`'s
//! replies) read through it.

use crate::format::blocks::SharedBlocks;
use crate::format::compression::{Compression, CutOff};
use dnsluice_core::sync;
use std::io::{self, Read};

/// Bytes the walker reads from: a window starting at the current position.
pub trait RecordSource {
    /// The bytes available from the current position.
    fn window(&self) -> &[u8];
    /// Moves the current position forward by `n` bytes (`n <= window().len()`).
    fn consume(&mut self, n: usize);
    /// Tries to make at least `needed` bytes available in the window. Returns
    /// `Ok(false)` at the end of the data (the window may then be shorter).
    fn fill(&mut self, needed: usize) -> io::Result<bool>;
    /// Absolute offset of the current position in the file.
    fn offset(&self) -> u64;
    /// At the end of the data: why it ended early, if it did (a compressed
    /// stream cut off inside a frame).
    fn end_note(&self) -> Option<String> {
        None
    }
    /// The compression the bytes were decompressed from (`zstd`, ...), if any.
    fn compression(&self) -> Option<&'static str> {
        None
    }
    /// The size of the whole source, when known (a regular file).
    fn total(&self) -> Option<u64> {
        None
    }
}

/// The least size of a block read into (see [`BufferedStream::fill`]).
const MIN_BLOCK: usize = 64 << 10;

/// A reader with a growable buffer, as a [`RecordSource`]. A capture
/// input's buffer is published as a shared region ([`BufferedStream::shared`]),
/// so that a split hands its packets to other threads by their place in it.
pub struct BufferedStream {
    reader: Box<dyn Read>,
    buffer: SharedBlocks,
    start: usize,
    end: usize,
    chunk: usize,
    /// How many bytes the last read gave (a pipe gives some 64 KiB at a time).
    last_read: usize,
    consumed_before: u64,
    eof: bool,
    /// The decompressor's compression and its note of a stream cut off
    /// inside a frame.
    decoder: Option<(Compression, CutOff)>,
    /// The size of the whole (plain) stream, when known: a regular file's.
    total: Option<u64>,
}

impl BufferedStream {
    /// Wraps `reader`, reading `chunk` bytes at a time.
    pub fn new(reader: Box<dyn Read>, chunk: usize) -> Self {
        BufferedStream {
            reader,
            buffer: SharedBlocks::new(chunk),
            start: 0,
            end: 0,
            chunk,
            last_read: chunk,
            consumed_before: 0,
            eof: false,
            decoder: None,
            total: None,
        }
    }

    /// Publishes the buffer as a shared region (a capture input's: see
    /// [`SharedBlocks`]), so that a split hands the packets read to other
    /// threads by their place in it; it is then never rewritten while
    /// anything else holds it. Other streams (Frame Streams, one per
    /// connection at times) keep theirs to themselves.
    pub fn shared(mut self) -> Self {
        self.buffer.publish_from_now();
        self
    }

    /// Says how long the stream is (a regular file's size), for progress.
    pub fn with_total(mut self, total: Option<u64>) -> Self {
        self.total = total;
        self
    }

    /// Says, in errors, that the bytes come from a `compression` decoder,
    /// and reports the note it leaves in `cut_off` at the end.
    pub fn decompressed_from(mut self, compression: Compression, cut_off: Option<CutOff>) -> Self {
        self.decoder = cut_off.map(|c| (compression, c));
        self
    }

    /// Reads into `block` (its first `end` bytes held) until it holds
    /// `needed` bytes or the data ends, growing it if one record is larger
    /// than it: a chunk past the bytes held at a time, so a record header
    /// that claims more than the file holds costs no more than the file.
    fn read_into(&mut self, block: &mut Vec<u8>, needed: usize) -> io::Result<()> {
        while self.end < needed && !self.eof {
            if block.len() < needed {
                let grown = needed.min(self.end + self.chunk).max(block.len());
                block.resize(grown, 0);
            }
            match self.reader.read(&mut block[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => {
                    self.end += n;
                    self.last_read = n;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl RecordSource for BufferedStream {
    fn window(&self) -> &[u8] {
        &self.buffer.bytes()[self.start..self.end]
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        self.consumed_before += n as u64;
    }

    fn fill(&mut self, needed: usize) -> io::Result<bool> {
        if self.end - self.start < needed && !self.eof {
            // What is left moves to the front (of another block when a
            // split's batches still hold this one: as large as two reads, a
            // chunk at most, as a pipe's reads are short and each may need
            // a block of its own).
            let size = (2 * self.last_read).max(MIN_BLOCK).min(self.chunk);
            let mut block = self.buffer.writable(self.start..self.end, size);
            self.end -= self.start;
            self.start = 0;
            let read = self.read_into(&mut block, needed);
            self.buffer.share(block);
            read?;
        }
        Ok(!self.eof || self.end - self.start >= needed)
    }

    fn offset(&self) -> u64 {
        self.consumed_before
    }

    fn end_note(&self) -> Option<String> {
        let (_, cut_off) = self.decoder.as_ref()?;
        sync::lock(cut_off).clone()
    }

    fn compression(&self) -> Option<&'static str> {
        self.decoder.as_ref().map(|(c, _)| c.name())
    }

    fn total(&self) -> Option<u64> {
        self.total
    }
}

/// A pcap file with records of `sizes` bytes, each filled with its index
/// (a record's first field, its seconds, is the index too): for tests.
#[cfg(test)]
pub(crate) fn pcap_of_sizes(sizes: &[usize]) -> Vec<u8> {
    let mut v = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
    v.extend_from_slice(&[0; 8]);
    v.extend_from_slice(&65535u32.to_le_bytes());
    v.extend_from_slice(&1u32.to_le_bytes());
    for (i, size) in sizes.iter().enumerate() {
        for field in [i as u32, 0, *size as u32, *size as u32] {
            v.extend_from_slice(&field.to_le_bytes());
        }
        v.extend(std::iter::repeat_n(i as u8, *size));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::CaptureReader;
    use dnsluice_core::{Object, Producer};

    #[test]
    fn records_larger_than_a_read_grow_the_buffer() {
        let sizes = [10, 100, 3, 1000, 17];
        let stream = BufferedStream::new(Box::new(io::Cursor::new(pcap_of_sizes(&sizes))), 16);
        let mut reader = CaptureReader::new("input.fpcap", "test".into(), stream).unwrap();
        let mut got = Vec::new();
        while let Some(Object::Packet(p)) = reader.produce().unwrap() {
            got.push((
                p.data.len(),
                p.data.iter().all(|b| usize::from(*b) == got.len()),
            ));
        }
        assert_eq!(got, sizes.iter().map(|s| (*s, true)).collect::<Vec<_>>());
    }

    #[test]
    fn a_record_claiming_more_than_the_file_holds_allocates_little() {
        let mut stream = BufferedStream::new(Box::new(io::Cursor::new(pcap_of_sizes(&[5]))), 4096);
        // A record header claiming 32 MiB: the stream ends long before.
        assert!(!stream.fill(32 << 20).unwrap());
        assert_eq!(stream.window().len(), 24 + 16 + 5);
        assert!(
            stream.buffer.bytes().len() <= 2 * 4096,
            "buffer grew to {}",
            stream.buffer.bytes().len()
        );
    }
}

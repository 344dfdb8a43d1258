//! Bytes a reader walks: the [`RecordSource`] window the record and frame
//! readers look at, and [`BufferedStream`], a growable read buffer over any
//! [`Read`] (a file, standard input, a socket, a decoder) that gives one.
//! The capture inputs (`input.fpcap`, `input.mmpcap` on a compressed file)
//! and the Frame Streams readers (`input.dnstap`, `output.dnstap`'s
//! replies) read through it.

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

/// A reader with a growable buffer, as a [`RecordSource`].
pub struct BufferedStream {
    reader: Box<dyn Read>,
    buffer: Vec<u8>,
    start: usize,
    end: usize,
    chunk: usize,
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
            buffer: vec![0; chunk],
            start: 0,
            end: 0,
            chunk,
            consumed_before: 0,
            eof: false,
            decoder: None,
            total: None,
        }
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
}

impl RecordSource for BufferedStream {
    fn window(&self) -> &[u8] {
        &self.buffer[self.start..self.end]
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        self.consumed_before += n as u64;
    }

    fn fill(&mut self, needed: usize) -> io::Result<bool> {
        while self.end - self.start < needed && !self.eof {
            // Move what is left to the front, and grow if one record is larger than
            // the buffer: a chunk past the bytes held at a time, so a record header
            // that claims more than the file holds costs no more than the file.
            if self.start > 0 {
                self.buffer.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            let want = needed.min(self.end + self.chunk).max(self.chunk);
            if self.buffer.len() < want {
                self.buffer.resize(want, 0);
            }
            match self.reader.read(&mut self.buffer[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::CaptureReader;
    use dnsluice_core::{Object, Producer};

    /// A pcap file with records of `sizes` bytes, each filled with its index.
    fn pcap(sizes: &[usize]) -> Vec<u8> {
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

    #[test]
    fn records_larger_than_a_read_grow_the_buffer() {
        let sizes = [10, 100, 3, 1000, 17];
        let stream = BufferedStream::new(Box::new(io::Cursor::new(pcap(&sizes))), 16);
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
        let mut stream = BufferedStream::new(Box::new(io::Cursor::new(pcap(&[5]))), 4096);
        // A record header claiming 32 MiB: the stream ends long before.
        assert!(!stream.fill(32 << 20).unwrap());
        assert_eq!(stream.window().len(), 24 + 16 + 5);
        assert!(
            stream.buffer.len() <= 2 * 4096,
            "buffer grew to {}",
            stream.buffer.len()
        );
    }
}

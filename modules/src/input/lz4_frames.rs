//! LZ4 streams as the `lz4` tool reads them: frames one after another
//! (`lz4 -c a >> f; lz4 -c b >> f`), skippable frames skipped, and a stream
//! that ends anywhere but between two frames reported as cut off.
//!
//! `lz4_flex`'s frame decoder (which decodes the blocks) ends each frame
//! with a read of 0 bytes, and gives the same 0 when its input ends at a
//! block boundary, before any end mark. Read as the end of the stream, the
//! first lost every frame after the first, silently, and the second hid a
//! file cut off between two blocks, the way a killed `tcpdump -w - | lz4`
//! leaves it. So the decoder reads through [`Watched`], which follows the
//! frame layout of the bytes going by (headers and lengths only: a block's
//! bytes are stepped over, not looked at) and so knows, when the decoder
//! says 0, whether a frame has just ended. (The LZ4 frame format:
//! <https://github.com/lz4/lz4/blob/dev/doc/lz4_Frame_format.md>.)

use lz4_flex::frame::FrameDecoder;
use std::io::{self, Read};

/// The magic number of an LZ4 frame.
const MAGIC: u32 = 0x184D_2204;
/// The magic number of a frame of the legacy format (`lz4 -l`).
const LEGACY_MAGIC: u32 = 0x184C_2102;
/// Skippable frames' magic numbers: this, with any low four bits.
const SKIPPABLE: u32 = 0x184D_2A50;
/// A frame descriptor's flags: a checksum after each block.
const FLAG_BLOCK_CHECKSUM: u8 = 0x10;
/// The content size follows the flags.
const FLAG_CONTENT_SIZE: u8 = 0x08;
/// A checksum of the content follows the end mark.
const FLAG_CONTENT_CHECKSUM: u8 = 0x04;
/// A dictionary id follows the flags.
const FLAG_DICTIONARY: u8 = 0x01;
/// The bit of a block's size word that says the block is stored as is.
const UNCOMPRESSED: u32 = 0x8000_0000;

/// LZ4 frames read one after another; see the module docs.
pub(super) struct Lz4Frames<R: Read> {
    decoder: FrameDecoder<Watched<R>>,
}

impl<R: Read> Lz4Frames<R> {
    /// Decodes the frames of `source`.
    pub(super) fn new(source: R) -> Self {
        Lz4Frames {
            decoder: FrameDecoder::new(Watched::new(source)),
        }
    }
}

impl<R: Read> Read for Lz4Frames<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let n = self.decoder.read(buf)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            // The decoder ended a frame, or its input ended.
            if !self.decoder.get_mut().next_frame()? {
                return Ok(0);
            }
        }
    }
}

/// Where the bytes going by are in the frame layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    /// A frame's magic number (4 bytes).
    Magic,
    /// A frame descriptor: its flags byte, then `len` bytes in all (0 until
    /// the flags are known).
    Descriptor { len: usize },
    /// A block's size word (4 bytes), or the end mark (0).
    BlockSize,
    /// `left` bytes of a block, its checksum or the content checksum, then `then`.
    Skip { left: u64, then: After },
    /// A legacy frame's block size (4 bytes); its end is the stream's.
    LegacyBlockSize,
    /// Between two frames.
    FrameEnd,
    /// Bytes that are no LZ4 frame: the decoder says what is wrong.
    Unknown,
}

/// What follows the bytes a [`Part::Skip`] steps over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum After {
    BlockSize,
    LegacyBlockSize,
    FrameEnd,
}

/// The decoder's input: the source, followed through the frame layout.
struct Watched<R> {
    source: R,
    part: Part,
    /// The bytes of the header part being gathered.
    header: [u8; 16],
    have: usize,
    /// The current frame's flags.
    flags: u8,
    /// A magic number read ahead to look at (served before the source).
    ahead: [u8; 4],
    ahead_at: usize,
    ahead_len: usize,
}

impl<R: Read> Watched<R> {
    fn new(source: R) -> Self {
        Watched {
            source,
            part: Part::Magic,
            header: [0; 16],
            have: 0,
            flags: 0,
            ahead: [0; 4],
            ahead_at: 0,
            ahead_len: 0,
        }
    }

    /// Whether the bytes so far end between two frames (or end a legacy
    /// frame's block, which may end the stream).
    fn between_frames(&self) -> bool {
        matches!(self.part, Part::FrameEnd | Part::LegacyBlockSize if self.have == 0)
    }

    /// After the decoder said 0: whether another frame follows (skippable
    /// frames are skipped here, the decoder never sees them). An input that
    /// ends inside a frame is an error of kind `UnexpectedEof`.
    fn next_frame(&mut self) -> io::Result<bool> {
        if !self.between_frames() {
            return Err(cut_off(match self.part {
                Part::Magic | Part::Descriptor { .. } => "in a frame header",
                _ => "between two blocks of a frame, before its end mark",
            }));
        }
        loop {
            let mut magic = [0; 4];
            let got = read_up_to(&mut self.source, &mut magic)?;
            match got {
                0 => return Ok(false),
                4 => {}
                _ => return Err(cut_off("in a frame's magic number")),
            }
            if u32::from_le_bytes(magic) & !0xF != SKIPPABLE {
                // Served to the decoder, and followed, as it reads it.
                (self.ahead, self.ahead_at, self.ahead_len) = (magic, 0, 4);
                (self.part, self.have) = (Part::Magic, 0);
                return Ok(true);
            }
            let mut size = [0; 4];
            if read_up_to(&mut self.source, &mut size)? < 4 {
                return Err(cut_off("in a skippable frame's size"));
            }
            let size = u64::from(u32::from_le_bytes(size));
            let skipped = io::copy(&mut (&mut self.source).take(size), &mut io::sink())?;
            if skipped < size {
                return Err(cut_off("in a skippable frame"));
            }
        }
    }

    /// Follows `bytes`, the next ones of the stream, through the layout.
    fn follow(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if let Part::Skip { left, then } = self.part {
                let n = left.min(bytes.len() as u64);
                bytes = &bytes[n as usize..];
                self.part = if n == left {
                    then.part()
                } else {
                    Part::Skip {
                        left: left - n,
                        then,
                    }
                };
                continue;
            }
            let need = match self.part {
                Part::Magic | Part::BlockSize | Part::LegacyBlockSize => 4,
                Part::Descriptor { len: 0 } => 1,
                Part::Descriptor { len } => len,
                Part::FrameEnd => {
                    // The decoder reads on by itself: a new frame.
                    (self.part, self.have) = (Part::Magic, 0);
                    continue;
                }
                Part::Unknown | Part::Skip { .. } => return,
            };
            let n = (need - self.have).min(bytes.len());
            self.header[self.have..self.have + n].copy_from_slice(&bytes[..n]);
            (self.have, bytes) = (self.have + n, &bytes[n..]);
            if self.have == need {
                self.have = 0;
                self.part = self.part_after();
            }
        }
    }

    /// The part after the header part just gathered (in [`Self::header`]).
    fn part_after(&mut self) -> Part {
        let word = u32::from_le_bytes([
            self.header[0],
            self.header[1],
            self.header[2],
            self.header[3],
        ]);
        match self.part {
            Part::Magic => match word {
                MAGIC => Part::Descriptor { len: 0 },
                LEGACY_MAGIC => Part::LegacyBlockSize,
                _ => Part::Unknown,
            },
            Part::Descriptor { len: 0 } => {
                // The flags are in: the descriptor's length (the flags and
                // the block-size byte, the optional fields, the checksum byte).
                self.flags = self.header[0];
                let optional =
                    |flag: u8, size: usize| if self.flags & flag != 0 { size } else { 0 };
                let len = 3 + optional(FLAG_CONTENT_SIZE, 8) + optional(FLAG_DICTIONARY, 4);
                // The flags byte is gathered again with the rest.
                self.have = 1;
                Part::Descriptor { len }
            }
            Part::Descriptor { .. } => Part::BlockSize,
            Part::BlockSize if word == 0 => match self.flags & FLAG_CONTENT_CHECKSUM {
                0 => Part::FrameEnd,
                _ => After::FrameEnd.after(4),
            },
            Part::BlockSize => {
                let checksum = if self.flags & FLAG_BLOCK_CHECKSUM != 0 {
                    4
                } else {
                    0
                };
                After::BlockSize.after(u64::from(word & !UNCOMPRESSED) + checksum)
            }
            Part::LegacyBlockSize => After::LegacyBlockSize.after(u64::from(word)),
            other => other,
        }
    }
}

impl After {
    /// The part that steps over `left` bytes, then goes on with this one.
    fn after(self, left: u64) -> Part {
        match left {
            0 => self.part(),
            left => Part::Skip { left, then: self },
        }
    }

    fn part(self) -> Part {
        match self {
            After::BlockSize => Part::BlockSize,
            After::LegacyBlockSize => Part::LegacyBlockSize,
            After::FrameEnd => Part::FrameEnd,
        }
    }
}

impl<R: Read> Read for Watched<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = if self.ahead_at < self.ahead_len {
            let n = (self.ahead_len - self.ahead_at).min(buf.len());
            buf[..n].copy_from_slice(&self.ahead[self.ahead_at..self.ahead_at + n]);
            self.ahead_at += n;
            n
        } else {
            self.source.read(buf)?
        };
        self.follow(&buf[..n]);
        Ok(n)
    }
}

/// Reads into `buf` until it is full or the input ends: the bytes read.
fn read_up_to(source: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match source.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// The error of an LZ4 stream that ends `where_`.
fn cut_off(where_: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("the input ends {where_}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use lz4_flex::frame::{FrameEncoder, FrameInfo};
    use std::io::Write;

    /// `data` as one LZ4 frame of 64 KiB blocks, with a content checksum.
    fn frame(data: &[u8]) -> Vec<u8> {
        let info = FrameInfo::new()
            .block_size(lz4_flex::frame::BlockSize::Max64KB)
            .content_checksum(true);
        let mut encoder = FrameEncoder::with_frame_info(info, Vec::new());
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    /// Bytes that do not compress much: 64 KiB blocks stay many.
    fn data(len: usize, seed: u32) -> Vec<u8> {
        let mut x = seed | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect()
    }

    fn read_all(stream: &[u8]) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        Lz4Frames::new(stream).read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn frames_and_skippable_frames_one_after_another() {
        let (a, b) = (data(200_000, 1), data(100_000, 2));
        let mut stream = frame(&a);
        // A skippable frame (magic 0x184D2A53, 5 bytes of user data).
        stream.extend([0x53, 0x2a, 0x4d, 0x18, 5, 0, 0, 0, 1, 2, 3, 4, 5]);
        stream.extend(frame(&b));
        let mut want = a.clone();
        want.extend(&b);
        assert!(read_all(&stream).unwrap() == want);
    }

    #[test]
    fn a_stream_that_ends_inside_a_frame_is_cut_off() {
        let whole = frame(&data(300_000, 3));
        // Every length short of the whole frame: inside the header, between
        // blocks, inside one, before the content checksum.
        for len in [3, 7, 11, 100, whole.len() - 4, whole.len() - 1] {
            let e = read_all(&whole[..len]).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "cut at {len}: {e}");
        }
        // Between two blocks (the first block's size word, then its bytes).
        let header = 7;
        let first = u32::from_le_bytes(whole[header..header + 4].try_into().unwrap());
        let boundary = header + 4 + (first & !UNCOMPRESSED) as usize;
        let e = read_all(&whole[..boundary]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        assert!(e.to_string().contains("between two blocks"), "{e}");
        // A skippable frame cut short.
        let mut skippable = whole.clone();
        skippable.extend([0x50, 0x2a, 0x4d, 0x18, 9, 0, 0, 0, 1]);
        let e = read_all(&skippable).unwrap_err();
        assert!(e.to_string().contains("in a skippable frame"), "{e}");
        // The whole frame, then nothing: the end.
        assert_eq!(read_all(&whole).unwrap().len(), 300_000);
    }
}

//! Capture file formats, the one home of their layouts, read and written
//! natively: classic pcap (both byte orders, micro- and nanosecond) and
//! pcapng (several sections of either byte order, several interfaces with
//! their own link types and timestamp resolutions, EPB/SPB/OPB; other
//! blocks skipped).
//!
//! Reading: [`CaptureFormat::next`] looks at the bytes from the current
//! position and says what is there ([`Step`]) using offsets only, so the
//! same code serves the memory-mapped and the buffered-read inputs
//! (`input::reader`). Writing: [`write`], used by `output.pcap`.
//!
//! Below the layouts, the readers inputs and outputs share: [`stream`] (a
//! window over bytes, [`stream::RecordSource`], and the growable read buffer
//! [`stream::BufferedStream`]) and [`framestream::reader`] (Frame Streams
//! frames from such a buffer, for `input.dnstap` and `output.dnstap`).

pub mod blocks;
pub mod compression;
pub mod dnstap;
pub mod framestream;
pub mod pcap;
pub mod pcapng;
pub mod stream;
pub mod write;

#[cfg(test)]
pub(crate) mod tests;

use dnsluice_core::LinkType;
use std::ops::ControlFlow;

/// The largest record or block accepted; anything larger is taken as corruption
/// (libpcap's own limit for a record is 256 KiB; pcapng blocks can carry more).
pub const MAX_RECORD: usize = 64 << 20;

/// What the bytes at the current position hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A packet record.
    Packet(RecordInfo),
    /// A non-packet block (pcapng SHB/IDB/NRB/ISB/custom...), `consumed` bytes long.
    Skip {
        /// Bytes to advance.
        consumed: usize,
    },
    /// The record is not complete: at least `needed` bytes from the current position are required.
    NeedMore {
        /// Bytes needed from the current position.
        needed: usize,
    },
}

/// Where a packet record's bytes are, and its capture metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordInfo {
    /// Bytes to advance past the record.
    pub consumed: usize,
    /// Offset of the packet bytes from the current position.
    pub data_at: usize,
    /// Captured bytes.
    pub caplen: usize,
    /// Original length on the wire.
    pub len: u32,
    /// Timestamp in ns since the epoch, if the record has one.
    pub ts_ns: Option<i64>,
    /// The link type of its interface.
    pub link: LinkType,
}

/// A capture format with the state it needs between records (cloned where
/// a reading in parts starts: a pcapng part needs the interfaces declared
/// before it).
#[derive(Debug, Clone)]
pub enum CaptureFormat {
    /// Classic pcap.
    Pcap(pcap::Pcap),
    /// pcapng.
    Pcapng(pcapng::Pcapng),
}

/// Why bytes could not be read as a capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatError {
    /// More bytes are needed to tell (the file is shorter than a header).
    NeedMore(usize),
    /// Not a capture, or corrupt: the message says what and where (offset relative to the position given).
    Invalid(String),
}

impl CaptureFormat {
    /// Recognises the format from the start of a file. Returns the format and
    /// the number of file-header bytes to skip (pcapng has none: its section
    /// header is a block like the others).
    pub fn detect(head: &[u8]) -> Result<(CaptureFormat, usize), FormatError> {
        let magic: [u8; 4] = head
            .get(..4)
            .ok_or(FormatError::NeedMore(4))?
            .try_into()
            .map_err(|_| FormatError::NeedMore(4))?;
        if magic == pcapng::SHB_TYPE {
            return Ok((CaptureFormat::Pcapng(pcapng::Pcapng::default()), 0));
        }
        let (format, header) = pcap::Pcap::detect(head)?;
        Ok((CaptureFormat::Pcap(format), header))
    }

    /// The complete, sane packet record at `buf[0..]` when the format's fast
    /// path reads it (a classic pcap record, a pcapng Enhanced Packet
    /// Block), or `None`: then [`CaptureFormat::next`] says what is there.
    #[inline(always)]
    pub fn record(&self, buf: &[u8]) -> Option<RecordInfo> {
        match self {
            CaptureFormat::Pcap(p) => p.record(buf),
            CaptureFormat::Pcapng(p) => p.record(buf),
        }
    }

    /// Walks the complete, sane packet records from the start of `buf`
    /// (those [`CaptureFormat::record`] gives), handing each to `each`
    /// with its offset in `buf`, until one is not (then [`CaptureFormat::next`]
    /// says what is there) or `each` breaks. Returns the bytes walked (up to
    /// the record `each` broke at; that record not counted) and what `each`
    /// broke with. The format's and the byte order's choice is made once,
    /// for the loop, not per record.
    #[inline(always)]
    pub fn walk<B>(
        &self,
        buf: &[u8],
        each: impl FnMut(usize, &RecordInfo) -> ControlFlow<B>,
    ) -> (usize, ControlFlow<B>) {
        match self {
            CaptureFormat::Pcap(p) => p
                .endian
                .with_words(|read| walk_with(buf, |at| p.record_in(at, read), each)),
            CaptureFormat::Pcapng(p) => p
                .endian
                .with_words(|read| walk_with(buf, |at| p.record_in(at, read), each)),
        }
    }

    /// What the bytes at `buf[0..]` (the current position) hold.
    #[inline]
    pub fn next(&mut self, buf: &[u8]) -> Result<Step, String> {
        match self {
            CaptureFormat::Pcap(p) => p.next(buf),
            CaptureFormat::Pcapng(p) => p.next(buf),
        }
    }

    /// A short description (`pcap (little-endian, µs)`, `pcapng`).
    pub fn describe(&self) -> String {
        match self {
            CaptureFormat::Pcap(p) => p.describe(),
            CaptureFormat::Pcapng(_) => "pcapng".to_string(),
        }
    }
}

/// [`CaptureFormat::walk`] with a format's reader of one record.
#[inline(always)]
fn walk_with<B>(
    buf: &[u8],
    record: impl Fn(&[u8]) -> Option<RecordInfo>,
    mut each: impl FnMut(usize, &RecordInfo) -> ControlFlow<B>,
) -> (usize, ControlFlow<B>) {
    let mut at = 0;
    while let Some(info) = buf.get(at..).and_then(&record) {
        if let ControlFlow::Break(b) = each(at, &info) {
            return (at, ControlFlow::Break(b));
        }
        at += info.consumed;
    }
    (at, ControlFlow::Continue(()))
}

/// Reads a `u16`/`u32`/`u64` in a given byte order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum Endian {
    #[default]
    Little,
    Big,
}

impl Endian {
    /// Calls `f` with this byte order's reader of a 4-byte field, a
    /// constant in each branch: `f`, inlined, reads its fields without a
    /// branch per field (the records' fast paths).
    #[inline(always)]
    pub(crate) fn with_words<T>(self, f: impl FnOnce(fn([u8; 4]) -> u32) -> T) -> T {
        match self {
            Endian::Little => f(u32::from_le_bytes),
            Endian::Big => f(u32::from_be_bytes),
        }
    }

    pub(crate) fn u16(self, buf: &[u8], at: usize) -> Option<u16> {
        let b: [u8; 2] = buf.get(at..at + 2)?.try_into().ok()?;
        Some(match self {
            Endian::Little => u16::from_le_bytes(b),
            Endian::Big => u16::from_be_bytes(b),
        })
    }

    pub(crate) fn u32(self, buf: &[u8], at: usize) -> Option<u32> {
        let b: [u8; 4] = buf.get(at..at + 4)?.try_into().ok()?;
        Some(match self {
            Endian::Little => u32::from_le_bytes(b),
            Endian::Big => u32::from_be_bytes(b),
        })
    }

    pub(crate) fn u64(self, buf: &[u8], at: usize) -> Option<u64> {
        let b: [u8; 8] = buf.get(at..at + 8)?.try_into().ok()?;
        Some(match self {
            Endian::Little => u64::from_le_bytes(b),
            Endian::Big => u64::from_be_bytes(b),
        })
    }
}

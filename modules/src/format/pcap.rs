//! Classic pcap: a 24-byte file header (magic, version 2.4, thiszone,
//! sigfigs, snaplen, link type), then records, each a 16-byte header
//! (seconds, fraction, captured length, original length) and the packet.
//! The layout constants serve the reader here and the writer in
//! [`super::write`].

use super::{Endian, FormatError, RecordInfo, Step, MAX_RECORD};
use dnsluice_core::LinkType;

/// Magic of a file whose timestamp fractions are microseconds.
pub(super) const MAGIC_MICRO: u32 = 0xa1b2_c3d4;
/// Magic of a file whose timestamp fractions are nanoseconds.
pub(super) const MAGIC_NANO: u32 = 0xa1b2_3c4d;
/// The format version this reader and writer speak: 2.4.
pub(super) const VERSION: (u16, u16) = (2, 4);
/// Bytes of the file header.
pub(super) const FILE_HEADER: usize = 24;
/// Bytes of a record header.
pub(super) const RECORD_HEADER: usize = 16;

/// Classic pcap state: byte order, resolution, link type.
#[derive(Debug, Clone)]
pub struct Pcap {
    pub(super) endian: Endian,
    /// Nanoseconds per unit of the timestamp's fraction: 1 in a
    /// nanosecond file, 1000 in a microsecond one.
    frac_ns: i64,
    link: LinkType,
}

impl Pcap {
    /// Reads the file header.
    pub(super) fn detect(head: &[u8]) -> Result<(Pcap, usize), FormatError> {
        let le = Endian::Little
            .u32(head, 0)
            .ok_or(FormatError::NeedMore(4))?;
        let be = Endian::Big.u32(head, 0).ok_or(FormatError::NeedMore(4))?;
        let (endian, nanos) = match (le, be) {
            (MAGIC_MICRO, _) => (Endian::Little, false),
            (MAGIC_NANO, _) => (Endian::Little, true),
            (_, MAGIC_MICRO) => (Endian::Big, false),
            (_, MAGIC_NANO) => (Endian::Big, true),
            _ => {
                return Err(FormatError::Invalid(format!(
                    "not a pcap or pcapng file (first bytes {:02x} {:02x} {:02x} {:02x})",
                    head[0], head[1], head[2], head[3]
                )))
            }
        };
        if head.len() < FILE_HEADER {
            return Err(FormatError::NeedMore(FILE_HEADER));
        }
        // The link type is the low 16 bits of the last field (the high bits carry FCS info).
        let link = endian
            .u32(head, 20)
            .ok_or(FormatError::NeedMore(FILE_HEADER))?
            & 0xffff;
        Ok((
            Pcap {
                endian,
                frac_ns: if nanos { 1 } else { 1000 },
                link: LinkType(link),
            },
            FILE_HEADER,
        ))
    }

    /// The complete, sane record at the start of `buf`, or `None` when the
    /// record is incomplete or corrupt (then `Pcap::next` says which). This is
    /// the per-packet fast path; the byte order is chosen once per record,
    /// not once per field.
    #[inline]
    pub fn record(&self, buf: &[u8]) -> Option<RecordInfo> {
        self.endian.with_words(|read| self.record_in(buf, read))
    }

    /// [`Pcap::record`] with the byte order's reader (also the per-record
    /// step of [`super::CaptureFormat::walk`]).
    #[inline(always)]
    pub(super) fn record_in(&self, buf: &[u8], read: fn([u8; 4]) -> u32) -> Option<RecordInfo> {
        let header: &[u8; RECORD_HEADER] = buf.get(..RECORD_HEADER)?.try_into().ok()?;
        let field = |at: usize| read([header[at], header[at + 1], header[at + 2], header[at + 3]]);
        let caplen = field(8) as usize;
        if caplen > MAX_RECORD || buf.len() < RECORD_HEADER + caplen {
            return None;
        }
        Some(RecordInfo {
            consumed: RECORD_HEADER + caplen,
            data_at: RECORD_HEADER,
            caplen,
            // A record whose original length is below its captured length is
            // inconsistent; the captured bytes are what we have.
            len: field(12).max(caplen as u32),
            ts_ns: Some(i64::from(field(0)) * 1_000_000_000 + i64::from(field(4)) * self.frac_ns),
            link: self.link,
        })
    }

    pub(super) fn next(&mut self, buf: &[u8]) -> Result<Step, String> {
        if let Some(record) = self.record(buf) {
            return Ok(Step::Packet(record));
        }
        if buf.len() < RECORD_HEADER {
            return Ok(Step::NeedMore {
                needed: RECORD_HEADER,
            });
        }
        let caplen = self.endian.u32(buf, 8).unwrap_or_default() as usize;
        if caplen > MAX_RECORD {
            return Err(format!(
                "record claims {caplen} captured bytes (more than {MAX_RECORD}): corrupt file"
            ));
        }
        Ok(Step::NeedMore {
            needed: RECORD_HEADER + caplen,
        })
    }

    pub(super) fn describe(&self) -> String {
        format!(
            "pcap ({}-endian, {})",
            if self.endian == Endian::Little {
                "little"
            } else {
                "big"
            },
            if self.frac_ns == 1 { "ns" } else { "µs" }
        )
    }
}

//! Classic pcap: a 24-byte file header, then 16-byte record headers.

use super::{Endian, FormatError, RecordInfo, Step, MAX_RECORD};
use dnsluice_core::LinkType;

const MAGIC_MICRO: u32 = 0xa1b2_c3d4;
const MAGIC_NANO: u32 = 0xa1b2_3c4d;
const FILE_HEADER: usize = 24;
const RECORD_HEADER: usize = 16;

/// Classic pcap state: byte order, resolution, link type.
#[derive(Debug, Clone)]
pub struct Pcap {
    endian: Endian,
    nanos: bool,
    link: LinkType,
}

impl Pcap {
    /// Reads the file header.
    pub(super) fn detect(head: &[u8]) -> Result<(Pcap, usize), FormatError> {
        let le = Endian::Little.u32(head, 0).ok_or(FormatError::NeedMore(4))?;
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
        let link = endian.u32(head, 20).ok_or(FormatError::NeedMore(FILE_HEADER))? & 0xffff;
        Ok((
            Pcap {
                endian,
                nanos,
                link: LinkType(link),
            },
            FILE_HEADER,
        ))
    }

    pub(super) fn next(&mut self, buf: &[u8]) -> Result<Step, String> {
        if buf.len() < RECORD_HEADER {
            return Ok(Step::NeedMore { needed: RECORD_HEADER });
        }
        let field = |at| self.endian.u32(buf, at).unwrap_or_default();
        let (secs, frac, caplen, len) = (field(0), field(4), field(8) as usize, field(12));
        if caplen > MAX_RECORD {
            return Err(format!("record claims {caplen} captured bytes (more than {MAX_RECORD}): corrupt file"));
        }
        let needed = RECORD_HEADER + caplen;
        if buf.len() < needed {
            return Ok(Step::NeedMore { needed });
        }
        let frac_ns = if self.nanos { i64::from(frac) } else { i64::from(frac) * 1000 };
        Ok(Step::Packet(RecordInfo {
            consumed: needed,
            data_at: RECORD_HEADER,
            caplen,
            // A record whose original length is below its captured length is
            // inconsistent; the captured bytes are what we have.
            len: len.max(caplen as u32),
            ts_ns: Some(i64::from(secs) * 1_000_000_000 + frac_ns),
            link: self.link,
        }))
    }

    pub(super) fn describe(&self) -> String {
        format!(
            "pcap ({}-endian, {})",
            if self.endian == Endian::Little { "little" } else { "big" },
            if self.nanos { "ns" } else { "µs" }
        )
    }
}

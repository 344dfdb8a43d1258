//! DNS messages: a zero-copy view for the hot path and on-demand decoding.
//!
//! - [`scan`] checks a whole message without allocating: header, questions,
//!   every resource record (names with compression, bounds of RDATA), and the
//!   EDNS OPT record. It returns a small `Copy` summary, [`DnsInfo`], with the
//!   first problem found as a [`DnsError`] kind and offset; [`check`] returns
//!   it as the 24-byte [`CompactInfo`] that a [`crate::DnsMessage`] keeps.
//! - [`records`] iterates over the records of a message for full decoding;
//!   [`name`] walks and prints names; [`rdata`] prints RDATA in presentation
//!   form; [`mnemonic`] has the type, class, rcode and opcode names.
//!
//! Every length is bounds-checked, compression pointers are followed with a
//! hop limit and loop detection, and nothing here can panic on any input.

pub mod mnemonic;
pub mod name;
pub mod rdata;
mod scan;

#[cfg(test)]
mod tests;

#[doc(hidden)]
pub use scan::scan_without_fast_path;
pub use scan::{
    check, full_rcode, questions, records, scan, scan_inspect, CompactInfo, DnsInfo, Edns, Inspect,
    Question, Record, Records, Section, TYPE_OPT,
};

/// The fixed 12-byte DNS header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// Message id.
    pub id: u16,
    /// The flags word (QR, opcode, AA, TC, RD, RA, Z, AD, CD, rcode).
    pub flags: u16,
    /// Question count.
    pub qdcount: u16,
    /// Answer count.
    pub ancount: u16,
    /// Authority count.
    pub nscount: u16,
    /// Additional count.
    pub arcount: u16,
}

impl Header {
    /// Size of the header on the wire.
    pub const LEN: usize = 12;

    /// Reads the header at the start of `msg`, if there are 12 bytes.
    #[inline]
    pub fn parse(msg: &[u8]) -> Option<Header> {
        let h: &[u8; 12] = msg.get(..12)?.try_into().ok()?;
        let word = |i: usize| u16::from_be_bytes([h[i], h[i + 1]]);
        Some(Header {
            id: word(0),
            flags: word(2),
            qdcount: word(4),
            ancount: word(6),
            nscount: word(8),
            arcount: word(10),
        })
    }

    /// The id and flags of a message too short for a whole header (counts 0),
    /// when its first 4 bytes are there.
    pub fn parse_partial(msg: &[u8]) -> Option<Header> {
        let h = msg.get(..4)?;
        Some(Header {
            id: u16::from_be_bytes([h[0], h[1]]),
            flags: u16::from_be_bytes([h[2], h[3]]),
            ..Header::default()
        })
    }

    /// A response (QR set)?
    pub fn qr(&self) -> bool {
        self.flags & 0x8000 != 0
    }
    /// The opcode (4 bits).
    pub fn opcode(&self) -> u8 {
        ((self.flags >> 11) & 0xf) as u8
    }
    /// The header RCODE (low 4 bits; see [`DnsInfo::rcode`] for the extended one).
    pub fn rcode(&self) -> u16 {
        self.flags & 0xf
    }
    /// Authoritative answer.
    pub fn aa(&self) -> bool {
        self.flags & 0x0400 != 0
    }
    /// Truncated.
    pub fn tc(&self) -> bool {
        self.flags & 0x0200 != 0
    }
    /// Recursion desired.
    pub fn rd(&self) -> bool {
        self.flags & 0x0100 != 0
    }
    /// Recursion available.
    pub fn ra(&self) -> bool {
        self.flags & 0x0080 != 0
    }
    /// Authentic data.
    pub fn ad(&self) -> bool {
        self.flags & 0x0020 != 0
    }
    /// Checking disabled.
    pub fn cd(&self) -> bool {
        self.flags & 0x0010 != 0
    }
}

/// What is wrong with a message, by kind. The offset of the problem travels beside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum DnsError {
    /// Fewer than 12 bytes: no header.
    ShortHeader,
    /// A label runs past the end of the message.
    LabelPastEnd,
    /// A compression pointer loops (or there are more pointers than any real name has).
    PointerLoop,
    /// A compression pointer points outside the message.
    PointerOutOfBounds,
    /// A name longer than 255 octets.
    NameTooLong,
    /// A label type other than a length or a pointer (0x40, 0x80: extended/reserved).
    ReservedLabelType,
    /// A section count claims more entries than the message holds.
    CountExceedsMessage,
    /// A record's RDATA runs past the end of the message.
    RdataPastEnd,
    /// The message was cut by the capture's snaplen before its end.
    TruncatedCapture,
    /// An OPT record whose options area is not a sequence of whole options
    /// (RFC 6891 §6.1.2: code, length, that many bytes).
    EdnsMalformed,
}

impl DnsError {
    /// Every kind, in a fixed order (for counters indexed by kind).
    pub const ALL: [DnsError; 10] = [
        DnsError::ShortHeader,
        DnsError::LabelPastEnd,
        DnsError::PointerLoop,
        DnsError::PointerOutOfBounds,
        DnsError::NameTooLong,
        DnsError::ReservedLabelType,
        DnsError::CountExceedsMessage,
        DnsError::RdataPastEnd,
        DnsError::TruncatedCapture,
        DnsError::EdnsMalformed,
    ];

    /// The kind as a `snake_case` name (stats and JSON).
    pub fn as_str(self) -> &'static str {
        match self {
            DnsError::ShortHeader => "short_header",
            DnsError::LabelPastEnd => "label_past_end",
            DnsError::PointerLoop => "pointer_loop",
            DnsError::PointerOutOfBounds => "pointer_out_of_bounds",
            DnsError::NameTooLong => "name_too_long",
            DnsError::ReservedLabelType => "reserved_label_type",
            DnsError::CountExceedsMessage => "count_exceeds_message",
            DnsError::RdataPastEnd => "rdata_past_end",
            DnsError::TruncatedCapture => "truncated_capture",
            DnsError::EdnsMalformed => "edns_malformed",
        }
    }

    /// Position of this kind in [`DnsError::ALL`] (the variants are declared in that order).
    pub fn index(self) -> usize {
        self as usize
    }
}

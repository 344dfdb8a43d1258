//! Whole-message checking without allocation, and record iteration.

use super::name;
use super::{DnsError, Header};

/// The first question of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Question {
    /// Offset of the QNAME in the message.
    pub name: u32,
    /// Offset of the QTYPE (just past the QNAME).
    pub qtype_at: u32,
    /// QTYPE.
    pub qtype: u16,
    /// QCLASS.
    pub qclass: u16,
}

/// The EDNS OPT record (RFC 6891), when the additional section has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edns {
    /// Requestor's UDP payload size (the OPT CLASS).
    pub udp_size: u16,
    /// Upper 8 bits of the extended RCODE.
    pub ext_rcode: u8,
    /// EDNS version.
    pub version: u8,
    /// The flags (DO is the top bit).
    pub flags: u16,
    /// Offset of the options (the OPT RDATA) in the message.
    pub options_at: u32,
    /// Length of the options.
    pub options_len: u16,
}

impl Edns {
    /// DNSSEC OK.
    pub fn dnssec_ok(&self) -> bool {
        self.flags & 0x8000 != 0
    }
}

/// What [`scan`] found: a `Copy` summary of one message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DnsInfo {
    /// The header, when the message has 12 bytes.
    pub header: Option<Header>,
    /// For a message shorter than a header: the id and flags, when its first
    /// 4 bytes are there (the counts are not).
    pub partial_header: Option<Header>,
    /// The first question, when it parsed.
    pub question: Option<Question>,
    /// Questions that parsed.
    pub questions: u16,
    /// Records that parsed: answer, authority, additional (OPT included).
    pub records: [u16; 3],
    /// The first OPT record.
    pub edns: Option<Edns>,
    /// How many OPT records the additional section holds (more than one is a FORMERR).
    pub opt_records: u16,
    /// The first problem found.
    pub error: Option<DnsError>,
    /// Where it was found (offset in the message).
    pub error_offset: u32,
}

impl DnsInfo {
    /// The full RCODE: the header's 4 bits, extended by EDNS when present.
    pub fn rcode(&self) -> u16 {
        full_rcode(self.header.or(self.partial_header), self.edns.as_ref())
    }
}

/// The full RCODE of a message with this header (or first 4 bytes of one)
/// and OPT record: the header's 4 bits, extended by EDNS when present.
#[inline]
pub fn full_rcode(header: Option<Header>, edns: Option<&Edns>) -> u16 {
    let low = header.map_or(0, |h| h.rcode());
    match edns {
        Some(e) => (u16::from(e.ext_rcode) << 4) | low,
        None => low,
    }
}

/// A section of the message (in message order: answer, authority, additional).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Section {
    /// Answer.
    Answer,
    /// Authority.
    Authority,
    /// Additional.
    Additional,
}

/// One resource record, as offsets into its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// Its section.
    pub section: Section,
    /// Offset of the owner name.
    pub name: u32,
    /// TYPE.
    pub rtype: u16,
    /// CLASS.
    pub class: u16,
    /// TTL.
    pub ttl: u32,
    /// Offset of the RDATA.
    pub rdata_at: u32,
    /// Length of the RDATA.
    pub rdata_len: u16,
}

/// The TYPE of the EDNS OPT pseudo-record.
pub const TYPE_OPT: u16 = 41;

/// Reads the question at `pos`: its end, or the error.
#[inline]
fn question_at(msg: &[u8], pos: usize) -> Result<(Question, usize), (DnsError, usize)> {
    let end = name::skip(msg, pos)?;
    let fixed = msg
        .get(end..end + 4)
        .ok_or((DnsError::CountExceedsMessage, end))?;
    let question = Question {
        name: pos as u32,
        qtype_at: end as u32,
        qtype: u16::from_be_bytes([fixed[0], fixed[1]]),
        qclass: u16::from_be_bytes([fixed[2], fixed[3]]),
    };
    Ok((question, end + 4))
}

/// Reads the record at `pos` in `section`: the record and the offset after it.
#[inline]
fn record_at(
    msg: &[u8],
    pos: usize,
    section: Section,
) -> Result<(Record, usize), (DnsError, usize)> {
    let end = name::skip(msg, pos)?;
    let fixed: &[u8; 10] = msg
        .get(end..end + 10)
        .and_then(|f| f.try_into().ok())
        .ok_or((DnsError::CountExceedsMessage, end))?;
    let rdata_len = u16::from_be_bytes([fixed[8], fixed[9]]);
    let rdata_at = end + 10;
    if rdata_at + usize::from(rdata_len) > msg.len() {
        return Err((DnsError::RdataPastEnd, end + 8));
    }
    let record = Record {
        section,
        name: pos as u32,
        rtype: u16::from_be_bytes([fixed[0], fixed[1]]),
        class: u16::from_be_bytes([fixed[2], fixed[3]]),
        ttl: u32::from_be_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]),
        rdata_at: rdata_at as u32,
        rdata_len,
    };
    Ok((record, rdata_at + usize::from(rdata_len)))
}

/// Checks the whole message: header, questions, every record, EDNS. `cut`
/// says the capture ended before the message did (snaplen): running out of
/// bytes is then reported as [`DnsError::TruncatedCapture`].
#[inline]
pub fn scan(msg: &[u8], cut: bool) -> DnsInfo {
    scan_query(msg).unwrap_or_else(|| scan_general(msg, cut))
}

/// Something that looks at each message summary [`scan_inspect`] makes
/// (a counter, say). Implementations should be `#[inline(always)]`.
pub trait Inspect {
    /// Looks at one summary.
    fn inspect(&mut self, info: &DnsInfo);
}

/// Looks at nothing.
impl Inspect for () {
    #[inline(always)]
    fn inspect(&mut self, _info: &DnsInfo) {}
}

/// [`scan`], handing the summary to `inspector` and returning it in the
/// compact form a [`crate::DnsMessage`] keeps. Inspecting it here, once on
/// the common queries' path and once on the general one, lets the compiler
/// read the fresh summary from registers (inspecting a returned one read it
/// back from memory just after it was written in pieces, which stalled on
/// store forwarding); only the compact form's few fields are stored.
#[inline(always)]
pub fn scan_inspect<I: Inspect + ?Sized>(msg: &[u8], cut: bool, inspector: &mut I) -> CompactInfo {
    match scan_query(msg) {
        Some(info) => {
            inspector.inspect(&info);
            CompactInfo::from(&info)
        }
        None => {
            let info = scan_general(msg, cut);
            inspector.inspect(&info);
            CompactInfo::from(&info)
        }
    }
}

/// [`scan`]'s result in the compact form: [`scan_inspect`] with no inspector.
#[inline]
pub fn check(msg: &[u8], cut: bool) -> CompactInfo {
    scan_inspect(msg, cut, &mut ())
}

/// A [`DnsInfo`] without what the message's own bytes say: 24 bytes instead
/// of 72, most of them written once per message on the hot path. It keeps
/// where the first question's QTYPE and the first OPT record's options are,
/// how many questions and records parsed, and the first problem;
/// [`CompactInfo::expand`] reads the header, the QTYPE and QCLASS and the OPT
/// fields back from the message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactInfo {
    /// Offset of the first question's QTYPE; 0 when no question parsed
    /// (the first question's QNAME is always at offset 12).
    qtype_at: u32,
    /// Offset of the first OPT record's options (its RDATA); 0 when none.
    options_at: u32,
    error_offset: u32,
    questions: u16,
    records: [u16; 3],
    opt_records: u16,
    error: Option<DnsError>,
}

impl From<&DnsInfo> for CompactInfo {
    #[inline(always)]
    fn from(info: &DnsInfo) -> Self {
        CompactInfo {
            qtype_at: info.question.map_or(0, |q| q.qtype_at),
            options_at: info.edns.map_or(0, |e| e.options_at),
            error_offset: info.error_offset,
            questions: info.questions,
            records: info.records,
            opt_records: info.opt_records,
            error: info.error,
        }
    }
}

impl CompactInfo {
    /// The summary of `msg`, the message this was made from (for another
    /// message the result is meaningless, but reading it never panics).
    pub fn expand(&self, msg: &[u8]) -> DnsInfo {
        let header = Header::parse(msg);
        DnsInfo {
            header,
            partial_header: header
                .is_none()
                .then(|| Header::parse_partial(msg))
                .flatten(),
            question: self.question(msg),
            questions: self.questions,
            records: self.records,
            edns: self.edns(msg),
            opt_records: self.opt_records,
            error: self.error,
            error_offset: self.error_offset,
        }
    }

    /// The first question of `msg` (as [`DnsInfo::question`]), read back
    /// without expanding the rest: for readers that want one field, such as
    /// the Lua record of every object.
    #[inline]
    pub fn question(&self, msg: &[u8]) -> Option<Question> {
        (self.qtype_at != 0).then(|| Question {
            name: Header::LEN as u32,
            qtype_at: self.qtype_at,
            qtype: word_at(msg, self.qtype_at),
            qclass: word_at(msg, self.qtype_at.wrapping_add(2)),
        })
    }

    /// The first OPT record of `msg` (as [`DnsInfo::edns`]), read back
    /// without expanding the rest.
    #[inline]
    pub fn edns(&self, msg: &[u8]) -> Option<Edns> {
        // The OPT record's CLASS, TTL and RDLENGTH are the 8 bytes before its RDATA.
        let at = self.options_at;
        (at != 0).then(|| Edns {
            udp_size: word_at(msg, at.wrapping_sub(8)),
            ext_rcode: byte_at(msg, at.wrapping_sub(6)),
            version: byte_at(msg, at.wrapping_sub(5)),
            flags: word_at(msg, at.wrapping_sub(4)),
            options_at: at,
            options_len: word_at(msg, at.wrapping_sub(2)),
        })
    }
}

/// The byte of `msg` at `at`, 0 past its end (summaries are read back
/// from the message they were made from, where it never is).
#[inline(always)]
fn byte_at(msg: &[u8], at: u32) -> u8 {
    msg.get(at as usize).copied().unwrap_or(0)
}

/// The big-endian 16-bit word of `msg` at `at` ([`byte_at`]'s rule past the end).
#[inline(always)]
fn word_at(msg: &[u8], at: u32) -> u16 {
    u16::from_be_bytes([byte_at(msg, at), byte_at(msg, at.wrapping_add(1))])
}

/// The shape of most queries in one pass: one question with an uncompressed
/// QNAME, no answer or authority records, at most an OPT record at the root.
/// Anything else returns `None` for [`scan_general`], which gives the same
/// result on these messages (tested on every corpus message).
#[inline(always)]
pub(crate) fn scan_query(msg: &[u8]) -> Option<DnsInfo> {
    let raw: &[u8; Header::LEN] = msg.get(..Header::LEN)?.try_into().ok()?;
    // QDCOUNT 1, ANCOUNT 0, NSCOUNT 0, ARCOUNT 0 or 1, as one comparison of
    // the four counts' 8 bytes.
    let [_, _, _, _, counts @ ..] = *raw;
    if u64::from_be_bytes(counts) & !1 != 1 << 48 {
        return None;
    }
    let header = Header::parse(raw)?;
    let mut pos = name::plain_root(msg, Header::LEN)?.0 + 1;
    if pos - Header::LEN > name::MAX_NAME {
        return None;
    }
    let fixed = msg.get(pos..pos + 4)?;
    let mut info = DnsInfo {
        header: Some(header),
        question: Some(Question {
            name: Header::LEN as u32,
            qtype_at: pos as u32,
            qtype: u16::from_be_bytes([fixed[0], fixed[1]]),
            qclass: u16::from_be_bytes([fixed[2], fixed[3]]),
        }),
        questions: 1,
        ..DnsInfo::default()
    };
    pos += 4;
    if header.arcount == 1 {
        let rr: &[u8; 11] = msg.get(pos..pos + 11)?.try_into().ok()?;
        let rdata_len = u16::from_be_bytes([rr[9], rr[10]]);
        if rr[0] != 0
            || u16::from_be_bytes([rr[1], rr[2]]) != TYPE_OPT
            || pos + 11 + usize::from(rdata_len) > msg.len()
            || (rdata_len != 0 && !edns_options_whole(msg, pos + 11, rdata_len))
        {
            return None;
        }
        info.edns = Some(Edns {
            udp_size: u16::from_be_bytes([rr[3], rr[4]]),
            ext_rcode: rr[5],
            version: rr[6],
            flags: u16::from_be_bytes([rr[7], rr[8]]),
            options_at: (pos + 11) as u32,
            options_len: rdata_len,
        });
        info.opt_records = 1;
        info.records[2] = 1;
    }
    Some(info)
}

/// [`scan`] for every message.
fn scan_general(msg: &[u8], cut: bool) -> DnsInfo {
    let mut info = DnsInfo::default();
    let Some(header) = Header::parse(msg) else {
        info.error = Some(if cut {
            DnsError::TruncatedCapture
        } else {
            DnsError::ShortHeader
        });
        info.partial_header = Header::parse_partial(msg);
        return info;
    };
    info.header = Some(header);
    if let Err((kind, at)) = scan_body(msg, header, &mut info).or_else(|e| {
        // A malformed OPT found earlier stays the first problem.
        if info.error.is_some() {
            Ok(())
        } else {
            Err(e)
        }
    }) {
        let out_of_bytes = matches!(
            kind,
            DnsError::LabelPastEnd | DnsError::CountExceedsMessage | DnsError::RdataPastEnd
        );
        info.error = Some(if cut && out_of_bytes {
            DnsError::TruncatedCapture
        } else {
            kind
        });
        info.error_offset = at as u32;
    }
    info
}

fn scan_body(msg: &[u8], header: Header, info: &mut DnsInfo) -> Result<(), (DnsError, usize)> {
    let mut pos = Header::LEN;
    for _ in 0..header.qdcount {
        if pos >= msg.len() {
            return Err((DnsError::CountExceedsMessage, pos));
        }
        let (question, next) = question_at(msg, pos)?;
        info.question.get_or_insert(question);
        info.questions += 1;
        pos = next;
    }
    if header.ancount == 0 && header.nscount == 0 && header.arcount == 0 {
        return Ok(()); // most queries
    }
    let sections = [
        (Section::Answer, header.ancount),
        (Section::Authority, header.nscount),
        (Section::Additional, header.arcount),
    ];
    for (index, (section, count)) in sections.into_iter().enumerate() {
        for _ in 0..count {
            if pos >= msg.len() {
                return Err((DnsError::CountExceedsMessage, pos));
            }
            let (record, next) = record_at(msg, pos, section)?;
            if record.rtype == TYPE_OPT && section == Section::Additional {
                let options_at = record.rdata_at as usize;
                if !edns_options_whole(msg, options_at, record.rdata_len) && info.error.is_none() {
                    // Noted, and the scan goes on: the rest of the message may be fine.
                    info.error = Some(DnsError::EdnsMalformed);
                    info.error_offset = record.rdata_at;
                }
                info.opt_records += 1;
                info.edns.get_or_insert(Edns {
                    udp_size: record.class,
                    ext_rcode: (record.ttl >> 24) as u8,
                    version: (record.ttl >> 16) as u8,
                    flags: record.ttl as u16,
                    options_at: record.rdata_at,
                    options_len: record.rdata_len,
                });
            }
            info.records[index] += 1;
            pos = next;
        }
    }
    Ok(())
}

/// Do the `len` bytes of OPT RDATA at `at` hold whole options (RFC 6891
/// §6.1.2: a code, a length, that many bytes), up to their exact end?
fn edns_options_whole(msg: &[u8], at: usize, len: u16) -> bool {
    let end = at + usize::from(len);
    let mut pos = at;
    while pos < end {
        let Some(length) = msg.get(pos + 2..pos + 4) else {
            return false;
        };
        pos += 4 + usize::from(u16::from_be_bytes([length[0], length[1]]));
    }
    pos == end
}

/// Iterates over the questions of `msg`; stops at the first that does not parse.
pub fn questions(msg: &[u8]) -> impl Iterator<Item = Question> + '_ {
    let count = Header::parse(msg).map_or(0, |h| h.qdcount);
    let mut pos = Header::LEN;
    (0..count).map_while(move |_| {
        let (question, next) = question_at(msg, pos).ok()?;
        pos = next;
        Some(question)
    })
}

/// Iterates over the records of `msg` (after its questions), in order; stops
/// at the first one that does not parse.
pub fn records(msg: &[u8]) -> Records<'_> {
    let header = Header::parse(msg).unwrap_or_default();
    let mut pos = Header::LEN;
    let mut ok = msg.len() >= Header::LEN;
    for _ in 0..header.qdcount {
        match question_at(msg, pos) {
            Ok((_, next)) => pos = next,
            Err(_) => {
                ok = false;
                break;
            }
        }
    }
    Records {
        msg,
        pos,
        left: if ok {
            [header.ancount, header.nscount, header.arcount]
        } else {
            [0; 3]
        },
    }
}

/// Iterator over the records of a message; see [`records`].
pub struct Records<'a> {
    msg: &'a [u8],
    pos: usize,
    left: [u16; 3],
}

impl Iterator for Records<'_> {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        let index = self.left.iter().position(|n| *n > 0)?;
        let section = [Section::Answer, Section::Authority, Section::Additional][index];
        self.left[index] -= 1;
        match record_at(self.msg, self.pos, section) {
            Ok((record, next)) => {
                self.pos = next;
                Some(record)
            }
            Err(_) => {
                self.left = [0; 3];
                None
            }
        }
    }
}

/// [`scan`]'s general path alone, for the fuzz target and tests, which
/// compare it with the fast path.
#[doc(hidden)]
pub fn scan_without_fast_path(msg: &[u8], cut: bool) -> DnsInfo {
    scan_general(msg, cut)
}

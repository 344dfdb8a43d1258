//! Responses from authoritative servers, decoded into owned records, and the
//! response the resolver hands back, composed from the records it trusts.
//!
//! Decoding uses the project's own parser (`dnsluice_core::dns`: the whole
//! message is checked by `scan` first, which never panics and bounds every
//! length; `records` then walks it). It is on the resolver's hot path (every
//! referral of every name) and needs no more than owner names, types, TTLs and
//! RDATA, so the allocation-heavy general decoder of hickory-proto would only
//! cost time here; hickory stays for structured RDATA in the records.
//! Names inside RDATA are decompressed for the types whose RDATA may be
//! compressed (RFC 3597 §4), so a record can be copied into another message.

use super::name::Name;
use dnsluice_core::dns::{self, Section};
use std::net::IpAddr;

/// Record types the resolver looks at.
pub mod types {
    /// A.
    pub const A: u16 = 1;
    /// NS.
    pub const NS: u16 = 2;
    /// CNAME.
    pub const CNAME: u16 = 5;
    /// SOA.
    pub const SOA: u16 = 6;
    /// AAAA.
    pub const AAAA: u16 = 28;
    /// DNAME.
    pub const DNAME: u16 = 39;
    /// DS (held by the parent side of a zone cut).
    pub const DS: u16 = 43;
    /// ANY (a question for every type).
    pub const ANY: u16 = 255;
}

/// RCODEs the resolver tells apart.
pub mod rcodes {
    /// NOERROR.
    pub const NOERROR: u16 = 0;
    /// FORMERR.
    pub const FORMERR: u16 = 1;
    /// SERVFAIL.
    pub const SERVFAIL: u16 = 2;
    /// NXDOMAIN.
    pub const NXDOMAIN: u16 = 3;
    /// NOTIMP.
    pub const NOTIMP: u16 = 4;
}

/// One resource record, owned, its RDATA without compression pointers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rr {
    /// The owner name.
    pub owner: Name,
    /// TYPE.
    pub rtype: u16,
    /// CLASS.
    pub class: u16,
    /// TTL, seconds.
    pub ttl: u32,
    /// RDATA (names in it uncompressed and lower-cased).
    pub rdata: Box<[u8]>,
}

impl Rr {
    /// The one name an NS, CNAME or DNAME record points to.
    pub fn target(&self) -> Option<Name> {
        let (name, end) = Name::from_message(&self.rdata, 0)?;
        (end == self.rdata.len()).then_some(name)
    }

    /// The address of an A or AAAA record.
    pub fn address(&self) -> Option<IpAddr> {
        match (self.rtype, self.rdata.len()) {
            (types::A, 4) => Some(IpAddr::from(<[u8; 4]>::try_from(&self.rdata[..]).ok()?)),
            (types::AAAA, 16) => Some(IpAddr::from(<[u8; 16]>::try_from(&self.rdata[..]).ok()?)),
            _ => None,
        }
    }

    /// For an SOA record: how long a negative answer it comes with may be
    /// cached, the lesser of its TTL and its MINIMUM field (RFC 2308 §5).
    pub fn negative_ttl(&self) -> Option<u32> {
        if self.rtype != types::SOA || self.rdata.len() < 4 {
            return None;
        }
        let minimum = u32::from_be_bytes(self.rdata[self.rdata.len() - 4..].try_into().ok()?);
        Some(self.ttl.min(minimum))
    }
}

/// A decoded response.
#[derive(Clone, Debug, Default)]
pub struct Reply {
    /// The RCODE (extended by EDNS when present).
    pub rcode: u16,
    /// The response has an OPT record (EDNS).
    pub edns: bool,
    /// AA.
    pub authoritative: bool,
    /// TC.
    pub truncated: bool,
    /// The answer section.
    pub answer: Vec<Rr>,
    /// The authority section.
    pub authority: Vec<Rr>,
    /// The additional section (OPT left out).
    pub additional: Vec<Rr>,
}

/// Why a response cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadReply {
    /// The message does not parse; the parser's kind of problem.
    Malformed(&'static str),
    /// QR is not set, or the opcode is not QUERY.
    NotAResponse,
}

impl std::fmt::Display for BadReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadReply::Malformed(kind) => write!(f, "malformed response ({kind})"),
            BadReply::NotAResponse => f.write_str("not a response to a query"),
        }
    }
}

impl Reply {
    /// Decodes `msg`.
    pub fn decode(msg: &[u8]) -> Result<Reply, BadReply> {
        let info = dns::scan(msg, false);
        if let Some(error) = info.error {
            return Err(BadReply::Malformed(error.as_str()));
        }
        let header = info.header.ok_or(BadReply::Malformed("short_header"))?;
        if !header.qr() || header.opcode() != 0 {
            return Err(BadReply::NotAResponse);
        }
        let mut reply = Reply {
            rcode: info.rcode(),
            edns: info.edns.is_some(),
            authoritative: header.aa(),
            truncated: header.tc(),
            ..Reply::default()
        };
        for record in dns::records(msg) {
            if record.rtype == dns::TYPE_OPT {
                continue;
            }
            let rr = owned(msg, &record).ok_or(BadReply::Malformed("rdata_name"))?;
            match record.section {
                Section::Answer => reply.answer.push(rr),
                Section::Authority => reply.authority.push(rr),
                Section::Additional => reply.additional.push(rr),
            }
        }
        Ok(reply)
    }
}

/// The parts of an RDATA layout that matter for decompression.
#[derive(Clone, Copy)]
enum Part {
    /// A domain name (maybe compressed).
    Name,
    /// This many octets as they are.
    Fixed(usize),
}

/// RDATA layouts with names that may be compressed (RFC 1035 types, and
/// those RFC 3597 §4 says receivers decompress); `None`: copy as it is.
fn layout(rtype: u16) -> Option<&'static [Part]> {
    use Part::{Fixed, Name};
    Some(match rtype {
        // NS MD MF CNAME MB MG MR PTR DNAME
        2 | 3 | 4 | 5 | 7 | 8 | 9 | 12 | 39 => &[Name],
        // SOA: mname rname and five numbers
        6 => &[Name, Name, Fixed(20)],
        // MINFO, RP
        14 | 17 => &[Name, Name],
        // MX AFSDB RT KX: a number, a name
        15 | 18 | 21 | 36 => &[Fixed(2), Name],
        // PX
        26 => &[Fixed(2), Name, Name],
        // SRV
        33 => &[Fixed(6), Name],
        _ => return None,
    })
}

/// The record at `record` in `msg`, owned, RDATA decompressed.
fn owned(msg: &[u8], record: &dns::Record) -> Option<Rr> {
    let (owner, _) = Name::from_message(msg, record.name as usize)?;
    let start = record.rdata_at as usize;
    let end = start + usize::from(record.rdata_len);
    let rdata: Box<[u8]> = match layout(record.rtype) {
        None => msg.get(start..end)?.into(),
        Some(parts) => {
            let mut out = Vec::with_capacity(usize::from(record.rdata_len) + 16);
            let mut pos = start;
            for part in parts {
                match part {
                    Part::Name => {
                        let (name, after) = Name::from_message(msg, pos)?;
                        out.extend_from_slice(name.wire());
                        pos = after;
                    }
                    Part::Fixed(n) => {
                        out.extend_from_slice(msg.get(pos..pos + n)?);
                        pos += n;
                    }
                }
                if pos > end {
                    return None;
                }
            }
            if pos != end {
                return None;
            }
            out.into_boxed_slice()
        }
    };
    Some(Rr {
        owner,
        rtype: record.rtype,
        class: record.class,
        ttl: record.ttl,
        rdata,
    })
}

/// The question a composed response repeats.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Asked {
    /// QNAME.
    pub name: Name,
    /// QTYPE.
    pub qtype: u16,
    /// QCLASS.
    pub qclass: u16,
}

/// A response as a recursive resolver gives it: QR, RD and RA set, `rcode`,
/// the question, and the sections (no compression).
pub fn compose(asked: &Asked, rcode: u16, answer: &[Rr], authority: &[Rr]) -> Vec<u8> {
    let size: usize = answer
        .iter()
        .chain(authority)
        .map(|rr| rr.owner.wire().len() + 10 + rr.rdata.len())
        .sum();
    let mut out = Vec::with_capacity(12 + asked.name.wire().len() + 4 + size);
    let flags: u16 = 0x8000 | 0x0100 | 0x0080 | (rcode & 0xf);
    let count = |n: usize| u16::try_from(n).unwrap_or(u16::MAX).to_be_bytes();
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&[0, 1]);
    out.extend_from_slice(&count(answer.len()));
    out.extend_from_slice(&count(authority.len()));
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(asked.name.wire());
    out.extend_from_slice(&asked.qtype.to_be_bytes());
    out.extend_from_slice(&asked.qclass.to_be_bytes());
    for rr in answer.iter().chain(authority) {
        out.extend_from_slice(rr.owner.wire());
        out.extend_from_slice(&rr.rtype.to_be_bytes());
        out.extend_from_slice(&rr.class.to_be_bytes());
        out.extend_from_slice(&rr.ttl.to_be_bytes());
        out.extend_from_slice(&(rr.rdata.len() as u16).to_be_bytes());
        out.extend_from_slice(&rr.rdata);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A response to `www.example.com A` with a compressed CNAME and an MX,
    /// as a server writes it (pointers to the question's name).
    fn sample() -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(b"\x12\x34\x84\x00\x00\x01\x00\x02\x00\x00\x00\x00");
        m.extend_from_slice(b"\x03www\x07example\x03com\x00\x00\x01\x00\x01");
        // www.example.com CNAME web.example.com (web + pointer to example.com at 16)
        m.extend_from_slice(b"\xc0\x0c\x00\x05\x00\x01\x00\x00\x0e\x10\x00\x06\x03WEB\xc0\x10");
        // example.com MX 10 mail.example.com
        m.extend_from_slice(
            b"\xc0\x10\x00\x0f\x00\x01\x00\x00\x0e\x10\x00\x09\x00\x0a\x04mail\xc0\x10",
        );
        m
    }

    #[test]
    fn records_come_out_owned_and_decompressed() {
        let reply = Reply::decode(&sample()).unwrap();
        assert!(reply.authoritative && !reply.truncated);
        assert_eq!(reply.rcode, 0);
        let cname = &reply.answer[0];
        assert_eq!(cname.owner, Name::parse("www.example.com").unwrap());
        assert_eq!(cname.ttl, 3600);
        assert_eq!(
            cname.target().unwrap(),
            Name::parse("web.example.com").unwrap()
        );
        let mx = &reply.answer[1];
        assert_eq!(&mx.rdata[..], b"\x00\x0a\x04mail\x07example\x03com\x00");
    }

    #[test]
    fn a_composed_response_reads_back_as_dig_would_print_it() {
        let reply = Reply::decode(&sample()).unwrap();
        let asked = Asked {
            name: Name::parse("www.example.com").unwrap(),
            qtype: 1,
            qclass: 1,
        };
        let msg = compose(&asked, 0, &reply.answer, &[]);
        let info = dns::scan(&msg, false);
        assert_eq!(info.error, None);
        assert_eq!(info.records, [2, 0, 0]);
        let header = info.header.unwrap();
        assert!(header.qr() && header.rd() && header.ra() && !header.aa());
        let texts: Vec<String> = dns::records(&msg)
            .map(|r| {
                let mut out = Vec::new();
                dns::rdata::write(&msg, &r, &mut out);
                String::from_utf8(out).unwrap()
            })
            .collect();
        assert_eq!(texts, ["web.example.com.", "10 mail.example.com."]);
    }

    #[test]
    fn broken_messages_are_refused_with_a_reason() {
        let mut msg = sample();
        msg.truncate(40);
        assert!(matches!(Reply::decode(&msg), Err(BadReply::Malformed(_))));
        let mut query = sample();
        query[2] &= 0x7f; // QR off
        assert_eq!(Reply::decode(&query).unwrap_err(), BadReply::NotAResponse);
        // An MX whose name runs past its RDATA.
        let mut bad = sample();
        let at = bad.len() - 11;
        bad[at] = 0x00;
        bad[at + 1] = 0x03; // rdlength 3: the name does not fit
        bad.truncate(bad.len() - 6);
        bad[7] = 2;
        assert!(Reply::decode(&bad).is_err());
    }
}

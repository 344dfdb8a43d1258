//! A zone transfer's response, sans I/O (RFC 5936): many messages on one
//! stream, each answering the one AXFR query, the first opening with the
//! zone's SOA and the last closing with it again (§2.2). [`TransferState`]
//! is fed each message as it is read and says when the transfer is whole,
//! or why it failed: an error RCODE (REFUSED, NOTAUTH), a message for
//! another query, a first record that is no SOA.

use super::question::{answers, first_question, id_of};

/// The SOA record type.
const TYPE_SOA: u16 = 6;

/// Why a transfer failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransferError {
    /// The server answered with an error RCODE (the transfer is refused).
    #[error("the server answered the transfer with {0}")]
    Rcode(&'static str),
    /// A message too short or cut inside a record.
    #[error("a malformed message in the transfer: {0}")]
    Malformed(&'static str),
    /// A message that does not answer the query (another id or question).
    #[error("a message in the transfer does not answer the query")]
    Unrelated,
    /// The first record of the transfer is not the zone's SOA.
    #[error("the transfer does not start with the zone's SOA")]
    NoOpeningSoa,
}

/// How far a transfer has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// More messages are to come.
    More,
    /// The closing SOA came: the transfer is whole.
    Done,
}

/// Follows one transfer's messages; see the module docs.
#[derive(Debug)]
pub struct TransferState {
    id: u16,
    question: Option<Vec<u8>>,
    /// Records seen so far (answer sections).
    records: u64,
    messages: u64,
}

impl TransferState {
    /// Follows the response to `query` (the AXFR query as sent, id included).
    pub fn new(query: &[u8]) -> TransferState {
        TransferState {
            id: id_of(query).unwrap_or(0),
            question: first_question(query).map(<[u8]>::to_vec),
            records: 0,
            messages: 0,
        }
    }

    /// Messages fed so far.
    pub fn messages(&self) -> u64 {
        self.messages
    }

    /// Records fed so far (both SOAs counted).
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Takes the next message of the response.
    pub fn feed(&mut self, msg: &[u8]) -> Result<Progress, TransferError> {
        if msg.len() < 12 {
            return Err(TransferError::Malformed("shorter than a DNS header"));
        }
        if id_of(msg) != Some(self.id) || msg[2] & 0x80 == 0 {
            return Err(TransferError::Unrelated);
        }
        let rcode = msg[3] & 0x0f;
        if rcode != 0 {
            return Err(TransferError::Rcode(rcode_name(rcode)));
        }
        // RFC 5936 §2.2.1: later messages may leave the question out (and
        // a first one without it is judged by its id, as other answers are).
        let qdcount = u16::from_be_bytes([msg[4], msg[5]]);
        if qdcount > 0 && !answers(self.question.as_deref(), msg) {
            return Err(TransferError::Unrelated);
        }
        self.messages += 1;
        let mut at = 12;
        for _ in 0..qdcount {
            at = skip_name(msg, at)? + 4;
        }
        let ancount = u16::from_be_bytes([msg[6], msg[7]]);
        for _ in 0..ancount {
            at = skip_name(msg, at)?;
            let fixed = msg
                .get(at..at + 10)
                .ok_or(TransferError::Malformed("a record is cut short"))?;
            let rtype = u16::from_be_bytes([fixed[0], fixed[1]]);
            let rdlength = usize::from(u16::from_be_bytes([fixed[8], fixed[9]]));
            at += 10 + rdlength;
            if at > msg.len() {
                return Err(TransferError::Malformed("a record's data is cut short"));
            }
            self.records += 1;
            match (self.records, rtype) {
                (1, TYPE_SOA) => {}
                (1, _) => return Err(TransferError::NoOpeningSoa),
                // The SOA again ends the transfer (what follows in this
                // message, if anything, is not part of it).
                (_, TYPE_SOA) => return Ok(Progress::Done),
                _ => {}
            }
        }
        Ok(Progress::More)
    }
}

/// Steps over the name at `at`: the offset after it.
fn skip_name(msg: &[u8], mut at: usize) -> Result<usize, TransferError> {
    loop {
        let len = *msg
            .get(at)
            .ok_or(TransferError::Malformed("a name runs past the end"))?;
        match len {
            0 => return Ok(at + 1),
            1..=63 => at += 1 + usize::from(len),
            _ if len & 0xc0 == 0xc0 => return Ok(at + 2),
            _ => return Err(TransferError::Malformed("a reserved label type")),
        }
    }
}

/// The mnemonic of an RCODE (RFC 6895 §2.3), header bits only.
fn rcode_name(rcode: u8) -> &'static str {
    match rcode {
        1 => "FORMERR",
        2 => "SERVFAIL",
        3 => "NXDOMAIN",
        4 => "NOTIMP",
        5 => "REFUSED",
        6 => "YXDOMAIN",
        7 => "YXRRSET",
        8 => "NXRRSET",
        9 => "NOTAUTH",
        10 => "NOTZONE",
        _ => "an unknown RCODE",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::query::{build, QueryOptions};

    /// The AXFR query for `zone.` with id 0x4242.
    fn query() -> Vec<u8> {
        let mut q = Vec::new();
        build(0x4242, "zone", 252, &QueryOptions::default(), &mut q).unwrap();
        q
    }

    /// A response to [`query`] carrying records of `types` (owner: a
    /// pointer to the question's name; empty RDATA but for 4 bytes of A),
    /// with or without the question.
    fn response(types: &[u16], with_question: bool, rcode: u8) -> Vec<u8> {
        let q = query();
        let mut m = vec![0x42, 0x42, 0x80, rcode, 0, u8::from(with_question), 0];
        m.push(types.len() as u8);
        m.extend_from_slice(&[0, 0, 0, 0]);
        if with_question {
            m.extend_from_slice(first_question(&q).unwrap());
        }
        for &t in types {
            m.extend_from_slice(&[0xc0, 12]);
            m.extend_from_slice(&t.to_be_bytes());
            m.extend_from_slice(&[0, 1, 0, 0, 0x0e, 0x10]);
            let rdata: &[u8] = if t == 1 { &[10, 0, 0, 1] } else { &[] };
            m.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
            m.extend_from_slice(rdata);
        }
        m
    }

    #[test]
    fn a_transfer_ends_at_the_second_soa_across_messages() {
        let mut t = TransferState::new(&query());
        assert_eq!(t.feed(&response(&[6, 2, 1], true, 0)), Ok(Progress::More));
        // Later messages may leave the question out (RFC 5936 §2.2.1).
        assert_eq!(t.feed(&response(&[1, 1], false, 0)), Ok(Progress::More));
        assert_eq!(t.feed(&response(&[1, 6], false, 0)), Ok(Progress::Done));
        assert_eq!((t.messages(), t.records()), (3, 7));
        // A zone of only its SOA: SOA, SOA in one message.
        let mut t = TransferState::new(&query());
        assert_eq!(t.feed(&response(&[6, 6], true, 0)), Ok(Progress::Done));
    }

    #[test]
    fn refusals_strangers_and_bad_starts_fail() {
        let mut t = TransferState::new(&query());
        assert_eq!(
            t.feed(&response(&[], true, 9)),
            Err(TransferError::Rcode("NOTAUTH"))
        );
        let mut t = TransferState::new(&query());
        assert_eq!(
            t.feed(&response(&[], true, 5)),
            Err(TransferError::Rcode("REFUSED"))
        );
        let mut t = TransferState::new(&query());
        assert_eq!(
            t.feed(&response(&[1, 6], true, 0)),
            Err(TransferError::NoOpeningSoa)
        );
        // Another id, or another question, is not ours.
        let mut other_question = response(&[6], true, 0);
        other_question[13] = b'y';
        assert_eq!(
            TransferState::new(&query()).feed(&other_question),
            Err(TransferError::Unrelated)
        );
        let mut other = response(&[6], true, 0);
        other[1] = 0x43;
        assert_eq!(
            TransferState::new(&query()).feed(&other),
            Err(TransferError::Unrelated)
        );
        // Cut inside a record.
        let mut cut = response(&[6, 1], true, 0);
        cut.truncate(cut.len() - 2);
        assert!(matches!(
            TransferState::new(&query()).feed(&cut),
            Err(TransferError::Malformed(_))
        ));
    }
}

//! DNS messages on a byte stream (TCP, TLS): each is preceded by its length,
//! two bytes, most significant first, not counting the two (RFC 1035 §4.2.2).
//! A client should hand the prefix and the message to the stream in one write
//! (RFC 7766 §8), which [`push_frame`] makes possible: it appends both to one
//! buffer. A read may end anywhere — inside the prefix, inside a message, or
//! after several messages — so [`FrameReader`] keeps the bytes until a message
//! is whole and then hands it out as a slice of its buffer.

/// Bytes of the length prefix.
pub const PREFIX_LEN: usize = 2;

/// Why a message cannot be framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The length does not fit the two-byte prefix.
    #[error("a DNS message on a stream is at most 65535 bytes, this one is {0}")]
    TooLong(usize),
    /// No room for the id the frame is to carry.
    #[error("a DNS message is at least 2 bytes (its id), this one is {0}")]
    TooShort(usize),
}

/// Appends `message` to `out` framed: its length, then the message with its
/// id (first two bytes) replaced by `id`. `out` is unchanged on error.
pub fn push_frame(out: &mut Vec<u8>, message: &[u8], id: u16) -> Result<(), FrameError> {
    let len = u16::try_from(message.len()).map_err(|_| FrameError::TooLong(message.len()))?;
    if message.len() < 2 {
        return Err(FrameError::TooShort(message.len()));
    }
    out.reserve(PREFIX_LEN + message.len());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&message[2..]);
    Ok(())
}

/// Collects bytes read from a stream and cuts them into whole messages.
#[derive(Debug, Default)]
pub struct FrameReader {
    buf: Vec<u8>,
    /// Where the first message not yet handed out starts.
    at: usize,
}

impl FrameReader {
    /// An empty reader.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds bytes as they were read (any amount, cut anywhere).
    pub fn push(&mut self, bytes: &[u8]) {
        if self.at > 0 {
            // What was handed out is dropped before more comes in.
            self.buf.drain(..self.at);
            self.at = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole message (without its prefix), if one is there.
    pub fn next_message(&mut self) -> Option<&[u8]> {
        let rest = self.buf.len() - self.at;
        if rest < PREFIX_LEN {
            return None;
        }
        let len = usize::from(u16::from_be_bytes([
            self.buf[self.at],
            self.buf[self.at + 1],
        ]));
        if rest < PREFIX_LEN + len {
            return None;
        }
        let start = self.at + PREFIX_LEN;
        self.at = start + len;
        Some(&self.buf[start..start + len])
    }

    /// Whether bytes of an unfinished message are held (a stream that ends
    /// now ends inside a message).
    pub fn is_mid_message(&self) -> bool {
        self.buf.len() > self.at
    }

    /// Forgets everything held (the stream is gone).
    pub fn clear(&mut self) {
        self.buf.clear();
        self.at = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 8484 §4.1.1's query (www.example.com A, id 0, RD), 33 bytes.
    const QUERY: [u8; 33] = [
        0x00, 0x00, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x77, 0x77,
        0x77, 0x07, 0x65, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65, 0x03, 0x63, 0x6f, 0x6d, 0x00, 0x00,
        0x01, 0x00, 0x01,
    ];

    /// A 12-byte header alone: id 0xabcd, QR=1, RCODE=FORMERR, no records.
    const FORMERR: [u8; 12] = [0xab, 0xcd, 0x81, 0x01, 0, 0, 0, 0, 0, 0, 0, 0];

    #[test]
    fn a_frame_is_the_length_then_the_message_with_its_new_id() {
        // RFC 1035 §4.2.2: two bytes of length (33 = 0x0021), the length
        // field itself not counted, then the message.
        let mut out = vec![0xee]; // what was there stays
        push_frame(&mut out, &QUERY, 0x1234).unwrap();
        let mut expected = vec![0xee, 0x00, 0x21, 0x12, 0x34];
        expected.extend_from_slice(&QUERY[2..]);
        assert_eq!(out, expected);
        // Two frames back to back in one buffer: one write (RFC 7766 §8).
        push_frame(&mut out, &FORMERR, 0xabcd).unwrap();
        assert_eq!(&out[out.len() - 14..out.len() - 12], &[0x00, 0x0c]);
        assert_eq!(&out[out.len() - 12..], &FORMERR);
    }

    #[test]
    fn messages_that_do_not_fit_are_refused_and_nothing_is_written() {
        let mut out = Vec::new();
        let big = vec![0u8; 65536];
        assert_eq!(
            push_frame(&mut out, &big, 1),
            Err(FrameError::TooLong(65536))
        );
        assert_eq!(push_frame(&mut out, &[7], 1), Err(FrameError::TooShort(1)));
        assert!(out.is_empty());
        // 65535 bytes is the largest that fits: prefix ff ff.
        push_frame(&mut out, &big[..65535], 1).unwrap();
        assert_eq!(&out[..4], &[0xff, 0xff, 0x00, 0x01]);
        assert_eq!(out.len(), 65537);
    }

    /// Two frames (QUERY with id 0x0102, FORMERR) as they come off the wire.
    fn stream() -> Vec<u8> {
        let mut wire = Vec::new();
        push_frame(&mut wire, &QUERY, 0x0102).unwrap();
        push_frame(&mut wire, &FORMERR, 0xabcd).unwrap();
        wire
    }

    fn first_expected() -> Vec<u8> {
        let mut q = QUERY.to_vec();
        q[..2].copy_from_slice(&[0x01, 0x02]);
        q
    }

    #[test]
    fn reads_cut_at_every_byte_give_the_same_two_messages() {
        let wire = stream();
        for cut in 0..=wire.len() {
            let mut reader = FrameReader::new();
            let mut got: Vec<Vec<u8>> = Vec::new();
            for part in [&wire[..cut], &wire[cut..]] {
                reader.push(part);
                while let Some(m) = reader.next_message() {
                    got.push(m.to_vec());
                }
            }
            assert_eq!(got, vec![first_expected(), FORMERR.to_vec()], "cut {cut}");
            assert!(!reader.is_mid_message(), "cut {cut}");
        }
    }

    #[test]
    fn one_byte_at_a_time_and_a_message_split_inside_the_prefix() {
        let wire = stream();
        let mut reader = FrameReader::new();
        let mut got = Vec::new();
        for (i, byte) in wire.iter().enumerate() {
            reader.push(std::slice::from_ref(byte));
            if let Some(m) = reader.next_message() {
                got.push((i, m.to_vec()));
            }
            // Until the 35th byte (2 + 33) the first message is not whole.
            if i < 34 {
                assert!(got.is_empty(), "byte {i}");
                assert!(reader.is_mid_message());
            }
        }
        assert_eq!(
            got,
            vec![(34, first_expected()), (wire.len() - 1, FORMERR.to_vec())]
        );
        // Half a prefix held: the stream would end inside a message.
        reader.push(&[0x00]);
        assert!(reader.next_message().is_none());
        assert!(reader.is_mid_message());
        reader.clear();
        assert!(!reader.is_mid_message());
    }

    #[test]
    fn an_empty_message_is_a_zero_prefix() {
        // A zero length frames nothing: a message of no bytes, handed out as such.
        let mut reader = FrameReader::new();
        reader.push(&[0x00, 0x00, 0x00]);
        assert_eq!(reader.next_message(), Some(&[][..]));
        assert!(reader.next_message().is_none());
        assert!(reader.is_mid_message());
    }
}

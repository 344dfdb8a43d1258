//! Frame Streams, the framing dnstap travels in, sans I/O: what the bytes
//! at the current position hold ([`next`]), and the frames to write
//! ([`push_data`], [`push_control`]).
//!
//! A data frame is a 4-byte big-endian length and that many bytes. A zero
//! length starts a control frame: its own 4-byte length, a 4-byte type
//! (ACCEPT 1, START 2, STOP 3, READY 4, FINISH 5) and fields, each a
//! 4-byte field type (CONTENT_TYPE 1), a 4-byte length and the content
//! type's bytes. A file is START, data frames, STOP. On a socket the
//! sender offers READY with its content types, the receiver answers
//! ACCEPT, then START, data, STOP, and the receiver answers FINISH.

pub mod reader;

/// Control frame type ACCEPT: the receiver takes one of the offered content types.
pub const ACCEPT: u32 = 1;
/// Control frame type START: data frames of one content type follow.
pub const START: u32 = 2;
/// Control frame type STOP: no more data frames.
pub const STOP: u32 = 3;
/// Control frame type READY: the sender offers content types.
pub const READY: u32 = 4;
/// Control frame type FINISH: the receiver saw STOP.
pub const FINISH: u32 = 5;
/// Control field CONTENT_TYPE.
pub const FIELD_CONTENT_TYPE: u32 = 1;
/// The longest control frame a receiver must accept (the Frame Streams spec).
pub const MAX_CONTROL: usize = 512;
/// The longest data frame read; a longer length is taken as a broken stream.
pub const MAX_DATA: usize = 16 << 20;

/// A frame at the current position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A data frame's payload.
    Data(&'a [u8]),
    /// A control frame.
    Control(Control<'a>),
}

/// A control frame: its type and its fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Control<'a> {
    /// ACCEPT, START, STOP, READY or FINISH (or another number).
    pub kind: u32,
    fields: &'a [u8],
}

impl<'a> Control<'a> {
    /// The content types it names (START: at most one; READY, ACCEPT: any).
    pub fn content_types(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        let mut rest = self.fields;
        std::iter::from_fn(move || loop {
            let kind = be32(rest, 0)?;
            let len = be32(rest, 4)? as usize;
            let value = rest.get(8..8 + len)?;
            rest = &rest[8 + len..];
            if kind == FIELD_CONTENT_TYPE {
                return Some(value);
            }
        })
    }

    /// Whether it names `content_type` (a START without one names any).
    pub fn names(&self, content_type: &[u8]) -> bool {
        let mut types = self.content_types().peekable();
        types.peek().is_none() || types.any(|t| t == content_type)
    }
}

/// Why the bytes are not a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// A data frame longer than [`MAX_DATA`]: the stream cannot be followed.
    DataTooLong(usize),
    /// A control frame longer than [`MAX_CONTROL`] or shorter than its type.
    BadControlLength(usize),
    /// A control frame whose fields do not add up (skipped: its length is known).
    BadControlFields {
        /// Bytes to skip past it.
        consumed: usize,
    },
}

impl FrameError {
    /// The counter the error is counted under.
    pub fn kind(self) -> &'static str {
        match self {
            FrameError::DataTooLong(_) => "frame_too_long",
            FrameError::BadControlLength(_) => "bad_control_length",
            FrameError::BadControlFields { .. } => "bad_control_fields",
        }
    }
}

fn be32(buf: &[u8], at: usize) -> Option<u32> {
    let bytes = buf.get(at..at + 4)?;
    Some(u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

/// How many bytes from the start of `buf` the frame there needs, as far as
/// `buf` tells (at least its next length field).
pub fn needed(buf: &[u8]) -> usize {
    match be32(buf, 0) {
        None => 4,
        Some(0) => match be32(buf, 4) {
            None => 8,
            Some(len) => 8 + (len as usize).min(MAX_CONTROL),
        },
        Some(len) => 4 + (len as usize).min(MAX_DATA),
    }
}

/// The frame at the start of `buf` and the bytes it takes, or `Ok(None)`
/// when more bytes are needed.
pub fn next(buf: &[u8]) -> Result<Option<(Frame<'_>, usize)>, FrameError> {
    let Some(len) = be32(buf, 0) else {
        return Ok(None);
    };
    let len = len as usize;
    if len > 0 {
        if len > MAX_DATA {
            return Err(FrameError::DataTooLong(len));
        }
        return Ok(buf.get(4..4 + len).map(|data| (Frame::Data(data), 4 + len)));
    }
    let Some(control_len) = be32(buf, 4) else {
        return Ok(None);
    };
    let control_len = control_len as usize;
    if !(4..=MAX_CONTROL).contains(&control_len) {
        return Err(FrameError::BadControlLength(control_len));
    }
    let Some(body) = buf.get(8..8 + control_len) else {
        return Ok(None);
    };
    let consumed = 8 + control_len;
    let kind = be32(body, 0).unwrap_or(0);
    let fields = &body[4..];
    // Every field must fit exactly.
    let mut at = 0;
    while at < fields.len() {
        let len = be32(fields, at + 4).ok_or(FrameError::BadControlFields { consumed })?;
        at += 8 + len as usize;
    }
    if at != fields.len() {
        return Err(FrameError::BadControlFields { consumed });
    }
    Ok(Some((Frame::Control(Control { kind, fields }), consumed)))
}

/// Appends a data frame.
pub fn push_data(payload: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
}

/// Appends a control frame of `kind`, naming `content_type` if given.
pub fn push_control(kind: u32, content_type: Option<&[u8]>, out: &mut Vec<u8>) {
    let fields = content_type.map_or(0, |t| 8 + t.len());
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&((4 + fields) as u32).to_be_bytes());
    out.extend_from_slice(&kind.to_be_bytes());
    if let Some(t) = content_type {
        out.extend_from_slice(&FIELD_CONTENT_TYPE.to_be_bytes());
        out.extend_from_slice(&(t.len() as u32).to_be_bytes());
        out.extend_from_slice(t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_split_reads_need_more() {
        let mut buf = Vec::new();
        push_control(START, Some(b"protobuf:dnstap.Dnstap"), &mut buf);
        push_data(b"hello", &mut buf);
        push_control(STOP, None, &mut buf);
        // The START frame as the spec lays it out.
        assert_eq!(&buf[..12], &[0, 0, 0, 0, 0, 0, 0, 34, 0, 0, 0, 2]);
        for cut in 0..buf.len() {
            let got = next(&buf[..cut]).unwrap();
            assert!(got.is_none() || got.unwrap().1 <= cut);
        }
        let (frame, n) = next(&buf).unwrap().unwrap();
        let Frame::Control(c) = frame else { panic!() };
        assert_eq!(c.kind, START);
        assert_eq!(
            c.content_types().collect::<Vec<_>>(),
            [&b"protobuf:dnstap.Dnstap"[..]]
        );
        assert!(c.names(b"protobuf:dnstap.Dnstap") && !c.names(b"other"));
        let (frame, m) = next(&buf[n..]).unwrap().unwrap();
        assert_eq!(frame, Frame::Data(b"hello"));
        let (frame, _) = next(&buf[n + m..]).unwrap().unwrap();
        let Frame::Control(c) = frame else { panic!() };
        assert_eq!(c.kind, STOP);
        assert!(c.names(b"anything"));
    }

    #[test]
    fn broken_frames_are_errors_of_a_kind() {
        assert_eq!(
            next(&[0x10, 0, 0, 0]),
            Err(FrameError::DataTooLong(0x1000_0000))
        );
        assert_eq!(
            next(&[0, 0, 0, 0, 0, 0, 0, 2]),
            Err(FrameError::BadControlLength(2))
        );
        assert_eq!(
            next(&[0, 0, 0, 0, 0, 0, 4, 0]),
            Err(FrameError::BadControlLength(1024))
        );
        // A field claiming 9 bytes in a frame that holds 3.
        let bad = [
            0, 0, 0, 0, 0, 0, 0, 15, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 9, 1, 2, 3,
        ];
        assert_eq!(
            next(&bad),
            Err(FrameError::BadControlFields { consumed: 23 })
        );
    }
}

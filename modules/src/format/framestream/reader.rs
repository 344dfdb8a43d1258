//! Frames read from a byte stream (a file, standard input, a socket): the
//! Frame Streams layout of [`super`] over the growable read buffer the
//! capture inputs use ([`BufferedStream`]).

use super::{Frame, FrameError};
use crate::format::framestream;
use crate::format::stream::{BufferedStream, RecordSource};
use std::io;

/// Reads one frame at a time; a frame borrows the buffer until the next call.
pub struct FrameStreamReader {
    stream: BufferedStream,
    /// Bytes of the frame handed out last, consumed at the next call.
    pending: usize,
    /// Bytes read past, for messages.
    offset: u64,
}

/// What the stream holds next.
pub enum Next<'a> {
    /// A frame.
    Frame(Frame<'a>),
    /// Bytes that are not a frame. After [`FrameError::BadControlFields`]
    /// the reader has skipped the frame and goes on; after the others the
    /// stream cannot be followed and the reader reports its end.
    Malformed(FrameError),
    /// The end of the stream; `partial` bytes of an incomplete frame were left.
    End {
        /// Bytes of an incomplete frame at the end.
        partial: usize,
    },
}

impl FrameStreamReader {
    /// Reads frames from `stream`.
    pub fn new(stream: BufferedStream) -> Self {
        FrameStreamReader {
            stream,
            pending: 0,
            offset: 0,
        }
    }

    /// The byte offset of the current frame in the stream.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// At the end: why the stream ended early, when it did (a compressed
    /// stream cut off, whatever frame it was in).
    pub fn end_note(&self) -> Option<String> {
        self.stream.end_note()
    }

    /// The next frame.
    pub fn next_frame(&mut self) -> io::Result<Next<'_>> {
        self.stream.consume(std::mem::take(&mut self.pending));
        self.offset = self.stream.offset();
        loop {
            match framestream::next(self.stream.window()) {
                Ok(Some(_)) => break,
                Ok(None) => {
                    let needed = framestream::needed(self.stream.window());
                    if !self.stream.fill(needed)? && self.stream.window().len() < needed {
                        let partial = self.stream.window().len();
                        self.stream.consume(partial);
                        return Ok(Next::End { partial });
                    }
                }
                Err(e @ FrameError::BadControlFields { consumed }) => {
                    self.stream.consume(consumed);
                    return Ok(Next::Malformed(e));
                }
                Err(e) => {
                    // Lengths that cannot be trusted: nothing after them can be.
                    let rest = self.stream.window().len();
                    self.stream.consume(rest);
                    self.stream = BufferedStream::new(Box::new(io::empty()), 16);
                    return Ok(Next::Malformed(e));
                }
            }
        }
        match framestream::next(self.stream.window()) {
            Ok(Some((frame, consumed))) => {
                self.pending = consumed;
                Ok(Next::Frame(frame))
            }
            _ => unreachable!("the frame was complete a moment ago"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::framestream::{push_control, push_data, START, STOP};

    fn reader(bytes: Vec<u8>, chunk: usize) -> FrameStreamReader {
        FrameStreamReader::new(BufferedStream::new(Box::new(io::Cursor::new(bytes)), chunk))
    }

    #[test]
    fn frames_across_small_reads_then_the_end() {
        let mut bytes = Vec::new();
        push_control(START, Some(b"t"), &mut bytes);
        for i in 0..50u8 {
            push_data(&vec![i; usize::from(i) * 3 + 1], &mut bytes);
        }
        push_control(STOP, None, &mut bytes);
        bytes.extend_from_slice(&[0, 0, 0, 9, 1]); // an incomplete frame
        let mut r = reader(bytes, 7);
        assert!(
            matches!(r.next_frame().unwrap(), Next::Frame(Frame::Control(c)) if c.kind == START)
        );
        for i in 0..50u8 {
            match r.next_frame().unwrap() {
                Next::Frame(Frame::Data(d)) => {
                    assert!(d.len() == usize::from(i) * 3 + 1 && d.iter().all(|b| *b == i))
                }
                _ => panic!("frame {i}"),
            }
        }
        assert!(
            matches!(r.next_frame().unwrap(), Next::Frame(Frame::Control(c)) if c.kind == STOP)
        );
        assert!(matches!(r.next_frame().unwrap(), Next::End { partial: 5 }));
    }

    #[test]
    fn a_length_past_the_limit_ends_the_stream() {
        let mut bytes = vec![0xff, 0, 0, 0];
        push_data(b"never read", &mut bytes);
        let mut r = reader(bytes, 64);
        assert!(matches!(
            r.next_frame().unwrap(),
            Next::Malformed(FrameError::DataTooLong(_))
        ));
        assert!(matches!(r.next_frame().unwrap(), Next::End { partial: 0 }));
    }
}

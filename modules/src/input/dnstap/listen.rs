//! `input.dnstap` as a collector: it listens on a unix socket or a TCP
//! address, and the servers connect to it (as they do to fstrm_capture or
//! DNS-collector). Each connection gets a thread that holds the
//! bidirectional Frame Streams handshake (READY → ACCEPT, START, data,
//! STOP → FINISH; a sender that starts with START is read as
//! unidirectional) and hands the data frames to the input's thread.

use crate::format::dnstap::CONTENT_TYPE;
use crate::format::framestream::reader::{FrameStreamReader, Next};
use crate::format::framestream::{self, Frame, ACCEPT, FINISH, READY, START, STOP};
use crate::format::stream::BufferedStream;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

/// Frames waiting between the connections' threads and the input.
const QUEUE: usize = 4096;

/// What a connection's thread reports.
pub enum Event {
    /// A sender started a stream (READY, or START without a handshake).
    Opened,
    /// A data frame's payload.
    Data(Vec<u8>),
    /// Bytes that were not a usable frame, by kind.
    Malformed(&'static str),
    /// The connection of a sender that had started a stream ended.
    Closed,
}

/// Where the collector listens.
#[derive(Clone, Debug)]
pub enum Address {
    /// A unix socket path (a stale socket there is replaced).
    Unix(PathBuf),
    /// A TCP address.
    Tcp(SocketAddr),
}

/// A listening collector: its events, and the socket file to remove.
pub struct Collector {
    /// Events from every connection, in arrival order.
    pub events: Receiver<Event>,
    unix_path: Option<PathBuf>,
}

impl Drop for Collector {
    fn drop(&mut self) {
        if let Some(path) = &self.unix_path {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Starts listening at `address`.
pub fn listen(address: &Address) -> io::Result<Collector> {
    let (tx, events) = sync_channel(QUEUE);
    match address {
        Address::Unix(path) => {
            if std::fs::symlink_metadata(path).is_ok_and(|m| {
                use std::os::unix::fs::FileTypeExt;
                m.file_type().is_socket()
            }) {
                std::fs::remove_file(path)?;
            }
            let listener = UnixListener::bind(path)?;
            spawn("dnstap-listen", move || {
                accept(listener.incoming(), |s| s.try_clone(), tx)
            })?;
            Ok(Collector {
                events,
                unix_path: Some(path.clone()),
            })
        }
        Address::Tcp(addr) => {
            let listener = TcpListener::bind(addr)?;
            spawn("dnstap-listen", move || {
                accept(listener.incoming(), |s| s.try_clone(), tx)
            })?;
            Ok(Collector {
                events,
                unix_path: None,
            })
        }
    }
}

/// Serves every connection of `incoming` on a thread of its own.
fn accept<S: Read + Write + Send + 'static>(
    incoming: impl Iterator<Item = io::Result<S>>,
    clone: fn(&S) -> io::Result<S>,
    tx: SyncSender<Event>,
) {
    for stream in incoming {
        let Ok(stream) = stream else {
            // No connection taken (out of file descriptors: the same error
            // comes back at once): wait, not spin.
            std::thread::sleep(std::time::Duration::from_millis(100));
            continue;
        };
        let Ok(reader) = clone(&stream) else { continue };
        let tx = tx.clone();
        if spawn("dnstap-conn", move || serve(Box::new(reader), stream, tx)).is_err() {
            continue; // out of threads: the sender sees its connection close
        }
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> io::Result<()> {
    dnsluice_core::thread::named(name).spawn(f).map(drop)
}

/// Reads one sender's frames from `reader`, answering on `writer`.
fn serve(reader: Box<dyn Read + Send>, mut writer: impl Write, tx: SyncSender<Event>) {
    let mut opened = false;
    let mut frames = FrameStreamReader::new(BufferedStream::new(reader, 1 << 16));
    let mut reply = Vec::new();
    loop {
        let next = match frames.next_frame() {
            Ok(next) => next,
            Err(_) => {
                let _ = tx.send(Event::Malformed("connection_error"));
                break;
            }
        };
        let event = match next {
            Next::Frame(Frame::Data(data)) => Event::Data(data.to_vec()),
            Next::Frame(Frame::Control(c)) => {
                let answer = match c.kind {
                    READY | START if !c.names(CONTENT_TYPE) => {
                        let _ = tx.send(Event::Malformed("unsupported_content_type"));
                        break;
                    }
                    READY => Some(ACCEPT),
                    START => None,
                    STOP => Some(FINISH),
                    _ => {
                        let _ = tx.send(Event::Malformed("unexpected_control_frame"));
                        continue;
                    }
                };
                if !opened && (c.kind == READY || c.kind == START) {
                    opened = true;
                    if tx.send(Event::Opened).is_err() {
                        return;
                    }
                }
                if let Some(kind) = answer {
                    reply.clear();
                    let content_type = (kind == ACCEPT).then_some(CONTENT_TYPE);
                    framestream::push_control(kind, content_type, &mut reply);
                    if writer
                        .write_all(&reply)
                        .and_then(|_| writer.flush())
                        .is_err()
                    {
                        let _ = tx.send(Event::Malformed("connection_error"));
                        break;
                    }
                }
                if c.kind == STOP {
                    break;
                }
                continue;
            }
            Next::Malformed(e) => Event::Malformed(e.kind()),
            Next::End { partial } => {
                if partial > 0 {
                    let _ = tx.send(Event::Malformed("truncated_frame"));
                }
                break;
            }
        };
        if tx.send(event).is_err() {
            return;
        }
    }
    if opened {
        let _ = tx.send(Event::Closed);
    }
}

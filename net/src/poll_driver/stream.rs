//! A non-blocking TCP connection, TLS or not: framed queries written as the
//! socket takes them, bytes read and cut into messages.

use crate::error::NetError;
use crate::protocol::frame::{push_frame, FrameReader};
use crate::tls::TlsClient;
use rustls::pki_types::ServerName;
use rustls::ClientConnection;
use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

/// The connection, with what is not yet written and what is read but not
/// yet a whole message.
pub struct StreamConn {
    tcp: mio::net::TcpStream,
    tls: Option<ClientConnection>,
    /// Bytes for the socket not yet written (plain TCP; rustls keeps its own).
    out: Vec<u8>,
    /// TLS: framed queries held to go out together as one record.
    held: Vec<u8>,
    /// Received bytes (plaintext), cut into messages.
    frames: FrameReader,
}

impl StreamConn {
    pub(super) fn new(tcp: mio::net::TcpStream, tls: Option<ClientConnection>) -> Self {
        StreamConn {
            tcp,
            tls,
            out: Vec::new(),
            held: Vec::new(),
            frames: FrameReader::new(),
        }
    }

    pub(super) fn tcp_mut(&mut self) -> &mut mio::net::TcpStream {
        &mut self.tcp
    }

    /// Queues one framed query with wire id `id` and, unless `hold`, writes
    /// what the socket takes (held queries go with the next write or
    /// [`StreamConn::send_held`]).
    pub fn write_query(&mut self, id: u16, query: &[u8], hold: bool) -> io::Result<()> {
        // TLS: into the held plaintext, written as one record; TCP: into the
        // bytes for the socket.
        let queue = if self.tls.is_some() {
            &mut self.held
        } else {
            &mut self.out
        };
        push_frame(queue, query, id).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        if hold {
            return Ok(());
        }
        self.send_held()
    }

    /// Writes the held queries (TLS: as one record) and what else is queued.
    pub fn send_held(&mut self) -> io::Result<()> {
        if let Some(tls) = &mut self.tls {
            if !self.held.is_empty() {
                tls.writer().write_all(&self.held)?;
                self.held.clear();
            }
        }
        self.flush()
    }

    /// Writes what is queued until the socket would block.
    pub fn flush(&mut self) -> io::Result<()> {
        match &mut self.tls {
            Some(tls) => {
                while tls.wants_write() {
                    match tls.write_tls(&mut self.tcp) {
                        Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
            }
            None => {
                let mut at = 0;
                while at < self.out.len() {
                    match self.tcp.write(&self.out[at..]) {
                        Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                        Ok(n) => at += n,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                self.out.drain(..at);
            }
        }
        Ok(())
    }

    /// Reads what arrived (decrypting for TLS), using `scratch` on the way;
    /// the whole messages are then [`StreamConn::next_message`]'s. `Err`
    /// carries why the connection is over (messages read before still count).
    pub fn read_available(&mut self, scratch: &mut [u8]) -> Result<(), String> {
        loop {
            match &mut self.tls {
                Some(tls) => {
                    match tls.read_tls(&mut self.tcp) {
                        Ok(0) => return Err(self.ended()),
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => return Err(format!("receive failed: {e}")),
                    }
                    tls.process_new_packets()
                        .map_err(|e| format!("TLS error from the server: {e}"))?;
                    loop {
                        match tls.reader().read(scratch) {
                            Ok(0) => return Err(self.ended()),
                            Ok(n) => self.frames.push(&scratch[..n]),
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                            Err(e) => return Err(format!("receive failed: {e}")),
                        }
                    }
                    // Alerts or key updates rustls wants to answer.
                    self.flush().map_err(|e| format!("write failed: {e}"))?;
                }
                None => match self.tcp.read(scratch) {
                    Ok(0) => return Err(self.ended()),
                    Ok(n) => self.frames.push(&scratch[..n]),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(format!("receive failed: {e}")),
                },
            }
        }
    }

    /// The next whole message read, if any.
    pub fn next_message(&mut self) -> Option<&[u8]> {
        self.frames.next_message()
    }

    /// Why the stream ended: cleanly between messages, or inside one.
    fn ended(&self) -> String {
        if self.frames.is_mid_message() {
            "the connection ended inside a message".to_string()
        } else {
            "the server closed the connection".to_string()
        }
    }
}

/// A blocking TLS handshake on `tcp`, within `timeout`.
pub(super) fn handshake(
    tcp: &mut std::net::TcpStream,
    client: &TlsClient,
    server_name: &ServerName<'static>,
    timeout: Duration,
    name: &str,
) -> Result<ClientConnection, NetError> {
    let failed = |error: io::Error| NetError::Handshake {
        addr: name.to_string(),
        error,
    };
    let deadline = Instant::now() + timeout;
    let mut conn = client.session(server_name)?;
    // No cap on what rustls holds to send: a server that reads slowly
    // fills the socket, and then rustls' own 64 KiB; past that a write of
    // queries failed and took the connection down (the window of queries
    // in flight bounds what is held).
    conn.set_buffer_limit(None);
    while conn.is_handshaking() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(failed(io::Error::new(
                io::ErrorKind::TimedOut,
                "handshake timed out",
            )));
        }
        tcp.set_read_timeout(Some(left)).map_err(failed)?;
        tcp.set_write_timeout(Some(left)).map_err(failed)?;
        conn.complete_io(tcp).map_err(failed)?;
    }
    // Whatever the handshake left to write (a ticket acknowledgement).
    while conn.wants_write() {
        conn.write_tls(tcp).map_err(failed)?;
    }
    tcp.set_read_timeout(None).map_err(failed)?;
    tcp.set_write_timeout(None).map_err(failed)?;
    Ok(conn)
}

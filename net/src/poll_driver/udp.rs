//! A connected, non-blocking UDP socket: datagrams sent one by one or held
//! and sent together (`sendmmsg`, runs of equal length as one GSO message),
//! and read many per call (`recvmmsg`).

use crate::health::udp_error_is_transient;
use crate::protocol::question::set_id;
use crate::sys::{gso_unsupported, recv_batch, send_some, wait_writable, RECV_BATCH, RECV_SLOT};
use std::io;

/// Bytes of scratch space [`UdpConn::receive`] wants: room for a full batch
/// of the largest datagrams.
pub const RECV_SCRATCH: usize = RECV_BATCH * RECV_SLOT;

/// The socket and the datagrams held for it.
pub struct UdpConn {
    socket: mio::net::UdpSocket,
    /// Held datagrams (with their wire ids), back to back, and their
    /// (offset, length).
    outbox: Vec<u8>,
    outbox_offsets: Vec<(usize, usize)>,
    /// Send runs of equal-length datagrams as one segmented message (UDP
    /// GSO), until the kernel says it cannot.
    gso: bool,
}

impl UdpConn {
    pub(super) fn new(socket: mio::net::UdpSocket) -> Self {
        UdpConn {
            socket,
            outbox: Vec::new(),
            outbox_offsets: Vec::new(),
            gso: cfg!(target_os = "linux"),
        }
    }

    pub(super) fn socket_mut(&mut self) -> &mut mio::net::UdpSocket {
        &mut self.socket
    }

    /// Sends `query` with the wire id `id` at once, waiting (briefly, in
    /// poll) while the socket buffer is full.
    pub fn send(&self, id: u16, query: &[u8]) -> io::Result<()> {
        let mut datagram = [0u8; 1500];
        let mut large;
        let buf: &mut [u8] = if query.len() <= datagram.len() {
            &mut datagram[..query.len()]
        } else {
            large = query.to_vec();
            &mut large
        };
        buf.copy_from_slice(query);
        set_id(buf, id);
        loop {
            match self.socket.send(buf) {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => wait_writable(&self.socket)?,
                // An ICMP error from an earlier datagram: this one can still go.
                Err(e) if udp_error_is_transient(&e) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Holds `query`, with wire id `id`, for [`UdpConn::send_held`].
    pub fn hold(&mut self, id: u16, query: &[u8]) {
        let at = self.outbox.len();
        self.outbox.extend_from_slice(query);
        set_id(&mut self.outbox[at..], id);
        self.outbox_offsets.push((at, query.len()));
    }

    /// Sends the held datagrams with as few `sendmmsg` calls as the kernel
    /// allows; they are forgotten either way.
    pub fn send_held(&mut self) -> io::Result<()> {
        let result = self.send_outbox();
        self.outbox.clear();
        self.outbox_offsets.clear();
        result
    }

    fn send_outbox(&mut self) -> io::Result<()> {
        let mut next = 0;
        while next < self.outbox_offsets.len() {
            match send_some(
                &self.socket,
                &self.outbox,
                &self.outbox_offsets[next..],
                self.gso,
            ) {
                Ok(n) => next += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => wait_writable(&self.socket)?,
                Err(e) if self.gso && gso_unsupported(&e) => self.gso = false,
                // An ICMP error from an earlier datagram: these can still go.
                Err(e) if udp_error_is_transient(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reads every datagram waiting, handing each to `on_message`.
    /// `scratch` should hold [`RECV_SCRATCH`] bytes. `Err` carries why the
    /// socket is over.
    pub fn receive(
        &self,
        scratch: &mut [u8],
        mut on_message: impl FnMut(&[u8]),
    ) -> Result<(), String> {
        let mut lens = [0usize; RECV_BATCH];
        loop {
            match recv_batch(&self.socket, scratch, &mut lens) {
                Ok(n) => {
                    for (i, len) in lens[..n].iter().enumerate() {
                        on_message(&scratch[i * RECV_SLOT..i * RECV_SLOT + len]);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                // ICMP port unreachable and friends: the queries will time out.
                Err(e) if udp_error_is_transient(&e) => continue,
                Err(e) => return Err(format!("receive failed: {e}")),
            }
        }
    }
}

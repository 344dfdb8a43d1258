//! Datagrams to and from many peers on one unconnected UDP socket, many per
//! system call (`sendmmsg` with a destination per message, `recvmmsg` with
//! the sender of each), and socket buffers large enough that a burst of
//! answers is not dropped by the kernel before it is read. The lookup
//! engine's sockets talk to every nameserver at once through these.
//! Elsewhere than Linux they fall back to one datagram per call.

#![allow(unsafe_code)]

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

/// Datagrams per [`Received::read`].
pub const RECV_BATCH: usize = 32;
/// Room for one datagram: the largest a UDP socket can receive.
pub const RECV_SLOT: usize = 65536;
/// Datagrams per [`send_to`] call at most.
pub const SEND_BATCH: usize = 64;

/// Sets the socket's receive and send buffers to `bytes`: past the system
/// limits when allowed (`SO_RCVBUFFORCE` as root), else as far as they go.
/// Returns the receive buffer the kernel then reports.
pub fn set_buffers(socket: &impl AsRawFd, bytes: usize) -> usize {
    let value = bytes.min(i32::MAX as usize) as libc::c_int;
    let fd = socket.as_raw_fd();
    let set = |option: libc::c_int| {
        // SAFETY: setsockopt reads one int we own, for its given length.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                option,
                &value as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            ) == 0
        }
    };
    for (forced, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        if !set(forced) {
            set(plain);
        }
    }
    let mut got: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes one int into `got`, at most `len` bytes.
    unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &mut got as *mut libc::c_int as *mut libc::c_void,
            &mut len,
        );
    }
    got.max(0) as usize
}

/// Writes `addr` into `storage`; its length.
#[cfg(target_os = "linux")]
fn to_c(addr: SocketAddr, storage: &mut libc::sockaddr_storage) -> libc::socklen_t {
    // SAFETY: sockaddr_storage is large and aligned enough for either form;
    // one plain C struct is written into it.
    unsafe {
        match addr {
            SocketAddr::V4(a) => {
                let sin = storage as *mut libc::sockaddr_storage as *mut libc::sockaddr_in;
                *sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(a.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t
            }
            SocketAddr::V6(a) => {
                let sin6 = storage as *mut libc::sockaddr_storage as *mut libc::sockaddr_in6;
                *sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: a.flowinfo(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.ip().octets(),
                    },
                    sin6_scope_id: a.scope_id(),
                };
                std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t
            }
        }
    }
}

/// The address the kernel wrote into `storage`.
#[cfg(target_os = "linux")]
fn from_c(storage: &libc::sockaddr_storage) -> Option<SocketAddr> {
    // SAFETY: the family field says which struct the kernel wrote.
    unsafe {
        match i32::from(storage.ss_family) {
            libc::AF_INET => {
                let sin = &*(storage as *const libc::sockaddr_storage as *const libc::sockaddr_in);
                let ip = std::net::Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
                Some(SocketAddr::new(ip.into(), u16::from_be(sin.sin_port)))
            }
            libc::AF_INET6 => {
                let sin6 =
                    &*(storage as *const libc::sockaddr_storage as *const libc::sockaddr_in6);
                Some(SocketAddr::V6(std::net::SocketAddrV6::new(
                    sin6.sin6_addr.s6_addr.into(),
                    u16::from_be(sin6.sin6_port),
                    sin6.sin6_flowinfo,
                    sin6.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }
}

/// Sends up to [`SEND_BATCH`] datagrams, each `data[start..start + len]` to
/// its address, with one `sendmmsg`; how many the kernel took (at least one
/// on success).
#[cfg(target_os = "linux")]
pub fn send_to(
    socket: &UdpSocket,
    data: &[u8],
    datagrams: &[(usize, usize, SocketAddr)],
) -> io::Result<usize> {
    use std::mem::MaybeUninit;
    let count = datagrams.len().min(SEND_BATCH);
    // Only the `count` entries used are set up (zeroing them all would cost
    // more than the datagrams of a small batch).
    let mut names = [const { MaybeUninit::<libc::sockaddr_storage>::uninit() }; SEND_BATCH];
    let mut iovecs = [const { MaybeUninit::<libc::iovec>::uninit() }; SEND_BATCH];
    let mut messages = [const { MaybeUninit::<libc::mmsghdr>::uninit() }; SEND_BATCH];
    for (i, &(start, len, to)) in datagrams[..count].iter().enumerate() {
        let iovec = iovecs[i].write(libc::iovec {
            iov_base: data[start..start + len].as_ptr() as *mut libc::c_void,
            iov_len: len,
        });
        // SAFETY: all-zero bytes are a valid sockaddr_storage and mmsghdr.
        let name = names[i].write(unsafe { std::mem::zeroed() });
        let namelen = to_c(to, name);
        let mut message: libc::mmsghdr = unsafe { std::mem::zeroed() };
        message.msg_hdr.msg_iov = iovec;
        message.msg_hdr.msg_iovlen = 1;
        message.msg_hdr.msg_name = name as *mut libc::sockaddr_storage as *mut libc::c_void;
        message.msg_hdr.msg_namelen = namelen;
        messages[i].write(message);
    }
    // SAFETY: the first `count` messages were written just above.
    let messages = unsafe {
        std::slice::from_raw_parts_mut(messages.as_mut_ptr() as *mut libc::mmsghdr, count)
    };
    // The messages point into `data` and at our address storage, all alive
    // for the call.
    let n = crate::sys::sendmmsg(socket.as_raw_fd(), messages)?;
    Ok(n.max(1))
}

/// One `send_to` (platforms without `sendmmsg`).
#[cfg(not(target_os = "linux"))]
pub fn send_to(
    socket: &UdpSocket,
    data: &[u8],
    datagrams: &[(usize, usize, SocketAddr)],
) -> io::Result<usize> {
    let (start, len, to) = datagrams[0];
    socket.send_to(&data[start..start + len], to).map(|_| 1)
}

/// Room for one `recvmmsg` of [`RECV_BATCH`] datagrams with their senders,
/// set up once and used for every read (nothing to zero or allocate per call).
pub struct Received {
    scratch: Box<[u8]>,
    names: Box<[libc::sockaddr_storage]>,
    iovecs: Box<[libc::iovec]>,
    messages: Box<[libc::mmsghdr]>,
    count: usize,
}

// SAFETY: the raw pointers inside point into the boxes this struct owns
// (heap memory that moves with it), never shared.
unsafe impl Send for Received {}

impl Default for Received {
    fn default() -> Self {
        Self::new()
    }
}

impl Received {
    /// Room for a batch.
    pub fn new() -> Received {
        fn zeroed<T>() -> Box<[T]> {
            // SAFETY: all-zero bytes are valid for these plain C structs.
            (0..RECV_BATCH)
                .map(|_| unsafe { std::mem::zeroed() })
                .collect()
        }
        let mut r = Received {
            scratch: vec![0u8; RECV_BATCH * RECV_SLOT].into_boxed_slice(),
            names: zeroed(),
            iovecs: zeroed(),
            messages: zeroed(),
            count: 0,
        };
        for i in 0..RECV_BATCH {
            r.iovecs[i].iov_base = r.scratch[i * RECV_SLOT..].as_mut_ptr() as *mut libc::c_void;
            r.iovecs[i].iov_len = RECV_SLOT;
            let header = &mut r.messages[i].msg_hdr;
            header.msg_iov = &mut r.iovecs[i];
            header.msg_iovlen = 1;
            header.msg_name = &mut r.names[i] as *mut libc::sockaddr_storage as *mut libc::c_void;
        }
        r
    }

    /// Reads up to [`RECV_BATCH`] waiting datagrams from `socket` with one
    /// `recvmmsg`; how many (an error, `WouldBlock` too, if none).
    #[cfg(target_os = "linux")]
    pub fn read(&mut self, socket: &UdpSocket) -> io::Result<usize> {
        self.count = 0;
        for message in self.messages.iter_mut() {
            message.msg_hdr.msg_namelen =
                std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        }
        // Each message points at its own RECV_SLOT bytes of `scratch` and its
        // own address storage, owned by `self`.
        self.count = crate::sys::recvmmsg(socket.as_raw_fd(), &mut self.messages)?;
        Ok(self.count)
    }

    /// One `recv_from` (platforms without `recvmmsg`).
    #[cfg(not(target_os = "linux"))]
    pub fn read(&mut self, socket: &UdpSocket) -> io::Result<usize> {
        self.count = 0;
        socket.set_nonblocking(true)?;
        let (len, from) = socket.recv_from(&mut self.scratch[..RECV_SLOT])?;
        self.messages[0].msg_len = len as _;
        let _ = to_c(from, &mut self.names[0]);
        self.count = 1;
        Ok(1)
    }

    /// Datagram `i` of the last read, and its sender.
    pub fn datagram(&self, i: usize) -> Option<(&[u8], SocketAddr)> {
        if i >= self.count {
            return None;
        }
        let len = (self.messages[i].msg_len as usize).min(RECV_SLOT);
        let from = from_c(&self.names[i])?;
        Some((&self.scratch[i * RECV_SLOT..][..len], from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_datagrams_go_to_their_peers_and_come_back_with_their_senders() {
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(set_buffers(&sender, 4 << 20) >= 4 << 20);
        let peers: Vec<UdpSocket> = (0..3)
            .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
            .collect();
        let mut data = Vec::new();
        let mut datagrams = Vec::new();
        for (i, peer) in peers.iter().enumerate() {
            let start = data.len();
            data.extend_from_slice(format!("to peer {i}").as_bytes());
            datagrams.push((start, data.len() - start, peer.local_addr().unwrap()));
        }
        let mut sent = 0;
        while sent < datagrams.len() {
            sent += send_to(&sender, &data, &datagrams[sent..]).unwrap();
        }
        let mut buf = [0u8; 64];
        for (i, peer) in peers.iter().enumerate() {
            let (n, from) = peer.recv_from(&mut buf).unwrap();
            assert_eq!(
                (&buf[..n], from),
                (
                    format!("to peer {i}").as_bytes(),
                    sender.local_addr().unwrap()
                )
            );
            peer.send_to(format!("from {i}").as_bytes(), from).unwrap();
        }
        sender.set_nonblocking(true).unwrap();
        let mut received = Received::new();
        let mut seen = Vec::new();
        while seen.len() < 3 {
            match received.read(&sender) {
                Ok(n) => {
                    for i in 0..n {
                        let (bytes, from) = received.datagram(i).unwrap();
                        seen.push((String::from_utf8(bytes.to_vec()).unwrap(), from));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        }
        for (i, peer) in peers.iter().enumerate() {
            assert!(
                seen.contains(&(format!("from {i}"), peer.local_addr().unwrap())),
                "{seen:?}"
            );
        }
    }
}

//! The socket calls the UDP loop needs beyond std: large buffers, and many
//! datagrams per call with their addresses (`recvmmsg`, `sendmmsg`).

#![allow(unsafe_code)]

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsRawFd;

/// Datagrams per `recvmmsg` / `sendmmsg`.
pub const BATCH: usize = 32;
/// Room for one datagram (DNS over UDP stays well below this).
pub const SLOT: usize = 4096;

/// Sets the socket's receive and send buffers to `bytes`, past the system
/// limits when running as root (`SO_RCVBUFFORCE`), else as far as allowed.
pub fn big_buffers(socket: &impl AsRawFd, bytes: usize) {
    let value = bytes as libc::c_int;
    for (forced, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        // SAFETY: setsockopt reads an int we own for its given length.
        unsafe {
            let set = |option| {
                libc::setsockopt(
                    socket.as_raw_fd(),
                    libc::SOL_SOCKET,
                    option,
                    &value as *const libc::c_int as *const libc::c_void,
                    size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            if set(forced) != 0 {
                set(plain);
            }
        }
    }
}

/// A socket address in the C form, and back.
fn to_c(addr: SocketAddr, storage: &mut libc::sockaddr_storage) -> libc::socklen_t {
    // SAFETY: sockaddr_storage is large and aligned enough for either form;
    // we write one plain C struct into it.
    unsafe {
        match addr {
            SocketAddr::V4(a) => {
                let sin = storage as *mut _ as *mut libc::sockaddr_in;
                *sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(a.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                size_of::<libc::sockaddr_in>() as libc::socklen_t
            }
            SocketAddr::V6(a) => {
                let sin6 = storage as *mut _ as *mut libc::sockaddr_in6;
                *sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: a.flowinfo(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.ip().octets(),
                    },
                    sin6_scope_id: a.scope_id(),
                };
                size_of::<libc::sockaddr_in6>() as libc::socklen_t
            }
        }
    }
}

fn from_c(storage: &libc::sockaddr_storage) -> Option<SocketAddr> {
    // SAFETY: the family field says which struct the kernel wrote.
    unsafe {
        match i32::from(storage.ss_family) {
            libc::AF_INET => {
                let sin = &*(storage as *const _ as *const libc::sockaddr_in);
                let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
                Some(SocketAddr::V4(SocketAddrV4::new(
                    ip,
                    u16::from_be(sin.sin_port),
                )))
            }
            libc::AF_INET6 => {
                let sin6 = &*(storage as *const _ as *const libc::sockaddr_in6);
                Some(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                    u16::from_be(sin6.sin6_port),
                    sin6.sin6_flowinfo,
                    sin6.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }
}

/// Reads up to [`BATCH`] waiting datagrams: datagram `i` into
/// `scratch[i * SLOT..]`, with its length and sender in `got[i]`. How many
/// were read; `WouldBlock` when none was waiting.
pub fn receive(
    socket: &impl AsRawFd,
    scratch: &mut [u8; BATCH * SLOT],
    got: &mut [(usize, Option<SocketAddr>); BATCH],
) -> io::Result<usize> {
    // SAFETY: all-zero bytes are valid for these plain C structs.
    let mut names: [libc::sockaddr_storage; BATCH] = unsafe { zeroed() };
    let mut iovecs: [libc::iovec; BATCH] = unsafe { zeroed() };
    let mut messages: [libc::mmsghdr; BATCH] = unsafe { zeroed() };
    for i in 0..BATCH {
        iovecs[i].iov_base = scratch[i * SLOT..].as_mut_ptr() as *mut libc::c_void;
        iovecs[i].iov_len = SLOT;
        let header = &mut messages[i].msg_hdr;
        header.msg_iov = &mut iovecs[i];
        header.msg_iovlen = 1;
        header.msg_name = &mut names[i] as *mut _ as *mut libc::c_void;
        header.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    }
    // SAFETY: every message points at its own SLOT bytes of `scratch` and its
    // own address storage, all alive for the call.
    let n = unsafe {
        libc::recvmmsg(
            socket.as_raw_fd(),
            messages.as_mut_ptr(),
            BATCH as libc::c_uint,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = n as usize;
    for i in 0..n {
        got[i] = ((messages[i].msg_len as usize).min(SLOT), from_c(&names[i]));
    }
    Ok(n)
}

/// Sends up to [`BATCH`] of `datagrams` (bytes, and the address for an
/// unconnected socket) with one `sendmmsg`; how many the kernel took.
pub fn send(socket: &impl AsRawFd, datagrams: &[(&[u8], Option<SocketAddr>)]) -> io::Result<usize> {
    let count = datagrams.len().min(BATCH);
    // SAFETY: all-zero bytes are valid for these plain C structs.
    let mut names: [libc::sockaddr_storage; BATCH] = unsafe { zeroed() };
    let mut iovecs: [libc::iovec; BATCH] = unsafe { zeroed() };
    let mut messages: [libc::mmsghdr; BATCH] = unsafe { zeroed() };
    for (i, (data, to)) in datagrams[..count].iter().enumerate() {
        iovecs[i].iov_base = data.as_ptr() as *mut libc::c_void;
        iovecs[i].iov_len = data.len();
        let header = &mut messages[i].msg_hdr;
        header.msg_iov = &mut iovecs[i];
        header.msg_iovlen = 1;
        if let Some(to) = to {
            header.msg_namelen = to_c(*to, &mut names[i]);
            header.msg_name = &mut names[i] as *mut _ as *mut libc::c_void;
        }
    }
    // SAFETY: the messages point at the caller's datagrams and our address
    // storage, alive for the call; the kernel only reads them.
    let n = unsafe {
        libc::sendmmsg(
            socket.as_raw_fd(),
            messages.as_mut_ptr(),
            count as libc::c_uint,
            0,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Waits up to `ms` milliseconds for `socket` to take more data.
pub fn wait_writable(socket: &impl AsRawFd, ms: i32) {
    let mut fd = libc::pollfd {
        fd: socket.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    unsafe { libc::poll(&mut fd, 1, ms) };
}

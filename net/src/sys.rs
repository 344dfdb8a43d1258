//! Socket calls std does not have, for every sender of datagrams: one
//! `sendmmsg` for many datagrams (runs of equal length as one UDP GSO
//! message), one `recvmmsg` for many, and a bounded wait for a full socket.
//! Linux gets the batched calls; elsewhere they fall back to one datagram per
//! call.

#![allow(unsafe_code)]

use std::io;

/// The most datagrams one [`send_some`] call carries.
pub const MAX_BATCH: usize = 64;

/// `UDP_SEGMENT` (linux/udp.h): a cmsg giving the size of each datagram of a
/// buffer the kernel cuts into several (UDP generic segmentation offload).
#[cfg(target_os = "linux")]
const UDP_SEGMENT: libc::c_int = 103;

/// Most datagrams in one segmented send (the kernel's UDP_MAX_SEGMENTS).
#[cfg(target_os = "linux")]
const MAX_SEGMENTS: usize = 64;

/// A connected UDP socket, std's or mio's: what [`send_some`] sends on.
pub trait ConnectedUdp: std::os::fd::AsRawFd {
    /// Sends one datagram to the connected peer (where there is no `sendmmsg`).
    fn send_one(&self, datagram: &[u8]) -> io::Result<usize>;
    /// Receives one datagram from the connected peer (where there is no `recvmmsg`).
    fn recv_one(&self, into: &mut [u8]) -> io::Result<usize>;
}

impl ConnectedUdp for std::net::UdpSocket {
    fn send_one(&self, datagram: &[u8]) -> io::Result<usize> {
        self.send(datagram)
    }
    fn recv_one(&self, into: &mut [u8]) -> io::Result<usize> {
        self.recv(into)
    }
}

impl ConnectedUdp for mio::net::UdpSocket {
    fn send_one(&self, datagram: &[u8]) -> io::Result<usize> {
        self.send(datagram)
    }
    fn recv_one(&self, into: &mut [u8]) -> io::Result<usize> {
        self.recv(into)
    }
}

/// One `sendmmsg` with up to [`MAX_BATCH`] of the datagrams at `offsets`; how
/// many datagrams the kernel took (at least one on success). With `gso`, each
/// run of consecutive datagrams of one length (back to back in `data`) goes
/// as one message the kernel segments (UDP GSO): the per-datagram work of the
/// send path is then done once per run.
#[cfg(target_os = "linux")]
pub fn send_some(
    socket: &impl ConnectedUdp,
    data: &[u8],
    offsets: &[(usize, usize)],
    gso: bool,
) -> io::Result<usize> {
    let available = offsets.len().min(MAX_BATCH);
    // SAFETY: iovec and mmsghdr are plain C structs for which all-zero bytes
    // are a valid value (null pointers, zero lengths).
    let mut iovecs: [libc::iovec; MAX_BATCH] = unsafe { std::mem::zeroed() };
    let mut messages: [libc::mmsghdr; MAX_BATCH] = unsafe { std::mem::zeroed() };
    // One control buffer per message, 8-byte aligned, room for one u16 cmsg.
    let mut controls = [[0u64; 4]; MAX_BATCH];
    let mut runs = [0usize; MAX_BATCH];
    let (mut count, mut i) = (0, 0);
    while i < available {
        let (start, len) = offsets[i];
        let mut run = 1;
        if gso && len > 0 {
            while i + run < available
                && run < MAX_SEGMENTS
                && offsets[i + run].1 == len
                && (run + 1) * len <= 65_000
            {
                run += 1;
            }
        }
        iovecs[count].iov_base = data[start..].as_ptr() as *mut libc::c_void;
        iovecs[count].iov_len = run * len;
        messages[count].msg_hdr.msg_iov = &mut iovecs[count];
        messages[count].msg_hdr.msg_iovlen = 1;
        if run > 1 {
            let control = &mut controls[count];
            // SAFETY: `control` is 32 zeroed, 8-byte aligned bytes, more than
            // CMSG_SPACE(2); CMSG_FIRSTHDR/CMSG_DATA point inside it.
            unsafe {
                let header = &mut messages[count].msg_hdr;
                header.msg_control = control.as_mut_ptr() as *mut libc::c_void;
                header.msg_controllen = libc::CMSG_SPACE(2) as _;
                let cmsg = libc::CMSG_FIRSTHDR(header);
                (*cmsg).cmsg_level = libc::SOL_UDP;
                (*cmsg).cmsg_type = UDP_SEGMENT;
                (*cmsg).cmsg_len = libc::CMSG_LEN(2) as _;
                std::ptr::write_unaligned(libc::CMSG_DATA(cmsg) as *mut u16, len as u16);
            }
        }
        runs[count] = run;
        count += 1;
        i += run;
    }
    // `messages[..count]` point at `iovecs[..count]` (into `data`) and
    // `controls[..count]`; all outlive the call (the socket is connected, so
    // no address is given).
    let n = sendmmsg(socket.as_raw_fd(), &mut messages[..count])?;
    let messages_sent = n.max(1).min(count);
    Ok(runs[..messages_sent].iter().sum())
}

/// One `sendmmsg` of `messages` (each pointing at data that outlives the
/// call, which the caller vouches for); how many the kernel took.
#[cfg(target_os = "linux")]
pub(crate) fn sendmmsg(
    fd: std::os::fd::RawFd,
    messages: &mut [libc::mmsghdr],
) -> io::Result<usize> {
    // SAFETY: the kernel only reads the messages and what they point at,
    // which the caller keeps alive for the call.
    let n = unsafe { libc::sendmmsg(fd, messages.as_mut_ptr(), messages.len() as libc::c_uint, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Whether an error from a segmented send means this kernel (or socket) does
/// not do UDP GSO, so sending should go on without it.
pub fn gso_unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINVAL | libc::EIO | libc::ENOPROTOOPT | libc::EOPNOTSUPP)
    )
}

/// One `send` (platforms without `sendmmsg`).
#[cfg(not(target_os = "linux"))]
pub fn send_some(
    socket: &impl ConnectedUdp,
    data: &[u8],
    offsets: &[(usize, usize)],
    _gso: bool,
) -> io::Result<usize> {
    let (start, len) = offsets[0];
    socket.send_one(&data[start..start + len]).map(|_| 1)
}

/// Datagrams read by one `recvmmsg`.
pub const RECV_BATCH: usize = 16;
/// Room for one datagram: the largest a UDP socket can receive.
pub const RECV_SLOT: usize = 65536;

/// Reads up to [`RECV_BATCH`] datagrams waiting on `socket` with one
/// `recvmmsg`, datagram `i` into `scratch[i * RECV_SLOT..]`, its length in
/// `lens[i]`; how many were read (an error, `WouldBlock` included, if none).
#[cfg(target_os = "linux")]
pub fn recv_batch(
    socket: &impl ConnectedUdp,
    scratch: &mut [u8],
    lens: &mut [usize; RECV_BATCH],
) -> io::Result<usize> {
    let slots = (scratch.len() / RECV_SLOT).min(RECV_BATCH);
    // SAFETY: iovec and mmsghdr are plain C structs for which all-zero bytes
    // are a valid value (null pointers, zero lengths).
    let mut iovecs: [libc::iovec; RECV_BATCH] = unsafe { std::mem::zeroed() };
    let mut messages: [libc::mmsghdr; RECV_BATCH] = unsafe { std::mem::zeroed() };
    for i in 0..slots {
        iovecs[i].iov_base = scratch[i * RECV_SLOT..].as_mut_ptr() as *mut libc::c_void;
        iovecs[i].iov_len = RECV_SLOT;
        messages[i].msg_hdr.msg_iov = &mut iovecs[i];
        messages[i].msg_hdr.msg_iovlen = 1;
    }
    // Each message points at its own RECV_SLOT bytes of `scratch`, which
    // outlive the call; the socket is connected (no address wanted).
    let n = recvmmsg(socket.as_raw_fd(), &mut messages[..slots])?;
    for i in 0..n {
        lens[i] = (messages[i].msg_len as usize).min(RECV_SLOT);
    }
    Ok(n)
}

/// One non-blocking `recvmmsg` into `messages` (each pointing at buffers
/// that outlive the call, which the caller vouches for); how many were read.
#[cfg(target_os = "linux")]
pub(crate) fn recvmmsg(
    fd: std::os::fd::RawFd,
    messages: &mut [libc::mmsghdr],
) -> io::Result<usize> {
    // SAFETY: the kernel writes into the buffers the messages point at,
    // which the caller keeps alive for the call, and into `messages`.
    let n = unsafe {
        libc::recvmmsg(
            fd,
            messages.as_mut_ptr(),
            messages.len() as libc::c_uint,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// One `recv` (platforms without `recvmmsg`).
#[cfg(not(target_os = "linux"))]
pub fn recv_batch(
    socket: &impl ConnectedUdp,
    scratch: &mut [u8],
    lens: &mut [usize; RECV_BATCH],
) -> io::Result<usize> {
    lens[0] = socket.recv_one(&mut scratch[..RECV_SLOT])?;
    Ok(1)
}

/// Waits up to a second for `socket` to take more data.
pub fn wait_writable(socket: &impl std::os::fd::AsRawFd) -> io::Result<()> {
    let mut fd = libc::pollfd {
        fd: socket.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd, for the duration of the call.
    let n = unsafe { libc::poll(&mut fd, 1, 1000) };
    match n {
        n if n < 0 => {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(e)
            }
        }
        0 => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the socket stayed full for a second",
        )),
        _ => Ok(()),
    }
}

/// The local address to bind a socket to before connecting it to `peer`:
/// any address of `peer`'s family, any port.
pub fn any_local(peer: std::net::SocketAddr) -> std::net::SocketAddr {
    if peer.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    }
}

//! Sockets for test sinks.

use std::net::UdpSocket;
use std::os::fd::AsRawFd;

/// How many bytes a test sink's receive buffer holds: a burst of tens of
/// thousands of small datagrams, so a sink whose reading thread is not
/// scheduled for a while (a loaded 2-core machine) loses none of them.
const SINK_BUFFER: libc::c_int = 32 << 20;

/// A UDP socket on `127.0.0.1`, any port, with a receive buffer of
/// [`SINK_BUFFER`] bytes (as root beyond `net.core.rmem_max`, which
/// `SO_RCVBUFFORCE` may exceed; otherwise as large as the kernel allows).
pub fn sink_socket() -> UdpSocket {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind a loopback UDP socket");
    for option in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        // SAFETY: the fd is the socket's, open for this call; the value is
        // a c_int that lives across the call, and its size is passed.
        let set = unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                option,
                (&SINK_BUFFER as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if set == 0 {
            break;
        }
    }
    socket
}

//! `output.udpcli`: fire-and-forget UDP sender. Each query payload goes to the
//! server as fast as the kernel takes it, from `clients` sockets (the
//! capture's sources spread over them), in batches of `batch` datagrams per
//! `sendmmsg` call on Linux (one `send` each elsewhere). Nothing is read back.
//!
//! A batch waits until `batch` queries are pending, so with a paced chain
//! (`filter.timing`) use `batch = 1` (`dnsluice replay` does).

use crate::clients::{query_bytes, ClientMap};
use dnsluice_core::registry::ModuleEntry;
use dnsluice_core::{Object, Receiver, StageError, StageStats};
use dnsluice_net::{Endpoint, Transport};
use dnsluice_options::Options;
use std::io;
use std::net::{SocketAddr, UdpSocket};

const MODULE: &str = "output.udpcli";

/// The most datagrams one `sendmmsg` call carries.
pub const MAX_BATCH: usize = 64;

/// Options of `output.udpcli`.
#[derive(Debug, Clone, Options)]
pub struct UdpCliOptions {
    /// The server to send to: `IP:PORT` or `HOST:PORT`.
    pub server: String,
    /// Simulated clients: sending sockets the capture's sources are spread over.
    #[option(default = 1, range = 1..=100_000)]
    pub clients: u32,
    /// Datagrams per `sendmmsg` call (1 for paced chains).
    #[option(default = 32, range = 1..=MAX_BATCH)]
    pub batch: usize,
}

/// Queries waiting for one socket's next batch, back to back.
#[derive(Default)]
struct Pending {
    data: Vec<u8>,
    lens: Vec<usize>,
}

/// The sender; see the module docs.
pub struct UdpCli {
    sockets: Vec<UdpSocket>,
    pending: Vec<Pending>,
    pending_total: usize,
    batch: usize,
    map: ClientMap,
    received: u64,
    sent: u64,
    send_errors: u64,
    skipped: u64,
    bytes: u64,
    syscalls: u64,
    first_error: Option<String>,
    /// Send runs of equal-length datagrams segmented by the kernel (UDP GSO);
    /// turned off for good if the kernel refuses it.
    gso: bool,
}

impl UdpCli {
    /// Opens `options.clients` sockets connected to the server.
    pub fn new(options: &UdpCliOptions) -> Result<Self, StageError> {
        let bad = |key: &str, message: String| StageError::option(MODULE, Some(key), message);
        let endpoint = Endpoint::parse(&options.server, Transport::Udp)
            .map_err(|e| bad("server", e.to_string()))?;
        let local: SocketAddr = if endpoint.addr.is_ipv4() {
            (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let open = || -> io::Result<UdpSocket> {
            let socket = UdpSocket::bind(local)?;
            socket.connect(endpoint.addr)?;
            Ok(socket)
        };
        let sockets = (0..options.clients)
            .map(|_| open())
            .collect::<io::Result<Vec<_>>>()
            .map_err(|e| StageError::other(MODULE, format!("socket to {}: {e}", endpoint.addr)))?;
        Ok(UdpCli {
            pending: (0..sockets.len()).map(|_| Pending::default()).collect(),
            sockets,
            pending_total: 0,
            batch: options.batch,
            map: ClientMap::new(options.clients),
            received: 0,
            sent: 0,
            send_errors: 0,
            skipped: 0,
            bytes: 0,
            syscalls: 0,
            first_error: None,
            gso: cfg!(target_os = "linux"),
        })
    }

    /// Sends every pending datagram.
    fn flush(&mut self) {
        for (socket, pending) in self.sockets.iter().zip(&mut self.pending) {
            if pending.lens.is_empty() {
                continue;
            }
            let outcome = send_all(socket, &pending.data, &pending.lens, &mut self.gso);
            self.sent += outcome.sent;
            self.bytes += outcome.bytes;
            self.syscalls += outcome.syscalls;
            self.send_errors += outcome.failed;
            if let (Some(e), None) = (outcome.error, &self.first_error) {
                self.first_error = Some(e.to_string());
            }
            pending.data.clear();
            pending.lens.clear();
        }
        self.pending_total = 0;
    }
}

/// What one flush of one socket did.
#[derive(Default)]
struct Sent {
    sent: u64,
    bytes: u64,
    failed: u64,
    syscalls: u64,
    error: Option<io::Error>,
}

/// Sends the datagrams of `lens` (back to back in `data`) on `socket`. A
/// datagram the kernel refuses twice (say, an ICMP error reported on it) is
/// counted as failed and skipped.
fn send_all(socket: &UdpSocket, data: &[u8], lens: &[usize], gso: &mut bool) -> Sent {
    let mut out = Sent::default();
    let mut offsets = Vec::with_capacity(lens.len());
    let mut at = 0;
    for len in lens {
        offsets.push((at, *len));
        at += len;
    }
    let mut next = 0;
    let mut retried = false;
    while next < offsets.len() {
        out.syscalls += 1;
        match send_some(socket, data, &offsets[next..], *gso) {
            Ok(n) => {
                for (_, len) in &offsets[next..next + n] {
                    out.bytes += *len as u64;
                }
                out.sent += n as u64;
                next += n;
                retried = false;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if *gso && gso_unsupported(&e) => *gso = false,
            Err(e) => {
                if retried {
                    out.failed += 1;
                    next += 1;
                    retried = false;
                } else {
                    retried = true;
                }
                out.error.get_or_insert(e);
            }
        }
    }
    out
}

/// `UDP_SEGMENT` (linux/udp.h): a cmsg giving the size of each datagram of a
/// buffer the kernel cuts into several (UDP generic segmentation offload).
#[cfg(target_os = "linux")]
const UDP_SEGMENT: libc::c_int = 103;

/// Most datagrams in one segmented send (the kernel's UDP_MAX_SEGMENTS).
#[cfg(target_os = "linux")]
const MAX_SEGMENTS: usize = 64;

/// A connected UDP socket, std's or mio's: what [`send_some`] sends on.
pub(crate) trait ConnectedUdp: std::os::fd::AsRawFd {
    /// Sends one datagram to the connected peer (where there is no `sendmmsg`).
    #[cfg_attr(target_os = "linux", allow(dead_code))]
    fn send_one(&self, datagram: &[u8]) -> io::Result<usize>;
}

impl ConnectedUdp for UdpSocket {
    fn send_one(&self, datagram: &[u8]) -> io::Result<usize> {
        self.send(datagram)
    }
}

impl ConnectedUdp for mio::net::UdpSocket {
    fn send_one(&self, datagram: &[u8]) -> io::Result<usize> {
        self.send(datagram)
    }
}

/// One `sendmmsg` with up to [`MAX_BATCH`] of the datagrams at `offsets`; how
/// many datagrams the kernel took (at least one on success). With `gso`, each
/// run of consecutive datagrams of one length (back to back in `data`) goes
/// as one message the kernel segments (UDP GSO): the per-datagram work of the
/// send path is then done once per run.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub(crate) fn send_some(
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
    // SAFETY: `messages[..count]` point at `iovecs[..count]` (into `data`) and
    // `controls[..count]`; all outlive the call, and the kernel only reads them
    // (the socket is connected, so no address is given).
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
    let messages_sent = (n as usize).max(1).min(count);
    Ok(runs[..messages_sent].iter().sum())
}

/// Whether an error from a segmented send means this kernel (or socket) does
/// not do UDP GSO, so sending should go on without it.
pub(crate) fn gso_unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINVAL | libc::EIO | libc::ENOPROTOOPT | libc::EOPNOTSUPP)
    )
}

/// One `send` (platforms without `sendmmsg`).
#[cfg(not(target_os = "linux"))]
pub(crate) fn send_some(
    socket: &impl ConnectedUdp,
    data: &[u8],
    offsets: &[(usize, usize)],
    _gso: bool,
) -> io::Result<usize> {
    let (start, len) = offsets[0];
    socket.send_one(&data[start..start + len]).map(|_| 1)
}

impl Receiver for UdpCli {
    #[inline]
    fn receive(&mut self, obj: &mut Object<'_>) -> Result<(), StageError> {
        self.received += 1;
        let Some(query) = query_bytes(obj) else {
            self.skipped += 1;
            return Ok(());
        };
        let client = self.map.client_for_object(obj) as usize;
        let pending = &mut self.pending[client];
        pending.data.extend_from_slice(query);
        pending.lens.push(query.len());
        self.pending_total += 1;
        if self.pending_total >= self.batch {
            self.flush();
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<(), StageError> {
        self.flush();
        Ok(())
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        let mut stats = StageStats::new(MODULE);
        stats.input = self.received;
        stats.output = self.sent;
        stats.counters.insert("sent".to_string(), self.sent);
        stats.add_counter("bytes", self.bytes);
        stats.add_counter("syscalls", self.syscalls);
        stats.add_counter("skipped", self.skipped);
        stats.add_counter("send_errors", self.send_errors);
        stats.add_counter("connections_opened", self.sockets.len() as u64);
        stats.add_error("send", self.send_errors);
        if let Some(e) = &self.first_error {
            stats.warnings.push(format!(
                "{MODULE}: {} datagrams not sent; the first error: {e}",
                self.send_errors
            ));
        }
        out.push(stats);
    }
}

/// The registry entry.
pub fn entry() -> ModuleEntry {
    ModuleEntry::output(
        MODULE,
        "fire-and-forget UDP sender of each query (batched sendmmsg), for load",
        |o: UdpCliOptions| Ok(Box::new(UdpCli::new(&o)?)),
    )
}

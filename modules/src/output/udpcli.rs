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
use dnsluice_net::sys::{gso_unsupported, send_some};
use dnsluice_net::{DnsTransport, Endpoint};
use dnsluice_options::Options;
use std::io;
use std::net::UdpSocket;

const MODULE: &str = "output.udpcli";

/// The most datagrams one `sendmmsg` call carries.
pub const MAX_BATCH: usize = dnsluice_net::sys::MAX_BATCH;

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
        let endpoint = Endpoint::parse(&options.server, DnsTransport::Udp)
            .map_err(|e| bad("server", e.to_string()))?;
        let local = dnsluice_net::sys::any_local(endpoint.addr);
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

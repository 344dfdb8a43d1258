//! The few UDP sockets every query of a lookup run goes out on: unconnected,
//! each talking to every nameserver, bound to the user's source addresses
//! (used in turn) or to any address, with large buffers, registered on the
//! engine's epoll set. Each socket hands out query ids unique among the
//! queries it has outstanding and remembers which slot owns each, so an
//! answer finds its name with one array read. Queries are held and sent
//! together (`sendmmsg`); answers are read many per call (`recvmmsg`).

use dnsluice_net::datagrams::{self, Received};
use dnsluice_net::protocol::ids::QueryIds;
use dnsluice_net::protocol::question::set_id;
use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

/// Socket buffers: a burst of thousands of answers fits before the engine reads.
const BUFFER_BYTES: usize = 8 << 20;
/// Ids one socket hands out at most (of 65,536): random ids stay quick to
/// find, and a second socket is opened past it.
const IDS_PER_SOCKET: usize = 32_768;

/// Query ids owned by slots: `owners[id]` is the slot plus one, 0 for none.
struct Sock {
    socket: UdpSocket,
    local: SocketAddr,
    owners: Box<[u32]>,
    ids: QueryIds,
    in_use: usize,
    /// Whether it has carried a query.
    used: bool,
    /// Held queries, back to back, and (start, length, destination).
    outbox: Vec<u8>,
    out: Vec<(usize, usize, SocketAddr)>,
}

/// The sockets; see the module docs.
pub struct SocketSet {
    sockets: Vec<Sock>,
    /// The sockets of each family, used in turn.
    v4: Vec<usize>,
    v6: Vec<usize>,
    turn: usize,
}

/// Sockets a run opens per source address: enough ids for `depth` names,
/// each keeping the ids of its last `kept` tries.
pub fn sockets_for(depth: usize, kept: usize) -> usize {
    (depth * kept).div_ceil(IDS_PER_SOCKET).max(1)
}

impl SocketSet {
    /// Binds `per_address` sockets to each of `locals` (port 0), or with no
    /// `locals` to any address of each family (IPv6 only where the machine
    /// has it), and registers them on `registry` with their index as token.
    /// An address that cannot be bound is an error naming it.
    pub fn bind(
        locals: &[IpAddr],
        per_address: usize,
        registry: &Registry,
    ) -> Result<SocketSet, String> {
        let mut set = SocketSet {
            sockets: Vec::new(),
            v4: Vec::new(),
            v6: Vec::new(),
            turn: 0,
        };
        let any = [
            IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        ];
        let (addresses, optional) = if locals.is_empty() {
            (&any[..], true)
        } else {
            (locals, false)
        };
        for ip in addresses {
            for _ in 0..per_address.max(1) {
                match set.open(*ip, registry) {
                    Ok(()) => {}
                    // No IPv6 on this machine: only IPv6 nameservers fail.
                    Err(_) if optional && ip.is_ipv6() => break,
                    Err(e) => return Err(format!("--local-addr {ip}: cannot bind: {e}")),
                }
            }
        }
        Ok(set)
    }

    fn open(&mut self, ip: IpAddr, registry: &Registry) -> io::Result<()> {
        let socket = UdpSocket::bind(SocketAddr::new(ip, 0))?;
        socket.set_nonblocking(true)?;
        datagrams::set_buffers(&socket, BUFFER_BYTES);
        let index = self.sockets.len();
        registry.register(
            &mut SourceFd(&socket.as_raw_fd()),
            Token(index),
            Interest::READABLE,
        )?;
        let local = socket.local_addr()?;
        self.sockets.push(Sock {
            socket,
            local,
            owners: vec![0u32; 1 << 16].into_boxed_slice(),
            ids: QueryIds::default(),
            in_use: 0,
            used: false,
            outbox: Vec::with_capacity(64 * 64),
            out: Vec::with_capacity(64),
        });
        if ip.is_ipv4() {
            self.v4.push(index);
        } else {
            self.v6.push(index);
        }
        Ok(())
    }

    /// The local addresses of the sockets (for the summary and the tests).
    pub fn locals(&self) -> Vec<SocketAddr> {
        self.sockets.iter().map(|s| s.local).collect()
    }

    /// Holds `query` for `to` on the next socket of `to`'s family with an id
    /// to spare, owned by `slot`: the (socket, id) it goes with and whether
    /// the socket carried a query before, or `None` when no socket of that
    /// family is open (or every id is taken).
    pub fn hold(&mut self, slot: u32, query: &[u8], to: SocketAddr) -> Option<(u16, u16, bool)> {
        let family = if to.is_ipv4() { &self.v4 } else { &self.v6 };
        let n = family.len();
        for k in 0..n {
            let index = family[(self.turn + k) % n];
            let sock = &mut self.sockets[index];
            if sock.in_use >= IDS_PER_SOCKET {
                continue;
            }
            let owners = &sock.owners;
            let id = sock
                .ids
                .next(sock.in_use, |id| owners[usize::from(id)] != 0)?;
            sock.owners[usize::from(id)] = slot + 1;
            sock.in_use += 1;
            let start = sock.outbox.len();
            sock.outbox.extend_from_slice(query);
            set_id(&mut sock.outbox[start..], id);
            sock.out.push((start, query.len(), to));
            let reused = std::mem::replace(&mut sock.used, true);
            self.turn = self.turn.wrapping_add(1);
            return Some((index as u16, id, reused));
        }
        None
    }

    /// The slot that owns `id` on `socket`.
    pub fn owner(&self, socket: u16, id: u16) -> Option<u32> {
        let owner = self.sockets.get(usize::from(socket))?.owners[usize::from(id)];
        owner.checked_sub(1)
    }

    /// Gives `id` on `socket` back, if `slot` still owns it.
    pub fn release(&mut self, socket: u16, id: u16, slot: u32) {
        if let Some(sock) = self.sockets.get_mut(usize::from(socket)) {
            let owner = &mut sock.owners[usize::from(id)];
            if *owner == slot + 1 {
                *owner = 0;
                sock.in_use -= 1;
            }
        }
    }

    /// Sends everything held, waiting while a socket's buffer is full. A
    /// datagram the kernel refuses outright (no route) is skipped: its query
    /// times out like a lost one.
    pub fn flush(&mut self) {
        for sock in &mut self.sockets {
            let mut next = 0;
            while next < sock.out.len() {
                match datagrams::send_to(&sock.socket, &sock.outbox, &sock.out[next..]) {
                    Ok(n) => next += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        let _ = dnsluice_net::sys::wait_writable(&sock.socket);
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => next += 1,
                }
            }
            sock.outbox.clear();
            sock.out.clear();
        }
    }

    /// Reads up to a batch of datagrams waiting on `socket` into
    /// `received`; how many (0 when none is waiting, or the socket keeps
    /// failing).
    pub fn read_batch(&self, socket: usize, received: &mut Received) -> usize {
        let Some(sock) = self.sockets.get(socket) else {
            return 0;
        };
        for _ in 0..8 {
            match received.read(&sock.socket) {
                Ok(n) => return n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return 0,
                // Interrupted, or an ICMP error from an earlier datagram (a
                // port not listening: its query times out): read again.
                Err(_) => {}
            }
        }
        0
    }
}

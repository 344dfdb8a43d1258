//! The UDP side: one thread, one epoll set, every link's sockets.
//!
//! A link has a listening socket; each client (source address) seen there
//! gets its own upstream socket, connected to the target and bound to the
//! client's own IP when that is a loopback address, so the server sees
//! which client asked (and a server's own per-client limits still work).
//! A datagram received is lost, limited, or held until its due time (delay
//! plus jitter) in one queue ordered by due time, then sent. Sockets are
//! drained with `recvmmsg` until empty and have large buffers, so the
//! emulator never loses a datagram it was not told to (the kernel's own
//! drop count on its sockets, [`crate::kernel`], says whether it did).

use crate::rng::Rng;
use crate::slip;
use crate::spec::{Link, Over, Path};
use crate::stats::LinkStats;
use crate::sys::{self, BATCH, SLOT};
use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Socket buffers: several seconds of traffic at the rates benchmarks use.
const BUFFER_BYTES: usize = 16 << 20;
/// An upstream socket with no traffic for this long is closed.
const IDLE: Duration = Duration::from_secs(60);
/// The longest the loop sleeps (to notice a stop request).
const TICK: Duration = Duration::from_millis(50);

/// A per-client token bucket.
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// One link's state on the UDP side.
struct LinkState {
    link: Link,
    stats: Arc<LinkStats>,
    listen: usize,
    up_rng: Rng,
    down_rng: Rng,
    buckets: HashMap<IpAddr, Bucket>,
    upstream: HashMap<SocketAddr, usize>,
}

enum SocketRole {
    Listen(usize),
    Upstream { link: usize, client: SocketAddr },
}

struct Sock {
    socket: UdpSocket,
    role: SocketRole,
    last_active: Instant,
}

/// A datagram waiting for its due time.
struct Held {
    from: usize,
    to: Option<SocketAddr>,
    data: Vec<u8>,
    /// The counter to bump when it is sent.
    link: usize,
    up: bool,
}

/// The UDP emulator; see the module docs.
pub struct Udp {
    poll: Poll,
    links: Vec<LinkState>,
    sockets: Vec<Option<Sock>>,
    queue: BinaryHeap<Reverse<(Instant, u64, usize)>>,
    held: Vec<Option<Held>>,
    free_held: Vec<usize>,
    pool: Vec<Vec<u8>>,
    seq: u64,
    /// The local addresses of every socket, for the kernel's drop counts.
    locals: Arc<Mutex<Vec<SocketAddr>>>,
}

impl Udp {
    /// Binds every link's listening socket.
    pub fn bind(
        links: &[(Link, Arc<LinkStats>)],
        seed: u64,
        locals: Arc<Mutex<Vec<SocketAddr>>>,
    ) -> io::Result<Udp> {
        let mut udp = Udp {
            poll: Poll::new()?,
            links: Vec::new(),
            sockets: Vec::new(),
            queue: BinaryHeap::new(),
            held: Vec::new(),
            free_held: Vec::new(),
            pool: Vec::new(),
            seq: 0,
            locals,
        };
        for (i, (link, stats)) in links.iter().enumerate() {
            let socket = UdpSocket::bind(link.listen).map_err(|e| {
                io::Error::new(e.kind(), format!("udp {}: cannot bind: {e}", link.listen))
            })?;
            let listen = udp.add_socket(socket, SocketRole::Listen(i))?;
            let stream = 2 * i as u64;
            udp.links.push(LinkState {
                link: link.clone(),
                stats: stats.clone(),
                listen,
                up_rng: Rng::new(seed, stream),
                down_rng: Rng::new(seed, stream + 1),
                buckets: HashMap::new(),
                upstream: HashMap::new(),
            });
        }
        Ok(udp)
    }

    fn add_socket(&mut self, mut socket: UdpSocket, role: SocketRole) -> io::Result<usize> {
        sys::big_buffers(&socket, BUFFER_BYTES);
        let index = self
            .sockets
            .iter()
            .position(Option::is_none)
            .unwrap_or(self.sockets.len());
        self.poll
            .registry()
            .register(&mut socket, Token(index), Interest::READABLE)?;
        let local = socket.local_addr()?;
        crate::lock(&self.locals).push(local);
        let sock = Sock {
            socket,
            role,
            last_active: Instant::now(),
        };
        if index == self.sockets.len() {
            self.sockets.push(Some(sock));
        } else {
            self.sockets[index] = Some(sock);
        }
        Ok(index)
    }

    /// Runs until `stop` is set.
    pub fn run(mut self, stop: &AtomicBool) -> io::Result<()> {
        let mut events = Events::with_capacity(256);
        let mut scratch = Box::new([0u8; BATCH * SLOT]);
        let mut last_sweep = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            let wait = self
                .queue
                .peek()
                .map_or(TICK, |Reverse((due, _, _))| {
                    due.saturating_duration_since(now)
                })
                .min(TICK);
            match self.poll.poll(&mut events, Some(wait)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
            for event in events.iter() {
                self.drain(event.token().0, &mut scratch);
            }
            self.send_due();
            if last_sweep.elapsed() > Duration::from_secs(1) {
                self.close_idle();
                last_sweep = Instant::now();
            }
        }
        Ok(())
    }

    /// Reads every datagram waiting on socket `index`.
    fn drain(&mut self, index: usize, scratch: &mut [u8; BATCH * SLOT]) {
        let mut got = [(0usize, None); BATCH];
        loop {
            let Some(sock) = self.sockets.get(index).and_then(Option::as_ref) else {
                return;
            };
            let n = match sys::receive(&sock.socket, scratch, &mut got) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // ICMP errors from an earlier send (a port not listening).
                Err(_) => continue,
            };
            let now = Instant::now();
            for (i, &(len, from)) in got[..n].iter().enumerate() {
                let data = &scratch[i * SLOT..i * SLOT + len];
                let sock = self.sockets[index].as_mut().expect("socket just read");
                sock.last_active = now;
                match sock.role {
                    SocketRole::Listen(link) => {
                        if let Some(client) = from {
                            self.query_from(link, client, data, now);
                        }
                    }
                    SocketRole::Upstream { link, client } => {
                        self.response_from(link, client, data, now)
                    }
                }
            }
        }
    }

    /// A query from `client`: lost, limited, or held for the way up.
    fn query_from(&mut self, link: usize, client: SocketAddr, data: &[u8], now: Instant) {
        let state = &mut self.links[link];
        LinkStats::bump(&state.stats.up_received);
        if state.up_rng.chance(state.link.up.loss) {
            LinkStats::bump(&state.stats.up_lost);
            return;
        }
        if let Some(limit) = state.link.limit {
            let bucket = state.buckets.entry(client.ip()).or_insert(Bucket {
                tokens: limit.burst,
                at: now,
            });
            let refill = now.duration_since(bucket.at).as_secs_f64() * limit.per_second;
            bucket.tokens = (bucket.tokens + refill).min(limit.burst);
            bucket.at = now;
            if bucket.tokens < 1.0 {
                self.over_limit(link, client, data, limit.over, now);
                return;
            }
            bucket.tokens -= 1.0;
        }
        let upstream = match self.upstream_of(link, client) {
            Ok(index) => index,
            Err(e) => {
                eprintln!(
                    "dnsluice-netem: udp {client} -> {}: {e}",
                    self.links[link].link.target
                );
                return;
            }
        };
        let state = &mut self.links[link];
        let due = now + delay(&state.link.up, &mut state.up_rng);
        self.hold(due, upstream, None, data, link, true);
    }

    /// A query over its client's limit: dropped, or answered from here (the
    /// answer travels back as the server's would, both delays and the
    /// loss of the way down).
    fn over_limit(
        &mut self,
        link: usize,
        client: SocketAddr,
        query: &[u8],
        over: Over,
        now: Instant,
    ) {
        let state = &mut self.links[link];
        let counter = match over {
            Over::Drop => &state.stats.limited_dropped,
            Over::Refused => &state.stats.limited_refused,
            Over::Truncate => &state.stats.limited_truncated,
        };
        LinkStats::bump(counter);
        let Some(answer) = slip::answer(query, over) else {
            return;
        };
        LinkStats::bump(&state.stats.down_received);
        if state.down_rng.chance(state.link.down.loss) {
            LinkStats::bump(&state.stats.down_lost);
            return;
        }
        let due = now
            + delay(&state.link.up, &mut state.up_rng)
            + delay(&state.link.down, &mut state.down_rng);
        let listen = state.listen;
        self.hold(due, listen, Some(client), &answer, link, false);
    }

    /// A response for `client`: lost, or held for the way down.
    fn response_from(&mut self, link: usize, client: SocketAddr, data: &[u8], now: Instant) {
        let state = &mut self.links[link];
        LinkStats::bump(&state.stats.down_received);
        if state.down_rng.chance(state.link.down.loss) {
            LinkStats::bump(&state.stats.down_lost);
            return;
        }
        let due = now + delay(&state.link.down, &mut state.down_rng);
        let listen = state.listen;
        self.hold(due, listen, Some(client), data, link, false);
    }

    fn hold(
        &mut self,
        due: Instant,
        from: usize,
        to: Option<SocketAddr>,
        data: &[u8],
        link: usize,
        up: bool,
    ) {
        let mut buffer = self.pool.pop().unwrap_or_default();
        buffer.clear();
        buffer.extend_from_slice(data);
        let held = Held {
            from,
            to,
            data: buffer,
            link,
            up,
        };
        let slot = match self.free_held.pop() {
            Some(slot) => {
                self.held[slot] = Some(held);
                slot
            }
            None => {
                self.held.push(Some(held));
                self.held.len() - 1
            }
        };
        self.seq += 1;
        self.queue.push(Reverse((due, self.seq, slot)));
    }

    /// The upstream socket of `client` on `link`, made on first sight.
    fn upstream_of(&mut self, link: usize, client: SocketAddr) -> io::Result<usize> {
        if let Some(&index) = self.links[link].upstream.get(&client) {
            if self.sockets[index].is_some() {
                return Ok(index);
            }
        }
        let target = self.links[link].link.target;
        let socket = bind_as(client.ip(), target)?;
        socket.connect(target)?;
        let index = self.add_socket(socket, SocketRole::Upstream { link, client })?;
        let state = &mut self.links[link];
        state.upstream.insert(client, index);
        LinkStats::bump(&state.stats.udp_clients);
        Ok(index)
    }

    /// Sends every held datagram whose time has come, in batches per socket.
    fn send_due(&mut self) {
        let now = Instant::now();
        let mut due: Vec<usize> = Vec::new();
        while let Some(&Reverse((at, _, slot))) = self.queue.peek() {
            if at > now {
                break;
            }
            self.queue.pop();
            due.push(slot);
        }
        // Per socket, in due order.
        due.sort_by_key(|&slot| self.held[slot].as_ref().map_or(0, |h| h.from));
        for group in due.chunk_by(|a, b| {
            self.held[*a].as_ref().map(|h| h.from) == self.held[*b].as_ref().map(|h| h.from)
        }) {
            self.send_group(group);
        }
        for slot in due {
            if let Some(held) = self.held[slot].take() {
                self.pool.push(held.data);
                self.free_held.push(slot);
            }
        }
    }

    fn send_group(&self, group: &[usize]) {
        let Some(first) = self.held[group[0]].as_ref() else {
            return;
        };
        let Some(sock) = self.sockets[first.from].as_ref() else {
            return;
        };
        let datagrams: Vec<(&[u8], Option<SocketAddr>)> = group
            .iter()
            .filter_map(|&slot| self.held[slot].as_ref())
            .map(|h| (h.data.as_slice(), h.to))
            .collect();
        // Counted before they go, so a client that got one sees it counted.
        for &slot in group {
            if let Some(h) = self.held[slot].as_ref() {
                let stats = &self.links[h.link].stats;
                LinkStats::bump(if h.up {
                    &stats.up_forwarded
                } else {
                    &stats.down_forwarded
                });
            }
        }
        let mut next = 0;
        while next < datagrams.len() {
            match sys::send(&sock.socket, &datagrams[next..]) {
                Ok(n) => next += n.max(1),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    sys::wait_writable(&sock.socket, 10)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // A refused port (ICMP) for an earlier datagram: this one is
                // still sent on the next call; other errors skip it.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                Err(_) => next += 1,
            }
        }
    }

    /// Closes upstream sockets idle for [`IDLE`] with nothing held for them.
    fn close_idle(&mut self) {
        let busy: Vec<usize> = self.held.iter().flatten().map(|h| h.from).collect();
        for index in 0..self.sockets.len() {
            let idle = match &self.sockets[index] {
                Some(sock) => {
                    matches!(sock.role, SocketRole::Upstream { .. })
                        && sock.last_active.elapsed() > IDLE
                        && !busy.contains(&index)
                }
                None => false,
            };
            if !idle {
                continue;
            }
            if let Some(mut sock) = self.sockets[index].take() {
                let _ = self.poll.registry().deregister(&mut sock.socket);
                if let SocketRole::Upstream { link, client } = sock.role {
                    self.links[link].upstream.remove(&client);
                }
                if let Ok(local) = sock.socket.local_addr() {
                    crate::lock(&self.locals).retain(|a| *a != local);
                }
            }
        }
    }
}

/// The delay of one datagram on `path`: fixed, plus up to `jitter`.
pub fn delay(path: &Path, rng: &mut Rng) -> Duration {
    if path.jitter.is_zero() {
        return path.delay;
    }
    path.delay + path.jitter.mul_f64(rng.unit())
}

/// A socket for traffic to `target` on behalf of a client at `client_ip`:
/// bound to that IP when it is a loopback address of `target`'s family (the
/// server then sees the client's address), else to loopback.
fn bind_as(client_ip: IpAddr, target: SocketAddr) -> io::Result<UdpSocket> {
    let fallback = if target.is_ipv4() {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        IpAddr::V6(Ipv6Addr::LOCALHOST)
    };
    let same_family = client_ip.is_ipv4() == target.is_ipv4();
    if same_family && client_ip.is_loopback() {
        if let Ok(socket) = UdpSocket::bind(SocketAddr::new(client_ip, 0)) {
            return Ok(socket);
        }
    }
    UdpSocket::bind(SocketAddr::new(fallback, 0))
}

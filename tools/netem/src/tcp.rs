//! The TCP side: each accepted connection gets one upstream connection, and
//! every chunk of bytes read is written on the other side after the link's
//! delay for that direction (plus jitter, order kept: a chunk never
//! overtakes the one before it). A "lost" chunk is one the sender had to
//! retransmit: it and everything behind it wait [`RETRANSMIT`] plus a round
//! trip more, as after a real loss (TCP never loses bytes). A new
//! connection pays its handshake's round trip before any byte passes (the
//! kernel completes the local handshake at once). End of stream (or an
//! error) on one side is passed on, after the delay, as a half-close (or a
//! full shutdown) of the other. No rate limit: RRL limits UDP, and TCP is
//! the way out it points clients to.
//!
//! Threads: one per direction of each connection, plenty for tests.

use crate::rng::Rng;
use crate::spec::{Link, Path};
use crate::stats::LinkStats;
use crate::udp::delay;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// How long a lost segment waits before it is sent again (Linux's minimum
/// retransmission timeout).
pub const RETRANSMIT: Duration = Duration::from_millis(200);

/// Binds `link.listen` for TCP (an error naming the address when it cannot).
pub fn bind(link: &Link) -> io::Result<TcpListener> {
    TcpListener::bind(link.listen)
        .map_err(|e| io::Error::new(e.kind(), format!("tcp {}: cannot bind: {e}", link.listen)))
}

/// Starts accepting on `listener` (bound by [`bind`]) for `link`; returns
/// the bound address.
pub fn spawn(
    listener: TcpListener,
    link: Link,
    stats: Arc<LinkStats>,
    seed: u64,
) -> io::Result<SocketAddr> {
    let local = listener.local_addr()?;
    let connections = AtomicU64::new(0);
    thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { continue };
            LinkStats::bump(&stats.tcp_connections);
            // Each connection draws from streams of its own, still repeatable.
            let n = connections.fetch_add(1, Ordering::Relaxed);
            let (link, stats) = (link.clone(), stats.clone());
            thread::spawn(move || {
                if let Err(e) = flow(client, &link, &stats, seed ^ (n << 32)) {
                    eprintln!("dnsluice-netem: tcp -> {}: {e}", link.target);
                }
            });
        }
    });
    Ok(local)
}

/// Joins one accepted connection to a new upstream connection, after the
/// handshake's round trip.
fn flow(client: TcpStream, link: &Link, stats: &Arc<LinkStats>, seed: u64) -> io::Result<()> {
    thread::sleep(link.up.delay + link.down.delay);
    let upstream = match TcpStream::connect(link.target) {
        Ok(upstream) => upstream,
        Err(e) => {
            let _ = client.shutdown(Shutdown::Both);
            return Err(e);
        }
    };
    client.set_nodelay(true)?;
    upstream.set_nodelay(true)?;
    let round_trip = link.up.delay + link.down.delay;
    pipe(
        client.try_clone()?,
        upstream.try_clone()?,
        Direction::new(link.up, round_trip, Rng::new(seed, 0), stats.clone()),
    );
    pipe(
        upstream,
        client,
        Direction::new(link.down, round_trip, Rng::new(seed, 1), stats.clone()),
    );
    Ok(())
}

/// What one direction of a connection does to its chunks.
struct Direction {
    path: Path,
    round_trip: Duration,
    rng: Rng,
    stats: Arc<LinkStats>,
    /// When the last chunk is due: none may be due before it.
    last_due: Instant,
}

impl Direction {
    fn new(path: Path, round_trip: Duration, rng: Rng, stats: Arc<LinkStats>) -> Direction {
        Direction {
            path,
            round_trip,
            rng,
            stats,
            last_due: Instant::now(),
        }
    }

    /// When a chunk read at `read` is to be written.
    fn due(&mut self, read: Instant) -> Instant {
        let mut due = read + delay(&self.path, &mut self.rng);
        if self.rng.chance(self.path.loss) {
            LinkStats::bump(&self.stats.tcp_retransmits);
            due += RETRANSMIT + self.round_trip;
        }
        self.last_due = self.last_due.max(due);
        self.last_due
    }
}

/// Copies `from` to `to` through a delay line, in new threads: each chunk
/// read is written when [`Direction::due`] says; end of stream becomes a
/// half-close of `to`.
fn pipe(mut from: TcpStream, to: TcpStream, mut direction: Direction) {
    let stats = direction.stats.clone();
    let line = delay_line(move |chunk: Option<Vec<u8>>| {
        let mut to: &TcpStream = &to;
        match chunk {
            Some(data) => {
                if to.write_all(&data).is_err() {
                    let _ = to.shutdown(Shutdown::Both);
                    return false;
                }
                stats
                    .tcp_bytes
                    .fetch_add(data.len() as u64, Ordering::Relaxed);
                true
            }
            None => {
                let _ = to.shutdown(Shutdown::Write);
                false
            }
        }
    });
    thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        loop {
            match from.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let due = direction.due(Instant::now());
                    if line.send((due, Some(buf[..n].to_vec()))).is_err() {
                        // The other side is gone: stop reading this one too.
                        let _ = from.shutdown(Shutdown::Both);
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let due = direction.due(Instant::now());
        let _ = line.send((due, None));
    });
}

/// Starts a thread that hands each item sent to the returned channel to
/// `deliver` at the item's due time, in sending order (due times never
/// decrease). The thread ends when every sender is gone or `deliver`
/// returns `false`.
fn delay_line<T: Send + 'static>(
    mut deliver: impl FnMut(T) -> bool + Send + 'static,
) -> Sender<(Instant, T)> {
    let (tx, rx) = mpsc::channel::<(Instant, T)>();
    thread::spawn(move || {
        for (due, item) in rx {
            let now = Instant::now();
            if due > now {
                thread::sleep(due - now);
            }
            if !deliver(item) {
                break;
            }
        }
    });
    tx
}

//! A forwarder that makes a fast server slow: every UDP datagram and every
//! TCP byte chunk is held for a fixed delay in each direction, in order.
//!
//! The kernel here has no `netem`, so tests that need a slow nameserver run
//! this in front of a fast one on another loopback address.
//!
//! - UDP: each client address gets its own upstream socket, so replies go
//!   back to the client that asked. A mapping idle for [`UDP_IDLE`] is dropped.
//! - TCP: each accepted connection gets one upstream connection; an end of
//!   stream (or an error) on either side is passed on, after the delay, as a
//!   half-close (or a full shutdown) of the other. A new connection also pays
//!   the round trip its handshake would cost on a link this slow: nothing is
//!   forwarded until `2 × delay` after the accept (the kernel completes the
//!   local handshake at once, so without this a new connection would be as
//!   cheap as a kept one, which no real slow server allows).
//!
//! Only std: one thread per direction of each flow, which is plenty for tests.

#![warn(missing_docs)]

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How long a UDP client mapping may see no reply traffic before its upstream
/// socket is closed.
pub const UDP_IDLE: Duration = Duration::from_secs(60);

/// Starts a thread that hands each item sent to the returned channel to
/// `deliver` once `delay` has passed since it was sent, in sending order.
/// The thread ends when every sender is gone or `deliver` returns `false`.
fn delay_line<T: Send + 'static>(
    delay: Duration,
    mut deliver: impl FnMut(T) -> bool + Send + 'static,
) -> Sender<(Instant, T)> {
    let (tx, rx) = mpsc::channel::<(Instant, T)>();
    thread::spawn(move || {
        for (received, item) in rx {
            let due = received + delay;
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

/// Forwards UDP from `listen` to `target`, `delay` each way. Returns the bound
/// address (useful with port 0); the work goes on in background threads.
pub fn spawn_udp(
    listen: SocketAddr,
    target: SocketAddr,
    delay: Duration,
) -> io::Result<SocketAddr> {
    let socket = Arc::new(UdpSocket::bind(listen)?);
    let local = socket.local_addr()?;
    let to_clients = {
        let socket = Arc::clone(&socket);
        delay_line(delay, move |(client, data): (SocketAddr, Vec<u8>)| {
            let _ = socket.send_to(&data, client);
            true
        })
    };
    let to_target = delay_line(delay, |(upstream, data): (Arc<UdpSocket>, Vec<u8>)| {
        let _ = upstream.send(&data);
        true
    });
    // Upstream sockets stay on loopback too.
    let upstream_bind: SocketAddr = if target.is_ipv4() {
        "127.0.0.1:0"
    } else {
        "[::1]:0"
    }
    .parse()
    .expect("a valid address");
    let flows: Arc<Mutex<HashMap<SocketAddr, Arc<UdpSocket>>>> = Arc::default();
    thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        loop {
            let Ok((n, client)) = socket.recv_from(&mut buf) else {
                continue;
            };
            let received = Instant::now();
            let upstream = match upstream_for(&flows, client, upstream_bind, target, &to_clients) {
                Ok(upstream) => upstream,
                Err(e) => {
                    eprintln!("delay-proxy: udp {client} -> {target}: {e}");
                    continue;
                }
            };
            if to_target
                .send((received, (upstream, buf[..n].to_vec())))
                .is_err()
            {
                return;
            }
        }
    });
    Ok(local)
}

/// The upstream socket of `client`, made (with a thread reading its replies)
/// on first use.
fn upstream_for(
    flows: &Arc<Mutex<HashMap<SocketAddr, Arc<UdpSocket>>>>,
    client: SocketAddr,
    bind: SocketAddr,
    target: SocketAddr,
    to_clients: &Sender<(Instant, (SocketAddr, Vec<u8>))>,
) -> io::Result<Arc<UdpSocket>> {
    let mut map = flows.lock().expect("flow map lock");
    if let Some(upstream) = map.get(&client) {
        return Ok(Arc::clone(upstream));
    }
    let upstream = UdpSocket::bind(bind)?;
    upstream.connect(target)?;
    upstream.set_read_timeout(Some(UDP_IDLE))?;
    let upstream = Arc::new(upstream);
    map.insert(client, Arc::clone(&upstream));
    let (reader, flows, to_clients) =
        (Arc::clone(&upstream), Arc::clone(flows), to_clients.clone());
    thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        loop {
            match reader.recv(&mut buf) {
                Ok(n) => {
                    if to_clients
                        .send((Instant::now(), (client, buf[..n].to_vec())))
                        .is_err()
                    {
                        break;
                    }
                }
                // A refused port (ICMP) is the target's business: keep going.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                Err(_) => break, // idle (timeout) or broken
            }
        }
        flows.lock().expect("flow map lock").remove(&client);
    });
    Ok(upstream)
}

/// Forwards TCP connections from `listen` to `target`, `delay` each way.
/// Returns the bound address; the work goes on in background threads.
pub fn spawn_tcp(
    listen: SocketAddr,
    target: SocketAddr,
    delay: Duration,
) -> io::Result<SocketAddr> {
    let listener = TcpListener::bind(listen)?;
    let local = listener.local_addr()?;
    thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { continue };
            thread::spawn(move || {
                if let Err(e) = tcp_flow(client, target, delay) {
                    eprintln!("delay-proxy: tcp -> {target}: {e}");
                }
            });
        }
    });
    Ok(local)
}

/// Joins one accepted connection to a new upstream connection, after the
/// handshake's round trip (`2 × delay`).
fn tcp_flow(client: TcpStream, target: SocketAddr, delay: Duration) -> io::Result<()> {
    thread::sleep(2 * delay);
    let upstream = match TcpStream::connect(target) {
        Ok(upstream) => upstream,
        Err(e) => {
            let _ = client.shutdown(Shutdown::Both);
            return Err(e);
        }
    };
    client.set_nodelay(true)?;
    upstream.set_nodelay(true)?;
    pipe(client.try_clone()?, upstream.try_clone()?, delay);
    pipe(upstream, client, delay);
    Ok(())
}

/// Copies `from` to `to` through a delay line, in a new thread: each chunk
/// read is written `delay` later; end of stream becomes a half-close of `to`.
fn pipe(mut from: TcpStream, to: TcpStream, delay: Duration) {
    let writer = to.try_clone();
    let line = delay_line(delay, move |chunk: Option<Vec<u8>>| {
        let Ok(mut to): Result<&TcpStream, _> = writer.as_ref() else {
            return false;
        };
        match chunk {
            Some(data) => {
                if to.write_all(&data).is_err() {
                    let _ = to.shutdown(Shutdown::Both);
                    return false;
                }
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
                    if line
                        .send((Instant::now(), Some(buf[..n].to_vec())))
                        .is_err()
                    {
                        // The other side is gone: stop reading this one too.
                        let _ = from.shutdown(Shutdown::Both);
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = line.send((Instant::now(), None));
        drop(to);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const DELAY: Duration = Duration::from_millis(50);

    fn loopback() -> SocketAddr {
        "127.0.0.1:0".parse().unwrap()
    }

    #[test]
    fn udp_is_delayed_each_way_and_replies_reach_their_client() {
        let echo = UdpSocket::bind(loopback()).unwrap();
        let echo_addr = echo.local_addr().unwrap();
        thread::spawn(move || {
            let mut buf = [0u8; 512];
            while let Ok((n, from)) = echo.recv_from(&mut buf) {
                let _ = echo.send_to(&buf[..n], from);
            }
        });
        let proxy = spawn_udp(loopback(), echo_addr, DELAY).unwrap();
        let a = UdpSocket::bind(loopback()).unwrap();
        let b = UdpSocket::bind(loopback()).unwrap();
        for s in [&a, &b] {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        }
        let start = Instant::now();
        a.send_to(b"from a 1", proxy).unwrap();
        b.send_to(b"from b", proxy).unwrap();
        a.send_to(b"from a 2", proxy).unwrap();
        let mut buf = [0u8; 64];
        let n = a.recv(&mut buf).unwrap();
        assert!(start.elapsed() >= 2 * DELAY, "{:?}", start.elapsed());
        assert_eq!(&buf[..n], b"from a 1");
        let n = a.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"from a 2");
        let n = b.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"from b");
    }

    #[test]
    fn tcp_is_delayed_in_order_and_close_propagates() {
        let server = TcpListener::bind(loopback()).unwrap();
        let server_addr = server.local_addr().unwrap();
        thread::spawn(move || {
            let (mut conn, _) = server.accept().unwrap();
            let mut all = Vec::new();
            conn.read_to_end(&mut all).unwrap(); // until the client's close arrives
            conn.write_all(&all).unwrap();
            // dropping `conn` closes: the client must see end of stream
        });
        let proxy = spawn_tcp(loopback(), server_addr, DELAY).unwrap();
        let mut client = TcpStream::connect(proxy).unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let start = Instant::now();
        for chunk in [&b"one "[..], b"two ", b"three"] {
            client.write_all(chunk).unwrap();
            thread::sleep(Duration::from_millis(5));
        }
        client.shutdown(Shutdown::Write).unwrap();
        let mut back = Vec::new();
        client.read_to_end(&mut back).unwrap();
        assert_eq!(back, b"one two three");
        // The handshake's round trip, then the data's: four delays.
        assert!(start.elapsed() >= 4 * DELAY, "{:?}", start.elapsed());
    }
}

//! In-process DNS servers that misbehave on purpose, for client fault tests.

use std::collections::hash_map::RandomState;
use std::future::pending;
use std::hash::BuildHasher;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio_rustls::TlsAcceptor;

pub use crate::behaviour::Behaviour;
use crate::wire::{self, Query};
use crate::TestCert;

/// The transport a [`FaultServer`] speaks.
#[derive(Clone, Debug)]
pub enum FaultKind {
    /// DNS over UDP.
    Udp,
    /// DNS over TCP (RFC 7766: length-prefixed, several queries per connection).
    Tcp,
    /// DNS over TLS (RFC 7858) with `cert`.
    Tls {
        /// The certificate the server presents.
        cert: TestCert,
    },
    /// DNS over HTTPS (RFC 8484) over HTTP/2 with `cert`, at path
    /// `/dns-query`: POST (`application/dns-message` body) and GET (`?dns=`
    /// base64url).
    Https {
        /// The certificate the server presents.
        cert: TestCert,
    },
}

/// The address of the `ok` answer.
const OK_ADDR: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
/// How many A records `big` has.
const BIG_COUNT: u8 = 40;

/// How a server's transport frames what it sends; decides `tc`, `reset`,
/// `garbage` and `big`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Transport {
    Udp,
    Stream,
    Https,
}

/// What to do with one received query.
enum Action {
    Send(Vec<u8>),
    /// Over UDP only: the datagram twice.
    SendTwice(Vec<u8>),
    SendAfter(Duration, Vec<u8>),
    Nothing,
    Close,
    SendThenClose(Vec<u8>),
}

fn decide(msg: &[u8], transport: Transport, counters: &Counters) -> Action {
    let Some(query) = wire::parse_query(msg) else {
        return Action::Nothing;
    };
    let answer =
        |rcode, answers: &[Ipv4Addr]| wire::response(&query, query.id, rcode, false, answers);
    match Behaviour::of(&query.first_label) {
        Behaviour::Ok => Action::Send(answer(wire::NOERROR, &[OK_ADDR])),
        Behaviour::NxDomain => Action::Send(answer(wire::NXDOMAIN, &[])),
        Behaviour::ServFail => Action::Send(answer(wire::SERVFAIL, &[])),
        Behaviour::Refused => Action::Send(answer(wire::REFUSED, &[])),
        Behaviour::RefusedTwice if transport == Transport::Udp => {
            Action::SendTwice(answer(wire::REFUSED, &[]))
        }
        Behaviour::RefusedTwice => Action::Send(answer(wire::REFUSED, &[])),
        Behaviour::Flip => {
            let mut flipped = counters.flipped.lock().unwrap_or_else(|p| p.into_inner());
            match flipped.insert(query.question.to_ascii_lowercase()) {
                true => Action::Send(answer(wire::NOERROR, &[OK_ADDR])),
                false => Action::Send(answer(wire::NXDOMAIN, &[])),
            }
        }
        Behaviour::Drop => Action::Nothing,
        Behaviour::Late(ms) => {
            Action::SendAfter(Duration::from_millis(ms), answer(wire::NOERROR, &[OK_ADDR]))
        }
        Behaviour::WrongId => Action::Send(wire::response(
            &query,
            query.id.wrapping_add(1),
            wire::NOERROR,
            false,
            &[OK_ADDR],
        )),
        Behaviour::WrongQuestion => {
            let mut other = query.question.to_vec();
            // `wrongq` → `vrongq`: the first letter of the first label.
            if let Some(letter) = other.get_mut(1) {
                *letter ^= 0x01;
            }
            let asked = wire::Query {
                id: query.id,
                flags: query.flags,
                question: &other,
                first_label: String::new(),
                edns_udp_size: query.edns_udp_size,
            };
            Action::Send(wire::response(
                &asked,
                query.id,
                wire::NOERROR,
                false,
                &[OK_ADDR],
            ))
        }
        Behaviour::Truncated if transport == Transport::Udp => Action::Send(truncated(&query)),
        Behaviour::Truncated => Action::Send(answer(wire::NOERROR, &[OK_ADDR])),
        Behaviour::OkThenClose if transport == Transport::Stream => {
            Action::SendThenClose(answer(wire::NOERROR, &[OK_ADDR]))
        }
        Behaviour::OkThenClose => Action::Send(answer(wire::NOERROR, &[OK_ADDR])),
        Behaviour::ResetOnce if counters.reset_once.swap(true, Ordering::Relaxed) => {
            Action::Send(answer(wire::NOERROR, &[OK_ADDR]))
        }
        Behaviour::ResetOnce | Behaviour::Reset if transport == Transport::Udp => Action::Nothing,
        Behaviour::ResetOnce => Action::Close,
        Behaviour::Reset => Action::Close,
        Behaviour::Garbage => {
            let junk = RandomState::new().hash_one(msg).to_be_bytes();
            let len = if transport == Transport::Stream { 2 } else { 3 };
            Action::Send(junk[..len].to_vec())
        }
        Behaviour::Cname(hops) => {
            Action::Send(wire::cname_response(&query, &format!("cname{}", hops - 1)))
        }
        Behaviour::LoopA => Action::Send(wire::cname_response(&query, "loopb")),
        Behaviour::LoopB => Action::Send(wire::cname_response(&query, "loopa")),
        Behaviour::Big => {
            let addrs: Vec<_> = (1..=BIG_COUNT)
                .map(|i| Ipv4Addr::new(192, 0, 2, i))
                .collect();
            let full = answer(wire::NOERROR, &addrs);
            let limit = usize::from(query.edns_udp_size.unwrap_or(512).max(512));
            if transport == Transport::Udp && full.len() > limit {
                Action::Send(truncated(&query))
            } else {
                Action::Send(full)
            }
        }
    }
}

fn truncated(query: &Query<'_>) -> Vec<u8> {
    wire::response(query, query.id, wire::NOERROR, true, &[])
}

#[derive(Default)]
struct Counters {
    connections: AtomicU64,
    queries: AtomicU64,
    handshakes: AtomicU64,
    doh_gets: AtomicU64,
    doh_posts: AtomicU64,
    /// A `resetonce` query has been reset.
    reset_once: std::sync::atomic::AtomicBool,
    /// The questions of the `flip` queries answered so far.
    flipped: std::sync::Mutex<std::collections::HashSet<Vec<u8>>>,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// A DNS server on 127.0.0.1 (a free port) running on a background thread
/// with its own tokio current-thread runtime. Each query gets the
/// [`Behaviour`] its name's first label selects; queries on one TCP, TLS or
/// HTTP/2 connection are handled concurrently, so a `late` answer does not
/// hold up later ones (answers come out of order).
///
/// Dropping it stops the server and closes every connection.
pub struct FaultServer {
    addr: SocketAddr,
    counters: Arc<Counters>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

enum Bound {
    Udp(std::net::UdpSocket),
    Tcp(std::net::TcpListener, Option<TlsAcceptor>, bool),
}

impl FaultServer {
    /// Binds 127.0.0.1 on a free port and starts serving `kind`.
    ///
    /// # Panics
    ///
    /// When the socket cannot be bound or the runtime cannot start.
    pub fn start(kind: FaultKind) -> FaultServer {
        let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let tls = |cert: &TestCert, alpn: &[&[u8]]| {
            Some(TlsAcceptor::from(Arc::new(cert.server_config(alpn))))
        };
        let listener = || std::net::TcpListener::bind(loopback).expect("binding a TCP port");
        let bound = match &kind {
            FaultKind::Udp => {
                Bound::Udp(std::net::UdpSocket::bind(loopback).expect("binding a UDP port"))
            }
            FaultKind::Tcp => Bound::Tcp(listener(), None, false),
            FaultKind::Tls { cert } => Bound::Tcp(listener(), tls(cert, &[b"dot"]), false),
            FaultKind::Https { cert } => Bound::Tcp(listener(), tls(cert, &[b"h2"]), true),
        };
        let addr = match &bound {
            Bound::Udp(s) => s.local_addr(),
            Bound::Tcp(l, ..) => l.local_addr(),
        }
        .expect("a bound address");
        let counters = Arc::new(Counters::default());
        let (stop, stopped) = oneshot::channel();
        let thread = {
            let counters = Arc::clone(&counters);
            std::thread::Builder::new()
                .name(format!("fault-server-{addr}"))
                .spawn(move || run(bound, counters, stopped))
                .expect("spawning the server thread")
        };
        FaultServer {
            addr,
            counters,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// TCP connections accepted so far (TCP, TLS and HTTPS servers).
    pub fn connections_accepted(&self) -> u64 {
        self.counters.connections.load(Ordering::Relaxed)
    }

    /// Queries received so far (every UDP datagram, TCP/TLS message, or DoH request).
    pub fn queries_received(&self) -> u64 {
        self.counters.queries.load(Ordering::Relaxed)
    }

    /// DoH requests that came as `GET /dns-query?dns=...` (HTTPS servers).
    pub fn doh_gets(&self) -> u64 {
        self.counters.doh_gets.load(Ordering::Relaxed)
    }

    /// DoH requests that came as `POST /dns-query` (HTTPS servers).
    pub fn doh_posts(&self) -> u64 {
        self.counters.doh_posts.load(Ordering::Relaxed)
    }

    /// TLS handshakes completed so far.
    pub fn tls_handshakes(&self) -> u64 {
        self.counters.handshakes.load(Ordering::Relaxed)
    }
}

impl Drop for FaultServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl std::fmt::Debug for FaultServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// The server thread: serves until `stopped`; dropping the runtime then
/// cancels every connection task and closes every socket.
fn run(bound: Bound, counters: Arc<Counters>, stopped: oneshot::Receiver<()>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async move {
        let serve = async {
            match bound {
                Bound::Udp(socket) => {
                    socket.set_nonblocking(true).expect("non-blocking socket");
                    serve_udp(
                        UdpSocket::from_std(socket).expect("a tokio socket"),
                        counters,
                    )
                    .await
                }
                Bound::Tcp(listener, tls, https) => {
                    listener.set_nonblocking(true).expect("non-blocking socket");
                    let listener = TcpListener::from_std(listener).expect("a tokio listener");
                    serve_tcp(listener, tls, https, counters).await
                }
            }
        };
        tokio::select! {
            () = serve => {}
            _ = stopped => {}
        }
    });
}

async fn serve_udp(socket: UdpSocket, counters: Arc<Counters>) {
    let socket = Arc::new(socket);
    let mut buf = vec![0u8; 65535];
    loop {
        let Ok((n, peer)) = socket.recv_from(&mut buf).await else {
            continue;
        };
        bump(&counters.queries);
        match decide(&buf[..n], Transport::Udp, &counters) {
            // A datagram has no connection to close.
            Action::Send(msg) | Action::SendThenClose(msg) => {
                let _ = socket.send_to(&msg, peer).await;
            }
            Action::SendTwice(msg) => {
                let _ = socket.send_to(&msg, peer).await;
                let _ = socket.send_to(&msg, peer).await;
            }
            Action::SendAfter(delay, msg) => {
                let socket = Arc::clone(&socket);
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let _ = socket.send_to(&msg, peer).await;
                });
            }
            Action::Nothing | Action::Close => {}
        }
    }
}

async fn serve_tcp(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    https: bool,
    counters: Arc<Counters>,
) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        bump(&counters.connections);
        let _ = stream.set_nodelay(true);
        let (tls, counters) = (tls.clone(), Arc::clone(&counters));
        tokio::spawn(async move {
            let Some(acceptor) = tls else {
                return serve_stream(stream, counters).await;
            };
            let Ok(stream) = acceptor.accept(stream).await else {
                return;
            };
            bump(&counters.handshakes);
            if https {
                serve_h2(stream, counters).await;
            } else {
                serve_stream(stream, counters).await;
            }
        });
    }
}

/// One TCP or TLS connection: reads length-prefixed queries and answers each
/// on its own (late answers are written when they are due, in any order).
async fn serve_stream<S>(stream: S, counters: Arc<Counters>)
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (mut reader, mut writer) = tokio::io::split(stream);
    let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let write_task = tokio::spawn(async move {
        while let Some(msg) = rx.recv().await {
            let mut frame = Vec::with_capacity(2 + msg.len());
            frame.extend_from_slice(&(msg.len() as u16).to_be_bytes());
            frame.extend_from_slice(&msg);
            if writer.write_all(&frame).await.is_err() || writer.flush().await.is_err() {
                return;
            }
        }
        let _ = writer.shutdown().await;
    });
    let mut buf = Vec::new();
    while let Ok(len) = reader.read_u16().await {
        buf.resize(usize::from(len), 0);
        if reader.read_exact(&mut buf).await.is_err() {
            break;
        }
        bump(&counters.queries);
        match decide(&buf, Transport::Stream, &counters) {
            Action::Send(msg) | Action::SendTwice(msg) => {
                let _ = tx.send(msg);
            }
            Action::SendAfter(delay, msg) => {
                let tx = tx.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let _ = tx.send(msg);
                });
            }
            Action::Nothing => {}
            Action::Close => {
                // Dropping both halves closes the socket, unanswered.
                write_task.abort();
                return;
            }
            Action::SendThenClose(msg) => {
                // The answer goes out, then the writer shuts the connection.
                let _ = tx.send(msg);
                drop(tx);
                let _ = write_task.await;
                return;
            }
        }
    }
    // The client is done sending: answers still due (late ones) go out, then
    // the writer closes when the last sender is gone.
}

/// One DoH connection over HTTP/2: each request is handled in its own task.
async fn serve_h2<S>(stream: S, counters: Arc<Counters>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Ok(mut connection) = h2::server::handshake(stream).await else {
        return;
    };
    let close = Arc::new(Notify::new());
    loop {
        tokio::select! {
            request = connection.accept() => {
                let Some(Ok((request, respond))) = request else { return };
                tokio::spawn(serve_doh_request(request, respond, Arc::clone(&counters), Arc::clone(&close)));
            }
            () = close.notified() => return,
        }
    }
}

async fn serve_doh_request(
    request: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    counters: Arc<Counters>,
    close: Arc<Notify>,
) {
    match *request.method() {
        http::Method::GET => bump(&counters.doh_gets),
        http::Method::POST => bump(&counters.doh_posts),
        _ => {}
    }
    let query = match doh_query(request).await {
        Ok(query) => query,
        Err(status) => return send_http(&mut respond, status, Vec::new()),
    };
    bump(&counters.queries);
    match decide(&query, Transport::Https, &counters) {
        // One stream of the HTTP/2 connection: the connection stays.
        Action::Send(msg) | Action::SendThenClose(msg) | Action::SendTwice(msg) => {
            send_http(&mut respond, http::StatusCode::OK, msg)
        }
        Action::SendAfter(delay, msg) => {
            tokio::time::sleep(delay).await;
            send_http(&mut respond, http::StatusCode::OK, msg);
        }
        Action::Nothing => pending().await,
        Action::Close => close.notify_one(),
    }
}

/// The DNS query of a DoH request, or the HTTP status to refuse it with.
async fn doh_query(request: http::Request<h2::RecvStream>) -> Result<Vec<u8>, http::StatusCode> {
    if request.uri().path() != "/dns-query" {
        return Err(http::StatusCode::NOT_FOUND);
    }
    match *request.method() {
        http::Method::GET => request
            .uri()
            .query()
            .unwrap_or("")
            .split('&')
            .find_map(|pair| pair.strip_prefix("dns="))
            .and_then(base64url_decode)
            .ok_or(http::StatusCode::BAD_REQUEST),
        http::Method::POST => {
            let mut body = request.into_body();
            let mut query = Vec::new();
            while let Some(chunk) = body.data().await {
                let chunk = chunk.map_err(|_| http::StatusCode::BAD_REQUEST)?;
                let _ = body.flow_control().release_capacity(chunk.len());
                query.extend_from_slice(&chunk);
            }
            Ok(query)
        }
        _ => Err(http::StatusCode::METHOD_NOT_ALLOWED),
    }
}

fn send_http(
    respond: &mut h2::server::SendResponse<Bytes>,
    status: http::StatusCode,
    body: Vec<u8>,
) {
    let response = http::Response::builder()
        .status(status)
        .header("content-type", "application/dns-message")
        .header("content-length", body.len())
        .body(())
        .expect("a valid response head");
    if let Ok(mut stream) = respond.send_response(response, body.is_empty()) {
        if !body.is_empty() {
            let _ = stream.send_data(Bytes::from(body), true);
        }
    }
}

/// Decodes unpadded (or padded) base64url (RFC 4648 §5).
fn base64url_decode(text: &str) -> Option<Vec<u8>> {
    let text = text.trim_end_matches('=');
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaviour_by_label() {
        assert_eq!(Behaviour::of("late300"), Behaviour::Late(300));
        assert_eq!(Behaviour::of("late"), Behaviour::Refused);
        assert_eq!(Behaviour::of("nx"), Behaviour::NxDomain);
        assert_eq!(Behaviour::of("www"), Behaviour::Refused);
        assert_eq!(Behaviour::of("resetonce"), Behaviour::ResetOnce);
        assert_eq!(Behaviour::of("cname3"), Behaviour::Cname(3));
        assert_eq!(Behaviour::of("cname0"), Behaviour::Ok);
        assert_eq!(Behaviour::of("cname"), Behaviour::Refused);
    }

    #[test]
    fn base64url() {
        assert_eq!(base64url_decode("AAEC_-8").unwrap(), [0, 1, 2, 0xff, 0xef]);
        assert_eq!(base64url_decode("aGk=").unwrap(), b"hi");
        assert_eq!(base64url_decode("a+b"), None);
    }
}

//! The endpoint's HTTP/1.1 server: one thread on a `std::net::TcpListener`
//! that gives each connection a short-lived thread of its own (at most
//! [`MAX_CLIENTS`] at once: a connection that sends nothing, a port
//! scanner's, held the one server it had for 5 s and kept the scrapes
//! out), `GET /metrics` (404 for any other path, 405 for any other
//! method), each response closing its connection. That is all a Prometheus
//! server needs, and it adds no dependency (a crate such as `tiny_http`
//! would bring its own threads and buffers for nothing).

use super::board::Board;
use super::render::render;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The content type of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A request head larger than this is refused.
const MAX_HEAD: usize = 8192;

/// How long a client may take to send its request, and again to read
/// the answer (each in all, not per read or write).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections served at once; one more is closed unanswered (its client
/// scrapes again at its next interval).
const MAX_CLIENTS: usize = 8;

/// How long the server waits after a connection could not be accepted.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Serves `board` on `listener` from a thread of its own, for the rest of
/// the process.
pub fn spawn(listener: TcpListener, board: Arc<Board>) -> std::io::Result<()> {
    dnsluice_core::thread::named("metrics-server")
        .spawn(move || {
            let clients = Arc::new(AtomicUsize::new(0));
            for stream in listener.incoming() {
                match stream {
                    Ok(stream) => answer_apart(stream, &board, &clients),
                    // No connection taken (out of file descriptors: the
                    // same error comes back at once): wait, not spin.
                    Err(_) => std::thread::sleep(ACCEPT_PAUSE),
                }
            }
        })
        .map(drop)
}

/// Serves `stream` on a thread of its own, when fewer than
/// [`MAX_CLIENTS`] are served; else closes it. A client that goes away or
/// misbehaves costs only its own answer.
fn answer_apart(stream: TcpStream, board: &Arc<Board>, clients: &Arc<AtomicUsize>) {
    if clients.fetch_add(1, Ordering::AcqRel) >= MAX_CLIENTS {
        clients.fetch_sub(1, Ordering::AcqRel);
        return;
    }
    let (board, done) = (board.clone(), clients.clone());
    let spawned = dnsluice_core::thread::named("metrics-client").spawn(move || {
        let _ = serve(stream, &board);
        done.fetch_sub(1, Ordering::AcqRel);
    });
    if spawned.is_err() {
        clients.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Answers one connection's request.
fn serve(mut stream: TcpStream, board: &Board) -> std::io::Result<()> {
    stream.set_read_timeout(Some(CLIENT_TIMEOUT))?;
    stream.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let head = read_head(&mut stream, CLIENT_TIMEOUT)?;
    let request_line = head.lines().next().unwrap_or("");
    let mut words = request_line.split(' ');
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let mut finished = false;
    let (status, body) = match (method, path) {
        ("GET", "/metrics") => {
            let (stages, last) = board.scrape();
            finished = last;
            ("200 OK", render(&stages, last))
        }
        ("GET", _) => ("404 Not Found", "only /metrics is served\n".to_string()),
        _ => ("405 Method Not Allowed", "only GET is served\n".to_string()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    write_all_within(&mut stream, response.as_bytes(), CLIENT_TIMEOUT)?;
    board.served(finished);
    Ok(())
}

/// Writes `bytes` within `limit` in all (a client that reads a little at
/// a time would otherwise have `limit` for each write).
fn write_all_within(
    stream: &mut TcpStream,
    mut bytes: &[u8],
    limit: Duration,
) -> std::io::Result<()> {
    let deadline = std::time::Instant::now() + limit;
    while !bytes.is_empty() {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::other("answer read too slowly"));
        }
        stream.set_write_timeout(Some(left))?;
        match stream.write(bytes)? {
            0 => return Err(ErrorKind::WriteZero.into()),
            n => bytes = &bytes[n..],
        }
    }
    Ok(())
}

/// The request's head, up to the blank line (the body, if any, is ignored).
/// A client that sends a byte now and then has `limit` ([`CLIENT_TIMEOUT`])
/// for the whole head, not for each read (it would hold its thread, one of
/// [`MAX_CLIENTS`], for long).
fn read_head(stream: &mut TcpStream, limit: Duration) -> std::io::Result<String> {
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    let deadline = std::time::Instant::now() + limit;
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > MAX_HEAD {
            return Err(std::io::Error::other("request head too large"));
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::other("request head too slow"));
        }
        stream.set_read_timeout(Some(left))?;
        let n = match stream.read(&mut chunk) {
            Ok(n) => n,
            // The time left ran out inside the read.
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(std::io::Error::other("request head too slow"));
            }
            Err(e) => return Err(e),
        };
        if n == 0 {
            break;
        }
        head.extend_from_slice(&chunk[..n]);
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_that_trickles_its_head_is_cut_off_at_the_limit() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let client = std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            // A byte every 50 ms: each read is quick, the head never ends.
            for _ in 0..40 {
                if s.write_all(b"G").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let (mut stream, _) = listener.accept().unwrap();
        let started = std::time::Instant::now();
        let error = read_head(&mut stream, Duration::from_millis(300)).unwrap_err();
        let took = started.elapsed();
        assert!(error.to_string().contains("too slow"), "{error}");
        assert!(took < Duration::from_millis(1000), "{took:?}");
        drop(stream);
        client.join().unwrap();
    }

    fn get(addr: std::net::SocketAddr, request: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn an_idle_connection_does_not_keep_a_scrape_waiting() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        spawn(listener, Arc::new(Board::default())).unwrap();
        // Connected, sending nothing (a port scanner's, a stuck client).
        let idle: Vec<TcpStream> = (0..3).map(|_| TcpStream::connect(addr).unwrap()).collect();
        std::thread::sleep(Duration::from_millis(100));
        let started = std::time::Instant::now();
        let ok = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        let took = started.elapsed();
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        // Served one at a time, it waited for the idle ones' 5 s each.
        assert!(took < Duration::from_secs(2), "{took:?}");
        drop(idle);
    }

    #[test]
    fn serves_metrics_and_nothing_else() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        spawn(listener, Arc::new(Board::default())).unwrap();
        let ok = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(
            ok.contains("Content-Type: text/plain; version=0.0.4"),
            "{ok}"
        );
        assert!(ok.contains("dnsluice_build_info{version="), "{ok}");
        let missing = get(addr, "GET / HTTP/1.1\r\n\r\n");
        assert!(missing.starts_with("HTTP/1.1 404 "), "{missing}");
        let post = get(addr, "POST /metrics HTTP/1.1\r\n\r\n");
        assert!(post.starts_with("HTTP/1.1 405 "), "{post}");
    }
}

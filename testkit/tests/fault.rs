//! The fault servers behave as documented, over each transport.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use testkit::wire::{self, TYPE_A};
use testkit::{FaultKind, FaultServer, TestCert};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const OK_ADDR: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);

fn udp_client() -> UdpSocket {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    socket
}

/// Sends one query over UDP and waits up to `wait` for a datagram.
fn udp_ask(
    server: SocketAddr,
    id: u16,
    name: &str,
    edns: Option<u16>,
    wait: Duration,
) -> Option<Vec<u8>> {
    let socket = udp_client();
    socket.set_read_timeout(Some(wait)).unwrap();
    socket
        .send_to(&wire::query(id, name, TYPE_A, edns), server)
        .unwrap();
    let mut buf = [0u8; 4096];
    socket.recv(&mut buf).ok().map(|n| buf[..n].to_vec())
}

fn frame(msg: &[u8]) -> Vec<u8> {
    let mut out = (msg.len() as u16).to_be_bytes().to_vec();
    out.extend_from_slice(msg);
    out
}

fn read_frame(stream: &mut impl Read) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 2];
    stream.read_exact(&mut len)?;
    let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
    stream.read_exact(&mut msg)?;
    Ok(msg)
}

#[test]
fn udp_answers_by_first_label() {
    let server = FaultServer::start(FaultKind::Udp);
    let ask =
        |name: &str, edns| udp_ask(server.addr(), 7, name, edns, Duration::from_secs(2)).unwrap();

    let ok = ask("ok.example.", None);
    assert_eq!(
        (wire::id(&ok), wire::rcode(&ok)),
        (Some(7), Some(wire::NOERROR))
    );
    assert_eq!(wire::a_records(&ok).unwrap(), [OK_ADDR]);
    for (name, rcode) in [
        ("nx.example", wire::NXDOMAIN),
        ("servfail.example", wire::SERVFAIL),
        ("refused.example", wire::REFUSED),
        ("anything-else.example", wire::REFUSED),
    ] {
        assert_eq!(wire::rcode(&ask(name, None)), Some(rcode), "{name}");
    }
    let tc = ask("tc.example", None);
    assert_eq!(wire::is_truncated(&tc), Some(true));
    assert!(wire::a_records(&tc).unwrap().is_empty());
    assert_eq!(wire::is_truncated(&ask("big.example", None)), Some(true));
    let big = ask("big.example", Some(4096));
    assert_eq!(wire::is_truncated(&big), Some(false));
    assert_eq!(wire::a_records(&big).unwrap().len(), 40);
    assert!(big.len() > 512);
    assert_eq!(wire::id(&ask("wrongid.example", None)), Some(8));
    assert_eq!(ask("garbage.example", None).len(), 3);

    let short = Duration::from_millis(200);
    assert_eq!(udp_ask(server.addr(), 1, "drop.example", None, short), None);
    assert_eq!(
        udp_ask(server.addr(), 1, "reset.example", None, short),
        None
    );
    assert_eq!(server.queries_received(), 12);
    assert_eq!(server.connections_accepted(), 0);
}

#[test]
fn udp_late_answer_comes_after_its_delay_without_holding_up_others() {
    let server = FaultServer::start(FaultKind::Udp);
    let socket = udp_client();
    let start = Instant::now();
    socket
        .send_to(
            &wire::query(1, "late300.example", TYPE_A, None),
            server.addr(),
        )
        .unwrap();
    socket
        .send_to(&wire::query(2, "ok.example", TYPE_A, None), server.addr())
        .unwrap();
    let mut buf = [0u8; 512];
    let n = socket.recv(&mut buf).unwrap();
    assert_eq!(wire::id(&buf[..n]), Some(2));
    assert!(
        start.elapsed() < Duration::from_millis(250),
        "{:?}",
        start.elapsed()
    );
    let n = socket.recv(&mut buf).unwrap();
    assert_eq!(wire::id(&buf[..n]), Some(1));
    assert_eq!(wire::a_records(&buf[..n]).unwrap(), [OK_ADDR]);
    assert!(
        start.elapsed() >= Duration::from_millis(300),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn tcp_answers_out_of_order_on_one_connection() {
    let server = FaultServer::start(FaultKind::Tcp);
    let mut conn = TcpStream::connect(server.addr()).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut batch = Vec::new();
    for (id, name) in [
        (1, "late200.example"),
        (2, "ok.example"),
        (3, "big.example"),
        (4, "tc.example"),
    ] {
        batch.extend(frame(&wire::query(id, name, TYPE_A, None)));
    }
    conn.write_all(&batch).unwrap();
    let answers: Vec<_> = (0..4).map(|_| read_frame(&mut conn).unwrap()).collect();
    let ids: Vec<_> = answers.iter().map(|a| wire::id(a).unwrap()).collect();
    assert_eq!(ids, [2, 3, 4, 1]);
    assert_eq!(
        wire::a_records(&answers[1]).unwrap().len(),
        40,
        "big is whole over TCP"
    );
    assert_eq!(
        wire::is_truncated(&answers[2]),
        Some(false),
        "tc is whole over TCP"
    );

    conn.write_all(&frame(&wire::query(5, "garbage.example", TYPE_A, None)))
        .unwrap();
    assert_eq!(read_frame(&mut conn).unwrap().len(), 2);
    conn.write_all(&frame(&wire::query(6, "reset.example", TYPE_A, None)))
        .unwrap();
    let mut rest = Vec::new();
    let closed = matches!(conn.read_to_end(&mut rest), Ok(0) | Err(_));
    assert!(closed && rest.is_empty(), "reset closes without answering");
    assert_eq!(server.connections_accepted(), 1);
    assert_eq!(server.queries_received(), 6);
}

/// `resetonce` closes the first connection it comes on; later ones are `ok`;
/// `cname<N>` answers a CNAME to `cname<N-1>` alone.
#[test]
fn tcp_resets_once_and_answers_cnames() {
    let server = FaultServer::start(FaultKind::Tcp);
    let mut first = TcpStream::connect(server.addr()).unwrap();
    first
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    first
        .write_all(&frame(&wire::query(1, "resetonce.example", TYPE_A, None)))
        .unwrap();
    let mut rest = Vec::new();
    let closed = matches!(first.read_to_end(&mut rest), Ok(0) | Err(_));
    assert!(closed && rest.is_empty(), "the first resetonce closes");
    let mut second = TcpStream::connect(server.addr()).unwrap();
    second
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    second
        .write_all(&frame(&wire::query(2, "resetonce.example", TYPE_A, None)))
        .unwrap();
    assert_eq!(
        wire::a_records(&read_frame(&mut second).unwrap()).unwrap(),
        [OK_ADDR]
    );
    second
        .write_all(&frame(&wire::query(3, "cname2.example", TYPE_A, None)))
        .unwrap();
    let cname = read_frame(&mut second).unwrap();
    assert_eq!(wire::id(&cname), Some(3));
    assert!(wire::a_records(&cname).unwrap().is_empty(), "a CNAME alone");
    assert!(
        cname.windows(16).any(|w| w == b"\x06cname1\x07example\x00"),
        "to cname1"
    );
    assert_eq!(server.connections_accepted(), 2);
}

#[test]
fn stopping_the_server_closes_its_connections() {
    let server = FaultServer::start(FaultKind::Tcp);
    let mut conn = TcpStream::connect(server.addr()).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    conn.write_all(&frame(&wire::query(1, "drop.example", TYPE_A, None)))
        .unwrap();
    while server.queries_received() == 0 {
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(server);
    let mut rest = Vec::new();
    assert!(matches!(conn.read_to_end(&mut rest), Ok(0) | Err(_)));
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Connects with TLS to `server` expecting `name`, trusting `trust`'s CA.
async fn tls_connect(
    server: SocketAddr,
    trust: &TestCert,
    name: &str,
    alpn: &[&[u8]],
) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let mut config = trust.client_config();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(server).await?;
    let name = rustls::pki_types::ServerName::try_from(name.to_owned()).unwrap();
    connector.connect(name, tcp).await
}

#[test]
fn tls_verifies_with_the_right_ca_and_name_only() {
    let cert = TestCert::generate("dns.test");
    assert!(cert.ca_file().exists());
    assert!(std::fs::read_to_string(cert.ca_file())
        .unwrap()
        .contains("BEGIN CERTIFICATE"));
    let good = FaultServer::start(FaultKind::Tls { cert: cert.clone() });
    let wrong_name = FaultServer::start(FaultKind::Tls {
        cert: cert.for_name("wrong.test"),
    });
    let untrusted = FaultServer::start(FaultKind::Tls {
        cert: TestCert::generate("dns.test"),
    });
    runtime().block_on(async {
        let mut tls = tls_connect(good.addr(), &cert, "dns.test", &[])
            .await
            .unwrap();
        // Two queries, the first late: the answers come out of order.
        let mut batch = frame(&wire::query(1, "late100.example", TYPE_A, None));
        batch.extend(frame(&wire::query(2, "nx.example", TYPE_A, None)));
        tls.write_all(&batch).await.unwrap();
        let mut ids = Vec::new();
        for _ in 0..2 {
            let len = tls.read_u16().await.unwrap();
            let mut msg = vec![0u8; usize::from(len)];
            tls.read_exact(&mut msg).await.unwrap();
            ids.push(wire::id(&msg).unwrap());
        }
        assert_eq!(ids, [2, 1]);

        let err = tls_connect(wrong_name.addr(), &cert, "dns.test", &[])
            .await
            .unwrap_err();
        assert!(err.to_string().contains("not valid for name"), "{err}");
        let err = tls_connect(untrusted.addr(), &cert, "dns.test", &[])
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("UnknownIssuer"),
            "untrusted: {err}"
        );
    });
    assert_eq!((good.tls_handshakes(), good.queries_received()), (1, 2));
    assert_eq!(wrong_name.tls_handshakes(), 0);
    assert_eq!(untrusted.tls_handshakes(), 0);
    assert_eq!(untrusted.connections_accepted(), 1);
}

/// Sends one DoH request (POST, or GET with `?dns=` when `get`) and returns
/// the status and body.
async fn doh_ask(
    client: &mut h2::client::SendRequest<bytes::Bytes>,
    query: Vec<u8>,
    get: bool,
) -> Result<(u16, Vec<u8>), h2::Error> {
    let uri = if get {
        format!("https://dns.test/dns-query?dns={}", base64url(&query))
    } else {
        "https://dns.test/dns-query".to_owned()
    };
    let request = http::Request::builder()
        .method(if get { "GET" } else { "POST" })
        .uri(uri)
        .header("content-type", "application/dns-message")
        .body(())
        .unwrap();
    let mut client = client.clone().ready().await?;
    let (response, mut body) = client.send_request(request, get)?;
    if !get {
        body.send_data(query.into(), true)?;
    }
    let response = response.await?;
    let status = response.status().as_u16();
    let mut body = response.into_body();
    let mut out = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        let _ = body.flow_control().release_capacity(chunk.len());
        out.extend_from_slice(&chunk);
    }
    Ok((status, out))
}

fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bits: Vec<bool> = bytes
        .iter()
        .flat_map(|b| (0..8).rev().map(move |i| b >> i & 1 == 1))
        .collect();
    bits.chunks(6)
        .map(|six| {
            let v = six
                .iter()
                .enumerate()
                .fold(0usize, |v, (i, &bit)| v | usize::from(bit) << (5 - i));
            char::from(ALPHABET[v])
        })
        .collect()
}

#[test]
fn https_post_and_get_multiplexed_and_reset_closes() {
    let cert = TestCert::generate("dns.test");
    let server = FaultServer::start(FaultKind::Https { cert: cert.clone() });
    runtime().block_on(async {
        let tls = tls_connect(server.addr(), &cert, "dns.test", &[b"h2"])
            .await
            .unwrap();
        let (mut client, connection) = h2::client::handshake(tls).await.unwrap();
        let driver = tokio::spawn(connection);

        let (status, body) = doh_ask(
            &mut client,
            wire::query(0, "ok.example", TYPE_A, None),
            true,
        )
        .await
        .unwrap();
        assert_eq!(status, 200);
        assert_eq!(wire::a_records(&body).unwrap(), [OK_ADDR]);

        // A late answer on one stream does not hold up another stream.
        let start = Instant::now();
        let mut late_client = client.clone();
        let late = tokio::spawn(async move {
            doh_ask(
                &mut late_client,
                wire::query(0, "late1000.example", TYPE_A, None),
                false,
            )
            .await
        });
        let (_, nx) = doh_ask(
            &mut client,
            wire::query(0, "nx.example", TYPE_A, None),
            false,
        )
        .await
        .unwrap();
        assert_eq!(wire::rcode(&nx), Some(wire::NXDOMAIN));
        assert!(
            start.elapsed() < Duration::from_millis(1000),
            "{:?}",
            start.elapsed()
        );
        let (_, late) = late.await.unwrap().unwrap();
        assert_eq!(wire::a_records(&late).unwrap(), [OK_ADDR]);
        assert!(start.elapsed() >= Duration::from_millis(1000));

        assert!(doh_ask(
            &mut client,
            wire::query(0, "reset.example", TYPE_A, None),
            false
        )
        .await
        .is_err());
        driver.await.ok();
    });
    assert_eq!(server.tls_handshakes(), 1);
    assert_eq!(server.queries_received(), 4);
    // One GET (ok), three POSTs (late1000, nx, reset).
    assert_eq!((server.doh_gets(), server.doh_posts()), (1, 3));
}

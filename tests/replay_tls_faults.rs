//! `dnsluice replay` over DNS-over-TLS and DNS-over-HTTPS against testkit's
//! in-process fault servers: a certificate for another name fails every query
//! with a clear error unless `--insecure`; `drop`, `late<N>` and `reset` give
//! the counts the server's own counters confirm; nothing hangs.

use std::time::{Duration, Instant};
use testkit::replay::*;
use testkit::temp_path;
use testkit::{FaultKind, FaultServer, TestCert};

/// A capture of `spec` (label, count) queries, `LABEL.qI.fault.test`.
fn capture_of(spec: &[(&str, usize)], file: &str) -> std::path::PathBuf {
    let mut queries = Vec::new();
    for (label, count) in spec {
        for i in 0..*count {
            queries.push(Q {
                source: (queries.len() % 3) as u8 + 1,
                name: format!("{label}.q{i}.fault.test"),
                qtype: 1,
                at_us: queries.len() as u64,
            });
        }
    }
    let path = temp_path(file);
    write_capture(&path, &queries);
    path
}

/// The transports under test: (name, server kind, how to address it).
fn encrypted(cert: &TestCert) -> Vec<(&'static str, FaultServer)> {
    vec![
        (
            "tls",
            FaultServer::start(FaultKind::Tls { cert: cert.clone() }),
        ),
        (
            "https",
            FaultServer::start(FaultKind::Https { cert: cert.clone() }),
        ),
    ]
}

/// Replays `capture` over `transport` to `address`, verifying the server's
/// certificate for `dns.test` against `ca`'s CA, with `extra` flags.
fn replay_verified(
    capture: &std::path::Path,
    transport: &str,
    address: &str,
    ca: &TestCert,
    extra: &[&str],
) -> (serde_json::Value, String) {
    let ca_file = ca.ca_file().to_str().unwrap();
    let base = [
        "--server",
        address,
        "--transport",
        transport,
        "--ca-file",
        ca_file,
        "--tls-name",
        "dns.test",
    ];
    replay(capture, &[&base[..], extra].concat())
}

fn server_arg(transport: &str, server: &FaultServer) -> String {
    match transport {
        "https" => format!("https://{}/dns-query", server.addr()),
        _ => server.addr().to_string(),
    }
}

#[test]
fn a_certificate_for_another_name_fails_unless_insecure() {
    let ca = TestCert::generate("dns.test");
    let wrong = ca.for_name("wrong.test");
    let capture = capture_of(&[("ok", 20)], "wrong-cert.pcap");
    for (transport, server) in encrypted(&wrong) {
        let address = server_arg(transport, &server);
        let started = Instant::now();
        let (stats, stderr) = replay_verified(&capture, transport, &address, &ca, &[]);
        assert!(started.elapsed() < Duration::from_secs(5), "{transport}");
        assert_eq!(n(&stats, "sent"), 20, "{transport}: {stats}");
        assert_eq!(n(&stats, "answered"), 0, "{transport}: {stats}");
        assert_eq!(n(&stats, "errors"), 20, "{transport}: {stats}");
        assert_eq!(
            stats["errors_by_kind"]["tls_handshake"], 20,
            "{transport}: {stats}"
        );
        assert_eq!(n(&stats, "tls_handshakes"), 0, "{transport}: {stats}");
        // One attempt, then the failure is remembered for a second.
        assert_eq!(n(&stats, "connect_failures"), 1, "{transport}: {stats}");
        assert_eq!(server.queries_received(), 0, "{transport}");
        assert!(
            stderr.contains("TLS handshake with")
                && stderr.contains("certificate")
                && stderr.contains("wrong.test"),
            "{transport}: {stderr}"
        );
        let (stats, _) = replay(
            &capture,
            &["--server", &address, "--transport", transport, "--insecure"],
        );
        assert_eq!(n(&stats, "answered"), 20, "{transport} insecure: {stats}");
        assert_eq!(n(&stats, "tls_handshakes"), 1, "{transport}: {stats}");
        assert_eq!(server.queries_received(), 20, "{transport}");
    }
}

#[test]
fn drop_and_late_over_tls_and_https_are_counted_on_one_connection() {
    let cert = TestCert::generate("dns.test");
    let capture = capture_of(
        &[("ok", 10), ("drop", 5), ("late100", 5), ("nx", 4)],
        "tls-faults.pcap",
    );
    for (transport, server) in encrypted(&cert) {
        let address = server_arg(transport, &server);
        let started = Instant::now();
        let (stats, stderr) = replay_verified(
            &capture,
            transport,
            &address,
            &cert,
            &["--timeout", "600ms"],
        );
        // The dropped ones wait out their timeout, no more.
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "{transport}: {:?}",
            started.elapsed()
        );
        check_contract(&stats);
        assert_eq!(n(&stats, "sent"), 24, "{transport}: {stats}");
        assert_eq!(n(&stats, "answered"), 19, "{transport}: {stats}");
        assert_eq!(n(&stats, "timeouts"), 5, "{transport}: {stats}");
        assert_eq!(n(&stats, "errors"), 0, "{transport}: {stats}");
        assert_eq!(stats["rcodes"]["NOERROR"], 15, "{transport}: {stats}");
        assert_eq!(stats["rcodes"]["NXDOMAIN"], 4, "{transport}: {stats}");
        assert_eq!(n(&stats, "connections_opened"), 1, "{transport}: {stats}");
        assert_eq!(n(&stats, "tls_handshakes"), 1, "{transport}: {stats}");
        assert_eq!(server.connections_accepted(), 1, "{transport}");
        assert_eq!(server.tls_handshakes(), 1, "{transport}");
        assert_eq!(server.queries_received(), 24, "{transport}");
        assert!(
            stderr.contains("5 queries failed (timeout)"),
            "{transport}: {stderr}"
        );
    }
}

#[test]
fn a_reset_over_tls_and_https_fails_its_query_and_the_next_reconnects() {
    let cert = TestCert::generate("dns.test");
    let capture = capture_of(&[("reset", 3)], "tls-reset.pcap");
    for (transport, server) in encrypted(&cert) {
        let address = server_arg(transport, &server);
        let started = Instant::now();
        // One query outstanding at a time: each one loses its own connection.
        let (stats, stderr) = replay_verified(
            &capture,
            transport,
            &address,
            &cert,
            &["--inflight", "1", "--timeout", "3000ms"],
        );
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{transport}: {:?}",
            started.elapsed()
        );
        assert_eq!(n(&stats, "sent"), 3, "{transport}: {stats}");
        assert_eq!(n(&stats, "answered"), 0, "{transport}: {stats}");
        assert_eq!(n(&stats, "timeouts"), 0, "{transport}: {stats}");
        assert_eq!(n(&stats, "errors"), 3, "{transport}: {stats}");
        assert_eq!(n(&stats, "connections_opened"), 3, "{transport}: {stats}");
        assert_eq!(n(&stats, "tls_handshakes"), 3, "{transport}: {stats}");
        assert_eq!(server.tls_handshakes(), 3, "{transport}");
        assert_eq!(server.queries_received(), 3, "{transport}");
        assert!(
            stderr.contains("connection closed before the answer") || stderr.contains("HTTP/2"),
            "{transport}: {stderr}"
        );
    }
}

/// DoH sends POST unless `--method get` asks for GET (`?dns=`): the fault
/// server counts the method of every request it gets.
#[test]
fn doh_posts_by_default_and_gets_when_asked() {
    let ca = TestCert::generate("dns.test");
    let capture = capture_of(&[("ok", 20)], "doh-method.pcap");
    for (method, extra) in [("POST", vec![]), ("GET", vec!["--doh-method", "get"])] {
        let server = FaultServer::start(FaultKind::Https { cert: ca.clone() });
        let address = server_arg("https", &server);
        let (stats, _) = replay_verified(&capture, "https", &address, &ca, &extra);
        assert_eq!(n(&stats, "answered"), 20, "{method}: {stats}");
        let want = if method == "GET" { (20, 0) } else { (0, 20) };
        assert_eq!(
            (server.doh_gets(), server.doh_posts()),
            want,
            "{method}: (GET, POST) requests"
        );
    }
}

/// A certificate the client cannot verify fails every query with the
/// certificate error, over DoT and DoH: with no CA file (the system's
/// roots do not know the test CA), and with the right CA but a
/// `--tls-name` the certificate does not carry.
#[test]
fn unknown_roots_and_a_wrong_tls_name_fail_with_the_certificate_error() {
    let ca = TestCert::generate("dns.test");
    let capture = capture_of(&[("ok", 20)], "unverified.pcap");
    let ca_file = ca.ca_file().to_str().unwrap().to_string();
    for (transport, server) in encrypted(&ca) {
        let address = server_arg(transport, &server);
        for (what, extra, says) in [
            (
                "system roots",
                vec!["--tls-name", "dns.test"],
                "UnknownIssuer",
            ),
            (
                "wrong name",
                vec!["--ca-file", ca_file.as_str(), "--tls-name", "other.test"],
                "other.test",
            ),
        ] {
            let mut args = vec!["--server", address.as_str(), "--transport", transport];
            args.extend_from_slice(&extra);
            let (stats, stderr) = replay(&capture, &args);
            assert_eq!(n(&stats, "answered"), 0, "{transport}, {what}: {stats}");
            assert_eq!(n(&stats, "errors"), 20, "{transport}, {what}: {stats}");
            assert_eq!(
                stats["errors_by_kind"]["tls_handshake"], 20,
                "{transport}, {what}: {stats}"
            );
            assert_eq!(n(&stats, "tls_handshakes"), 0, "{transport}, {what}");
            assert!(
                stderr.contains("TLS handshake with")
                    && stderr.contains("certificate")
                    && stderr.contains(says),
                "{transport}, {what}: {stderr}"
            );
        }
        assert_eq!(server.queries_received(), 0, "{transport}");
    }
}

/// An answer to another question is no answer: over TLS it is unmatched
/// and its query times out (it may yet come), over HTTPS (one answer a
/// stream) the request fails, counted. Over HTTPS it was counted as
/// answered: any 2xx body passed.
#[test]
fn an_answer_to_another_question_is_not_counted_answered() {
    let cert = TestCert::generate("dns.test");
    let capture = capture_of(&[("ok", 4), ("wrongq", 3)], "wrongq.pcap");
    for (transport, server) in encrypted(&cert) {
        let address = server_arg(transport, &server);
        let (stats, _) = replay_verified(
            &capture,
            transport,
            &address,
            &cert,
            &["--timeout", "500ms"],
        );
        assert_eq!(n(&stats, "sent"), 7, "{transport}: {stats}");
        assert_eq!(n(&stats, "answered"), 4, "{transport}: {stats}");
        assert_eq!(server.queries_received(), 7, "{transport}");
        match transport {
            "https" => {
                assert_eq!(n(&stats, "errors"), 3, "{transport}: {stats}");
                assert_eq!(stats["errors_by_kind"]["http_request"], 3, "{stats}");
            }
            _ => {
                assert_eq!(n(&stats, "timeouts"), 3, "{transport}: {stats}");
                assert_eq!(n(&stats, "unmatched_responses"), 3, "{stats}");
            }
        }
    }
}

//! `dnsluice lookup` against real servers (knot, dnsdist; tests/servers/up.sh)
//! and in-process fault servers (testkit). Expected answers come from the zone
//! generator's rule (`testkit::lookup_address`) and from `kdig`.

use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use testkit::{assert_ok, dnsluice, run_ok, temp_dir, FaultKind, FaultServer, TestCert};

/// Runs `dnsluice lookup ARGS` with `input` on stdin; the records and the stats.
fn lookup(args: &[&str], input: &str) -> (Vec<Value>, Value) {
    lookup_fed(args, &[input], Duration::ZERO)
}

/// [`lookup`] with the input written in `chunks`, `pause` apart (the
/// workers are idle between them).
fn lookup_fed(args: &[&str], chunks: &[&str], pause: Duration) -> (Vec<Value>, Value) {
    let dir = temp_dir("lookup");
    let stats = dir.join("stats.json");
    let mut child = dnsluice()
        .arg("lookup")
        .args(args)
        .arg("--stats-json")
        .arg(&stats)
        .arg("-q")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dnsluice runs");
    let mut stdin = child.stdin.take().unwrap();
    for (i, chunk) in chunks.iter().enumerate() {
        if i > 0 {
            std::thread::sleep(pause);
        }
        stdin.write_all(chunk.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert_ok(&out, format_args!("dnsluice lookup {args:?}"));
    let records = json_lines(&String::from_utf8(out.stdout).unwrap());
    let stats = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    (records, stats)
}

/// One JSON value per line (lookup records).
fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn by_name(records: &[Value]) -> std::collections::HashMap<String, &Value> {
    records
        .iter()
        .map(|r| (r["name"].as_str().unwrap().to_string(), r))
        .collect()
}

fn answers(record: &Value) -> Vec<String> {
    record["data"]["answers"]
        .as_array()
        .unwrap_or_else(|| panic!("no answers in {record}"))
        .iter()
        .map(|a| a["answer"].as_str().unwrap().to_string())
        .collect()
}

/// Every numbered name gets its one record with the generator's address, over
/// every transport, and connections are kept (about one per worker).
#[test]
fn every_transport_answers_every_name() {
    let servers = testkit::servers();
    let names: String = (0..1500).map(|i| format!("n{i}.lookup.test\n")).collect();
    let names = names + "missing.lookup.test\n";
    let ca = servers.ca_file.to_str().unwrap().to_string();
    for (transport, ns, protocol) in [
        ("udp", servers.knot.to_string(), "udp"),
        ("tcp", servers.knot.to_string(), "tcp"),
        ("tls", servers.dot.to_string(), "DoT"),
        ("https", servers.doh.clone(), "DoH"),
    ] {
        let args = [
            "A",
            "--transport",
            transport,
            "--name-servers",
            &ns,
            "--ca-file",
            &ca,
            "--tls-name",
            &servers.tls_name,
            "--threads",
            "10",
        ];
        let (records, stats) = lookup(&args, &names);
        assert_eq!(records.len(), 1501, "{transport}: one record per name");
        let records = by_name(&records);
        for i in 0..1500u32 {
            let r = records[&format!("n{i}.lookup.test")];
            assert_eq!(r["status"], "NOERROR", "{transport}: {r}");
            assert_eq!(answers(r), vec![testkit::lookup_address(i).to_string()]);
            assert_eq!(r["data"]["protocol"], protocol);
            assert_eq!(r["data"]["resolver"], ns.as_str());
            assert_eq!(r["attempts"], 1);
        }
        assert_eq!(records["missing.lookup.test"]["status"], "NXDOMAIN");
        assert_eq!(stats["names"], 1501);
        assert_eq!(stats["queries"], 1501);
        assert_eq!(stats["statuses"]["NOERROR"], 1500);
        // 10 workers, one nameserver: one connection each, all kept.
        let opened = stats["connections_opened"].as_u64().unwrap();
        assert!(
            opened <= 10,
            "{transport}: {opened} connections for 10 workers"
        );
        assert_eq!(stats["connections_reused"].as_u64().unwrap(), 1501 - opened);
        let handshakes = if transport == "tls" || transport == "https" {
            opened
        } else {
            0
        };
        assert_eq!(stats["tls_handshakes"], handshakes);
        for key in ["retries", "timeouts", "steals"] {
            assert!(stats[key].is_u64(), "{key} in {stats}");
        }
        let ns_stats = &stats["per_nameserver"][ns.as_str()];
        assert_eq!(ns_stats["queries"], 1501);
        assert!(ns_stats["p50_ms"].as_f64().unwrap() > 0.0);
        assert!(ns_stats["p99_ms"].as_f64().unwrap() >= ns_stats["p50_ms"].as_f64().unwrap());
    }
}

/// The answers of each supported type (ANY included) equal what `kdig +short` gets from knot.
#[test]
fn answers_equal_kdig() {
    let servers = testkit::servers();
    let ns = servers.knot.to_string();
    let cases = [
        ("mx.lookup.test", "MX"),
        ("txt-multi.lookup.test", "TXT"),
        ("txt-special.lookup.test", "TXT"),
        ("caa.lookup.test", "CAA"),
        ("_sip._tcp.lookup.test", "SRV"),
        ("lookup.test", "SOA"),
        ("lookup.test", "NS"),
        ("www.lookup.test", "A"),
        ("www.lookup.test", "CNAME"),
        ("v6.lookup.test", "AAAA"),
        ("ptr.lookup.test", "PTR"),
        ("1.0.0.10.in-addr.arpa", "PTR"),
        ("https.lookup.test", "HTTPS"),
        ("svc.lookup.test", "HTTPS"),
        // ANY: knot answers with one RRset (RFC 8482); ours must show the same.
        ("mx.lookup.test", "ANY"),
        ("dual.lookup.test", "ANY"),
        ("lookup.test", "ANY"),
    ];
    for (name, qtype) in cases {
        let dig = Command::new("kdig")
            .args([
                &format!("@{}", servers.knot.ip()),
                "-p",
                &servers.knot.port().to_string(),
                "+short",
                name,
                qtype,
            ])
            .output()
            .expect("kdig (package knot-dnsutils) is needed for this test");
        let mut want: Vec<String> = String::from_utf8(dig.stdout)
            .unwrap()
            .lines()
            .map(|l| l.trim().to_string())
            .collect();
        assert!(!want.is_empty(), "kdig got nothing for {name} {qtype}");
        let (records, _) = lookup(&[qtype, "--name-servers", &ns], &format!("{name}\n"));
        let mut got = answers(&records[0]);
        want.sort();
        got.sort();
        assert_eq!(got, want, "{name} {qtype}");
    }
}

/// ALOOKUP follows the CNAME chain to A and AAAA.
#[test]
fn alookup_follows_cnames() {
    let servers = testkit::servers();
    let (records, _) = lookup(
        &["ALOOKUP", "--name-servers", &servers.knot.to_string()],
        "www.lookup.test\ndual.lookup.test\nn7.lookup.test\n",
    );
    let records = by_name(&records);
    let addrs = |name: &str, key: &str| -> Vec<String> {
        records[name]["data"][key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(addrs("www.lookup.test", "ipv4_addresses"), ["192.0.2.80"]);
    assert_eq!(addrs("www.lookup.test", "ipv6_addresses"), ["2001:db8::80"]);
    assert_eq!(
        addrs("dual.lookup.test", "ipv6_addresses"),
        ["2001:db8::10"]
    );
    assert_eq!(
        addrs("n7.lookup.test", "ipv4_addresses"),
        [testkit::lookup_address(7).to_string()]
    );
    assert!(addrs("n7.lookup.test", "ipv6_addresses").is_empty());
}

/// ALOOKUP's own CNAME following, against a fault server that answers a
/// CNAME alone (`cname<N>` → `cname<N-1>`, `cname0` = `ok`; `loopa` ↔
/// `loopb`): a target the first answer does not resolve gets a query of its
/// own; a chain of exactly the hop limit (8) resolves, one more is an error;
/// a loop across two answers is an error naming where it closed.
#[test]
fn alookup_asks_again_at_a_cname_and_stops_loops_and_long_chains() {
    let server = FaultServer::start(FaultKind::Udp);
    let (records, _) = lookup(
        &[
            "ALOOKUP",
            "--name-servers",
            &server.addr().to_string(),
            "--retries",
            "0",
        ],
        "cname1.f\ncname8.f\ncname9.f\nloopa.f\n",
    );
    assert_eq!(records.len(), 4);
    let r = by_name(&records);
    let addresses = |name: &str, key: &str| -> Vec<String> {
        r[name]["data"][key]
            .as_array()
            .unwrap_or_else(|| panic!("no {key} in {}", r[name]))
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    for (name, hops) in [("cname1.f", 1), ("cname8.f", 8)] {
        assert_eq!(r[name]["status"], "NOERROR", "{}", r[name]);
        assert_eq!(addresses(name, "ipv4_addresses"), ["192.0.2.1"], "{name}");
        // (The fault server answers every type with an A record: no AAAA.)
        assert!(addresses(name, "ipv6_addresses").is_empty(), "{name}");
        // A and AAAA each: the name, then each CNAME's target.
        assert_eq!(r[name]["attempts"], 2 * (hops + 1), "{}", r[name]);
        assert!(r[name]["error"].is_null(), "{}", r[name]);
    }
    // Nine CNAMEs: the ninth is not followed.
    assert_eq!(r["cname9.f"]["status"], "ERROR");
    assert_eq!(r["cname9.f"]["error"], "more than 8 CNAMEs");
    assert!(addresses("cname9.f", "ipv4_addresses").is_empty());
    assert_eq!(r["cname9.f"]["attempts"], 9);
    // loopa → loopb (a second query) → loopa.
    assert_eq!(r["loopa.f"]["status"], "ERROR");
    assert_eq!(r["loopa.f"]["error"], "CNAME loop at loopa.f.");
    assert_eq!(r["loopa.f"]["attempts"], 2);
    assert_eq!(server.queries_received(), 2 * 2 + 2 * 9 + 9 + 2);
}

/// A truncated UDP answer is asked again over TCP.
#[test]
fn truncated_udp_falls_back_to_tcp() {
    let servers = testkit::servers();
    let ns = servers.knot.to_string();
    let (records, stats) = lookup(
        &["A", "--name-servers", &ns, "--edns-udp-size", "0"],
        "big.lookup.test\n",
    );
    assert_eq!(records[0]["status"], "NOERROR");
    assert_eq!(records[0]["data"]["protocol"], "tcp");
    assert_eq!(answers(&records[0]).len(), 40);
    assert_eq!(stats["tcp_fallbacks"], 1);
    let (records, _) = lookup(
        &[
            "A",
            "--name-servers",
            &ns,
            "--edns-udp-size",
            "0",
            "--no-tcp-fallback",
        ],
        "big.lookup.test\n",
    );
    assert_eq!(records[0]["data"]["flags"]["truncated"], true);
    assert_eq!(records[0]["data"]["protocol"], "udp");
}

/// Fault servers: each misbehaviour ends with the right status within the
/// timeout budget, and nothing is lost. SERVFAIL and REFUSED are asked again
/// (`--retry-rcodes`' default) and end with that answer when the tries are
/// spent.
#[test]
fn faults_end_with_the_right_status() {
    for kind in [FaultKind::Udp, FaultKind::Tcp] {
        let transport = if matches!(kind, FaultKind::Udp) {
            "udp"
        } else {
            "tcp"
        };
        let server = FaultServer::start(kind);
        let ns = server.addr().to_string();
        // (late5000's answer is due long after the run has ended.)
        // (late50's answer comes within the wait for it: over UDP the
        // first wait is --timeout, or twice the round trip and at least
        // 100 ms once answers have come.)
        let input = "ok.f\nnx.f\nservfail.f\nrefused.f\ndrop.f\nlate50.f\nlate5000.f\nwrongid.f\ngarbage.f\n";
        let started = Instant::now();
        let (records, stats) = lookup(
            &[
                "A",
                "--transport",
                transport,
                "--name-servers",
                &ns,
                "--timeout",
                "500ms",
                "--retries",
                "1",
                "--threads",
                "4",
            ],
            input,
        );
        // Two tries of 500 ms for the slowest names, in parallel: well under 3 s.
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{transport}: {:?}",
            started.elapsed()
        );
        assert_eq!(records.len(), 9, "{transport}");
        let r = by_name(&records);
        assert_eq!(r["ok.f"]["status"], "NOERROR");
        assert_eq!(answers(r["ok.f"]), ["192.0.2.1"]);
        assert_eq!(r["nx.f"]["status"], "NXDOMAIN");
        for name in ["servfail.f", "refused.f"] {
            assert_eq!(r[name]["attempts"], 2, "{transport} {name}");
        }
        assert_eq!(r["servfail.f"]["status"], "SERVFAIL");
        assert_eq!(r["refused.f"]["status"], "REFUSED");
        assert_eq!(r["late50.f"]["status"], "NOERROR");
        assert_eq!(r["late50.f"]["attempts"], 1, "{transport}");
        for name in ["drop.f", "late5000.f", "wrongid.f"] {
            assert_eq!(r[name]["status"], "TIMEOUT", "{transport} {name}");
            assert_eq!(r[name]["attempts"], 2, "{transport} {name}");
        }
        // Junk is no answer (3 bytes over UDP; a 2-byte frame over TCP, which
        // keeps the stream in step): counted as unmatched, and the query times out.
        assert_eq!(r["garbage.f"]["status"], "TIMEOUT", "{transport}");
        // Each try of wrongid.f and garbage.f gets one answer that matches no
        // query; drop, late5000, wrongid and garbage time out on both tries.
        assert_eq!(stats["unmatched_responses"], 4, "{stats}");
        assert_eq!(stats["timeouts"], 8, "{stats}");
        assert_eq!(stats["retries"], 6, "{stats}");
        assert_eq!(
            server.queries_received(),
            15,
            "{transport}: 3 answered at once, 6 × 2 tries"
        );
    }
}

/// A network that delivers every answer twice (the fault server sends two
/// copies of each REFUSED): each copy after the first is an answer already
/// taken, counted as unmatched, and each refusal counts once in the
/// nameserver's refusals (and in the pace): 3 tries, 3 refusals, and the
/// copies unmatched.
#[test]
fn a_duplicated_refusal_counts_once() {
    let server = FaultServer::start(FaultKind::Udp);
    let ns = server.addr().to_string();
    let (records, stats) = lookup(
        &[
            "A",
            "--name-servers",
            &ns,
            "--retries",
            "2",
            "--timeout",
            "500ms",
        ],
        "refusedtwice.f\n",
    );
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["status"], "REFUSED", "{}", records[0]);
    assert_eq!(records[0]["attempts"], 3, "{}", records[0]);
    assert_eq!(server.queries_received(), 3);
    // The last copy may come after the run has ended.
    let unmatched = stats["unmatched_responses"].as_u64().unwrap();
    assert!((2..=3).contains(&unmatched), "{stats}");
    assert_eq!(stats["per_nameserver"][&ns]["refusals"], 3, "{stats}");
}

/// Whether `error` says the connection went away: seen by the reader (closed),
/// or by a write after the peer's reset (reset, broken pipe).
fn connection_lost(error: &str) -> bool {
    ["closed", "reset", "Broken pipe"]
        .iter()
        .any(|s| error.contains(s))
}

/// A connection reset with queries in flight: every query on it fails and
/// is sent again on a new connection; nothing hangs or times out. 20 queries
/// answered after 500 ms each are in flight beside `resetonce.f`, which the
/// server answers by closing the connection (the first time only): all 21
/// are then asked again on a second connection, where all are answered.
#[test]
fn reset_mid_pipeline_redials_and_ends() {
    let server = FaultServer::start(FaultKind::Tcp);
    let ns = server.addr().to_string();
    let late: String = (0..20).map(|i| format!("late{}.f{i}\n", 500 + i)).collect();
    // The late queries are all sent (their answers 500 ms away) before
    // resetonce.f comes in 100 ms later.
    let (records, stats) = lookup_fed(
        &[
            "A",
            "--transport",
            "tcp",
            "--name-servers",
            &ns,
            "--threads",
            "1",
            "--inflight-per-worker",
            "32",
            "--timeout",
            "3000ms",
            "--retries",
            "2",
        ],
        &[&late, "resetonce.f\n"],
        Duration::from_millis(100),
    );
    assert_eq!(records.len(), 21);
    for record in &records {
        assert_eq!(record["status"], "NOERROR", "{record}");
        assert_eq!(answers(record), ["192.0.2.1"], "{record}");
    }
    assert_eq!(stats["timeouts"], 0, "{stats}");
    assert_eq!(stats["connections_opened"], 2, "{stats}");
    assert_eq!(server.connections_accepted(), 2);
    assert_eq!(
        server.queries_received(),
        42,
        "each query on both connections"
    );
}

/// A query whose every try is reset ends as an ERROR after its tries, each
/// on a new connection, with the error that says the connection was lost.
#[test]
fn a_query_reset_on_every_try_fails_after_its_tries() {
    let server = FaultServer::start(FaultKind::Tcp);
    let ns = server.addr().to_string();
    let args = [
        "A",
        "--transport",
        "tcp",
        "--name-servers",
        &ns,
        "--threads",
        "1",
        "--retries",
        "2",
    ];
    let (records, stats) = lookup(&args, "reset.f\n");
    let r = &records[0];
    assert_eq!(r["status"], "ERROR", "{r}");
    assert_eq!(r["attempts"], 3, "{r}");
    assert!(connection_lost(r["error"].as_str().unwrap()), "{r}");
    assert_eq!(stats["timeouts"], 0, "{stats}");
    assert_eq!(stats["connections_opened"], 3, "{stats}");
    assert_eq!(server.connections_accepted(), 3);
    assert_eq!(server.queries_received(), 3);
}

/// TLS: a certificate for another name fails unless --insecure.
#[test]
fn tls_verifies_certificates() {
    let cert = TestCert::generate("dns.test");
    let wrong = cert.for_name("wrong.test");
    let server = FaultServer::start(FaultKind::Tls { cert: wrong });
    let ns = server.addr().to_string();
    let ca = cert.ca_file().to_str().unwrap().to_string();
    let (records, stats) = lookup(
        &[
            "A",
            "--transport",
            "tls",
            "--name-servers",
            &ns,
            "--ca-file",
            &ca,
            "--tls-name",
            "dns.test",
            "--retries",
            "0",
        ],
        "ok.f\n",
    );
    assert_eq!(records[0]["status"], "ERROR");
    let error = records[0]["error"].as_str().unwrap();
    assert!(
        error.contains("TLS handshake") && error.contains("certificate"),
        "{error}"
    );
    assert_eq!(stats["tls_handshakes"], 0);
    let (records, stats) = lookup(
        &[
            "A",
            "--transport",
            "tls",
            "--name-servers",
            &ns,
            "--insecure",
        ],
        "ok.f\n",
    );
    assert_eq!(records[0]["status"], "NOERROR");
    assert_eq!(stats["tls_handshakes"], 1);
    // With no CA file, the system's roots do not know the test CA either.
    let (records, _) = lookup(
        &[
            "A",
            "--transport",
            "tls",
            "--name-servers",
            &ns,
            "--tls-name",
            "wrong.test",
            "--retries",
            "0",
        ],
        "ok.f\n",
    );
    assert_eq!(records[0]["status"], "ERROR");
    let error = records[0]["error"].as_str().unwrap();
    assert!(
        error.contains("TLS handshake")
            && error.contains("certificate")
            && error.contains("UnknownIssuer"),
        "the system's roots do not know the test CA: {error}"
    );
}

/// `lookup --transport https` sends POST, and GET (`?dns=`) with
/// `--doh-method get`: the fault server counts the method of each request.
#[test]
fn doh_method_is_post_by_default_and_get_when_asked() {
    let cert = TestCert::generate("dns.test");
    let names: String = (0..5).map(|i| format!("ok.f{i}\n")).collect();
    for (method, extra) in [("POST", vec![]), ("GET", vec!["--doh-method", "get"])] {
        let server = FaultServer::start(FaultKind::Https { cert: cert.clone() });
        let url = format!("https://{}/dns-query", server.addr());
        let mut args = vec![
            "A",
            "--transport",
            "https",
            "--name-servers",
            &url,
            "--ca-file",
            cert.ca_file().to_str().unwrap(),
            "--tls-name",
            "dns.test",
        ];
        args.extend_from_slice(&extra);
        let (records, _) = lookup(&args, &names);
        assert_eq!(records.len(), 5);
        for r in &records {
            assert_eq!(r["status"], "NOERROR", "{method}: {r}");
            assert_eq!(answers(r), ["192.0.2.1"]);
        }
        let want = if method == "GET" { (5, 0) } else { (0, 5) };
        assert_eq!(
            (server.doh_gets(), server.doh_posts()),
            want,
            "{method}: (GET, POST)"
        );
    }
}

/// Malformed lines get an ERROR record each; nothing is dropped.
#[test]
fn malformed_lines_get_error_records() {
    let server = FaultServer::start(FaultKind::Udp);
    let ns = server.addr().to_string();
    let long_label = "x".repeat(64);
    let input = format!("ok.f\na..b\n{long_label}.f\nok.f,not:an:address\n,{ns}\nnx.f,{ns}\n");
    let (records, stats) = lookup(&["A", "--name-servers", &ns], &input);
    assert_eq!(records.len(), 6);
    // Each line's record: its name, status, and what is wrong with it.
    let mut got: Vec<(String, String, String)> = records
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["status"].as_str().unwrap().to_string(),
                r["error"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    got.sort();
    let line = |name: &str, status: &str, error: &str| {
        (name.to_string(), status.to_string(), error.to_string())
    };
    let mut want = vec![
        line("ok.f", "NOERROR", ""),
        line("a..b", "ERROR", "bad name: empty label"),
        line(
            &format!("{long_label}.f"),
            "ERROR",
            "bad name: label longer than 63 bytes",
        ),
        line(
            "ok.f",
            "ERROR",
            "bad nameserver `not:an:address`: the port is not a number 0-65535",
        ),
        line("", "ERROR", "empty name"),
        line("nx.f", "NXDOMAIN", ""),
    ];
    want.sort();
    assert_eq!(got, want);
    assert_eq!(stats["names"], 6);
    assert_eq!(stats["statuses"]["ERROR"], 4, "{stats}");
}

/// The scheduler's point: with names pinned at random over several
/// nameservers, sticky keeps a handful of connections where fifo re-dials at
/// almost every line.
#[test]
fn sticky_keeps_connections_fifo_redials() {
    let servers = testkit::servers();
    let ns: Vec<String> = servers.fast_dns.iter().map(|a| a.to_string()).collect();
    let mut input = String::new();
    for i in 0..1200usize {
        // A fixed scatter over the nameservers (no two lines in a row alike).
        input.push_str(&format!(
            "n{i}.lookup.test,{}\n",
            ns[(i * 7 + i / 3) % ns.len()]
        ));
    }
    let run = |scheduler: &str| {
        lookup(
            &[
                "A",
                "--transport",
                "tcp",
                "--threads",
                "12",
                "--scheduler",
                scheduler,
            ],
            &input,
        )
        .1
    };
    let sticky = run("sticky");
    let fifo = run("fifo");
    let random = run("random");
    // The PR's variant: wait 10 ms for home work before stealing.
    let args = [
        "A",
        "--transport",
        "tcp",
        "--threads",
        "12",
        "--steal-wait",
        "10ms",
    ];
    let waiting = lookup(&args, &input).1;
    for s in [&sticky, &fifo, &random, &waiting] {
        assert_eq!(s["names"], 1200);
        assert_eq!(s["statuses"]["NOERROR"], 1200);
    }
    let opened = |s: &Value| s["connections_opened"].as_u64().unwrap();
    assert_eq!(opened(&random), 1200, "random: a connection per query");
    assert!(
        opened(&fifo) > 600,
        "fifo re-dials on a change of nameserver: {}",
        opened(&fifo)
    );
    for (what, s) in [("sticky", &sticky), ("sticky, steal-wait 10", &waiting)] {
        assert!(
            opened(s) * 10 <= opened(&fifo),
            "{what} {} vs fifo {}",
            opened(s),
            opened(&fifo)
        );
    }
}

/// `configs/lookup.toml` (input.lines → lookup.dns → output.json) gives the
/// same records as `dnsluice lookup`, driven from either end.
#[test]
fn lookup_pipeline_pushed_and_pulled() {
    let servers = testkit::servers();
    let dir = temp_dir("lookup");
    let names = dir.join("names.txt");
    let text: String = (0..300).map(|i| format!("n{i}.lookup.test\n")).collect();
    std::fs::write(&names, format!("{text}\n# a comment\nbad..name\n")).unwrap();
    let config =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/configs/lookup.toml"))
            .unwrap();
    for drive in ["push", "pull"] {
        let pipeline = dir.join(format!("{drive}.toml"));
        std::fs::write(&pipeline, format!("drive = \"{drive}\"\n{config}")).unwrap();
        let (stdout, stats) = run_with_stats(
            &pipeline,
            &[
                format!("--set=0.path={}", names.display()),
                format!("--set=1.name_servers=[\"{}\"]", servers.knot),
                "--set=1.workers=8".to_string(),
            ],
        );
        let counters = &stats["stages"][1]["counters"];
        assert_eq!(counters["names"], 301, "{drive}");
        assert_eq!(counters["status_NOERROR"], 300, "{drive}");
        let records = json_lines(&stdout);
        assert_eq!(records.len(), 301, "{drive}");
        let r = by_name(&records);
        for i in 0..300u32 {
            assert_eq!(
                answers(r[format!("n{i}.lookup.test").as_str()]),
                [testkit::lookup_address(i).to_string()]
            );
        }
        assert_eq!(r["bad..name"]["status"], "ERROR");
    }
}

/// Runs `dnsluice run PIPELINE -q ARGS --stats-json`, checks it succeeded;
/// its standard output and the statistics.
fn run_with_stats(pipeline: &std::path::Path, args: &[String]) -> (String, Value) {
    let stats_path = pipeline.with_extension("stats.json");
    let out = run_ok(
        dnsluice()
            .args(["run", pipeline.to_str().unwrap(), "-q"])
            .args(args)
            .arg("--stats-json")
            .arg(&stats_path),
    );
    let stats = serde_json::from_str(&std::fs::read_to_string(&stats_path).unwrap()).unwrap();
    (String::from_utf8(out.stdout).unwrap(), stats)
}

/// The stage reports the counters `dnsluice lookup --stats-json` does,
/// failed connects included (one list of counters serves both).
#[test]
fn the_lookup_stage_counts_failed_connects() {
    let dir = temp_dir("lookup");
    let names = dir.join("names.txt");
    std::fs::write(&names, "a.test\nb.test\nc.test\n").unwrap();
    // Nothing listens on port 1 of 127.0.0.1: every connect is refused.
    let pipeline = dir.join("refused.toml");
    std::fs::write(
        &pipeline,
        format!(
            "[[stage]]\nmodule = \"input.lines\"\npath = \"{}\"\n\
             [[stage]]\nmodule = \"lookup.dns\"\nname_servers = [\"127.0.0.1:1\"]\ntransport = \"tcp\"\n\
             workers = 1\nretries = 0\n[[stage]]\nmodule = \"output.null\"\n",
            names.display()
        ),
    )
    .unwrap();
    let (_, stats) = run_with_stats(&pipeline, &[]);
    let counters = &stats["stages"][1]["counters"];
    assert_eq!(counters["names"], 3, "{counters}");
    assert_eq!(counters["connect_failures"], 3, "{counters}");
    assert_eq!(counters["status_ERROR"], 3, "{counters}");
}

/// A TCP connection on which 3 queries in a row time out is taken for dead:
/// the next query gets a new connection instead of timing out too. (Six
/// dropped queries: whatever order the worker takes them in beside `ok.f`,
/// three in a row are followed by another query.)
#[test]
fn dead_connection_is_reopened() {
    let server = FaultServer::start(FaultKind::Tcp);
    let ns = server.addr().to_string();
    let input: String = (1..=6).map(|i| format!("drop.f{i}\n")).collect::<String>() + "ok.f\n";
    let (records, stats) = lookup(
        &[
            "A",
            "--transport",
            "tcp",
            "--name-servers",
            &ns,
            "--threads",
            "1",
            "--timeout",
            "200ms",
            "--retries",
            "0",
        ],
        &input,
    );
    let r = by_name(&records);
    for i in 1..=6 {
        assert_eq!(r[format!("drop.f{i}").as_str()]["status"], "TIMEOUT");
    }
    assert_eq!(r["ok.f"]["status"], "NOERROR");
    let opened = stats["connections_opened"].as_u64().unwrap();
    assert!(opened >= 2, "{stats}");
    assert_eq!(server.connections_accepted(), opened);
}

/// `lookup.dns` from Lua: the same stage, built with `stage()`, in a push
/// chain `input.lines → lookup.dns → output.json`.
#[test]
fn lookup_stage_from_lua() {
    let servers = testkit::servers();
    let dir = temp_dir("lookup");
    let names = dir.join("names.txt");
    std::fs::write(
        &names,
        "n5.lookup.test\nn6.lookup.test\nmissing.lookup.test\n",
    )
    .unwrap();
    let out = dir.join("records.jsonl");
    let script = dir.join("lookup.lua");
    std::fs::write(
        &script,
        format!(
            r#"local d = require("dnsluice")
local input = d.stage("input.lines", {{ path = arg[1] }})
local lookup = d.stage("lookup.dns", {{ name_servers = {{ "{ns}" }}, transport = "tcp", workers = 2 }})
local json = d.stage("output.json", {{ path = arg[2] }})
input:receiver(lookup):receiver(json)
input:run()
"#,
            ns = servers.knot
        ),
    )
    .unwrap();
    run_ok(dnsluice().args([
        "script",
        script.to_str().unwrap(),
        names.to_str().unwrap(),
        out.to_str().unwrap(),
    ]));
    let records = json_lines(&std::fs::read_to_string(&out).unwrap());
    let r = by_name(&records);
    assert_eq!(records.len(), 3);
    assert_eq!(
        answers(r["n5.lookup.test"]),
        [testkit::lookup_address(5).to_string()]
    );
    assert_eq!(
        answers(r["n6.lookup.test"]),
        [testkit::lookup_address(6).to_string()]
    );
    assert_eq!(r["missing.lookup.test"]["status"], "NXDOMAIN");
    assert_eq!(r["n5.lookup.test"]["data"]["protocol"], "tcp");
}

/// A server that closes each connection after answering: the worker opens a
/// new one for its next name without spending a retry on it (`--retries 0`),
/// over TCP and TLS. Fed one name every 100 ms, the close is seen while the
/// connection is idle (a server's idle timeout); fed all at once, the next
/// query may be written before the close arrives, and is sent again at once
/// on a new connection (`stale_redials`). Either way every name is answered,
/// each on its own connection.
#[test]
fn a_connection_the_server_closed_is_reopened_on_next_use() {
    let cert = TestCert::generate("dns.test");
    let names: Vec<String> = (0..10).map(|i| format!("okclose.f{i}\n")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let all_at_once = names.concat();
    for (transport, kind) in [
        ("tcp", FaultKind::Tcp),
        ("tls", FaultKind::Tls { cert: cert.clone() }),
    ] {
        for (feeding, chunks, pause) in [
            ("idle", names.clone(), Duration::from_millis(100)),
            ("at once", vec![all_at_once.as_str()], Duration::ZERO),
        ] {
            let what = format!("{transport}, {feeding}");
            let server = FaultServer::start(kind.clone());
            let ns = server.addr().to_string();
            let (records, stats) = lookup_fed(
                &[
                    "A",
                    "--transport",
                    transport,
                    "--name-servers",
                    &ns,
                    "--ca-file",
                    cert.ca_file().to_str().unwrap(),
                    "--tls-name",
                    "dns.test",
                    "--threads",
                    "1",
                    "--inflight-per-worker",
                    "1",
                    "--retries",
                    "0",
                    "--timeout",
                    "2000ms",
                ],
                &chunks,
                pause,
            );
            // (No try waited out the 2 s timeout: `timeouts` and `retries`
            // below are 0; a wall-clock bound would only add flakiness.)
            assert_eq!(records.len(), 10, "{what}");
            for record in &records {
                assert_eq!(record["status"], "NOERROR", "{what}: {record}");
                assert_eq!(record["attempts"], 1, "{what}: {record}");
                assert_eq!(answers(record), ["192.0.2.1"], "{what}: {record}");
            }
            assert_eq!(stats["timeouts"], 0, "{what}: {stats}");
            assert_eq!(stats["retries"], 0, "{what}: {stats}");
            assert_eq!(server.connections_accepted(), 10, "{what}: {stats}");
        }
    }
}

/// A nameserver that keeps failing is set aside: of two configured
/// nameservers, one refuses every connection; after a few failures in a row
/// the unpinned names all go to the other, so all but those few succeed
/// (plain round-robin would fail every second name).
#[test]
fn a_failing_nameserver_is_set_aside_for_the_healthy_one() {
    let good = FaultServer::start(FaultKind::Tcp);
    // A port that refuses connections (nobody listens on it).
    let dead = format!("127.0.0.1:{}", testkit::queue::free_port());
    let input: String = (0..60).map(|i| format!("ok.d{i}\n")).collect();
    let (records, stats) = lookup(
        &[
            "A",
            "--transport",
            "tcp",
            "--name-servers",
            &format!("{dead},{}", good.addr()),
            "--threads",
            "1",
            "--inflight-per-worker",
            "1",
            "--retries",
            "0",
        ],
        &input,
    );
    assert_eq!(records.len(), 60);
    let failed: Vec<&Value> = records
        .iter()
        .filter(|r| r["status"] != "NOERROR")
        .collect();
    assert!(
        !failed.is_empty() && failed.len() <= 3,
        "{} failed: {failed:?}",
        failed.len()
    );
    for record in &failed {
        assert_eq!(record["nameserver"], dead.as_str(), "{record}");
    }
    assert_eq!(
        stats["statuses"]["NOERROR"],
        60 - failed.len() as u64,
        "{stats}"
    );
    assert_eq!(good.queries_received(), 60 - failed.len() as u64);
}

/// A `--tls-name` that is no DNS name is an error before any query (it
/// gave every name an ERROR record after six tries, and exit status 0).
#[test]
fn a_bad_tls_name_is_refused_at_the_start() {
    let out = dnsluice()
        .args([
            "lookup",
            "--transport",
            "tls",
            "--name-servers",
            "127.0.0.1:9",
        ])
        .args(["--tls-name", "bad name!"])
        .stdin(Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--tls-name: ") && err.contains("bad name!"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "no records");
}

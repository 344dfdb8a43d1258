//! `dnsluice replay` against real servers on loopback (knot, dnsdist for DoT
//! and DoH; started by tests/servers/up.sh): every query answered and counted,
//! rcodes as the zone says, connections reused, certificates verified.

use serde_json::Value;
use testkit::readers::{capinfos_packets, tcpdump_bytes, tshark_frames};
use testkit::replay::*;
use testkit::{dnsluice, run_ok, temp_path};

const QUERIES: usize = 400;
const CLIENTS: u64 = 4;

/// A capture of QUERIES zone queries from 8 sources (4/5 exist, 1/5 do not).
fn capture(name: &str) -> std::path::PathBuf {
    let path = temp_path(name);
    write_capture(&path, &zone_queries(QUERIES, 8));
    path
}

fn check_all_answered(stats: &Value, what: &str) {
    check_contract(stats);
    assert_eq!(n(stats, "sent"), QUERIES as u64, "{what}: {stats}");
    assert_eq!(n(stats, "answered"), QUERIES as u64, "{what}: {stats}");
    assert_eq!(n(stats, "timeouts"), 0, "{what}: {stats}");
    assert_eq!(n(stats, "errors"), 0, "{what}: {stats}");
    let exist = (0..QUERIES).filter(|i| i % 5 != 4).count() as u64;
    let rcodes = stats["rcodes"].as_object().unwrap();
    assert_eq!(rcodes.len(), 2, "{what}: {stats}");
    assert_eq!(rcodes["NOERROR"], exist, "{what}: {stats}");
    assert_eq!(
        rcodes["NXDOMAIN"],
        QUERIES as u64 - exist,
        "{what}: {stats}"
    );
    assert!(
        stats["latency_ms"]["p50"].as_f64().unwrap() > 0.0,
        "{what}: {stats}"
    );
}

#[test]
fn every_transport_answers_every_query_on_one_connection_per_client() {
    let s = servers();
    let capture = capture("all.pcap");
    let clients = CLIENTS.to_string();
    let ca = &s["CA_FILE"];
    let name = &s["TLS_NAME"];
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("udp", vec!["--server", &s["KNOT"]]),
        ("tcp", vec!["--server", &s["DNSDIST"], "--transport", "tcp"]),
        (
            "tls",
            vec![
                "--server",
                &s["DOT"],
                "--transport",
                "tls",
                "--ca-file",
                ca,
                "--tls-name",
                name,
            ],
        ),
        (
            "https",
            vec![
                "--server",
                &s["DOH"],
                "--transport",
                "https",
                "--ca-file",
                ca,
                "--tls-name",
                name,
            ],
        ),
        (
            "https-get",
            vec![
                "--server",
                &s["DOH"],
                "--transport",
                "https",
                "--doh-method",
                "get",
                "--ca-file",
                ca,
                "--tls-name",
                name,
            ],
        ),
    ];
    for (what, mut args) in cases {
        args.extend_from_slice(&["--clients", &clients, "--inflight", "50", "-q"]);
        let (stats, _) = replay(&capture, &args);
        check_all_answered(&stats, what);
        // One socket or connection per client, not one per query.
        assert_eq!(n(&stats, "connections_opened"), CLIENTS, "{what}: {stats}");
        let handshakes = if what.starts_with("tls") || what.starts_with("https") {
            CLIENTS
        } else {
            0
        };
        assert_eq!(n(&stats, "tls_handshakes"), handshakes, "{what}: {stats}");
    }
}

#[test]
fn responses_carry_the_answers_the_zone_holds() {
    let s = servers();
    let capture = capture("responses.pcap");
    let responses = temp_path("responses.jsonl");
    let (stats, _) = replay(
        &capture,
        &[
            "--server",
            &s["DNSDIST"],
            "--transport",
            "tcp",
            "--responses",
            responses.to_str().unwrap(),
            "-q",
        ],
    );
    check_all_answered(&stats, "tcp");
    check_response_lines(&std::fs::read_to_string(&responses).unwrap(), "tcp");
}

/// One JSON response line per query, each with the answer the zone holds
/// (the generator's address for `n<i>`, NXDOMAIN for the missing names).
fn check_response_lines(text: &str, transport: &str) {
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), QUERIES, "{transport}");
    let mut seen = 0;
    for line in &lines {
        assert_eq!(line["type"], "response");
        assert_eq!(line["transport"], transport);
        let question = line["query"]["dns"]["question"][0]["name"]
            .as_str()
            .unwrap();
        let answer = &line["answer"]["dns"];
        // The answer repeats the query's id and question.
        assert_eq!(answer["id"], line["query"]["dns"]["id"]);
        assert_eq!(answer["question"][0]["name"].as_str().unwrap(), question);
        if let Some(i) = question
            .strip_prefix('n')
            .and_then(|r| r.strip_suffix(".lookup.test."))
        {
            let i: u32 = i.parse().unwrap();
            assert_eq!(answer["rcode"], "NOERROR");
            assert_eq!(answer["answer"][0]["data"].as_str().unwrap(), address_of(i));
            seen += 1;
        } else {
            assert_eq!(answer["rcode"], "NXDOMAIN", "{line}");
        }
        assert!(line["latency_ms"].as_f64().unwrap() > 0.0);
    }
    assert_eq!(seen, QUERIES * 4 / 5, "{transport}");
}

/// `filter.dnscli` in a chain, pushed and pulled, over UDP to knot and over
/// DoH to dnsdist: the next stage (`output.json`) gets every response with
/// the zone's answer.
#[test]
fn filter_dnscli_hands_the_zone_answers_to_the_next_stage() {
    let s = servers();
    let capture = capture("chain.pcap");
    let cases = [
        ("udp", s["KNOT"].clone(), String::new()),
        (
            "https",
            s["DOH"].clone(),
            format!(
                "ca_file = \"{}\"\ntls_name = \"{}\"\n",
                s["CA_FILE"], s["TLS_NAME"]
            ),
        ),
    ];
    for (transport, server, tls) in cases {
        for drive in ["push", "pull"] {
            let options =
                format!("server = \"{server}\"\ntransport = \"{transport}\"\nclients = 4\n{tls}");
            let (text, _) = run_dnscli_chain(&capture, drive, &options);
            check_response_lines(&text, transport);
        }
    }
    // The shipped example pipeline, pointed at knot.
    let responses = temp_path("chain-config.jsonl");
    run_ok(dnsluice().args([
        "run",
        concat!(env!("CARGO_MANIFEST_DIR"), "/configs/replay-chain.toml"),
        "--set",
        &format!("0.path={}", capture.display()),
        "--set",
        &format!("3.server={}", s["KNOT"]),
        "--set",
        &format!("4.path={}", responses.display()),
    ]));
    check_response_lines(&std::fs::read_to_string(&responses).unwrap(), "udp");
}

#[test]
fn a_truncated_udp_answer_is_retried_over_tcp() {
    let s = servers();
    // `big` has 40 A records: more than 512 bytes, so without EDNS knot sets TC=1.
    let queries: Vec<Q> = (0..20)
        .map(|i| Q {
            source: 1,
            name: "big.lookup.test".into(),
            qtype: 1,
            at_us: i * 10,
        })
        .collect();
    let capture = temp_path("big.pcap");
    write_capture(&capture, &queries);
    let responses = temp_path("big.jsonl");
    let (stats, _) = replay(
        &capture,
        &[
            "--server",
            &s["KNOT"],
            "--responses",
            responses.to_str().unwrap(),
            "-q",
        ],
    );
    assert_eq!(n(&stats, "answered"), 20, "{stats}");
    assert_eq!(n(&stats, "tcp_retries"), 20, "{stats}");
    for line in std::fs::read_to_string(&responses).unwrap().lines() {
        let line: Value = serde_json::from_str(line).unwrap();
        assert_eq!(line["transport"], "tcp");
        assert_eq!(line["answer"]["dns"]["flags"]["tc"], false);
        assert_eq!(line["answer"]["dns"]["ancount"], 40);
    }
}

/// dnsdist's certificate (signed by the test CA, which the system does not
/// know) is taken with `--insecure`. (That verification fails without it,
/// with no CA file or with a name the certificate lacks, is tested against
/// the in-process TLS server in `replay_tls_faults.rs`: deterministic,
/// where dnsdist under a loaded machine has been seen to reset a handshake
/// before the certificate check.)
#[test]
fn an_unverifiable_certificate_is_taken_with_insecure() {
    let s = servers();
    let capture = capture("cert.pcap");
    let (stats, stderr) = replay(
        &capture,
        &[
            "--server",
            &s["DOT"],
            "--transport",
            "tls",
            "--insecure",
            "-q",
        ],
    );
    check_all_answered(&stats, "insecure");
    // Said once, even with -q.
    let said = "warning: insecure: TLS server certificates are not verified";
    assert_eq!(stderr.matches(said).count(), 1, "{stderr}");
}

#[test]
fn the_printed_pipeline_runs_the_same_replay() {
    let s = servers();
    let capture = capture("printed.pcap");
    let out = run_ok(dnsluice().args([
        "replay",
        capture.to_str().unwrap(),
        "--server",
        &s["KNOT"],
        "--clients",
        "3",
        "--rate",
        "4000",
        "--print-pipeline",
    ]));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("module = \"filter.timing\"\nrate = 4000.0"),
        "{text}"
    );
    let pipeline = temp_path("printed.toml");
    std::fs::write(&pipeline, &text).unwrap();
    let stats_path = temp_path("printed-stats.json");
    run_ok(dnsluice().args([
        "run",
        pipeline.to_str().unwrap(),
        "--stats-json",
        stats_path.to_str().unwrap(),
    ]));
    let stats: Value =
        serde_json::from_str(&std::fs::read_to_string(&stats_path).unwrap()).unwrap();
    let client = stats["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["module"] == "output.dnscli")
        .unwrap();
    assert_eq!(client["counters"]["answered"], QUERIES as u64);
    assert_eq!(client["counters"]["connections_opened"], 3);
    // 400 queries at 4000/s: 0.1 s at least.
    let elapsed = stats["elapsed_s"].as_f64().unwrap();
    assert!(elapsed >= 0.095, "{elapsed}");
}

/// `--responses FILE.pcap` writes each exchange as made-up UDP packets that
/// tshark reads as the same DNS: every query, then its answer with the same
/// id, the rcodes the zone gives, valid checksums.
#[test]
fn responses_as_pcap_read_back_with_tshark() {
    let s = servers();
    let capture = capture("responses-pcap-in.pcap");
    let out = temp_path("responses-out.pcap");
    let (stats, _) = replay(
        &capture,
        &[
            "--server",
            &s["KNOT"],
            "--responses",
            out.to_str().unwrap(),
            "-q",
        ],
    );
    check_all_answered(&stats, "udp");
    let tshark = run_ok(
        std::process::Command::new("tshark")
            .args(["-n", "-o", "udp.check_checksum:TRUE", "-r"])
            .arg(&out)
            .args(["-T", "fields", "-E", "separator=,"])
            .args(["-e", "ip.src", "-e", "ip.dst", "-e", "udp.checksum.status"])
            .args([
                "-e",
                "dns.flags.response",
                "-e",
                "dns.id",
                "-e",
                "dns.flags.rcode",
            ]),
    );
    let text = String::from_utf8(tshark.stdout).unwrap();
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 2 * QUERIES, "a query and an answer each");
    let server = s["KNOT"].split(':').next().unwrap().to_string();
    let mut open = std::collections::HashMap::new();
    let mut rcodes = std::collections::BTreeMap::new();
    for row in &rows {
        let [src, dst, checksum, response, id, rcode] = row[..] else {
            panic!("{row:?}")
        };
        assert_eq!(
            checksum, "1",
            "tshark says the UDP checksum is good: {row:?}"
        );
        if response == "0" {
            assert!(src.starts_with("198.18.") && dst == server, "{row:?}");
            *open.entry((src, id)).or_insert(0) += 1;
        } else {
            assert!(src == server && dst.starts_with("198.18."), "{row:?}");
            // The answer follows its query.
            let waiting = open
                .get_mut(&(dst, id))
                .unwrap_or_else(|| panic!("{row:?}"));
            assert!(*waiting > 0, "{row:?}");
            *waiting -= 1;
            *rcodes.entry(rcode.to_string()).or_insert(0u64) += 1;
        }
    }
    let exist = (0..QUERIES).filter(|i| i % 5 != 4).count() as u64;
    assert_eq!(rcodes["0"], exist);
    assert_eq!(rcodes["3"], QUERIES as u64 - exist);
    // The file reads the same in capinfos, tshark (timestamps, lengths) and
    // tcpdump (bytes) as in our own reader.
    assert_eq!(capinfos_packets(&out), 2 * QUERIES as u64);
    let ours = our_records(&out);
    let frames = tshark_frames(&out);
    let bytes = tcpdump_bytes(&out);
    assert_eq!(
        (ours.len(), frames.len(), bytes.len()),
        (2 * QUERIES, 2 * QUERIES, 2 * QUERIES)
    );
    for (i, ((ts, data), frame)) in ours.iter().zip(&frames).enumerate() {
        let epoch = format!("{}.{:09}", ts / 1_000_000_000, ts % 1_000_000_000);
        assert_eq!(frame.ts, epoch, "record {}", i + 1);
        assert_eq!(
            (frame.len, frame.caplen),
            (data.len() as u64, data.len() as u64)
        );
        assert!(
            bytes[i] == *data,
            "record {}: tcpdump reads other bytes",
            i + 1
        );
    }
}

/// (timestamp, bytes) of each record, read with our own reader.
fn our_records(path: &std::path::Path) -> Vec<(i64, Vec<u8>)> {
    use dnsluice::core::{Object, Producer};
    let mut reader = dnsluice::modules::input::mmpcap::open(path.to_path_buf()).unwrap();
    let mut records = Vec::new();
    while let Some(obj) = reader.produce().unwrap() {
        if let Object::Packet(p) = obj {
            records.push((p.meta.ts_ns.unwrap(), p.data.to_vec()));
        }
    }
    records
}

/// `examples/lua/replay.lua` (dnsjit's replay example, ported) replays a
/// capture over UDP and over DoT, and prints the counts and, with -R, every
/// outcome.
#[test]
fn the_lua_replay_example_replays_and_reports() {
    let s = servers();
    let capture = capture("lua-replay.pcap");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/lua/replay.lua");
    let run = |args: &[&str]| {
        let out = run_ok(dnsluice().args([&["script", script], args].concat()));
        String::from_utf8(out.stdout).unwrap()
    };
    let (host, port) = s["KNOT"].split_once(':').unwrap();
    let text = run(&[capture.to_str().unwrap(), host, port]);
    let counts: std::collections::BTreeMap<&str, &str> =
        text.lines().filter_map(|l| l.split_once('\t')).collect();
    assert_eq!(counts["packets"], QUERIES.to_string());
    assert_eq!(counts["queries"], QUERIES.to_string());
    assert_eq!(counts["answered"], QUERIES.to_string());
    assert_eq!(counts["timeouts"], "0");
    assert_eq!(counts["errors"], "0");
    let (host, port) = s["DOT"].split_once(':').unwrap();
    let text = run(&[
        "-T",
        "-R",
        "--ca-file",
        &s["CA_FILE"],
        "--tls-name",
        &s["TLS_NAME"],
        capture.to_str().unwrap(),
        host,
        port,
    ]);
    let outcomes: Vec<Value> = text
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(outcomes.len(), QUERIES);
    let nx = outcomes
        .iter()
        .filter(|o| o["answer"]["dns"]["rcode"] == "NXDOMAIN")
        .count();
    assert_eq!(nx, QUERIES / 5);
    assert!(outcomes.iter().all(|o| o["transport"] == "tls"));
    assert!(text.contains("answered\t400"), "{text}");
}

/// A capture that comes slowly on standard input (three queries 1.3 s
/// apart, as from `tcpdump -w -`): each query is sent as it comes, not held
/// for a batch of 16 until the input ends, so none times out (the 2 s
/// timeout ran while a held query waited unsent) on UDP, TCP and TLS.
#[test]
fn queries_from_a_slow_pipe_go_out_as_they_come() {
    use std::io::Write;
    let s = servers();
    let path = temp_path("slow.pcap");
    write_capture(&path, &zone_queries(3, 1));
    let bytes = std::fs::read(&path).unwrap();
    // The file header, then each record (16 bytes of header, then its length).
    let mut pieces = vec![&bytes[..24]];
    let mut at = 24;
    while at < bytes.len() {
        let len = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        pieces.push(&bytes[at..at + 16 + len]);
        at += 16 + len;
    }
    assert_eq!(pieces.len(), 4);
    for (transport, server) in [("udp", &s["KNOT"]), ("tcp", &s["KNOT"]), ("tls", &s["DOT"])] {
        let stats = temp_path("slow-stats.json");
        let mut child = dnsluice()
            .args([
                "replay",
                "-",
                "-q",
                "--transport",
                transport,
                "--server",
                server,
            ])
            .args(["--ca-file", &s["CA_FILE"], "--tls-name", &s["TLS_NAME"]])
            .arg("--stats-json")
            .arg(&stats)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(&[pieces[0], pieces[1]].concat()).unwrap();
        for piece in &pieces[2..] {
            std::thread::sleep(std::time::Duration::from_millis(1300));
            stdin.write_all(piece).unwrap();
        }
        drop(stdin);
        assert!(child.wait().unwrap().success(), "{transport}");
        let stats: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
        assert_eq!(n(&stats, "sent"), 3, "{transport}: {stats}");
        assert_eq!(n(&stats, "answered"), 3, "{transport}: {stats}");
        assert_eq!(n(&stats, "timeouts"), 0, "{transport}: {stats}");
    }
}

/// A TLS proxy in front of the DoT server: each connection, in the order
/// accepted, does what `plan` says for it (no entry: held silent, its
/// handshake never answered).
fn tls_proxy(plan: Vec<ProxyConnection>) -> String {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    let dot = servers()["DOT"].clone();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for (k, client) in listener.incoming().enumerate() {
            let Ok(mut client) = client else { continue };
            let Some(&how) = plan.get(k) else {
                held.push(client);
                continue;
            };
            let mut server = TcpStream::connect(&dot).unwrap();
            let (mut up_from, mut up_to) =
                (client.try_clone().unwrap(), server.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut up_from, &mut up_to);
            });
            if let ProxyConnection::CloseAfter(ms) = how {
                let closing = client.try_clone().unwrap();
                std::thread::spawn(move || {
                    std::thread::sleep(std::time::Duration::from_millis(ms));
                    let _ = closing.shutdown(std::net::Shutdown::Both);
                });
            }
            let accepted = std::time::Instant::now();
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                while let Ok(n) = server.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    // What comes 200 ms after the connection (the handshake
                    // is over by then): the answers.
                    if let ProxyConnection::DelayAnswers(ms) = how {
                        if accepted.elapsed() >= std::time::Duration::from_millis(200) {
                            std::thread::sleep(std::time::Duration::from_millis(ms));
                        }
                    }
                    if client.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = client.shutdown(std::net::Shutdown::Both);
            });
        }
    });
    proxy
}

/// What [`tls_proxy`] does with one connection.
#[derive(Clone, Copy, PartialEq, Debug)]
enum ProxyConnection {
    /// Passes both ways.
    Pass,
    /// Passes both ways, what the server sends from 200 ms after the
    /// connection on (the answers) this many milliseconds late.
    DelayAnswers(u64),
    /// Passes both ways, and closes this many milliseconds after it came.
    CloseAfter(u64),
}

/// Replays `queries` over TLS through `proxy`: 2 clients, `--timeout 2s`,
/// `--connect-timeout 2s`, keeping the capture's times, with `extra` flags.
fn replay_through(proxy: &str, queries: &[Q], extra: &[&str]) -> Value {
    let s = servers();
    let path = temp_path("through-proxy.pcap");
    write_capture(&path, queries);
    let (stats, _) = replay(
        &path,
        &[
            "--server",
            proxy,
            "--transport",
            "tls",
            "--ca-file",
            &s["CA_FILE"],
            "--tls-name",
            &s["TLS_NAME"],
            "--clients",
            "2",
            "--timeout",
            "2s",
            "--connect-timeout",
            "2s",
            "--keep-timing",
            "-q",
        ]
        .iter()
        .chain(extra)
        .copied()
        .collect::<Vec<_>>(),
    );
    stats
}

/// A query at `at_ms` from source 10.0.0.`source`.
fn query_at(source: u8, i: usize, at_ms: u64) -> Q {
    Q {
        source,
        name: format!("n{i}.lookup.test"),
        qtype: 1,
        at_us: at_ms * 1000,
    }
}

/// A TLS client whose connection hangs in its handshake does not stall the
/// others' queries. The first client's query comes first, held for a batch
/// (`--send-batch 16`); the second client's connection hangs (2 s of
/// `--connect-timeout`). The first query is sent before that connect and
/// answered at once (it waited the connect out unsent).
#[test]
fn a_hanging_handshake_does_not_hold_another_clients_query() {
    let proxy = tls_proxy(vec![ProxyConnection::Pass]);
    let queries = [query_at(1, 0, 0), query_at(2, 1, 0)];
    let stats = replay_through(&proxy, &queries, &["--send-batch", "16"]);
    assert_eq!(n(&stats, "answered"), 1, "{stats}");
    assert_eq!(n(&stats, "errors"), 1, "{stats}");
    let slowest = stats["latency_ms"]["max"].as_f64().unwrap();
    assert!(slowest < 1000.0, "{stats}");
}

/// The receiver reads the answers of every client while one reconnects:
/// the first client's connection closes at 300 ms, after its answer, and
/// its reconnect (for its second query, at 600 ms) hangs for 2 s; the
/// second client's second query (at 400 ms) is answered 900 ms late,
/// meanwhile, and taken as it comes (the receiver's timeout sweep waited
/// for the reconnecting client and read nothing meanwhile: the answer was
/// taken at the end of the hang, 2.2 s after its query, a query with a
/// shorter timeout swept as a timeout).
#[test]
fn a_hanging_reconnect_does_not_stall_the_receiver() {
    let proxy = tls_proxy(vec![
        ProxyConnection::CloseAfter(300),
        ProxyConnection::DelayAnswers(900),
    ]);
    let queries = [
        query_at(1, 0, 0),
        query_at(2, 1, 0),
        query_at(2, 2, 400),
        query_at(1, 3, 600),
    ];
    let stats = replay_through(&proxy, &queries, &[]);
    assert_eq!(n(&stats, "answered"), 3, "{stats}");
    assert_eq!(n(&stats, "timeouts"), 0, "{stats}");
    assert_eq!(n(&stats, "errors"), 1, "{stats}");
    let slowest = stats["latency_ms"]["max"].as_f64().unwrap();
    assert!(slowest < 1500.0, "{stats}");
}

/// Extended RCODEs are counted whole: knot answers a query of EDNS
/// version 1 BADVERS (RCODE 16: 0 in the header, 1 in the OPT record), as
/// kdig says; the replay counts BADVERS (it counted NOERROR, from the
/// header's 4 bits).
#[test]
fn an_extended_rcode_is_counted_whole() {
    let s = servers();
    let (ip, port) = s["KNOT"].rsplit_once(':').unwrap();
    let kdig = std::process::Command::new("kdig")
        .args([&format!("@{ip}"), "-p", port, "+edns=1", "n0.lookup.test"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&kdig.stdout);
    assert!(said.contains("status: BADVERS"), "{said}");
    let mut messages = Vec::new();
    for i in 0..3u16 {
        let mut dns = query(i, &format!("n{i}.lookup.test"), 1);
        dns[11] = 1; // ARCOUNT 1: an OPT record of EDNS version 1
        dns.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 1, 0, 0, 0, 0]);
        messages.push((1, u64::from(i), dns));
    }
    let path = temp_path("badvers.pcap");
    write_messages(&path, &messages);
    let (stats, _) = replay(&path, &["--server", &s["KNOT"], "-q"]);
    assert_eq!(n(&stats, "answered"), 3, "{stats}");
    assert_eq!(stats["rcodes"]["BADVERS"], 3, "{stats}");
}

//! `dnsluice replay` against in-process servers that misbehave on purpose,
//! chosen by the first label of the query name: `ok` answers, `drop` never
//! does, `wrongid` answers with another id, `lateN` answers after N ms,
//! `slow` answers after 100 ms (so later queries are answered first), `reset`
//! closes the TCP connection mid-stream. The right counts, and nothing hangs.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use testkit::replay::*;
use testkit::{dnsluice, temp_path};

/// The first label of the question of `query`.
fn first_label(query: &[u8]) -> String {
    let len = usize::from(*query.get(12).unwrap_or(&0));
    String::from_utf8_lossy(query.get(13..13 + len).unwrap_or(&[])).to_string()
}

/// The answer to `query`: the same message with QR and RA set, NOERROR.
fn answer(query: &[u8]) -> Vec<u8> {
    let mut a = query.to_vec();
    a[2] |= 0x80;
    a[3] = 0x80;
    a
}

/// What the server does for `label`: `None` to stay silent, else (delay, answer).
fn behaviour(query: &[u8]) -> Option<(Duration, Vec<u8>)> {
    let label = first_label(query);
    let mut a = answer(query);
    match label.as_str() {
        "drop" | "reset" => None,
        "wrongid" => {
            a[1] ^= 0x55;
            Some((Duration::ZERO, a))
        }
        "slow" => Some((Duration::from_millis(100), a)),
        l if l.starts_with("late") => Some((Duration::from_millis(l[4..].parse().unwrap()), a)),
        _ => Some((Duration::ZERO, a)),
    }
}

fn udp_server() -> String {
    let socket = Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
    let addr = socket.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok((len, from)) = socket.recv_from(&mut buf) {
            if let Some((delay, a)) = behaviour(&buf[..len]) {
                let socket = socket.clone();
                std::thread::spawn(move || {
                    std::thread::sleep(delay);
                    let _ = socket.send_to(&a, from);
                });
            }
        }
    });
    addr
}

fn tcp_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            std::thread::spawn(move || serve_tcp(stream));
        }
    });
    addr
}

fn serve_tcp(mut stream: TcpStream) {
    let writer = Arc::new(Mutex::new(stream.try_clone().unwrap()));
    loop {
        let mut prefix = [0u8; 2];
        if stream.read_exact(&mut prefix).is_err() {
            return;
        }
        let mut query = vec![0u8; usize::from(u16::from_be_bytes(prefix))];
        if stream.read_exact(&mut query).is_err() {
            return;
        }
        if first_label(&query) == "reset" {
            // Shut the connection in the middle of the stream.
            let _ = stream.shutdown(std::net::Shutdown::Both);
            return;
        }
        if let Some((delay, a)) = behaviour(&query) {
            let writer = writer.clone();
            std::thread::spawn(move || {
                std::thread::sleep(delay);
                let mut frame = (a.len() as u16).to_be_bytes().to_vec();
                frame.extend_from_slice(&a);
                let _ = writer.lock().unwrap().write_all(&frame);
            });
        }
    }
}

fn capture_of(names: &[String], file: &str) -> std::path::PathBuf {
    let queries: Vec<Q> = names
        .iter()
        .enumerate()
        .map(|(i, name)| Q {
            source: (i % 3) as u8 + 1,
            name: name.clone(),
            qtype: 1,
            at_us: i as u64,
        })
        .collect();
    let path = temp_path(file);
    write_capture(&path, &queries);
    path
}

fn names(spec: &[(&str, usize)]) -> Vec<String> {
    let mut out = Vec::new();
    for (label, count) in spec {
        for i in 0..*count {
            out.push(format!("{label}.q{i}.fault.test"));
        }
    }
    out
}

#[test]
fn udp_drops_wrong_ids_and_late_answers_are_timeouts() {
    let server = udp_server();
    let capture = capture_of(
        &names(&[
            ("ok", 10),
            ("drop", 5),
            ("wrongid", 5),
            ("late50", 5),
            ("late3000", 5),
        ]),
        "udp-faults.pcap",
    );
    let started = Instant::now();
    let (stats, stderr) = replay(
        &capture,
        &["--server", &server, "--timeout", "600ms", "--clients", "2"],
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    check_contract(&stats);
    assert_eq!(n(&stats, "sent"), 30, "{stats}");
    assert_eq!(n(&stats, "answered"), 15, "ok and late50: {stats}");
    assert_eq!(
        n(&stats, "timeouts"),
        15,
        "drop, wrongid, late3000: {stats}"
    );
    assert_eq!(n(&stats, "errors"), 0, "{stats}");
    // The answers with the wrong id were seen and ignored, one each (late3000's
    // answers are due long after the run has ended).
    assert_eq!(n(&stats, "unmatched_responses"), 5, "{stats}");
    assert!(stderr.contains("15 queries failed (timeout)"), "{stderr}");
}

#[test]
fn tcp_answers_out_of_order_are_matched_on_one_connection() {
    let server = tcp_server();
    let mut list = Vec::new();
    for i in 0..25 {
        list.push(if i % 5 == 0 {
            format!("slow.q{i}.fault.test")
        } else {
            format!("ok.q{i}.fault.test")
        });
    }
    let capture = capture_of(&list, "tcp-order.pcap");
    let responses = temp_path("tcp-order.jsonl");
    let (stats, _) = replay(
        &capture,
        &[
            "--server",
            &server,
            "--transport",
            "tcp",
            "--responses",
            responses.to_str().unwrap(),
        ],
    );
    assert_eq!(n(&stats, "answered"), 25, "{stats}");
    assert_eq!(n(&stats, "connections_opened"), 1, "{stats}");
    let text = std::fs::read_to_string(&responses).unwrap();
    let order: Vec<String> = text
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            assert_eq!(
                v["answer"]["dns"]["question"],
                v["query"]["dns"]["question"]
            );
            assert_eq!(v["answer"]["dns"]["id"], v["query"]["dns"]["id"]);
            v["query"]["dns"]["question"][0]["name"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    // The slow ones came back last, after queries sent later.
    assert!(
        order[..20].iter().all(|n| n.starts_with("ok.")),
        "{order:?}"
    );
}

#[test]
fn a_reset_connection_fails_its_queries_and_is_reopened() {
    let server = tcp_server();
    let capture = capture_of(&names(&[("reset", 3)]), "tcp-reset.pcap");
    let started = Instant::now();
    // One query outstanding at a time: each one resets its own connection.
    let (stats, stderr) = replay(
        &capture,
        &[
            "--server",
            &server,
            "--transport",
            "tcp",
            "--inflight",
            "1",
            "--timeout",
            "3000ms",
        ],
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(n(&stats, "sent"), 3, "{stats}");
    assert_eq!(n(&stats, "answered"), 0, "{stats}");
    assert_eq!(n(&stats, "timeouts"), 0, "{stats}");
    assert_eq!(n(&stats, "errors"), 3, "{stats}");
    assert_eq!(n(&stats, "connections_opened"), 3, "{stats}");
    assert!(
        stderr.contains("connection closed before the answer"),
        "{stderr}"
    );
}

#[test]
fn a_server_that_is_not_there_is_an_error_per_query_and_no_hang() {
    // A port nobody listens on.
    let port = testkit::queue::free_port();
    let capture = capture_of(&names(&[("ok", 50)]), "refused.pcap");
    let server = format!("127.0.0.1:{port}");
    let (stats, stderr) = replay(&capture, &["--server", &server, "--transport", "tcp"]);
    assert_eq!(n(&stats, "errors"), 50, "{stats}");
    assert_eq!(stats["errors_by_kind"]["connect"], 50, "{stats}");
    // One attempt, not one per query.
    assert_eq!(n(&stats, "connect_failures"), 1, "{stats}");
    assert!(stderr.contains("connect to 127.0.0.1"), "{stderr}");
}

/// `filter.dnscli` passes exactly one response per query to the next stage,
/// pushed and pulled: the answer for `ok` and `late50`, a timeout error for
/// the queries never answered (or answered with the wrong id, or too late).
#[test]
fn filter_dnscli_passes_one_response_per_query_on_both_drives() {
    let server = udp_server();
    let capture = capture_of(
        &names(&[("ok", 10), ("drop", 5), ("wrongid", 5), ("late50", 5)]),
        "chain-faults.pcap",
    );
    for drive in ["push", "pull"] {
        let started = Instant::now();
        let (text, stderr) = run_dnscli_chain(
            &capture,
            drive,
            &format!("server = \"{server}\"\ntimeout = \"400ms\"\nclients = 2"),
        );
        assert!(started.elapsed() < Duration::from_secs(5), "{drive}");
        let mut by_label: std::collections::BTreeMap<String, (usize, usize)> = Default::default();
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(v["type"], "response", "{drive}: {line}");
            let name = v["query"]["dns"]["question"][0]["name"].as_str().unwrap();
            let label = name.split('.').next().unwrap().to_string();
            let entry = by_label.entry(label).or_default();
            if v["answer"].is_null() {
                assert_eq!(v["error"]["kind"], "timeout", "{drive}: {line}");
                entry.1 += 1;
            } else {
                assert_eq!(v["answer"]["dns"]["id"], v["query"]["dns"]["id"], "{line}");
                assert!(v.get("error").is_none(), "{drive}: {line}");
                entry.0 += 1;
            }
        }
        let expected: std::collections::BTreeMap<String, (usize, usize)> = [
            ("drop", (0, 5)),
            ("late50", (5, 0)),
            ("ok", (10, 0)),
            ("wrongid", (0, 5)),
        ]
        .into_iter()
        .map(|(l, c)| (l.to_string(), c))
        .collect();
        assert_eq!(
            by_label, expected,
            "{drive}: (answered, timeouts) per label"
        );
        // The stage counts what it passed on, and the output got all of it.
        assert!(
            stderr.contains("filter.dnscli    in         25  out         25"),
            "{drive}: {stderr}"
        );
    }
}

/// `filter.dnscli` writes its responses to the next stage only: the
/// `responses` option of `output.dnscli` is refused with the reason.
#[test]
fn filter_dnscli_refuses_a_responses_file() {
    let pipeline = temp_path("chain-responses.toml");
    std::fs::write(
        &pipeline,
        "[[stage]]\nmodule = \"input.fpcap\"\npath = \"x.pcap\"\n\
         [[stage]]\nmodule = \"filter.dnscli\"\nserver = \"127.0.0.1:53\"\nresponses = \"r.jsonl\"\n\
         [[stage]]\nmodule = \"output.null\"\n",
    )
    .unwrap();
    let out = dnsluice().arg("run").arg(&pipeline).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("chain-responses.toml:7: key `responses`"),
        "names the file, line and key: {stderr}"
    );
    assert!(stderr.contains("put an output stage after"), "{stderr}");
}

/// As fast as possible, `dnsluice replay` holds queries to send 16 at a time
/// (`send_batch`). Held queries still go out when there are fewer than 16
/// left at the end, and when the window (`--inflight`) fills before 16 are
/// held: every query is answered, none times out, over UDP and TCP.
#[test]
fn held_queries_go_out_at_the_end_and_when_the_window_fills() {
    let servers = [("udp", udp_server()), ("tcp", tcp_server())];
    for (transport, server) in &servers {
        for (count, inflight) in [(5, "100"), (40, "4")] {
            let capture = capture_of(
                &names(&[("ok", count)]),
                &format!("held-{transport}-{count}.pcap"),
            );
            let started = Instant::now();
            let (stats, _) = replay(
                &capture,
                &[
                    "--server",
                    server,
                    "--transport",
                    transport,
                    "--inflight",
                    inflight,
                    "--timeout",
                    "3000ms",
                ],
            );
            let what = format!("{transport}, {count} queries, inflight {inflight}");
            assert_eq!(n(&stats, "sent"), count as u64, "{what}: {stats}");
            assert_eq!(n(&stats, "answered"), count as u64, "{what}: {stats}");
            assert_eq!(n(&stats, "timeouts"), 0, "{what}: {stats}");
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "{what}: held queries waited for a timeout ({:?})",
                started.elapsed()
            );
        }
        // Held only as fast as possible: a paced query goes when it comes.
        let capture = capture_of(&names(&[("ok", 1)]), "held-pipeline.pcap");
        let print = |extra: &[&str]| {
            let mut args = vec!["replay", capture.to_str().unwrap(), "--server", server];
            args.extend_from_slice(&["--transport", transport, "--print-pipeline"]);
            args.extend_from_slice(extra);
            String::from_utf8(dnsluice().args(&args).output().unwrap().stdout).unwrap()
        };
        assert!(print(&[]).contains("send_batch = 16"), "{transport}");
        assert!(
            !print(&["--rate", "100"]).contains("send_batch"),
            "{transport}"
        );
    }
}

/// A paced replay stopped by SIGTERM while it waits for its next query
/// (`--rate 0.1`: one every 10 s) ends at once with status 143, not when
/// that query is due.
#[test]
fn a_paced_replay_stopped_while_it_waits_ends_at_once() {
    let capture = temp_path("paced.pcap");
    write_capture(&capture, &zone_queries(5, 1));
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let server = silent.local_addr().unwrap().to_string();
    let started = Instant::now();
    let (status, stderr) = testkit::stopped_by_sigterm(
        dnsluice()
            .arg("replay")
            .arg(&capture)
            .args(["--server", &server, "--rate", "0.1", "-q"]),
        Duration::from_millis(1500),
    );
    let took = started.elapsed();
    assert_eq!(status.code(), Some(143), "{stderr}");
    assert!(took < Duration::from_secs(5), "{took:?}: {stderr}");
}

/// `replay -` fed by a writer that stays and says nothing more: SIGTERM
/// ends it at once (status 143), with every query that came counted. The
/// reading of standard input waited on in the kernel, restarted after the
/// signal, until more bytes or the writer's end came.
#[test]
fn a_replay_from_a_quiet_pipe_stops_on_sigterm() {
    let capture = capture_of(&names(&[("ok", 7)]), "quiet-pipe.pcap");
    let bytes = std::fs::read(&capture).unwrap();
    let server = udp_server();
    let stats = temp_path("quiet-pipe-stats.json");
    let mut child = dnsluice()
        .args(["replay", "-", "--server", &server, "-q", "--stats-json"])
        .arg(&stats)
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&bytes).unwrap();
    stdin.flush().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let (status, took) = testkit::sigterm_and_wait(&mut child);
    drop(stdin);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(143), "{stderr}");
    assert!(
        took < Duration::from_secs(2),
        "stopped {took:?} after the signal"
    );
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(n(&stats, "sent"), 7, "{stats}");
    assert_eq!(n(&stats, "answered"), 7, "{stats}");
}

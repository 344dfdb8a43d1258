//! Fire-and-forget replay (`--no-responses`, output.udpcli) into a UDP sink on
//! loopback, and pacing (`--rate`, `--keep-timing`, `--speed`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use testkit::replay::*;
use testkit::{dnsluice, temp_path};

/// What a sink saw: datagrams, distinct source ports, the query names.
type SinkCounts = (usize, usize, Vec<String>);

/// A UDP sink counting datagrams (and the distinct source ports) until `stop`,
/// and keeping the query name of each.
fn sink() -> (String, Arc<AtomicBool>, std::thread::JoinHandle<SinkCounts>) {
    let socket = testkit::sink_socket();
    socket
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let addr = socket.local_addr().unwrap().to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let stopping = stop.clone();
    let counter = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let mut count = 0;
        let mut ports = std::collections::BTreeSet::new();
        let mut names = Vec::new();
        loop {
            match socket.recv_from(&mut buf) {
                Ok((len, from)) => {
                    assert!(len >= 12 && buf[2] & 0x80 == 0, "a query");
                    count += 1;
                    ports.insert(from.port());
                    names.push(qname(&buf[..len]));
                }
                Err(_) if stopping.load(Ordering::Relaxed) => return (count, ports.len(), names),
                Err(_) => {}
            }
        }
    });
    (addr, stop, counter)
}

#[test]
fn every_query_reaches_the_sink_from_each_client() {
    let capture = temp_path("sink.pcap");
    // Paced at 20k/s so that the sink's socket buffer never overflows.
    write_capture(&capture, &zone_queries(2000, 16));
    let (addr, stop, counter) = sink();
    let (stats, _) = replay(
        &capture,
        &[
            "--server",
            &addr,
            "--no-responses",
            "--clients",
            "5",
            "--rate",
            "20000",
            "-q",
        ],
    );
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    let (received, sources, _) = counter.join().unwrap();
    check_contract(&stats);
    assert_eq!(n(&stats, "sent"), 2000, "{stats}");
    assert_eq!(received, 2000);
    assert_eq!(sources, 5, "one socket per client");
    assert_eq!(n(&stats, "connections_opened"), 5);
}

/// The first question's name of a query datagram, dotted; the datagram must
/// end right after its question (and its EDNS record, if any): a datagram cut
/// at the wrong place, or two run together, fails here.
fn qname(msg: &[u8]) -> String {
    let mut labels = Vec::new();
    let mut at = 12;
    while msg[at] != 0 {
        let len = usize::from(msg[at]);
        labels.push(String::from_utf8(msg[at + 1..at + 1 + len].to_vec()).unwrap());
        at += 1 + len;
    }
    let end = at + 5;
    let arcount = u16::from_be_bytes([msg[10], msg[11]]);
    assert_eq!(
        msg.len(),
        end + usize::from(arcount) * 11,
        "one query per datagram"
    );
    labels.join(".")
}

#[test]
fn batched_sends_carry_every_query() {
    let capture = temp_path("batched.pcap");
    // Few enough that an unpaced burst fits the sink's socket buffer.
    write_capture(&capture, &zone_queries(100, 3));
    let (addr, stop, counter) = sink();
    let (stats, _) = replay(&capture, &["--server", &addr, "--no-responses", "-q"]);
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    let (received, _, mut names) = counter.join().unwrap();
    assert_eq!(n(&stats, "sent"), 100);
    assert_eq!(received, 100);
    // Runs of queries of one length go out as one segmented send (UDP GSO):
    // the sink still gets each query whole, as its own datagram.
    let mut expected: Vec<String> = zone_queries(100, 3).into_iter().map(|q| q.name).collect();
    names.sort();
    expected.sort();
    assert_eq!(names, expected);
    // 32 per sendmmsg call: 4 calls, not 100.
    let client = stats["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["module"] == "output.udpcli")
        .unwrap();
    assert_eq!(client["counters"]["syscalls"], 4, "{client}");
}

/// A UDP sink that notes when each query arrived, by its id, until `stop`.
type Arrivals = Vec<(usize, Instant)>;
fn timed_sink() -> (String, Arc<AtomicBool>, std::thread::JoinHandle<Arrivals>) {
    let socket = testkit::sink_socket();
    socket
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let addr = socket.local_addr().unwrap().to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let stopping = stop.clone();
    let sink = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let mut arrivals = Vec::new();
        loop {
            match socket.recv_from(&mut buf) {
                Ok((len, _)) if len >= 2 => arrivals.push((
                    usize::from(u16::from_be_bytes([buf[0], buf[1]])),
                    Instant::now(),
                )),
                Ok(_) => panic!("a datagram shorter than a DNS id"),
                Err(_) if stopping.load(Ordering::Relaxed) => return arrivals,
                Err(_) => {}
            }
        }
    });
    (addr, stop, sink)
}

/// Each object is released at its own time, not just the run as a whole:
/// 301 queries 2 ms apart in the capture, replayed keeping the capture's
/// pace, 3 times as fast, and at a fixed 1000/s. Object i is due at
/// `due(i)` from the start; with the start taken as the earliest
/// `arrival(i) - due(i)` (so a late first arrival cannot make the others
/// look early), an object's lag is how far it came after its due time. A
/// pacer that sleeps once and then bursts lags by half the run on median;
/// a working one by about nothing (the bound leaves room for a loaded
/// machine's scheduling hiccups, which delay a few objects, not half).
#[test]
fn pacing_releases_each_object_at_its_capture_offset() {
    const GAP_MS: u64 = 2;
    let queries: Vec<Q> = zone_queries(301, 4)
        .into_iter()
        .enumerate()
        .map(|(i, q)| Q {
            at_us: i as u64 * GAP_MS * 1000,
            ..q
        })
        .collect();
    let capture = temp_path("paced.pcap");
    write_capture(&capture, &queries);
    let due_keep = |i: usize| Duration::from_millis(i as u64 * GAP_MS);
    for (args, due) in [
        (
            vec!["--keep-timing"],
            Box::new(due_keep) as Box<dyn Fn(usize) -> Duration>,
        ),
        (vec!["--speed", "3"], Box::new(move |i| due_keep(i) / 3)),
        (
            vec!["--rate", "1000"],
            Box::new(|i| Duration::from_millis(i as u64)),
        ),
    ] {
        let (addr, stop, sink) = timed_sink();
        let mut all = vec!["--server", addr.as_str(), "--no-responses", "-q"];
        all.extend_from_slice(&args);
        let (stats, _) = replay(&capture, &all);
        std::thread::sleep(Duration::from_millis(100));
        stop.store(true, Ordering::Relaxed);
        let arrivals = sink.join().unwrap();
        // (write_capture gives query i the id i.)
        let start = arrivals.iter().map(|&(i, at)| at - due(i)).min().unwrap();
        let mut lags: Vec<Duration> = arrivals
            .iter()
            .map(|&(i, at)| at - due(i) - start)
            .collect();
        lags.sort();
        let median = lags[lags.len() / 2];
        assert!(
            median < Duration::from_millis(15),
            "{args:?}: median lag {median:?} (max {:?}): objects are not released at their own times",
            lags.last().unwrap()
        );
        assert_eq!(arrivals.len(), 301, "{args:?}");
        // Never faster than the pace: the last objects arrive no earlier
        // against their due times than the first ones. Medians of 21 on
        // each end, so one arrival the sink saw late (its thread not
        // scheduled at once on a loaded machine) cannot shorten the span.
        let offsets: Vec<Instant> = arrivals.iter().map(|&(i, at)| at - due(i)).collect();
        let median_of = |part: &[Instant]| {
            let mut part = part.to_vec();
            part.sort();
            part[part.len() / 2]
        };
        let (first, last) = (median_of(&offsets[..21]), median_of(&offsets[280..]));
        assert!(
            last + Duration::from_millis(2) >= first,
            "{args:?}: the last objects came {:?} ahead of the first ones' pace",
            first - last
        );
        check_contract(&stats);
    }
}

/// `dnsluice replay -` reads the capture from standard input (input.fpcap,
/// chosen for `-`), and `--input-module` takes any input module: each sends
/// every query of the capture.
#[test]
fn replay_reads_stdin_and_any_input_module() {
    use std::io::Write as _;
    use std::process::Stdio;
    let capture = temp_path("stdin.pcap");
    write_capture(&capture, &zone_queries(300, 3));
    for how in ["stdin", "input-module"] {
        let (addr, stop, counter) = sink();
        let stats_path = temp_path(&format!("stdin-{how}.json"));
        let mut command = dnsluice();
        command.arg("replay");
        if how == "stdin" {
            command.arg("-").stdin(Stdio::piped());
        } else {
            command
                .arg(&capture)
                .args(["--input-module", "input.fpcap"]);
        }
        let mut child = command
            .args(["--server", &addr, "--no-responses", "--rate", "20000", "-q"])
            .arg("--stats-json")
            .arg(&stats_path)
            .spawn()
            .unwrap();
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(&std::fs::read(&capture).unwrap()).unwrap();
        }
        assert!(child.wait().unwrap().success(), "{how}");
        std::thread::sleep(Duration::from_millis(200));
        stop.store(true, Ordering::Relaxed);
        let (received, _, _) = counter.join().unwrap();
        let stats: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&stats_path).unwrap()).unwrap();
        assert_eq!(n(&stats, "sent"), 300, "{how}: {stats}");
        assert_eq!(received, 300, "{how}");
        let input = &stats["stages"][0]["module"];
        assert_eq!(input, "input.fpcap", "{how}");
    }
}

/// `--rate` paces the queries, not every message of the capture: the
/// corpus's live_mini_en10mb.pcap holds 580 queries and 583 responses
/// (tshark's counts); at `--rate 400` the sink gets the 580 queries, the
/// pacing stage sees only them, and they take at least 579 ÷ 400 s. (The
/// responses were paced too, dropped later by the client: the queries
/// went at about half the rate.)
#[test]
fn the_rate_paces_queries_not_responses() {
    let capture = testkit::corpus::corpus_dir().join("live_mini_en10mb.pcap");
    let truth = testkit::corpus::truth("live_mini_en10mb.pcap");
    let queries = truth["counts"]["dns_queries"].as_u64().unwrap();
    // A sink that only counts (the corpus's queries are of every shape).
    let socket = testkit::sink_socket();
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let addr = socket.local_addr().unwrap().to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let stopping = stop.clone();
    let counter = std::thread::spawn(move || {
        let (mut buf, mut count) = ([0u8; 65536], 0u64);
        loop {
            match socket.recv_from(&mut buf) {
                Ok(_) => count += 1,
                Err(_) if stopping.load(Ordering::Relaxed) => return count,
                Err(_) => {}
            }
        }
    });
    let started = Instant::now();
    let (stats, _) = replay(
        &capture,
        &["--server", &addr, "--no-responses", "--rate", "400", "-q"],
    );
    let took = started.elapsed();
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    let received = counter.join().unwrap();
    assert_eq!(received, queries, "{stats}");
    assert_eq!(n(&stats, "sent"), queries, "{stats}");
    let timing = stats["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["module"] == "filter.timing")
        .unwrap();
    assert_eq!(timing["in"], queries, "{timing}");
    let least = Duration::from_secs_f64((queries - 1) as f64 / 400.0 * 0.95);
    assert!(took >= least, "{took:?}");
}

/// More queries in flight than a socket has ids (65,535): 70,000 queries
/// from one source, `--inflight 70000`, against a server that answers
/// nothing. The queries past the ids wait for an id to come back (a
/// timeout), and every query ends as a timeout; none fails as a bad query
/// (4,465 did: "65535 queries already in flight").
#[test]
fn more_in_flight_than_ids_wait_for_an_id() {
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let server = silent.local_addr().unwrap().to_string();
    let capture = temp_path("ids.pcap");
    let count = 70_000;
    write_capture(&capture, &zone_queries(count, 1));
    let (stats, _) = replay(
        &capture,
        &[
            "--server",
            &server,
            "--inflight",
            "70000",
            "--clients",
            "1",
            "--timeout",
            "1s",
            "-q",
        ],
    );
    drop(silent);
    assert_eq!(n(&stats, "sent"), count as u64, "{stats}");
    assert_eq!(n(&stats, "timeouts"), count as u64, "{stats}");
    assert_eq!(n(&stats, "errors"), 0, "{stats}");
}

//! `dnsluice lookup` over an emulated wide-area network: each test runs its
//! own network emulator (tools/netem, `testkit::Netem`) in front of knot
//! (tests/servers/up.sh), with loss, latency and per-client rate limits, on
//! loopback. Expected answers are the zone generator's
//! (`testkit::lookup_address`); what the emulator lost or limited is its own
//! count, and the kernel's count of drops on its sockets must be 0 (the
//! emulator loses only what it was told to).

use serde_json::Value;
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use testkit::Netem;
use testkit::{dnsluice, run_ok, temp_path};

/// Held by each test for its whole run: these tests time their lookups and
/// read rates off them, and run side by side (the test harness's threads,
/// on 2 cores) one's 100,000 names and its emulator slowed another's: a
/// 2 ms path answered in 60 ms at the 99th percentile.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A file of the names `n{first}` .. `n{first + count - 1}` of the test zone.
fn names_file(count: u32) -> std::path::PathBuf {
    let path = temp_path("names.txt");
    let names: String = (0..count).map(|i| format!("n{i}.lookup.test\n")).collect();
    std::fs::write(&path, names).unwrap();
    path
}

/// Runs `dnsluice lookup A --name-servers NS --input NAMES --output OUT
/// ARGS`, which must succeed; its stats.
fn lookup(ns: SocketAddr, names: &Path, out: &Path, args: &[&str]) -> Value {
    let stats = temp_path("stats.json");
    run_ok(
        dnsluice()
            .args(["lookup", "A", "-q", "--name-servers", &ns.to_string()])
            .arg("--input")
            .arg(names)
            .arg("--output")
            .arg(out)
            .arg("--stats-json")
            .arg(&stats)
            .args(args),
    );
    serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap()
}

/// The records in `out`, by name; a name with two records fails the test.
fn records(out: &Path) -> HashMap<String, Value> {
    let mut by_name = HashMap::new();
    for line in std::fs::read_to_string(out).unwrap().lines() {
        let record: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let name = record["name"].as_str().unwrap().to_string();
        assert!(
            by_name.insert(name.clone(), record).is_none(),
            "{name} twice"
        );
    }
    by_name
}

/// Every name of `n0` .. `n{count-1}` has its one record, NOERROR with the
/// zone generator's address.
fn assert_every_name_answered(records: &HashMap<String, Value>, count: u32) {
    assert_eq!(records.len(), count as usize);
    for i in 0..count {
        let name = format!("n{i}.lookup.test");
        let r = records
            .get(&name)
            .unwrap_or_else(|| panic!("no record for {name}"));
        assert_eq!(r["status"], "NOERROR", "{r}");
        assert_eq!(
            r["data"]["answers"][0]["answer"],
            testkit::lookup_address(i).to_string(),
            "{r}"
        );
    }
}

/// 100,000 names behind 1 % loss each way (and 5 ms each way), with the
/// default flags: exactly one record per name, each the zone generator's
/// answer; every loss was made up for by a retry.
#[test]
fn one_percent_loss_each_way_loses_no_name() {
    let _turn = one_at_a_time();
    let servers = testkit::servers();
    let count = servers.zone_names;
    assert_eq!(count, 100_000);
    let netem = Netem::start(
        "127.0.0.20",
        servers.knot,
        &[
            "--udp-only",
            "--delay",
            "5ms",
            "--loss",
            "1%",
            "--seed",
            "7",
        ],
    );
    let (names, out) = (names_file(count), temp_path("out.jsonl"));
    let stats = lookup(netem.addr, &names, &out, &[]);
    let net = netem.stop();
    assert_every_name_answered(&records(&out), count);
    let lost = Netem::link(&net, "up_lost") + Netem::link(&net, "down_lost");
    // 1 % of the queries and of the answers: about 2,000.
    assert!(lost > 1_500, "{net}");
    assert_eq!(net["kernel_drops"], 0, "{net}");
    // Each loss cost its try a timeout, and its name a retry.
    assert!(stats["timeouts"].as_u64().unwrap() >= lost, "{stats} {net}");
    assert!(stats["retries"].as_u64().unwrap() >= lost, "{stats} {net}");
    assert_eq!(stats["statuses"]["NOERROR"], count);
}

/// Against a per-client limit of 2,000 queries/s that drops the queries
/// over it, or answers them REFUSED: no name is lost and the run takes at
/// most 1.2 times names ÷ limit (the adaptive rate finds the limit).
#[test]
fn a_rate_limit_costs_no_name_and_little_time() {
    let _turn = one_at_a_time();
    let servers = testkit::servers();
    let count = 10_000;
    let names = names_file(count);
    for (over, counter) in [("drop", "limited_dropped"), ("refused", "limited_refused")] {
        let netem = Netem::start(
            "127.0.0.21",
            servers.knot,
            &[
                "--udp-only",
                "--delay",
                "2ms",
                "--rate",
                "2000",
                "--over",
                over,
            ],
        );
        let out = temp_path("out.jsonl");
        let started = Instant::now();
        let stats = lookup(netem.addr, &names, &out, &[]);
        let took = started.elapsed();
        let net = netem.stop();
        assert_every_name_answered(&records(&out), count);
        let ideal = Duration::from_secs_f64(f64::from(count) / 2000.0);
        assert!(
            took <= ideal.mul_f64(1.2),
            "{over}: {took:?} for {count} names at 2,000/s: {stats} {net}"
        );
        // The limit was met (the first queries found it) and its excess retried.
        assert!(Netem::link(&net, counter) > 0, "{over}: {net}");
        assert_eq!(net["kernel_drops"], 0, "{net}");
        assert_eq!(stats["statuses"]["NOERROR"], count);
    }
}

/// A rate cap of our own (`--rate 400`) with the names' budget shorter
/// than the queue it builds (2,000 names in the in-flight table take 5 s to
/// send; `--name-timeout 2s`): each name's budget starts at its first
/// query, so every name is answered (the budget once started as the name
/// entered the table, and names sent after 2 s had none left: TIMEOUT
/// after one try), and the cap holds.
#[test]
fn a_slow_rate_cap_times_no_name_out_while_it_waits_its_turn() {
    let _turn = one_at_a_time();
    let servers = testkit::servers();
    let count = 2_000;
    let (names, out) = (names_file(count), temp_path("out.jsonl"));
    let started = Instant::now();
    let stats = lookup(
        servers.knot,
        &names,
        &out,
        &["--rate", "400", "--name-timeout", "2s"],
    );
    let took = started.elapsed();
    assert_every_name_answered(&records(&out), count);
    assert_eq!(stats["statuses"]["NOERROR"], count, "{stats}");
    let ideal = Duration::from_secs_f64(f64::from(count) / 400.0);
    assert!(
        took >= ideal.mul_f64(0.9),
        "{took:?} for {count} names under --rate 400: {stats}"
    );
}

/// A limit that answers TC=1 over it (RRL's slip): the names it slips are
/// asked again over TCP, which it does not limit; none is lost.
#[test]
fn a_limit_that_slips_sends_names_to_tcp() {
    let _turn = one_at_a_time();
    let servers = testkit::servers();
    let count = 3_000;
    let netem = Netem::start(
        "127.0.0.22",
        servers.knot,
        &["--delay", "2ms", "--rate", "1000", "--over", "tc"],
    );
    let (names, out) = (names_file(count), temp_path("out.jsonl"));
    let stats = lookup(netem.addr, &names, &out, &[]);
    let net = netem.stop();
    let records = records(&out);
    assert_every_name_answered(&records, count);
    let slipped = Netem::link(&net, "limited_truncated");
    assert!(slipped > 0, "{net}");
    let over_tcp = records
        .values()
        .filter(|r| r["data"]["protocol"] == "tcp")
        .count() as u64;
    assert!(
        over_tcp > 0 && over_tcp <= slipped,
        "{over_tcp} over TCP, {net}"
    );
    assert_eq!(
        stats["tcp_fallbacks"].as_u64().unwrap(),
        over_tcp,
        "{stats}"
    );
    assert!(Netem::link(&net, "tcp_connections") >= 1, "{net}");
}

/// A scan killed (SIGKILL) at a random moment and resumed with `--resume`
/// ends with each name's record exactly once, and none cut short (the half
/// record a kill can leave at the end is cut off first).
#[test]
fn resume_after_a_kill_gives_each_name_once() {
    let _turn = one_at_a_time();
    let servers = testkit::servers();
    let count = 20_000;
    // 5 ms each way and a rate limit: the run takes a few seconds.
    let netem = Netem::start(
        "127.0.0.23",
        servers.knot,
        &["--udp-only", "--delay", "5ms", "--rate", "8000"],
    );
    let names = names_file(count);
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    for round in 0..3 {
        let out = temp_path("out.jsonl");
        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let kill_after = Duration::from_millis(200 + u64::from(seed % 1500));
        let mut child = dnsluice()
            .args([
                "lookup",
                "A",
                "-q",
                "--name-servers",
                &netem.addr.to_string(),
            ])
            .arg("--input")
            .arg(&names)
            .arg("--output")
            .arg(&out)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(kill_after);
        child.kill().unwrap();
        let status = child.wait().unwrap();
        assert!(
            !status.success(),
            "round {round}: the run ended before the kill"
        );
        let mut before = std::fs::read_to_string(&out).unwrap_or_default();
        let whole = before.lines().count();
        assert!(
            whole < count as usize,
            "round {round}: nothing left to resume"
        );
        // A kill can leave a record half written (its line not ended): make
        // sure of one, so the cut is tested whatever the kill left.
        if before.ends_with('\n') || before.is_empty() {
            before.push_str("{\"name\":\"n1.lookup.test\",\"class\":\"IN\",\"sta");
            std::fs::write(&out, &before).unwrap();
        }
        lookup(netem.addr, &names, &out, &["--resume"]);
        let after = std::fs::read_to_string(&out).unwrap();
        assert!(after.ends_with('\n'));
        // What was whole before the kill is still there, as it was.
        let kept = before.rfind('\n').map_or(0, |i| i + 1);
        assert!(after.starts_with(&before[..kept]), "round {round}");
        assert_every_name_answered(&records(&out), count);
        // Resuming a finished scan adds nothing.
        lookup(netem.addr, &names, &out, &["--resume"]);
        assert_eq!(std::fs::read_to_string(&out).unwrap(), after);
    }
}

/// A server on loopback that answers every A query with 192.0.2.1 and
/// tells the test each query's source address.
fn source_recorder() -> (SocketAddr, std::sync::mpsc::Receiver<SocketAddr>) {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = socket.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 1500];
        while let Ok((n, from)) = socket.recv_from(&mut buf) {
            let Some(query) = testkit::wire::parse_query(&buf[..n]) else {
                continue;
            };
            let answer = [Ipv4Addr::new(192, 0, 2, 1)];
            let response = testkit::wire::response(&query, query.id, 0, false, &answer);
            let _ = tx.send(from);
            let _ = socket.send_to(&response, from);
        }
    });
    (addr, rx)
}

/// `--local-addr`: the source address the server sees; several are used in
/// turn; one that is not this machine's is an error that names it.
#[test]
fn local_addresses_are_the_sources_the_server_sees() {
    let _turn = one_at_a_time();
    let (server, seen) = source_recorder();
    let names = temp_path("names.txt");
    let list: String = (0..20).map(|i| format!("h{i}.example\n")).collect();
    std::fs::write(&names, list).unwrap();
    for (given, expected) in [
        ("127.0.0.2", vec!["127.0.0.2"]),
        ("127.0.0.2,127.0.0.3", vec!["127.0.0.2", "127.0.0.3"]),
    ] {
        let out = temp_path("out.jsonl");
        let stats = lookup(server, &names, &out, &["--local-addr", given]);
        assert_eq!(stats["statuses"]["NOERROR"], 20, "{stats}");
        let mut sources: Vec<String> = seen.try_iter().map(|a| a.ip().to_string()).collect();
        assert_eq!(sources.len(), 20);
        sources.sort();
        sources.dedup();
        assert_eq!(sources, expected, "--local-addr {given}");
    }
    let run = dnsluice()
        .args(["lookup", "A", "-q", "--name-servers", &server.to_string()])
        .args(["--local-addr", "192.0.2.7", "--input"])
        .arg(&names)
        .output()
        .unwrap();
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("--local-addr 192.0.2.7: cannot bind"),
        "{stderr}"
    );
}

/// The time `count` queries take at `rate` a second, one at a time: the
/// least a run under that cap may take, less 5 % for the clocks.
fn least_time(queries: u64, rate: f64) -> Duration {
    Duration::from_secs_f64(queries.saturating_sub(1) as f64 / rate * 0.95)
}

/// `--rate` holds for the lookups the workers run (the `fifo` scheduler
/// over UDP, and TCP): behind a limiter of 120 queries/s a client (burst
/// 10, for the emulator's own stalls) that answers REFUSED above it, `--rate 100` is never refused, and
/// the names take at least names ÷ 100 seconds. (The cap was read only by
/// the UDP engine: the workers sent at full speed, and the limiter refused
/// most of the names.)
#[test]
fn the_rate_cap_holds_off_the_udp_engine() {
    let _turn = one_at_a_time();
    let servers = testkit::servers();
    let count = 200;
    let names = names_file(count);
    let netem = Netem::start(
        "127.0.0.26",
        servers.knot,
        &[
            "--udp-only",
            "--rate",
            "120",
            "--burst",
            "10",
            "--over",
            "refused",
        ],
    );
    let out = temp_path("out.jsonl");
    let started = Instant::now();
    let stats = lookup(
        netem.addr,
        &names,
        &out,
        &["--scheduler", "fifo", "--rate", "100"],
    );
    let took = started.elapsed();
    let net = netem.stop();
    assert_every_name_answered(&records(&out), count);
    assert_eq!(Netem::link(&net, "limited_refused"), 0, "{stats} {net}");
    let queries = stats["queries"].as_u64().unwrap();
    assert!(took >= least_time(queries, 100.0), "{took:?} {stats}");
    // Over TCP straight to knot (no limiter): the time says the cap held.
    let out = temp_path("out.jsonl");
    let started = Instant::now();
    let stats = lookup(
        servers.knot,
        &names,
        &out,
        &["--transport", "tcp", "--rate", "100"],
    );
    let took = started.elapsed();
    assert_every_name_answered(&records(&out), count);
    let queries = stats["queries"].as_u64().unwrap();
    assert!(queries >= u64::from(count), "{stats}");
    assert!(took >= least_time(queries, 100.0), "{took:?} {stats}");
}

/// The TCP query after TC=1 is under `--rate` too: every UDP answer comes
/// truncated (a limiter of 1 query/s that slips), so each name asks twice,
/// and 100 names at `--rate 100` take about 2 s (the TCP queries went
/// uncapped: about 1 s).
#[test]
fn the_rate_cap_counts_the_tcp_query_after_truncation() {
    let _turn = one_at_a_time();
    let servers = testkit::servers();
    let count = 100;
    let names = names_file(count);
    let netem = Netem::start(
        "127.0.0.27",
        servers.knot,
        &["--rate", "1", "--burst", "1", "--over", "tc"],
    );
    let out = temp_path("out.jsonl");
    let started = Instant::now();
    let stats = lookup(netem.addr, &names, &out, &["--rate", "100"]);
    let took = started.elapsed();
    let addr = netem.addr.to_string();
    let net = netem.stop();
    let records = records(&out);
    assert_every_name_answered(&records, count);
    let over_tcp = records
        .values()
        .filter(|r| r["data"]["protocol"] == "tcp")
        .count() as u64;
    assert!(
        over_tcp >= u64::from(count) - 2,
        "{over_tcp} over TCP, {net}"
    );
    // The nameserver's queries count both, as the run's do.
    let ns = &stats["per_nameserver"][addr.as_str()];
    assert_eq!(ns["queries"], stats["queries"], "{stats}");
    let udp_queries = Netem::link(&net, "up_received");
    assert!(
        took >= least_time(udp_queries + over_tcp, 100.0),
        "{took:?} for {udp_queries} UDP and {over_tcp} TCP queries: {stats} {net}"
    );
}

/// A retry that waits for `--rate` past its name's budget is not sent:
/// against a server that answers nothing, `--rate 1` lets the retry of a
/// try lost after 900 ms (`--timeout`) go only at 1 s, after the budget of
/// 950 ms (`--name-timeout`); the name ends TIMEOUT after its one query
/// (the retry went out anyway, waited for 1 ms, and was counted lost).
#[test]
fn a_retry_past_the_budget_is_not_sent() {
    let _turn = one_at_a_time();
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let server = socket.local_addr().unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let names = temp_path("names.txt");
    std::fs::write(&names, "silent.example\n").unwrap();
    let out = temp_path("out.jsonl");
    let stats = lookup(
        server,
        &names,
        &out,
        &[
            "--rate",
            "1",
            "--timeout",
            "900ms",
            "--name-timeout",
            "950ms",
        ],
    );
    let mut buf = [0u8; 1500];
    let mut received = 0;
    while socket.recv_from(&mut buf).is_ok() {
        received += 1;
    }
    let records = records(&out);
    assert_eq!(records["silent.example"]["status"], "TIMEOUT", "{stats}");
    assert_eq!(received, 1, "{stats}");
    assert_eq!(stats["queries"], 1, "{stats}");
}

//! Work shared through NATS JetStream (`dnsluice queue`, `input.nats`,
//! `output.nats`), against the brokers `tests/servers/up.sh` runs (and, for
//! the restart test, one of the test's own): workers killed mid-run, the
//! broker restarted, poison and malformed items, a broker that is down, a
//! TLS broker with a password, and `--shard` without a broker. Answers are
//! checked against the zone generator's rule (`testkit::lookup_address`),
//! capture summaries against one run over all the files concatenated by
//! mergecap.

use serde_json::Value;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn dnsluice() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dnsluice"))
}

fn tempdir(name: &str) -> PathBuf {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("queue-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A stream name no other test (or earlier run) uses.
fn stream(name: &str) -> String {
    format!("{name}_{}", std::process::id())
}

/// A work stream and a results stream of the shared broker, named after `tag`.
fn work_and_results(tag: &str) -> (String, String) {
    let nats = testkit::servers().nats;
    (
        url(nats, &stream(&format!("{tag}_w"))),
        url(nats, &stream(&format!("{tag}_r"))),
    )
}

fn url(addr: SocketAddr, stream: &str) -> String {
    format!("nats://{addr}/{stream}")
}

fn ok(output: Output, what: &str) -> Output {
    assert!(
        output.status.success(),
        "{what} failed: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// `queue status --json`.
fn status(url: &str, extra: &[&str]) -> Value {
    let out = ok(
        dnsluice()
            .args(["queue", "status", url, "--json"])
            .args(extra)
            .output()
            .unwrap(),
        "queue status",
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn consumer(status: &Value, name: &str) -> Value {
    status["consumers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .cloned()
        .unwrap_or(Value::Null)
}

/// Writes `n0.lookup.test` .. `n{count-1}.lookup.test` to a file.
fn names_file(dir: &Path, count: u32) -> PathBuf {
    let path = dir.join("names.txt");
    let text: String = (0..count).map(|i| format!("n{i}.lookup.test\n")).collect();
    std::fs::write(&path, text).unwrap();
    path
}

fn put(url: &str, file: &Path, extra: &[&str]) -> String {
    let out = ok(
        dnsluice()
            .args(["queue", "put", url])
            .arg(file)
            .args(extra)
            .output()
            .unwrap(),
        "queue put",
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A lookup worker asking knot, its stderr in `dir/NAME.err`, its counters in `dir/NAME.json`.
fn lookup_worker(dir: &Path, name: &str, work: &str, results: &str, extra: &[&str]) -> Child {
    lookup_worker_asking(
        &testkit::servers().knot.to_string(),
        dir,
        name,
        work,
        results,
        extra,
    )
}

fn lookup_worker_asking(
    nameserver: &str,
    dir: &Path,
    name: &str,
    work: &str,
    results: &str,
    extra: &[&str],
) -> Child {
    dnsluice()
        .args([
            "lookup",
            "A",
            "--name-servers",
            nameserver,
            "--input",
            work,
            "--output",
            results,
        ])
        .args(extra)
        .arg("--stats-json")
        .arg(dir.join(format!("{name}.json")))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join(format!("{name}.err"))).unwrap())
        .spawn()
        .unwrap()
}

/// A lookup worker named `worker` asking the slow nameserver (a 40 ms
/// round trip: about 2,500 names/s with 100 workers), so that what a test
/// does mid-run lands mid-run.
fn slow_worker(dir: &Path, work: &str, results: &str, extra: &[&str]) -> Child {
    let slow = testkit::servers().slow.to_string();
    lookup_worker_asking(&slow, dir, "worker", work, results, extra)
}

/// Waits for a worker to exit 0; one still running after two minutes
/// (a worker that never goes idle) is killed and the test fails.
fn wait_ok(child: &mut Child, dir: &Path, name: &str) {
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let err = std::fs::read_to_string(dir.join(format!("{name}.err"))).unwrap_or_default();
    match status {
        Some(status) => assert!(status.success(), "{name} ended with {status}:\n{err}"),
        None => panic!("{name} was still running after 120 s (killed):\n{err}"),
    }
}

/// Waits (at most `limit`) until `done` holds for the status of `url`.
fn wait_for(url: &str, extra: &[&str], limit: Duration, done: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let s = status(url, extra);
        if done(&s) {
            return s;
        }
        assert!(start.elapsed() < limit, "gave up waiting: {s}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Stops `child` (SIGSTOP) so it holds what it holds, then kills it (SIGKILL).
fn freeze_and_kill(child: &mut Child) {
    let pid = child.id() as libc::pid_t;
    // SAFETY: signals to a child we spawned and have not reaped.
    unsafe {
        libc::kill(pid, libc::SIGSTOP);
    }
    std::thread::sleep(Duration::from_millis(100));
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    let status = child.wait().unwrap();
    assert!(!status.success());
}

/// `queue get --expect N`: the records.
fn get(url: &str, expect: usize, extra: &[&str]) -> Vec<Value> {
    let out = ok(
        dnsluice()
            .args(["queue", "get", url, "--expect", &expect.to_string()])
            .args(extra)
            .output()
            .unwrap(),
        "queue get",
    );
    json_lines(&out.stdout)
}

/// One JSON value per line.
fn json_lines(text: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(text)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Exactly one record per name `n0` .. `n{count-1}`, each answered with
/// the address the zone generator gave it.
fn assert_one_right_answer_each(records: &[Value], count: u32) {
    let mut by_name: HashMap<String, usize> = HashMap::new();
    for r in records {
        let name = r["name"].as_str().unwrap().to_string();
        *by_name.entry(name.clone()).or_default() += 1;
        let index: u32 = name
            .strip_prefix('n')
            .and_then(|s| s.strip_suffix(".lookup.test"))
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("unexpected name {name}"));
        assert_eq!(r["status"], "NOERROR", "{r}");
        let answers: Vec<&str> = r["data"]["answers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["answer"].as_str().unwrap())
            .collect();
        assert_eq!(
            answers,
            vec![testkit::lookup_address(index).to_string()],
            "{name}"
        );
    }
    assert_eq!(by_name.len(), count as usize, "names answered");
    let doubled: Vec<_> = by_name.iter().filter(|(_, n)| **n > 1).collect();
    assert!(doubled.is_empty(), "records twice: {doubled:?}");
    assert_eq!(records.len(), count as usize);
}

fn counters(stats_json: &Path, module: &str) -> Value {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(stats_json).unwrap()).unwrap();
    v["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["module"] == module)
        .cloned()
        .unwrap()
}

#[test]
fn two_workers_one_killed_mid_run_lose_and_double_nothing() {
    const NAMES: u32 = 20_000;
    let dir = tempdir("kill");
    let (work, results) = work_and_results("kill");
    let names = names_file(&dir, NAMES);
    // Items of 100 lines: 200 of them.
    let first_put = put(&work, &names, &["--batch", "100"]);
    assert!(
        first_put.contains("put 20000 lines in 200 items"),
        "{first_put}"
    );
    // A second put (as after a crash) adds nothing: ids are line and text.
    let again = put(&work, &names, &["--batch", "100"]);
    assert!(
        again.contains("put 0 items") && again.contains("200 more"),
        "{again}"
    );
    let put_status = status(&work, &[]);
    assert_eq!(put_status["messages"], NAMES / 100);
    assert_eq!(put_status["lines_per_item"], 100);

    // Each worker holds at most 2,000 lines (20 items), so both get work.
    let flags = ["--ack-wait", "2s", "--idle-exit", "2", "--max-held", "2000"];
    let mut first = lookup_worker(&dir, "first", &work, &results, &flags);
    let mut second = lookup_worker(&dir, "second", &work, &results, &flags);
    // Kill the first worker while it holds items, once some results are stored.
    wait_for(&work, &[], Duration::from_secs(60), |st| {
        st["acked"].as_u64().unwrap_or(0) >= 20
    });
    freeze_and_kill(&mut first);
    wait_ok(&mut second, &dir, "second");

    let left = status(&work, &[]);
    assert_eq!(left["messages"], 0, "every item acknowledged: {left}");
    assert_eq!(consumer(&left, "workers")["in_flight"], 0, "{left}");
    // The survivor got the dead worker's items again after ack_wait.
    let taken = counters(&dir.join("second.json"), "input.nats");
    assert!(
        taken["counters"]["redelivered"].as_u64().unwrap_or(0) > 0,
        "nothing was redelivered (the kill held no items?): {taken}"
    );
    // The broker stored each item's results once (its de-duplication by
    // item id), as one message of 100 records.
    assert_eq!(status(&results, &[])["messages"], NAMES / 100);
    let records = get(&results, NAMES as usize, &[]);
    assert_one_right_answer_each(&records, NAMES);
}

/// A nats-server of this test's own, on a port of its own, so it can be restarted.
struct OwnBroker {
    child: Child,
    port: u16,
    dir: PathBuf,
    extra: Vec<String>,
}

impl OwnBroker {
    /// A broker on a free port (another if someone takes the port first).
    fn start(dir: &Path) -> OwnBroker {
        Self::start_with(dir, &[])
    }

    /// A broker with `extra` arguments too (a `-c` configuration file).
    fn start_with(dir: &Path, extra: &[String]) -> OwnBroker {
        for _ in 0..5 {
            let port = free_port();
            let mut child = Self::spawn(dir, port, extra);
            if wait_listening(port, &mut child) {
                return OwnBroker {
                    child,
                    port,
                    dir: dir.to_path_buf(),
                    extra: extra.to_vec(),
                };
            }
        }
        panic!("nats-server did not start on any of five ports");
    }

    fn spawn(dir: &Path, port: u16, extra: &[String]) -> Child {
        Command::new("nats-server")
            .args(extra)
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(dir.join("store"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join(format!("nats-{port}.log"))).unwrap())
            .spawn()
            .expect("nats-server (apt-get install nats-server)")
    }

    /// Stops the broker (SIGTERM), waits `down`, and starts it again on the same store.
    fn restart(&mut self, down: Duration) {
        // SAFETY: a signal to our own child.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        self.child.wait().unwrap();
        std::thread::sleep(down);
        self.child = Self::spawn(&self.dir, self.port, &self.extra);
        assert!(
            wait_listening(self.port, &mut self.child),
            "nats-server did not start again on port {}",
            self.port
        );
    }
}

impl Drop for OwnBroker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits (at most 10 s) until `server` listens on `port`; false if it
/// exited first (the port was taken between [`free_port`] and its bind).
fn wait_listening(port: u16, server: &mut Child) -> bool {
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if server.try_wait().unwrap().is_some() {
            return false;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "nats-server did not start on port {port}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// A port nobody listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn broker_restarted_mid_run_loses_and_doubles_nothing() {
    const NAMES: u32 = 20_000;
    let dir = tempdir("restart");
    let mut broker = OwnBroker::start(&dir);
    let addr: SocketAddr = format!("127.0.0.1:{}", broker.port).parse().unwrap();
    let (work, results) = (url(addr, "W"), url(addr, "R"));
    // One line to an item: the broker's restart lands among many items.
    put(&work, &names_file(&dir, NAMES), &["--batch", "1"]);
    // Through the slow nameserver, so the restart lands mid-run.
    let mut worker = slow_worker(
        &dir,
        &work,
        &results,
        &["--ack-wait", "3s", "--idle-exit", "2"],
    );
    wait_for(&work, &[], Duration::from_secs(60), |st| {
        st["acked"].as_u64().unwrap_or(0) >= 2_000
    });
    broker.restart(Duration::from_millis(1500));
    wait_ok(&mut worker, &dir, "worker");
    let left = status(&work, &[]);
    assert_eq!(left["messages"], 0, "every item acknowledged: {left}");
    let sent = counters(&dir.join("worker.json"), "output.nats");
    assert!(
        sent["counters"]["republished"].as_u64().unwrap_or(0) > 0
            || sent["counters"]["duplicates_dropped"].as_u64().unwrap_or(0) > 0
            || counters(&dir.join("worker.json"), "input.nats")["counters"]["redelivered"]
                .as_u64()
                .unwrap_or(0)
                > 0,
        "the restart went unnoticed (it did not land mid-run?): {sent}"
    );
    assert_eq!(status(&results, &[])["messages"], NAMES);
    assert_one_right_answer_each(&get(&results, NAMES as usize, &[]), NAMES);
}

/// A worker that cannot store its results gives up after
/// `--nats-reconnect-for`, saying so, and leaves its items unacknowledged
/// for other workers: first the results stream deleted under it (the broker
/// up), then the broker gone for good.
#[test]
fn a_worker_gives_up_when_results_cannot_be_stored_and_leaves_its_items() {
    const NAMES: u32 = 5_000;
    let dir = tempdir("giveup");
    let broker = OwnBroker::start(&dir);
    let addr: SocketAddr = format!("127.0.0.1:{}", broker.port).parse().unwrap();
    let (work, results) = (url(addr, "W"), url(addr, "R"));
    put(&work, &names_file(&dir, NAMES), &["--batch", "100"]);
    let flags = ["--nats-reconnect-for", "2", "--ack-wait", "3s"];
    let mut worker = slow_worker(&dir, &work, &results, &flags);
    wait_for(&work, &[], Duration::from_secs(60), |st| {
        st["acked"].as_u64().unwrap_or(0) >= 2
    });
    dnsluice_modules::nats::runtime::block_on(async {
        use dnsluice_core::options::Options;
        let address = dnsluice_modules::nats::NatsAddress::parse_stream(&results).unwrap();
        let auth = dnsluice_modules::nats::NatsAuthOptions::from_table(Default::default()).unwrap();
        let link = dnsluice_modules::nats::connect(&address, &auth)
            .await
            .unwrap();
        link.jetstream().delete_stream("R").await.unwrap();
    });
    let err = wait_failed(&mut worker, &dir, "worker", Duration::from_secs(60));
    assert!(
        err.contains("the results stream did not store a record for 2s"),
        "{err}"
    );
    assert!(err.contains("were not acknowledged"), "{err}");
    let left = status(&work, &[]);
    let unacked = left["messages"].as_u64().unwrap();
    assert!(unacked > 0 && unacked < u64::from(NAMES / 100), "{left}");

    // The broker gone for good, mid-run: the error says what was in flight.
    let results = url(addr, "R2");
    let mut worker = slow_worker(&dir, &work, &results, &flags);
    let acked = left["acked"].as_u64().unwrap();
    wait_for(&work, &[], Duration::from_secs(60), |st| {
        st["acked"].as_u64().unwrap_or(0) > acked
    });
    drop(broker);
    let err = wait_failed(&mut worker, &dir, "worker", Duration::from_secs(60));
    assert!(err.contains("could not reconnect for 2s"), "{err}");
    assert!(err.contains(&format!("{addr}")), "{err}");
    assert!(
        err.contains("lines) in flight were not acknowledged"),
        "{err}"
    );
}

/// `--follow`: the worker makes the missing work stream, answers what is
/// put later, and keeps waiting past `--idle-exit`; its `--replicas` apply
/// to the stream it makes (three on a lone server: a clear error).
#[test]
fn a_following_worker_makes_the_stream_and_waits_for_work() {
    const NAMES: u32 = 150;
    let s = testkit::servers();
    let dir = tempdir("follow");
    let (work, results) = work_and_results("follow");
    let flags = ["--follow", "--idle-exit", "1"];
    let mut worker = lookup_worker(&dir, "worker", &work, &results, &flags);
    wait_for_stream(&work);
    put(&work, &names_file(&dir, NAMES), &[]);
    assert_one_right_answer_each(&get(&results, NAMES as usize, &[]), NAMES);
    std::thread::sleep(Duration::from_millis(2500));
    assert!(
        worker.try_wait().unwrap().is_none(),
        "the worker stopped though it follows"
    );
    assert_eq!(status(&work, &[])["messages"], 0);
    worker.kill().unwrap();
    worker.wait().unwrap();

    let other = url(s.nats, &stream("follow_r3"));
    let mut worker = lookup_worker(
        &dir,
        "r3",
        &other,
        &results,
        &["--follow", "--replicas", "3"],
    );
    let err = wait_failed(&mut worker, &dir, "r3", Duration::from_secs(30));
    assert!(err.contains("cannot make the stream"), "{err}");
}

/// Waits (at most 20 s) until stream `url` exists.
/// Whether process `pid` holds an established TCP connection to local
/// port `port` (its socket inodes among /proc/net/tcp's rows).
fn connected_to(pid: u32, port: u16) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    let inodes: Vec<String> = fds
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|link| {
            let link = link.to_string_lossy().to_string();
            Some(
                link.strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .to_string(),
            )
        })
        .collect();
    let remote = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|table| {
        std::fs::read_to_string(table)
            .unwrap_or_default()
            .lines()
            .skip(1)
            .map(|row| row.split_whitespace().collect::<Vec<_>>())
            .any(|f| {
                f.len() > 9
                    && f[2].ends_with(&remote)
                    && f[3] == "01"
                    && inodes.contains(&f[9].to_string())
            })
    })
}

fn wait_for_stream(url: &str) {
    let start = Instant::now();
    while !dnsluice()
        .args(["queue", "status", url])
        .output()
        .unwrap()
        .status
        .success()
    {
        assert!(start.elapsed() < Duration::from_secs(20), "no stream {url}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The worker as a TOML chain (`configs/queue-worker.toml`, every option
/// at hand) and as a Lua script (`input:receiver(lookup):receiver(output)`):
/// each answers every name of its stream once, with the generator's answer;
/// the names put in items of the default 1,000 lines.
#[test]
fn workers_as_a_toml_chain_and_as_a_lua_script() {
    const NAMES: u32 = 2_500;
    let dir = tempdir("chains");
    let knot = testkit::servers().knot.to_string();
    let (work, results) = work_and_results("toml");
    // The default: 1,000 lines to an item.
    put(&work, &names_file(&dir, NAMES), &[]);
    let put_status = status(&work, &[]);
    assert_eq!(put_status["messages"], 3);
    assert_eq!(put_status["lines_per_item"], 1000);
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/queue-worker.toml");
    ok(
        dnsluice()
            .args(["run", config, "-q"])
            .args(["--set", &format!("0.url={work}"), "--set", "0.idle_exit=1s"])
            .args(["--set", &format!("1.name_servers=[\"{knot}\"]")])
            .args(["--set", &format!("2.url={results}")])
            .output()
            .unwrap(),
        "the TOML worker",
    );
    assert_one_right_answer_each(&get(&results, NAMES as usize, &[]), NAMES);
    assert_eq!(status(&work, &[])["messages"], 0);

    let (work, results) = work_and_results("lua");
    put(&work, &names_file(&dir, NAMES), &[]);
    let script = dir.join("worker.lua");
    std::fs::write(
        &script,
        format!(
            r#"
local input = require("dnsluice.input.nats").new {{ url = "{work}", idle_exit = "1s" }}
local lookup = require("dnsluice.lookup.dns").new {{ type = "A", name_servers = {{ "{knot}" }} }}
local output = require("dnsluice.output.nats").new {{ url = "{results}" }}
input:receiver(lookup):receiver(output)
input:run()
print(input:stats()[1].output)
"#
        ),
    )
    .unwrap();
    let out = ok(
        dnsluice().arg("script").arg(&script).output().unwrap(),
        "the Lua worker",
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        NAMES.to_string()
    );
    assert_one_right_answer_each(&get(&results, NAMES as usize, &[]), NAMES);
    assert_eq!(status(&work, &[])["messages"], 0);
}

/// An item whose results are more than half the largest message the broker
/// takes goes out as one message per record (`…/LINE` ids), all stored
/// before the item is acknowledged: on a broker taking 8 KiB at most, 100
/// records of about 550 bytes (plain) become 100 messages; zstd-compressed
/// (about 3 KB) they stay one.
#[test]
fn results_too_large_for_one_message_go_one_per_record() {
    const NAMES: u32 = 250;
    let dir = tempdir("split");
    let config = dir.join("small.conf");
    std::fs::write(&config, "max_payload: 8192\n").unwrap();
    let broker = OwnBroker::start_with(&dir, &["-c".to_string(), config.display().to_string()]);
    let addr: SocketAddr = format!("127.0.0.1:{}", broker.port).parse().unwrap();
    for (tag, compression, messages) in [("plain", "none", NAMES as usize), ("zstd", "zstd", 3)] {
        let (work, results) = (url(addr, &format!("W{tag}")), url(addr, &format!("R{tag}")));
        put(&work, &names_file(&dir, NAMES), &["--batch", "100"]);
        let flags = ["--idle-exit", "1", "--results-compression", compression];
        let mut worker = lookup_worker(&dir, tag, &work, &results, &flags);
        wait_ok(&mut worker, &dir, tag);
        let stored = raw_messages(addr, &format!("R{tag}"));
        assert_eq!(stored.len(), messages, "{tag}");
        assert_one_right_answer_each(&get(&results, NAMES as usize, &[]), NAMES);
        assert_eq!(
            status(&work, &[])["messages"],
            0,
            "{tag}: every item acknowledged"
        );
    }
}

/// The messages of stream `name` at `addr` as stored: headers and payload.
fn raw_messages(addr: SocketAddr, name: &str) -> Vec<(Option<String>, Vec<u8>)> {
    use dnsluice_core::options::Options;
    use dnsluice_modules::nats::{connect, runtime, NatsAddress, NatsAuthOptions};
    runtime::block_on(async {
        let address = NatsAddress::parse_stream(&url(addr, name)).unwrap();
        let auth = NatsAuthOptions::from_table(Default::default()).unwrap();
        let link = connect(&address, &auth).await.unwrap();
        let mut stream = link.jetstream().get_stream(name).await.unwrap();
        let last = stream.info().await.unwrap().state.last_sequence;
        let mut out = Vec::new();
        for sequence in 1..=last {
            let m = stream.get_raw_message(sequence).await.unwrap();
            let encoding = m
                .headers
                .get("Content-Encoding")
                .map(|v| v.as_str().to_string());
            out.push((encoding, m.payload.to_vec()));
        }
        out
    })
}

/// `zstd -d` (the zstd program, not our decoder) of `packed`.
fn unzstd(packed: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut child = Command::new("zstd")
        .args(["-d", "-c", "-q"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("zstd (apt-get install zstd)");
    child.stdin.take().unwrap().write_all(packed).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    out.stdout
}

/// Results come back zstd-compressed, one message per item, in frames the
/// zstd program decodes to the records; `--results-compression none` sends
/// them plain.
#[test]
fn results_are_zstd_frames_one_per_item_unless_told_otherwise() {
    const NAMES: u32 = 250;
    let s = testkit::servers();
    let dir = tempdir("zstd");
    for (tag, flags, compressed) in [
        ("z", &["--idle-exit", "1"][..], true),
        (
            "p",
            &["--idle-exit", "1", "--results-compression", "none"][..],
            false,
        ),
    ] {
        let (work, results) = work_and_results(&format!("zstd{tag}"));
        put(&work, &names_file(&dir, NAMES), &["--batch", "100"]);
        let mut worker = lookup_worker(&dir, tag, &work, &results, flags);
        wait_ok(&mut worker, &dir, tag);
        let name = results.rsplit('/').next().unwrap();
        let messages = raw_messages(s.nats, name);
        // Items of 100, 100 and 50 lines.
        assert_eq!(messages.len(), 3);
        let mut records = Vec::new();
        for (encoding, payload) in &messages {
            let plain = if compressed {
                assert_eq!(encoding.as_deref(), Some("zstd"));
                unzstd(payload)
            } else {
                assert_eq!(encoding, &None);
                payload.clone()
            };
            records.extend(json_lines(&plain));
        }
        assert_one_right_answer_each(&records, NAMES);
        // And `queue get` reads the same records.
        assert_one_right_answer_each(&get(&results, NAMES as usize, &[]), NAMES);
    }
}

/// Waits (at most `limit`) for a worker to fail; its stderr.
fn wait_failed(child: &mut Child, dir: &Path, name: &str, limit: Duration) -> String {
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{name} was still running after {limit:?} (killed)");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let err = std::fs::read_to_string(dir.join(format!("{name}.err"))).unwrap_or_default();
    assert!(!status.success(), "{name} succeeded:\n{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

/// `queue status --json` of a cluster's stream, asked again for up to 30 s
/// while the stream elects a new leader (the request times out meanwhile).
fn status_after_election(url: &str) -> Value {
    let start = Instant::now();
    loop {
        let out = dnsluice()
            .args(["queue", "status", url, "--json"])
            .output()
            .unwrap();
        if out.status.success() {
            return serde_json::from_slice(&out.stdout).unwrap();
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no status: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Three nats-servers of this test's own in one JetStream cluster.
struct Cluster {
    nodes: Vec<Child>,
    ports: Vec<u16>,
}

impl Cluster {
    /// Three servers on free ports (all again on others if one of them
    /// finds its port taken).
    fn start(dir: &Path) -> Cluster {
        for _ in 0..5 {
            if let Some(cluster) = Self::try_start(dir) {
                return cluster;
            }
        }
        panic!("the cluster did not start on any of five sets of ports");
    }

    fn try_start(dir: &Path) -> Option<Cluster> {
        let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let routes: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let nodes = (0..3)
            .map(|i| {
                let others: Vec<String> = (0..3)
                    .filter(|&j| j != i)
                    .map(|j| format!("nats://127.0.0.1:{}", routes[j]))
                    .collect();
                let store = dir.join(format!("node{i}"));
                let _ = std::fs::remove_dir_all(&store);
                Command::new("nats-server")
                    .args(["-js", "-a", "127.0.0.1", "-p", &ports[i].to_string()])
                    .args(["-n", &format!("node{i}"), "--cluster_name", "c"])
                    .args(["--cluster", &format!("nats://127.0.0.1:{}", routes[i])])
                    .args(["--routes", &others.join(",")])
                    .arg("-sd")
                    .arg(store)
                    .stdout(Stdio::null())
                    .stderr(std::fs::File::create(dir.join(format!("node{i}.log"))).unwrap())
                    .spawn()
                    .expect("nats-server (apt-get install nats-server)")
            })
            .collect();
        let mut cluster = Cluster { nodes, ports };
        let ports = cluster.ports.clone();
        for (node, port) in cluster.nodes.iter_mut().zip(ports) {
            if !wait_listening(port, node) {
                return None; // Dropped: the others are stopped.
            }
        }
        // A taken route port ends a node just after it listens for clients.
        std::thread::sleep(Duration::from_millis(300));
        for node in &mut cluster.nodes {
            if node.try_wait().unwrap().is_some() {
                return None;
            }
        }
        Some(cluster)
    }

    /// `nats://` with all three servers, for `stream`.
    fn url(&self, stream: &str) -> String {
        let servers: Vec<String> = self
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        format!("nats://{}/{stream}", servers.join(","))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            let _ = node.kill();
            let _ = node.wait();
        }
    }
}

#[test]
fn replicated_streams_on_a_cluster_survive_a_lost_node() {
    const NAMES: u32 = 5_000;
    let dir = tempdir("cluster");
    let mut cluster = Cluster::start(&dir);
    let (work, results) = (cluster.url("W"), cluster.url("R"));
    let names = names_file(&dir, NAMES);
    // The cluster elects its JetStream leader after it forms: retry the put.
    let start = Instant::now();
    loop {
        let out = dnsluice()
            .args(["queue", "put", &work, "--replicas", "3", "--batch", "100"])
            .arg(&names)
            .output()
            .unwrap();
        if out.status.success() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no JetStream cluster: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(status(&work, &[])["replicas"], 3);
    let mut worker = slow_worker(
        &dir,
        &work,
        &results,
        &["--replicas", "3", "--ack-wait", "5s", "--idle-exit", "3"],
    );
    // Items of 100 lines: 50 of them.
    wait_for(&work, &[], Duration::from_secs(60), |st| {
        st["acked"].as_u64().unwrap_or(0) >= 10
    });
    // The server leading the results stream goes for good: the other two
    // hold every item and result, and elect a new leader.
    let leader = status(&results, &[])["leader"]
        .as_str()
        .and_then(|name| name.strip_prefix("node"))
        .and_then(|i| i.parse::<usize>().ok())
        .expect("the results stream has a leader");
    let _ = cluster.nodes[leader].kill();
    let _ = cluster.nodes[leader].wait();
    wait_ok(&mut worker, &dir, "worker");
    let left = status_after_election(&work);
    assert_eq!(left["messages"], 0, "every item acknowledged: {left}");
    let stored = status_after_election(&results);
    assert_eq!(stored["replicas"], 3, "{stored}");
    assert_eq!(stored["messages"], NAMES / 100, "{stored}");
    assert_one_right_answer_each(&get(&results, NAMES as usize, &[]), NAMES);
    drop(cluster);
    // On a lone server three replicas are a clear error.
    let s = testkit::servers();
    let out = dnsluice()
        .args([
            "queue",
            "put",
            &url(s.nats, &stream("r3")),
            "--replicas",
            "3",
        ])
        .arg(&names)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot make the stream"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// Ten captures whose qtype and rcode kinds together fit the summary's
/// top-10 lists (so no file's list is cut and sums are exact): the
/// corpus's eight small distinct captures, two of them twice (as copies).
fn capture_set(dir: &Path) -> Vec<PathBuf> {
    capture_set_with(dir, 0)
}

/// [`capture_set`], but the copy of `misc_l2l3.pcap` is that capture
/// concatenated `2^doublings` times by mergecap and is the third file: a
/// file long enough for a worker to be killed in after it did two others.
fn capture_set_with(dir: &Path, doublings: u32) -> Vec<PathBuf> {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/corpus");
    let names = [
        "dns_edns_compression.pcap",
        "ipv4_fragments.pcap",
        "ipv6_exthdr.pcap",
        "malformed.pcap",
        "misc_l2l3.pcap",
        "vlan_qinq.pcap",
        "pcapng_bigendian.pcapng",
        "pcapng_multi_if.pcapng",
    ];
    let mut files: Vec<PathBuf> = names.iter().map(|n| corpus.join(n)).collect();
    for (k, n) in ["misc_l2l3.pcap", "dns_edns_compression.pcap"]
        .iter()
        .enumerate()
    {
        let copy = dir.join(format!("copy{k}-{n}"));
        std::fs::copy(corpus.join(n), &copy).unwrap();
        files.push(copy);
    }
    // The last one as archives keep captures: compressed by the zstd tool
    // (its plain copy stays beside it for the one run over everything).
    let plain = files.pop().unwrap();
    ok(
        Command::new("zstd")
            .args(["-q", "-k", "-f"])
            .arg(&plain)
            .output()
            .unwrap(),
        "zstd",
    );
    files.push(zstd_of(&plain));
    if doublings > 0 {
        let long = files.remove(8);
        let twice = dir.join("twice.pcap");
        for _ in 0..doublings {
            ok(
                Command::new("mergecap")
                    .args(["-a", "-F", "pcap", "-w"])
                    .arg(&twice)
                    .args([&long, &long])
                    .output()
                    .unwrap(),
                "mergecap",
            );
            std::fs::rename(&twice, &long).unwrap();
        }
        files.insert(2, long);
    }
    files
}

/// `FILE.zst`, where the zstd tool writes FILE compressed.
fn zstd_of(plain: &Path) -> PathBuf {
    let mut name = plain.as_os_str().to_owned();
    name.push(".zst");
    PathBuf::from(name)
}

/// The summary of one `dnsluice run` over every file (a `.zst` one's plain
/// copy), concatenated by mergecap.
fn one_run_over(dir: &Path, files: &[PathBuf]) -> Value {
    let files: Vec<PathBuf> = files
        .iter()
        .map(|f| match f.extension() {
            Some(e) if e == "zst" => f.with_extension(""),
            _ => f.clone(),
        })
        .collect();
    let all = dir.join("all.pcapng");
    ok(
        Command::new("mergecap")
            .args(["-a", "-F", "pcapng", "-w"])
            .arg(&all)
            .args(&files)
            .output()
            .unwrap(),
        "mergecap",
    );
    let stats = dir.join("one.json");
    ok(
        dnsluice()
            .arg("run")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/qtype-stats.toml"))
            .arg("--set")
            .arg(format!("0.path={}", all.display()))
            .arg("--stats-json")
            .arg(&stats)
            .arg("-q")
            .output()
            .unwrap(),
        "one run",
    );
    serde_json::from_str(&std::fs::read_to_string(stats).unwrap()).unwrap()
}

/// Stages' module, in, out, errors and counters, without the pcapng
/// container's `skipped_blocks` (the concatenation's interface blocks).
fn comparable(summary: &Value) -> Vec<Value> {
    summary["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let mut counters = s["counters"].clone();
            counters.as_object_mut().unwrap().remove("skipped_blocks");
            serde_json::json!([s["module"], s["in"], s["out"], s["errors"], counters])
        })
        .collect()
}

#[test]
fn capture_files_over_two_workers_one_killed_merge_to_one_run() {
    let dir = tempdir("captures");
    // The third file takes about a second (2^15 copies of a capture).
    let files = capture_set_with(&dir, 15);
    let (work, results) = work_and_results("cap");
    let mut put_cmd = dnsluice();
    put_cmd
        .args(["queue", "put", &work, "--files"])
        .args(&files);
    ok(put_cmd.output().unwrap(), "queue put --files");
    let pipeline = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/qtype-stats.toml");
    let worker = |name: &str| {
        dnsluice()
            .arg("run")
            .arg(&pipeline)
            .args(["--work", &work, "--results", &results])
            .args(["--ack-wait", "2s", "--idle-exit", "2"])
            .stderr(std::fs::File::create(dir.join(format!("{name}.err"))).unwrap())
            .spawn()
            .unwrap()
    };
    let files_done = |name: &str| {
        let err = std::fs::read_to_string(dir.join(format!("{name}.err"))).unwrap();
        err.lines().filter(|l| l.ends_with(": OK")).count()
    };
    // The first worker alone does the two small files, and is killed
    // while it holds the long third one; the second does the rest.
    let mut first = worker("first");
    wait_for(&work, &[], Duration::from_secs(30), |st| {
        st["acked"].as_u64().unwrap_or(0) >= 2
            && consumer(st, "workers")["in_flight"].as_u64().unwrap_or(0) >= 1
    });
    freeze_and_kill(&mut first);
    let held = status(&work, &[]);
    assert!(
        consumer(&held, "workers")["in_flight"]
            .as_u64()
            .unwrap_or(0)
            >= 1,
        "the killed worker held no file: {held}"
    );
    let by_first = files_done("first");
    assert!(by_first >= 2, "the first worker did {by_first} files");
    let mut second = worker("second");
    wait_ok(&mut second, &dir, "second");
    let err = std::fs::read_to_string(dir.join("second.err")).unwrap();
    let redelivered: u64 = err
        .split("redelivered=")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        redelivered >= 1,
        "the killed worker's file was not redelivered:\n{err}"
    );
    assert!(
        files_done("second") >= 10 - by_first,
        "the second worker did {} files:\n{err}",
        files_done("second")
    );
    assert_eq!(status(&work, &[])["messages"], 0);

    let out = ok(
        dnsluice()
            .args(["queue", "get", &results, "--expect", "10", "--merge"])
            .output()
            .unwrap(),
        "queue get --merge",
    );
    let merged: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(merged["files"], 10, "{merged}");
    assert_eq!(merged["failed"], serde_json::json!([]));
    assert_eq!(comparable(&merged), comparable(&one_run_over(&dir, &files)));
    // The long capture and the concatenation are a quarter of a gigabyte.
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn poison_item_gets_an_error_record_after_max_deliver() {
    let dir = tempdir("poison");
    let (work, results) = work_and_results("poison");
    // A nameserver that never answers: the lookup holds its item.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let line = format!("n7.lookup.test,{}", silent.local_addr().unwrap());
    let file = dir.join("poison.txt");
    // One item of two lines: the poison and a name knot answers.
    std::fs::write(&file, format!("{line}\nn8.lookup.test\n")).unwrap();
    put(&work, &file, &[]);
    let flags = [
        "--ack-wait",
        "1s",
        "--max-deliver",
        "2",
        "--idle-exit",
        "1",
        "--timeout",
        "60s",
        "--retries",
        "0",
    ];
    // First delivery: the worker dies holding it.
    let mut first = lookup_worker(&dir, "first", &work, &results, &flags);
    wait_for(&work, &[], Duration::from_secs(20), |st| {
        consumer(st, "workers")["in_flight"] == 1
    });
    // Kept alive (in-progress acks) past several ack_waits, so not redelivered.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(consumer(&status(&work, &[]), "workers")["redelivered"], 0);
    freeze_and_kill(&mut first);
    // Second (last) delivery: answered with an ERROR record, not tried again.
    let mut second = lookup_worker(&dir, "second", &work, &results, &flags);
    wait_ok(&mut second, &dir, "second");
    // The item is given up as a whole: each of its lines gets the ERROR.
    let mut records = get(&results, 2, &[]);
    records.sort_by_key(|r| r["name"].as_str().unwrap_or("").to_string());
    assert_eq!(records.len(), 2);
    for (r, name) in records.iter().zip(["n7.lookup.test", "n8.lookup.test"]) {
        assert_eq!(
            (r["name"].as_str(), r["status"].as_str()),
            (Some(name), Some("ERROR"))
        );
        assert!(
            r["error"]
                .as_str()
                .unwrap()
                .contains("delivered 2 times (max_deliver)"),
            "{r}"
        );
    }
    assert_eq!(
        status(&work, &[])["messages"],
        0,
        "the poison item is acknowledged"
    );
}

#[test]
fn malformed_line_gets_an_error_record_and_is_acknowledged() {
    let dir = tempdir("malformed");
    let (work, results) = work_and_results("bad");
    let file = dir.join("names.txt");
    std::fs::write(
        &file,
        "n1.lookup.test\n\n# a comment\nbad..name\nn2.lookup.test,not-an-address:x\n",
    )
    .unwrap();
    // Three lines of work, two to an item: two items.
    let said = put(&work, &file, &["--batch", "2"]);
    assert!(said.contains("put 3 lines in 2 items"), "{said}");
    let put_status = status(&work, &[]);
    assert_eq!(put_status["messages"], 2);
    assert_eq!(put_status["lines_per_item"], 2, "n1 and bad..name");
    // `queue get` started before any worker: it waits for the results stream.
    let mut getter = dnsluice()
        .args(["queue", "get", &results, "--expect", "3"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let broker = testkit::servers().nats.port();
    let start = Instant::now();
    while !connected_to(getter.id(), broker) {
        assert!(getter.try_wait().unwrap().is_none(), "queue get ended");
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "queue get never connected"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Connected, and the results stream is not there yet: it waits for it.
    let absent = dnsluice()
        .args(["queue", "status", &results])
        .output()
        .unwrap();
    assert!(
        !absent.status.success(),
        "the results stream exists already"
    );
    assert!(
        getter.try_wait().unwrap().is_none(),
        "queue get did not wait"
    );
    let mut worker = lookup_worker(&dir, "worker", &work, &results, &["--idle-exit", "1"]);
    wait_ok(&mut worker, &dir, "worker");
    let out = ok(getter.wait_with_output().unwrap(), "queue get");
    let records = json_lines(&out.stdout);
    assert_eq!(records.len(), 3);
    let status_of = |name: &str| {
        records
            .iter()
            .find(|r| r["name"] == name)
            .map(|r| {
                (
                    r["status"].as_str().unwrap().to_string(),
                    r["error"].clone(),
                )
            })
            .unwrap_or_else(|| panic!("no record for {name}"))
    };
    assert_eq!(status_of("n1.lookup.test").0, "NOERROR");
    let (st, error) = status_of("bad..name");
    assert_eq!(st, "ERROR");
    assert!(error.as_str().unwrap().contains("empty label"), "{error}");
    assert_eq!(status_of("n2.lookup.test").0, "ERROR");
    assert_eq!(status(&work, &[])["messages"], 0);
}

#[test]
fn broker_down_at_start_is_a_clear_error_naming_the_url() {
    let port = free_port();
    let work = format!("nats://127.0.0.1:{port}/W");
    let out = dnsluice()
        .args([
            "lookup",
            "A",
            "--name-servers",
            "127.0.0.1:9",
            "--input",
            &work,
        ])
        .args(["--output", &format!("nats://127.0.0.1:{port}/R")])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    // The results stream's connection is made first (outputs are built first).
    let results = format!("nats://127.0.0.1:{port}/R");
    assert!(
        err.contains(&results) && err.contains("cannot reach the broker"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let out = dnsluice()
        .args(["queue", "get", &work.replace("/W", "/R")])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot reach the broker"));
}

#[test]
fn tls_broker_with_a_password_and_a_wrong_one_that_consumes_nothing() {
    const NAMES: u32 = 200;
    let s = testkit::servers();
    let dir = tempdir("tls");
    let password = std::fs::read_to_string(&s.nats_password_file).unwrap();
    let password = password.trim();
    let tls = |stream: &str| format!("tls://{}/{stream}", s.nats_tls);
    let (work, results) = (tls(&stream("tls_w")), tls(&stream("tls_r")));
    let ca = s.ca_file.display().to_string();
    let auth = ["--nats-ca-file", ca.as_str()];
    let with_password = |cmd: &mut Command, password: &str| {
        cmd.env("NATS_USER", &s.nats_user)
            .env("NATS_PASSWORD", password);
    };
    // Without the CA the certificate is refused; without a password the login.
    let mut cmd = dnsluice();
    cmd.args(["queue", "status", &work]);
    with_password(&mut cmd, password);
    let err = String::from_utf8_lossy(&cmd.output().unwrap().stderr).into_owned();
    assert!(err.contains("UnknownIssuer"), "{err}");
    let names = names_file(&dir, NAMES);
    let mut cmd = dnsluice();
    cmd.args(["queue", "put", &work, "--batch", "1"])
        .arg(&names)
        .args(auth);
    with_password(&mut cmd, password);
    ok(cmd.output().unwrap(), "put over TLS");

    // A worker with a wrong password: a clear error, nothing taken.
    let knot = s.knot.to_string();
    let worker = |password: &str, name: &str| {
        let mut cmd = dnsluice();
        cmd.args([
            "lookup",
            "A",
            "--name-servers",
            &knot,
            "--input",
            &work,
            "--output",
            &results,
        ])
        .args(auth)
        .args(["--idle-exit", "1", "--stats-json"])
        .arg(dir.join(format!("{name}.json")));
        with_password(&mut cmd, password);
        cmd.output().unwrap()
    };
    let out = worker("not-the-password", "wrong");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refused the login") && err.contains(&results),
        "{err}"
    );
    assert!(
        !err.contains("not-the-password"),
        "the password is in the message: {err}"
    );
    let mut cmd = dnsluice();
    cmd.args(["queue", "status", &work, "--json"]).args(auth);
    with_password(&mut cmd, password);
    let before: Value =
        serde_json::from_slice(&ok(cmd.output().unwrap(), "status").stdout).unwrap();
    assert_eq!(before["messages"], NAMES, "{before}");
    assert_eq!(
        before["consumers"],
        serde_json::json!([]),
        "nothing consumed: {before}"
    );

    let out = ok(worker(password, "right"), "worker with the password");
    let printed = format!(
        "{}{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(dir.join("right.json")).unwrap()
    );
    assert!(
        !printed.contains(password),
        "the password leaked: {printed}"
    );
    let mut cmd = dnsluice();
    cmd.args(["queue", "get", &results, "--expect", &NAMES.to_string()])
        .args(auth);
    with_password(&mut cmd, password);
    let out = ok(cmd.output().unwrap(), "get over TLS");
    let records = json_lines(&out.stdout);
    assert_one_right_answer_each(&records, NAMES);
}

#[test]
fn shards_cover_every_line_and_every_file_exactly_once() {
    const NAMES: u32 = 1_000;
    const SHARDS: u32 = 3;
    let s = testkit::servers();
    let dir = tempdir("shards");
    // Blank and comment lines count as lines (a shard is by position).
    let mut text = String::from("# names\n\n");
    text.extend((0..NAMES).map(|i| format!("n{i}.lookup.test\n")));
    let file = dir.join("names.txt");
    std::fs::write(&file, text).unwrap();
    let mut all = Vec::new();
    for i in 0..SHARDS {
        let out = ok(
            dnsluice()
                .args([
                    "lookup",
                    "A",
                    "--name-servers",
                    &s.knot.to_string(),
                    "--input",
                ])
                .arg(&file)
                .args(["--shard", &format!("{i}/{SHARDS}"), "-q"])
                .output()
                .unwrap(),
            "lookup --shard",
        );
        let records = json_lines(&out.stdout);
        // Line k (0-based; names start at line 2) is in shard k mod N.
        for r in &records {
            let index: u32 = r["name"].as_str().unwrap()[1..]
                .split('.')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert_eq!((index + 2) % SHARDS, i, "{r}");
        }
        all.extend(records);
    }
    assert_one_right_answer_each(&all, NAMES);

    // Files: every shard's summary adds up to one run over all files.
    let files = capture_set(&dir);
    let pipeline = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/qtype-stats.toml");
    let mut packets = 0;
    let mut runs = 0;
    for i in 0..SHARDS {
        let stats = dir.join(format!("shard{i}.json"));
        ok(
            dnsluice()
                .arg("run")
                .arg(&pipeline)
                .arg("--files")
                .args(&files)
                .args(["--shard", &format!("{i}/{SHARDS}"), "-q", "--stats-json"])
                .arg(&stats)
                .output()
                .unwrap(),
            "run --files --shard",
        );
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
        runs += v["files"].as_u64().unwrap();
        packets += v["stages"][0]["in"].as_u64().unwrap();
    }
    assert_eq!(runs, files.len() as u64);
    assert_eq!(
        packets,
        one_run_over(&dir, &files)["stages"][0]["in"]
            .as_u64()
            .unwrap()
    );
}

//! Work shared through NATS JetStream (`dnsluice queue`, `input.nats`,
//! `output.nats`) when things fail: a worker killed mid-run, the broker
//! restarted, results that cannot be stored, a node of a cluster lost, a
//! broker that is down. Nothing is lost and nothing doubled: answers are
//! checked against the zone generator's rule (`testkit::lookup_address`).

use serde_json::Value;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use testkit::queue::{
    assert_all_acknowledged, assert_one_right_answer_each, counters, free_port, freeze_and_kill,
    get, lookup_worker, names_file, put, slow_worker, status, stream, url, wait_failed, wait_for,
    wait_listening, wait_ok, work_and_results, OwnBroker,
};
use testkit::{dnsluice, temp_dir};

#[test]
fn two_workers_one_killed_mid_run_lose_and_double_nothing() {
    const NAMES: u32 = 20_000;
    let dir = temp_dir("queue-kill");
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
    assert_all_acknowledged(&left);
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

#[test]
fn broker_restarted_mid_run_loses_and_doubles_nothing() {
    const NAMES: u32 = 20_000;
    let dir = temp_dir("queue-restart");
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
    assert_all_acknowledged(&status(&work, &[]));
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
    let dir = temp_dir("queue-giveup");
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

/// `queue status --json` of a cluster's stream, asked again for up to 30 s
/// while the stream elects a new leader (the request times out meanwhile)
/// and its consumers theirs (the broker leaves them out of the list).
fn status_after_election(url: &str) -> Value {
    let start = Instant::now();
    loop {
        let out = dnsluice()
            .args(["queue", "status", url, "--json"])
            .output()
            .unwrap();
        let status: Option<Value> = out
            .status
            .success()
            .then(|| serde_json::from_slice(&out.stdout).unwrap());
        if let Some(status) = status.filter(|s| s["consumers_unlisted"] == 0) {
            return status;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no status with every consumer listed: {}{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
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
    let dir = temp_dir("queue-cluster");
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
    assert_all_acknowledged(&status_after_election(&work));
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

/// `queue get` whose broker goes away, and that hears nothing more within
/// `--idle-exit`, fails and says it may not have every result (it said
/// "got 10 results" and ended with status 0, as at the stream's end).
#[test]
fn queue_get_that_loses_its_broker_fails_and_says_so() {
    let dir = temp_dir("queue-get-lost");
    let broker = OwnBroker::start(&dir);
    let addr: SocketAddr = format!("127.0.0.1:{}", broker.port).parse().unwrap();
    let items = url(addr, "LOST");
    // Ten results: a lookup of ten names into the results stream.
    let knot = testkit::servers().knot.to_string();
    let lookup = dnsluice()
        .args(["lookup", "A", "-q", "--name-servers", &knot, "--input"])
        .arg(names_file(&dir, 10))
        .args(["--output", &items])
        .output()
        .unwrap();
    assert!(lookup.status.success(), "{lookup:?}");
    let getter = dnsluice()
        .args(["queue", "get", &items, "--idle-exit", "3s"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the getter's consumer has been given every item, the broker dies.
    wait_for(&items, &[], Duration::from_secs(60), |st| {
        let all = st["messages"].as_u64().unwrap_or(u64::MAX);
        st["consumers"]
            .as_array()
            .is_some_and(|list| list.iter().any(|c| c["delivered"].as_u64() >= Some(all)))
    });
    drop(broker);
    let out = getter.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("lost the connection") && err.contains("results, maybe not all"),
        "{err}"
    );
}

//! Workers of `dnsluice queue` and how they are run: following a stream
//! not made yet, as a TOML chain and as a Lua script, against a TLS broker
//! with a password (and a wrong one), and `--shard` without a broker.

use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};
use testkit::queue::free_port;
use testkit::queue::{
    assert_one_right_answer_each, get, json_lines, lookup_worker, lookup_worker_asking, names_file,
    put, status, stream, url, wait_failed, work_and_results,
};
use testkit::{assert_ok, dnsluice, run_ok, temp_dir, wait_within};

/// `--follow`: the worker makes the missing work stream, answers what is
/// put later, and keeps waiting past `--idle-exit`; its `--replicas` apply
/// to the stream it makes (three on a lone server: a clear error).
#[test]
fn a_following_worker_makes_the_stream_and_waits_for_work() {
    const NAMES: u32 = 150;
    let s = testkit::servers();
    let dir = temp_dir("queue-follow");
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
    // Idle, it still ends at the first SIGTERM (it went on waiting for work).
    let stopped = Instant::now();
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(worker.id() as i32, libc::SIGTERM) }, 0);
    let ended = wait_within(&mut worker, Duration::from_secs(10));
    assert_eq!(
        ended.and_then(|status| status.code()),
        Some(143),
        "an idle following worker did not end within 10 s of a SIGTERM"
    );
    assert!(
        stopped.elapsed() < Duration::from_secs(3),
        "{:?}",
        stopped.elapsed()
    );

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

/// A worker stopped by SIGTERM hands the items it holds back to the queue
/// (`-NAK`) as it ends: a second worker has them at once, not after the
/// first's `--ack-wait` of a minute. The first asks a nameserver that never
/// answers, so it holds its items unfinished when stopped.
#[test]
fn a_stopped_worker_hands_its_items_back_at_once() {
    const NAMES: u32 = 200;
    let dir = temp_dir("queue-hand-back");
    let (work, results) = work_and_results("handback");
    put(&work, &names_file(&dir, NAMES), &["--batch", "10"]);
    let silent = format!("127.0.0.1:{}", free_port());
    let flags = ["--ack-wait", "60s", "--idle-exit", "1"];
    let mut first = lookup_worker_asking(&silent, &dir, "first", &work, &results, &flags);
    testkit::queue::wait_for(&work, &[], Duration::from_secs(20), |st| {
        testkit::queue::consumer(st, "workers")["in_flight"]
            .as_u64()
            .unwrap_or(0)
            >= 1
    });
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(first.id() as i32, libc::SIGTERM) }, 0);
    let ended = wait_within(&mut first, Duration::from_secs(15));
    assert_eq!(ended.and_then(|status| status.code()), Some(143));
    let handed_back = Instant::now();
    let mut second = lookup_worker(&dir, "second", &work, &results, &["--idle-exit", "1"]);
    assert_one_right_answer_each(&get(&results, NAMES as usize, &[]), NAMES);
    assert!(
        handed_back.elapsed() < Duration::from_secs(30),
        "the stopped worker's items came back after {:?}",
        handed_back.elapsed()
    );
    let _ = wait_within(&mut second, Duration::from_secs(30));
}

/// Waits (at most 20 s) until stream `url` exists.
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
    let dir = temp_dir("queue-chains");
    let knot = testkit::servers().knot.to_string();
    let (work, results) = work_and_results("toml");
    // The default: 1,000 lines to an item.
    put(&work, &names_file(&dir, NAMES), &[]);
    let put_status = status(&work, &[]);
    assert_eq!(put_status["messages"], 3);
    assert_eq!(put_status["lines_per_item"], 1000);
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/queue-worker.toml");
    run_ok(
        dnsluice()
            .args(["run", config, "-q"])
            .args(["--set", &format!("0.url={work}"), "--set", "0.idle_exit=1s"])
            .args(["--set", &format!("1.name_servers=[\"{knot}\"]")])
            .args(["--set", &format!("2.url={results}")]),
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
    let out = run_ok(dnsluice().arg("script").arg(&script));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        NAMES.to_string()
    );
    assert_one_right_answer_each(&get(&results, NAMES as usize, &[]), NAMES);
    assert_eq!(status(&work, &[])["messages"], 0);
}

#[test]
fn tls_broker_with_a_password_and_a_wrong_one_that_consumes_nothing() {
    const NAMES: u32 = 200;
    let s = testkit::servers();
    let dir = temp_dir("queue-tls");
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
    // A password without its user is refused before any login (it logged
    // in with no user at all, silently).
    let mut cmd = dnsluice();
    cmd.args(["queue", "status", &work])
        .args(auth)
        .env_remove("NATS_USER")
        .env("NATS_PASSWORD", password);
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("$NATS_PASSWORD is set but $NATS_USER is not"),
        "{err}"
    );
    assert!(!err.contains(password), "the password leaked: {err}");
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
    run_ok(&mut cmd);

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
    let before: Value = serde_json::from_slice(&run_ok(&mut cmd).stdout).unwrap();
    assert_eq!(before["messages"], NAMES, "{before}");
    assert_eq!(
        before["consumers"],
        serde_json::json!([]),
        "nothing consumed: {before}"
    );

    let out = worker(password, "right");
    assert_ok(&out, "worker with the password");
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
    let out = run_ok(&mut cmd);
    let records = json_lines(&out.stdout);
    assert_one_right_answer_each(&records, NAMES);
}

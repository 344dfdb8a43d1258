//! Items a worker cannot answer: a poison item delivered `--max-deliver`
//! times and a malformed line both get ERROR records and are acknowledged.

use std::process::Stdio;
use std::time::{Duration, Instant};
use testkit::queue::{
    consumer, freeze_and_kill, get, json_lines, lookup_worker, put, status, wait_for, wait_ok,
    work_and_results,
};
use testkit::{assert_ok, dnsluice, temp_dir};

/// A worker's flags: items unacknowledged for a second go to another, an
/// item is given up after `max_deliver` deliveries, lookups are not retried
/// and wait a minute (a nameserver that never answers holds its item).
fn worker_flags(max_deliver: &'static str) -> [&'static str; 10] {
    [
        "--ack-wait",
        "1s",
        "--max-deliver",
        max_deliver,
        "--idle-exit",
        "1",
        "--timeout",
        "60s",
        "--retries",
        "0",
    ]
}

#[test]
fn poison_item_gets_an_error_record_after_max_deliver() {
    let dir = temp_dir("queue-poison");
    let (work, results) = work_and_results("poison");
    // A nameserver that never answers: the lookup holds its item.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let line = format!("n7.lookup.test,{}", silent.local_addr().unwrap());
    let file = dir.join("poison.txt");
    // One item of two lines: the poison and a name knot answers.
    std::fs::write(&file, format!("{line}\nn8.lookup.test\n")).unwrap();
    put(&work, &file, &[]);
    let flags = worker_flags("2");
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

/// The broker leaves the counting of deliveries to the workers: an item
/// whose last allowed delivery (by the first worker's `--max-deliver 2`,
/// the one the consumer was made with) dies with the worker that held it
/// comes once more, and its ERROR records are written then. (The consumer
/// was made with the broker limited to that count too: the item was never
/// delivered again, and no record at all was written.)
#[test]
fn a_last_delivery_lost_with_its_worker_comes_again() {
    let dir = temp_dir("queue-last-delivery");
    let (work, results) = work_and_results("lastdelivery");
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let line = format!("n9.lookup.test,{}", silent.local_addr().unwrap());
    let file = dir.join("held.txt");
    std::fs::write(&file, format!("{line}\n")).unwrap();
    put(&work, &file, &[]);
    let flags = worker_flags;
    let delivered = |n: u64| {
        move |st: &serde_json::Value| {
            let c = consumer(st, "workers");
            c["delivered"].as_u64() >= Some(n) && c["in_flight"] == 1
        }
    };
    // Two workers die holding the item's first and second deliveries (the
    // second allows itself five, so it tries the name).
    let mut first = lookup_worker(&dir, "first", &work, &results, &flags("2"));
    wait_for(&work, &[], Duration::from_secs(20), delivered(1));
    freeze_and_kill(&mut first);
    let mut second = lookup_worker(&dir, "second", &work, &results, &flags("5"));
    wait_for(&work, &[], Duration::from_secs(20), delivered(2));
    freeze_and_kill(&mut second);
    // A third delivery: given up by a worker that allows three.
    let mut third = lookup_worker(&dir, "third", &work, &results, &flags("3"));
    wait_ok(&mut third, &dir, "third");
    let records = get(&results, 1, &[]);
    assert_eq!(records[0]["status"], "ERROR", "{}", records[0]);
    assert!(
        records[0]["error"]
            .as_str()
            .unwrap()
            .contains("delivered 3 times (max_deliver)"),
        "{}",
        records[0]
    );
    assert_eq!(status(&work, &[])["messages"], 0);
}

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

#[test]
fn malformed_line_gets_an_error_record_and_is_acknowledged() {
    let dir = temp_dir("queue-malformed");
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
    let out = getter.wait_with_output().unwrap();
    assert_ok(&out, "queue get");
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

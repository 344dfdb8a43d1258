//! SIGTERM stops a lookup soon, and says what it leaves: 2,000 names (each
//! after a comment line, which is no name) sent to a nameserver that never
//! answers (a loopback port nothing listens on), 100 in flight at a time,
//! stopped a second in while most names wait for room. The run ends with
//! status 143 well before the names' tries run out (6 tries of 2 s: the
//! lookup once waited them out for the first name's record, with the names
//! read waiting for room or once the input was read), says how many names
//! read have no record, and a run with `--resume` gives every name its one
//! record. The same holds for a chain with a lookup stage run by `dnsluice
//! run`, driven from its input (push) or from its output (pull): every name
//! the input read (its own count) has a record or is in the warning's count.

use serde_json::Value;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use testkit::queue::free_port;
use testkit::{dnsluice, number_before, stopped_by_sigterm, temp_dir};

const NAMES: u64 = 2000;
/// Names in flight at most: the lookup holds twice as many, so most of the
/// [`NAMES`] wait for room (where a stop once went unseen).
const INFLIGHT: u64 = 100;

/// [`NAMES`] names, one a line, each after a comment line (no name, so no
/// record and not counted as one).
fn names_file(dir: &Path) -> PathBuf {
    let names = dir.join("names.txt");
    let list: String = (0..NAMES)
        .map(|i| format!("# comment {i}, not a name\nn{i}.example.com\n"))
        .collect();
    std::fs::write(&names, list).unwrap();
    names
}

/// Stops `command` with SIGTERM a second in; checks it ended soon with
/// status 143. Gives its stderr, the records written to `records` and the
/// names its warning says have none.
fn stopped_soon(command: &mut Command, records: &Path, what: &str) -> (String, u64, u64) {
    let started = Instant::now();
    let (status, stderr) = stopped_by_sigterm(command, Duration::from_secs(1));
    let took = started.elapsed();
    assert_eq!(status.code(), Some(143), "{what}: {stderr}");
    assert!(
        took < Duration::from_secs(8),
        "{what}: stopped after {took:?}: {stderr}"
    );
    let written = std::fs::read_to_string(records).unwrap().lines().count() as u64;
    let unrecorded = number_before(&stderr, " names read have no record");
    (stderr, written, unrecorded)
}

#[test]
fn a_stopped_lookup_ends_soon_and_resumed_gives_every_name_once() {
    let dir = temp_dir("lookup-stop");
    let names = names_file(&dir);
    let records = dir.join("records.jsonl");
    let silent = format!("127.0.0.1:{}", free_port());
    let lookup = |extra: &[&str]| {
        let mut command = dnsluice();
        command
            .args(["lookup", "--name-servers", &silent, "--output"])
            .arg(&records)
            .args(extra)
            .stdin(File::open(&names).unwrap());
        command
    };
    let (stderr, written, unrecorded) = stopped_soon(
        &mut lookup(&["--inflight", &INFLIGHT.to_string()]),
        &records,
        "dnsluice lookup",
    );
    // Stopped while names waited for room: more read than in flight, not all.
    assert!(
        unrecorded > INFLIGHT && written + unrecorded < NAMES,
        "{written} records, {unrecorded} without: {stderr}"
    );
    // Resumed (every name times out at once): each name has one record.
    let out = testkit::run_ok(&mut lookup(&[
        "--resume",
        "--inflight",
        "2000",
        "--retries",
        "0",
        "--name-timeout",
        "1s",
    ]));
    let text = std::fs::read_to_string(&records).unwrap();
    let mut asked: Vec<String> = text
        .lines()
        .map(|line| {
            let record: Value = serde_json::from_str(line).expect("a JSON record");
            record["name"]
                .as_str()
                .expect("a record's name")
                .to_string()
        })
        .collect();
    asked.sort_unstable();
    let mut expected: Vec<String> = (0..NAMES).map(|i| format!("n{i}.example.com")).collect();
    expected.sort_unstable();
    assert_eq!(asked, expected, "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_stopped_chain_with_a_lookup_stage_ends_soon_either_way_it_is_driven() {
    let dir = temp_dir("lookup-stop-chain");
    let names = names_file(&dir);
    let silent = format!("127.0.0.1:{}", free_port());
    for drive in ["push", "pull"] {
        let records = dir.join(format!("records-{drive}.jsonl"));
        let pipeline = dir.join(format!("lookup-{drive}.toml"));
        std::fs::write(
            &pipeline,
            format!(
                "drive = \"{drive}\"\n[[stage]]\nmodule = \"input.lines\"\npath = \"{}\"\n\
                 [[stage]]\nmodule = \"lookup.dns\"\nname_servers = [\"{silent}\"]\ninflight = {INFLIGHT}\n\
                 [[stage]]\nmodule = \"output.json\"\npath = \"{}\"\n",
                names.display(),
                records.display()
            ),
        )
        .unwrap();
        let stats = dir.join(format!("stats-{drive}.json"));
        let what = format!("dnsluice run, drive = {drive}");
        let (stderr, written, unrecorded) = stopped_soon(
            dnsluice()
                .arg("run")
                .arg(&pipeline)
                .arg("--stats-json")
                .arg(&stats),
            &records,
            &what,
        );
        let summary: Value =
            serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
        // input.lines skips the comments (and counts them).
        let names_read = summary["stages"][0]["out"].as_u64().unwrap();
        assert!(
            names_read > 2 * INFLIGHT && names_read < NAMES,
            "{what}: {names_read} names read: the stop should come while names wait for room\n{stderr}"
        );
        assert_eq!(written + unrecorded, names_read, "{what}: {stderr}");
    }
}

/// `lookup` reading names from a pipe whose writer stays and says nothing
/// more, stopped by SIGTERM: it ends at once with status 143 (it panicked:
/// the input said it was waiting where the lookup never waits), every name
/// written has its record (the fault server's `ok` answer; they came out
/// only with the next name, and at the stop were counted as without
/// one), and the line the writer had not finished is not taken for a name.
#[test]
fn a_lookup_from_a_quiet_pipe_stops_on_sigterm_with_every_whole_line() {
    let server = testkit::FaultServer::start(testkit::FaultKind::Udp);
    let dir = temp_dir("lookup-quiet-pipe");
    let stats = dir.join("stats.json");
    let mut lookup = dnsluice();
    lookup
        .args(["lookup", "A", "-q", "--name-servers"])
        .arg(server.addr().to_string())
        .arg("--stats-json")
        .arg(&stats);
    let records = records_of_a_quiet_pipe(&mut lookup);
    assert_eq!(records.len(), 5);
    // Every name asked is one of those five (the cut line was not).
    let stats: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(stats["names"], 5, "{stats}");
    // The same chain run from its input (its reader waits in the read):
    // the cut line is left out too.
    let pipeline = dir.join("lookup.toml");
    let text = format!(
        "[[stage]]\nmodule = \"input.lines\"\npath = \"-\"\n[[stage]]\nmodule = \"lookup.dns\"\nname_servers = [\"{}\"]\n[[stage]]\nmodule = \"output.json\"\n",
        server.addr()
    );
    std::fs::write(&pipeline, text).unwrap();
    let mut run = dnsluice();
    run.args(["run", "-q"]).arg(&pipeline);
    assert_eq!(records_of_a_quiet_pipe(&mut run).len(), 5);
}

/// Runs `command` with five names and a line cut short on its standard
/// input, left open and quiet, then SIGTERM: it must end at once with
/// status 143; its records, each of one of the five names, `NOERROR`.
fn records_of_a_quiet_pipe(command: &mut Command) -> Vec<Value> {
    use std::io::Write;
    let mut child = command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let names: String = (0..5).map(|i| format!("ok.n{i}.example\n")).collect();
    stdin.write_all(names.as_bytes()).unwrap();
    stdin.flush().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // A line the writer is still on, once the others are read: the reader
    // takes it in and waits in the read for the rest.
    stdin.write_all(b"ok.n5.exa").unwrap();
    stdin.flush().unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    let (status, took) = testkit::sigterm_and_wait(&mut child);
    drop(stdin);
    let stderr = std::io::read_to_string(child.stderr.take().unwrap()).unwrap();
    let stdout = std::io::read_to_string(child.stdout.take().unwrap()).unwrap();
    assert_eq!(status.code(), Some(143), "{stderr}");
    assert!(
        took < Duration::from_secs(2),
        "stopped {took:?} after the signal"
    );
    let records: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut got: Vec<String> = records
        .iter()
        .map(|r| {
            assert_eq!(r["status"], "NOERROR", "{r}");
            r["name"].as_str().unwrap().to_string()
        })
        .collect();
    got.sort();
    let want: Vec<String> = (0..5).map(|i| format!("ok.n{i}.example")).collect();
    assert_eq!(got, want, "{stderr}");
    // And no name was read that has none (the cut line taken for a name
    // was, asked as the stop came).
    assert!(!stderr.contains("have no record"), "{stderr}");
    records
}

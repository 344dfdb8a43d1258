//! SIGTERM stops a lookup soon, and says what it leaves: 2,000 names sent
//! to a nameserver that never answers (a loopback port nothing listens
//! on), stopped a second in. The run ends with status 143 well before the
//! names' tries run out (6 tries of 2 s; the lookup once waited them out
//! for the first name's record, then dropped the rest unsaid), and every
//! name is accounted for: a record, or counted in the warning that the
//! names read and not answered have none (`--resume` asks them again).

use std::fs::File;
use std::time::{Duration, Instant};
use testkit::queue::free_port;
use testkit::{dnsluice, number_before, stopped_by_sigterm, temp_dir};

const NAMES: u64 = 2000;

#[test]
fn a_stopped_lookup_ends_soon_and_says_what_has_no_record() {
    let dir = temp_dir("lookup-stop");
    let names = dir.join("names.txt");
    let list: String = (0..NAMES).map(|i| format!("n{i}.example.com\n")).collect();
    std::fs::write(&names, list).unwrap();
    let records = dir.join("records.jsonl");
    let silent = format!("127.0.0.1:{}", free_port());
    let started = Instant::now();
    let (status, stderr) = stopped_by_sigterm(
        dnsluice()
            .args(["lookup", "--name-servers", &silent, "--output"])
            .arg(&records)
            .stdin(File::open(&names).unwrap()),
        Duration::from_secs(1),
    );
    let took = started.elapsed();
    assert_eq!(status.code(), Some(143), "{stderr}");
    assert!(
        took < Duration::from_secs(8),
        "stopped after {took:?}: {stderr}"
    );
    let written = std::fs::read_to_string(&records).unwrap().lines().count();
    let unanswered = number_before(&stderr, " names read had no answer yet");
    assert_eq!(written as u64 + unanswered, NAMES, "{stderr}");
}

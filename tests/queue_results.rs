//! How a worker's results are stored: one message per item, zstd-compressed
//! unless told otherwise, and one message per record when an item's results
//! are too large for one.

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use testkit::queue::{
    assert_one_right_answer_each, get, json_lines, lookup_worker, names_file, put, status, url,
    wait_ok, work_and_results, OwnBroker,
};
use testkit::{assert_ok, temp_dir};

/// An item whose results are more than half the largest message the broker
/// takes goes out as one message per record (`…/LINE` ids), all stored
/// before the item is acknowledged: on a broker taking 8 KiB at most, 100
/// records of about 550 bytes (plain) become 100 messages; zstd-compressed
/// (about 3 KB) they stay one.
#[test]
fn results_too_large_for_one_message_go_one_per_record() {
    const NAMES: u32 = 250;
    let dir = temp_dir("queue-split");
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
    assert_ok(&out, "zstd -d");
    out.stdout
}

/// Results come back zstd-compressed, one message per item, in frames the
/// zstd program decodes to the records; `--results-compression none` sends
/// them plain.
#[test]
fn results_are_zstd_frames_one_per_item_unless_told_otherwise() {
    const NAMES: u32 = 250;
    let s = testkit::servers();
    let dir = temp_dir("queue-zstd");
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

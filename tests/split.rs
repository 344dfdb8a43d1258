//! `filter.split`: the rest of the chain in N threads gives the same counts as
//! one thread, and `by = "client"` keeps every source address on one thread
//! (and, after `filter.dns`, a client's fragmented answers with it).

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use testkit::corpus::corpus;
use testkit::generated;
use testkit::{assert_ok, run_pipeline, temp_path};

/// Runs `stages` (TOML after the input) on `capture`; the stats JSON (a
/// run that hangs is killed and fails the test: see `run_pipeline`).
fn stats_of(capture: &std::path::Path, stages: &str) -> Value {
    let stats = temp_path("split-stats.json");
    let text = format!(
        "[[stage]]\nmodule = \"input.mmpcap\"\npath = {:?}\n{stages}",
        capture.display().to_string()
    );
    let out = run_pipeline(&text, &["-q", "--stats-json", stats.to_str().unwrap()]);
    assert_ok(&out, capture.display());
    let value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let _ = std::fs::remove_file(&stats);
    value
}

/// The stages named `module` in `stats`, without the split itself.
fn stage<'a>(stats: &'a Value, module: &str) -> &'a Value {
    stats["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["module"] == module)
        .unwrap_or_else(|| panic!("no {module} in {stats}"))
}

const LAYER: &str = "[[stage]]\nmodule = \"filter.layer\"\n";
const DNS: &str = "[[stage]]\nmodule = \"filter.dns\"\n";
const NULL: &str = "[[stage]]\nmodule = \"output.null\"\n";

fn split(threads: u32, by: &str) -> String {
    format!("[[stage]]\nmodule = \"filter.split\"\nthreads = {threads}\nby = \"{by}\"\n")
}

/// Counters equal, except that filter.dns lists only its ten most frequent
/// qtypes and rcodes: merged threads may list one more that one thread had in
/// its ten (every listed value must still be the same).
fn same_counters(a: &Value, b: &Value, capture: &std::path::Path, module: &str) {
    let (a, b) = (a.as_object().unwrap(), b.as_object().unwrap());
    let top_n = |k: &str| k.starts_with("qtype ") || k.starts_with("rcode ");
    for (key, value) in a {
        assert_eq!(
            Some(value),
            b.get(key),
            "{} {module} {key}",
            capture.display()
        );
    }
    for key in b.keys() {
        assert!(
            a.contains_key(key) || top_n(key),
            "{} {module}: extra {key}",
            capture.display()
        );
    }
}

#[test]
fn counts_are_the_same_with_and_without_split() {
    for (capture, _) in corpus() {
        let plain = stats_of(&capture, &format!("{LAYER}{DNS}{NULL}"));
        // After the DNS filter any spreading keeps the counts; before it, only
        // by client (TCP reassembly and defragmentation need a flow's packets
        // together, and a flow's packets share their source).
        for chain in [
            format!("{LAYER}{DNS}{}{NULL}", split(3, "round-robin")),
            format!("{LAYER}{}{DNS}{NULL}", split(2, "client")),
        ] {
            let threaded = stats_of(&capture, &chain);
            for module in ["filter.dns", "output.null"] {
                let (a, b) = (stage(&plain, module), stage(&threaded, module));
                assert_eq!(a["in"], b["in"], "{} {module}: {chain}", capture.display());
                assert_eq!(a["out"], b["out"], "{} {module}", capture.display());
                same_counters(&a["counters"], &b["counters"], &capture, module);
                assert_eq!(a["errors"], b["errors"], "{} {module}", capture.display());
            }
            let s = stage(&threaded, "filter.split");
            let handled: u64 = s["counters"]
                .as_object()
                .unwrap()
                .values()
                .map(|v| v.as_u64().unwrap())
                .sum();
            assert_eq!(s["in"].as_u64().unwrap(), handled, "{}", capture.display());
        }
    }
}

/// Writes 20,000 generated queries from `clients` client addresses to `capture`.
fn generate(capture: &std::path::Path, clients: u32) {
    let clients = clients.to_string();
    generated::generate(
        "gen-pcap.py",
        &["--count", "20000", "--clients", &clients],
        capture,
    );
}

/// Runs `stages` (TOML after the input), then a split by client on
/// `threads` threads, each writing its own JSON lines file, on `capture`:
/// each thread's lines, in the order it wrote them.
fn lines_by_thread(capture: &std::path::Path, stages: &str, threads: u32) -> Vec<Vec<Value>> {
    let prefix = temp_path("split-out");
    let out_path = format!("{}-{{thread}}.jsonl", prefix.display());
    let chain = format!(
        "{stages}{}[[stage]]\nmodule = \"output.json\"\npath = {out_path:?}\n",
        split(threads, "client")
    );
    let stats = stats_of(capture, &chain);
    let lines: Vec<Vec<Value>> = (0..threads)
        .map(|thread| {
            let path = format!("{}-{thread}.jsonl", prefix.display());
            let text = std::fs::read_to_string(&path).unwrap();
            let _ = std::fs::remove_file(&path);
            text.lines()
                .map(|line| serde_json::from_str(line).unwrap())
                .collect()
        })
        .collect();
    let written: usize = lines.iter().map(Vec::len).sum();
    assert_eq!(stage(&stats, "output.json")["in"], written as u64);
    lines
}

#[test]
fn by_client_after_the_dns_filter_keeps_fragmented_answers_with_their_client() {
    // Six queries from one client and four answers from its server; three
    // answers and one query came in fragments (tshark's reassembled
    // messages in the truth).
    let capture = testkit::corpus::corpus_dir().join("ipv4_fragments.pcap");
    let truth = testkit::corpus::truth("ipv4_fragments.pcap");
    let messages = testkit::corpus::truth_rows(&truth["dns_messages"]);
    let client_of = |row: &serde_json::Map<String, Value>| {
        let side = if row["sport"] == 53 { "dst" } else { "src" };
        row[side].as_str().unwrap().to_string()
    };
    let client_of_frame: BTreeMap<u64, String> = messages
        .iter()
        .map(|row| (row["frame"].as_u64().unwrap(), client_of(row)))
        .collect();
    let fragmented = messages.iter().filter(|row| row["ip_reassembled"] == true);
    assert_eq!(fragmented.count(), 4, "the truth's reassembled messages");
    // Any number of threads: the server's and the client's addresses fall
    // on different threads in some of them.
    for threads in 2..=5 {
        let by_thread = lines_by_thread(&capture, &format!("{LAYER}{DNS}"), threads);
        let mut thread_of_client: BTreeMap<String, usize> = BTreeMap::new();
        let mut frames = Vec::new();
        for (thread, lines) in by_thread.iter().enumerate() {
            for v in lines {
                let frame = v["frame"].as_u64().unwrap();
                let client = &client_of_frame[&frame];
                let first = *thread_of_client.entry(client.clone()).or_insert(thread);
                assert_eq!(
                    first, thread,
                    "{threads} threads: frame {frame} of client {client} on thread {thread}, its other messages on {first}"
                );
                frames.push(frame);
            }
        }
        frames.sort_unstable();
        let expected: Vec<u64> = client_of_frame.keys().copied().collect();
        assert_eq!(frames, expected, "{threads} threads: every message once");
    }
}

#[test]
fn by_client_keeps_each_source_on_one_thread_in_order() {
    let capture = temp_path("split-clients.pcap");
    generate(&capture, 300);
    let by_thread = lines_by_thread(&capture, LAYER, 3);
    let mut thread_of: BTreeMap<String, usize> = BTreeMap::new();
    let mut total = 0;
    let mut frames = BTreeSet::new();
    for (thread, lines) in by_thread.iter().enumerate() {
        let mut last_frame = 0;
        for v in lines {
            let src = v["src"].as_str().unwrap().to_string();
            let frame = v["frame"].as_u64().unwrap();
            assert!(
                frame > last_frame,
                "thread {thread}: frame {frame} after {last_frame}"
            );
            last_frame = frame;
            frames.insert(frame);
            let first = *thread_of.entry(src.clone()).or_insert(thread);
            assert_eq!(first, thread, "{src} on threads {first} and {thread}");
        }
        let lines = lines.len();
        assert!(lines > 1000, "thread {thread} got only {lines} packets");
        total += lines;
    }
    let _ = std::fs::remove_file(&capture);
    assert_eq!(total, 20000);
    assert_eq!(frames.len(), 20000, "every packet once");
    assert_eq!(thread_of.len(), 300, "the generator's 300 clients");
}

/// Merged in input order, threads that get nothing hold nothing back: every
/// query of a one-client capture goes to one of three threads (`by =
/// "client"`); the two idle ones are told how far the split has got, so
/// the merged stream has all the generator's 20,000 packets, frames 1 to
/// 20,000 in order, with the smallest queues (one object a batch) and the
/// default ones.
#[test]
fn idle_threads_hold_no_ordered_stream_back() {
    let capture = temp_path("split-one-client.pcap");
    generate(&capture, 1);
    for queues in ["queue = 2\nbatch = 1\n", "queue = 8\nbatch = 2\n", ""] {
        let out_path = temp_path("split-one-client.jsonl");
        let chain = format!(
            "{}{queues}ordered = true\n{LAYER}[[stage]]\nmodule = \"output.json\"\npath = {:?}\n",
            split(3, "client"),
            out_path.display().to_string()
        );
        let stats = stats_of(&capture, &chain);
        let text = std::fs::read_to_string(&out_path).unwrap();
        let _ = std::fs::remove_file(&out_path);
        let frames: Vec<u64> = text
            .lines()
            .map(|line| {
                serde_json::from_str::<Value>(line).unwrap()["frame"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        assert_eq!(frames, (1..=20000).collect::<Vec<u64>>(), "{queues}");
        let split = stage(&stats, "filter.split");
        let mut per_thread: Vec<u64> = (0..3)
            .map(|i| split["counters"][format!("thread.{i}")].as_u64().unwrap())
            .collect();
        per_thread.sort_unstable();
        assert_eq!(
            per_thread,
            [0, 0, 20000],
            "one thread took every packet: {queues}"
        );
    }
    let _ = std::fs::remove_file(&capture);
}

/// With the splitting thread running a copy of the chain itself (`inline`,
/// what `--threads N` sets), it takes a smaller share of the flows, as it
/// also reads and hands over every packet: of 4,000 generated TCP
/// connections (9 packets each, every one from its own client), 7/16 on 2
/// threads and 3/12 on 3, each within five standard deviations of a fair
/// draw of the flows (an equal share, 1/2 and 1/3, is far outside).
#[test]
fn the_splitting_thread_takes_fewer_flows() {
    const CONNECTIONS: u32 = 4000;
    let capture = temp_path("split-tcp-flows.pcap");
    let connections = CONNECTIONS.to_string();
    generated::generate(
        "gen-tcp-pcap.py",
        &["--connections", &connections],
        &capture,
    );
    for (threads, share) in [(2u32, 7.0 / 16.0), (3, 3.0 / 12.0)] {
        let chain = format!(
            "{}inline = true\n{LAYER}{DNS}{NULL}",
            split(threads, "flow")
        );
        let stats = stats_of(&capture, &chain);
        let counters = &stage(&stats, "filter.split")["counters"];
        let per_thread: Vec<u64> = (0..threads)
            .map(|i| counters[format!("thread.{i}")].as_u64().unwrap())
            .collect();
        assert_eq!(per_thread.iter().sum::<u64>(), u64::from(CONNECTIONS) * 9);
        assert!(
            per_thread.iter().all(|&n| n % 9 == 0),
            "whole connections: {per_thread:?}"
        );
        let flows = f64::from(CONNECTIONS);
        let expected = flows * share;
        let sd = (flows * share * (1.0 - share)).sqrt();
        let got = per_thread[0] as f64 / 9.0;
        assert!(
            (got - expected).abs() < 5.0 * sd,
            "{threads} threads: the splitting thread took {got} flows, expected {expected}: {per_thread:?}"
        );
    }
    let _ = std::fs::remove_file(&capture);
}

#[test]
fn split_refuses_pull_pipelines_and_bad_options() {
    let capture = corpus().remove(0).0;
    let text = format!(
        "drive = \"pull\"\n[[stage]]\nmodule = \"input.mmpcap\"\npath = {:?}\n{}{NULL}",
        capture.display().to_string(),
        split(2, "client")
    );
    let out = run_pipeline(&text, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("push pipeline"), "{stderr}");
    let text = format!(
        "[[stage]]\nmodule = \"input.mmpcap\"\npath = {:?}\n{}{NULL}",
        capture.display().to_string(),
        split(2, "sideways")
    );
    let out = run_pipeline(&text, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("not one of round-robin, client"),
        "{stderr}"
    );
    // A mistake in a stage after the split names its line.
    let text = format!(
        "[[stage]]\nmodule = \"input.mmpcap\"\npath = {:?}\n{}[[stage]]\nmodule = \"output.null\"\nbogus = 1\n",
        capture.display().to_string(),
        split(2, "client")
    );
    let out = run_pipeline(&text, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains(":10: key `bogus`"), "{stderr}");
}

//! One capture on several threads (`run --threads N`, the pipeline's
//! `threads` key): every corpus and field capture gives, on 2 and 3 threads,
//! the lines one thread writes, in the same order (`ordered`, the default)
//! or as the same multiset (`--unordered`); TCP streams cut into segments
//! and IP fragments reassemble the same (the captures have both, and the
//! corpus tests check one thread against tshark); the statistics merged
//! from the threads are the one thread's; every kind of input splits;
//! chains that cannot run in copies are refused or run on one thread, saying
//! why.

use dnsluice_core::StageStats;
use dnsluice_modules::fuzzing;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;
use testkit::generated::generate;
use testkit::{assert_ok, dnsluice, output_within, run_ok, temp_dir, wait_usage};

/// layer → dns → json, the chain of `configs/dump.toml`.
const DUMP: &str = "[[stage]]\nmodule = \"filter.layer\"\n[[stage]]\nmodule = \"filter.dns\"\n";
/// layer → json, the chain of `configs/quickstart.toml`: no flow to keep
/// on one thread.
const LAYERS: &str = "[[stage]]\nmodule = \"filter.layer\"\n";

/// Every capture of the corpus and of the field set.
fn captures() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in [testkit::corpus::corpus_dir(), field_dir()] {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if name.ends_with(".pcap") || name.ends_with(".pcapng") {
                files.push(path);
            }
        }
    }
    files.sort();
    assert!(
        files.len() > 100,
        "the corpus and field captures: {}",
        files.len()
    );
    files
}

fn field_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/field")
}

/// A pipeline: `input` reading `path`, the dump chain, output.json to `out`,
/// then `extra` top-level keys.
fn pipeline(dir: &Path, input: &str, path: &Path, out: &Path, extra: &str) -> PathBuf {
    pipeline_of(dir, input, path, DUMP, out, extra)
}

/// [`pipeline`] with the stages `chain` between the input and the output.
fn pipeline_of(
    dir: &Path,
    input: &str,
    path: &Path,
    chain: &str,
    out: &Path,
    extra: &str,
) -> PathBuf {
    let file = dir.join(format!("p{}.toml", rand_suffix()));
    std::fs::write(
        &file,
        format!(
            "{extra}\n[[stage]]\nmodule = \"{input}\"\npath = {:?}\n{chain}[[stage]]\nmodule = \"output.json\"\npath = {:?}\n",
            path.display().to_string(),
            out.display().to_string()
        ),
    )
    .unwrap();
    file
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// What one run gave: its output bytes, its statistics, its exit and stderr.
struct Ran {
    lines: Vec<u8>,
    stats: Value,
    output: Output,
}

/// Runs the dump chain on `capture` with `args` (`--threads N`...); threads
/// that wait on each other fail the test after a minute instead of hanging.
fn dump(dir: &Path, input: &str, capture: &Path, args: &[&str]) -> Ran {
    run_chain(dir, input, capture, DUMP, args)
}

/// [`dump`] with the stages `chain` between the input and output.json.
fn run_chain(dir: &Path, input: &str, capture: &Path, chain: &str, args: &[&str]) -> Ran {
    let out = dir.join(format!("out{}.jsonl", rand_suffix()));
    let stats = dir.join(format!("stats{}.json", rand_suffix()));
    let file = pipeline_of(dir, input, capture, chain, &out, "");
    let mut command = dnsluice();
    command
        .arg("run")
        .arg(&file)
        .arg("--stats-json")
        .arg(&stats)
        .args(args);
    let output = output_within(&mut command, Duration::from_secs(60));
    let ran = Ran {
        lines: std::fs::read(&out).unwrap_or_default(),
        stats: std::fs::read_to_string(&stats)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null),
        output,
    };
    for f in [&out, &stats, &file] {
        let _ = std::fs::remove_file(f);
    }
    ran
}

fn sorted_lines(bytes: &[u8]) -> Vec<&[u8]> {
    let mut lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    lines.sort();
    lines
}

/// `one` (one thread) and `many` (several) ended the same way and wrote the
/// same lines in the same order, with the same statistics.
fn same_lines_and_counts(one: &Ran, many: &Ran, what: &str) {
    assert_eq!(
        one.output.status.code(),
        many.output.status.code(),
        "{what}"
    );
    assert!(
        one.lines == many.lines,
        "{what}: other lines, or in another order"
    );
    same_statistics(&one.stats, &many.stats, what);
}

/// `dnsluice_modules::fuzzing::same_statistics` (the fuzz target's
/// comparison) on two runs' `--stats-json`.
fn same_statistics(one: &Value, many: &Value, what: &str) {
    fuzzing::same_statistics(&by_module(one), &by_module(many), what);
}

/// The counts, errors and counters of a `--stats-json`'s stages, by module.
fn by_module(stats: &Value) -> BTreeMap<String, StageStats> {
    let counts = |map: &Value| -> BTreeMap<String, u64> {
        let map = map.as_object().expect("a map of counts");
        map.iter()
            .map(|(name, n)| (name.clone(), n.as_u64().expect("a count")))
            .collect()
    };
    let stages = stats["stages"].as_array().expect("the stages");
    stages
        .iter()
        .map(|s| {
            let module = s["module"].as_str().expect("a module");
            let mut stage = StageStats::new(module);
            stage.input = s["in"].as_u64().expect("in");
            stage.output = s["out"].as_u64().expect("out");
            stage.errors = counts(&s["errors"]);
            stage.counters = counts(&s["counters"]);
            (module.to_string(), stage)
        })
        .collect()
}

#[test]
fn every_capture_gives_one_threads_lines_on_two_and_three() {
    let dir = temp_dir("threads-corpus");
    let mut compared = 0;
    for capture in captures() {
        let what = capture.display().to_string();
        let one = dump(&dir, "input.mmpcap", &capture, &["--threads", "1"]);
        for threads in ["2", "3"] {
            let many = dump(&dir, "input.mmpcap", &capture, &["--threads", threads]);
            same_lines_and_counts(&one, &many, &format!("{what}, {threads} threads"));
        }
        compared += usize::from(!one.lines.is_empty());
    }
    assert!(compared > 100, "captures with DNS messages: {compared}");
}

/// The captures that `keep` takes and that one thread reads to the end (a
/// broken record would stop mergecap), merged into one in time order by
/// `mergecap` (`name`, in `format`): its capture times only go forward, as
/// a capture's do (what times out depends on them).
fn merged(dir: &Path, name: &str, format: &str, keep: impl Fn(&Path) -> bool) -> PathBuf {
    let merged = dir.join(name);
    let mut merge = Command::new("mergecap");
    merge.args(["-F", format, "-w"]).arg(&merged);
    for capture in captures().into_iter().filter(|c| keep(c)) {
        let ran = dump(dir, "input.mmpcap", &capture, &["--threads", "1"]);
        let warned = ran.stats["stages"][0]["warnings"] != serde_json::json!([]);
        if ran.output.status.success() && !warned {
            merge.arg(capture);
        }
    }
    run_ok(&mut merge);
    merged
}

/// Every capture merged into one (pcapng, one interface per link type):
/// long enough for a hundred batches and more. mergecap cannot write a
/// second section's interfaces.
fn everything(dir: &Path) -> PathBuf {
    merged(dir, "all.pcapng", "pcapng", |capture| {
        !capture.ends_with("pcapng_two_sections.pcapng")
    })
}

#[test]
fn a_long_capture_splits_the_same_ordered_or_not_from_every_input() {
    let dir = temp_dir("threads-long");
    let all = everything(&dir);
    let one = dump(&dir, "input.mmpcap", &all, &["--threads", "1"]);
    assert_ok(&one.output, "one thread");
    let counters = &one.stats["stages"][2]["counters"];
    assert_eq!(one.stats["stages"][2]["module"], "filter.dns");
    // TCP streams cut into segments and fragmented datagrams, reassembled.
    for kind in ["tcp_reassembled", "ip_reassembled", "tcp_flows_expired"] {
        assert!(counters[kind].as_u64().unwrap() > 10, "{kind}: {counters}");
    }
    let messages = counters["messages"].as_u64().unwrap();
    assert!(messages > 20_000, "messages: {messages}");
    for threads in ["2", "3"] {
        let ordered = dump(&dir, "input.mmpcap", &all, &["--threads", threads]);
        assert_ok(&ordered.output, threads);
        assert!(one.lines == ordered.lines, "{threads} threads, ordered");
        same_statistics(&one.stats, &ordered.stats, "ordered");
        let summary = String::from_utf8_lossy(&ordered.output.stderr).to_string();
        assert!(
            summary.contains(&format!("on {threads} threads by flow")),
            "{summary}"
        );
        // A mapped pcapng is read in parts too.
        assert!(summary.contains(IN_PARTS), "{summary}");
        let loose = dump(
            &dir,
            "input.mmpcap",
            &all,
            &["--threads", threads, "--unordered"],
        );
        assert_ok(&loose.output, threads);
        assert_eq!(
            sorted_lines(&one.lines),
            sorted_lines(&loose.lines),
            "{threads} unordered"
        );
        same_statistics(&one.stats, &loose.stats, "unordered");
    }
    // Buffered reads, a compressed file, standard input.
    small_batches_spread_and_merge_in_order(&dir, &all, &one);
    let buffered = dump(&dir, "input.fpcap", &all, &["--threads", "2"]);
    assert!(one.lines == buffered.lines, "input.fpcap");
    // Reads of 1 KiB: the reader's block changes every few records, and a
    // batch is handed over at each change (its packets cross by place).
    let small_reads = ["--set", "0.buffer_kib=1"];
    let one_small = dump(
        &dir,
        "input.fpcap",
        &all,
        &[&["--threads", "1"], &small_reads[..]].concat(),
    );
    assert!(one.lines == one_small.lines, "1 KiB reads, one thread");
    for threads in ["2", "3"] {
        let small = [&["--threads", threads], &small_reads[..]].concat();
        let ordered = dump(&dir, "input.fpcap", &all, &small);
        assert!(one.lines == ordered.lines, "1 KiB reads, {threads} threads");
        let loose = dump(
            &dir,
            "input.fpcap",
            &all,
            &[&small[..], &["--unordered"]].concat(),
        );
        let what = format!("1 KiB reads, {threads} threads, unordered");
        assert_eq!(
            sorted_lines(&one.lines),
            sorted_lines(&loose.lines),
            "{what}"
        );
        same_statistics(&one_small.stats, &loose.stats, &what);
    }
    run_ok(Command::new("zstd").args(["-q", "-f", "-k"]).arg(&all));
    let zstd = PathBuf::from(format!("{}.zst", all.display()));
    let compressed = dump(&dir, "input.fpcap", &zstd, &["--threads", "2"]);
    assert!(one.lines == compressed.lines, "zstd");
    let out = dir.join("stdin.jsonl");
    let file = pipeline(&dir, "input.fpcap", Path::new("-"), &out, "threads = 2");
    let status = dnsluice()
        .arg("run")
        .arg(&file)
        .arg("-q")
        .stdin(std::fs::File::open(&zstd).unwrap())
        .status()
        .unwrap();
    assert!(status.success());
    assert!(one.lines == std::fs::read(&out).unwrap(), "stdin");
}

/// The implicit split is a filter.split: with small batches it shows that
/// every thread works and the merge still gives one thread's lines.
fn small_batches_spread_and_merge_in_order(dir: &Path, capture: &Path, one: &Ran) {
    let out = dir.join("split.jsonl");
    let stats = dir.join("split.json");
    let text = format!(
        "[[stage]]\nmodule = \"input.mmpcap\"\npath = {:?}\n[[stage]]\nmodule = \"filter.split\"\nthreads = 3\nby = \"flow\"\nbatch = 3\nqueue = 6\n{DUMP}[[stage]]\nmodule = \"output.json\"\npath = {:?}\n",
        capture.display().to_string(),
        out.display().to_string()
    );
    let file = dir.join("split.toml");
    std::fs::write(&file, text).unwrap();
    let mut command = dnsluice();
    command
        .arg("run")
        .arg(&file)
        .arg("--stats-json")
        .arg(&stats);
    let run = output_within(&mut command, Duration::from_secs(60));
    assert_ok(&run, "filter.split");
    assert!(one.lines == std::fs::read(&out).unwrap(), "batches of 3");
    let stats: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let split = &stats["stages"][1];
    assert_eq!(split["module"], "filter.split");
    for thread in ["thread.0", "thread.1", "thread.2"] {
        assert!(split["counters"][thread].as_u64().unwrap() > 100, "{split}");
    }
}

#[test]
fn chains_that_cannot_run_in_copies_are_refused_or_run_on_one_thread() {
    let dir = temp_dir("threads-refused");
    let capture = testkit::corpus::corpus_dir().join("dns_edns_compression.pcap");
    let pcap_out = dir.join("out.pcap");
    let text = format!(
        "threads = 2\n\n[[stage]]\nmodule = \"input.mmpcap\"\npath = {:?}\n[[stage]]\nmodule = \"output.pcap\"\npath = {:?}\n",
        capture.display().to_string(),
        pcap_out.display().to_string()
    );
    let file = dir.join("pcap.toml");
    std::fs::write(&file, &text).unwrap();
    let out = dnsluice().arg("run").arg(&file).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("pcap.toml:1: key `threads`: `output.pcap` cannot run in several threads"),
        "{err}"
    );
    // Left to choose, it runs on one thread and says why.
    let out = dnsluice()
        .arg("run")
        .arg(&file)
        .args(["--threads", "auto"])
        .output()
        .unwrap();
    assert_ok(&out, "auto");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("on 1 thread (`output.pcap` runs on one thread)"),
        "{err}"
    );
    // A chain that only counts runs faster on one thread; one that writes
    // JSON takes every core.
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs");
    let summary = |name: &str, more: &[&str]| {
        let out = dnsluice()
            .arg("run")
            .arg(config.join(name))
            .arg("--set")
            .arg(format!("0.path={}", capture.display()))
            .args(more)
            .stdout(Stdio::null())
            .output()
            .unwrap();
        assert_ok(&out, name);
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let counting = summary("dns-null.toml", &[]);
    assert!(
        counting.contains("on 1 thread (its stages cost less per object"),
        "{counting}"
    );
    let cores = std::thread::available_parallelism().unwrap().get();
    if cores > 1 {
        let dumping = summary("dump.toml", &[]);
        let expected = format!("on {cores} threads by flow (the machine's cores)");
        assert!(dumping.contains(&expected), "{dumping}");
    }
    // More threads than cores: said so.
    let more = cores + 1;
    let said = summary("dump.toml", &["--threads", &more.to_string()]);
    let expected = format!(
        "on {more} threads by flow (threads = {more}, more than the machine's {cores} cores: they take turns)"
    );
    assert!(said.contains(&expected), "{said}");
    // A bad value names its line.
    std::fs::write(&file, text.replace("threads = 2", "threads = 0")).unwrap();
    let out = dnsluice().arg("run").arg(&file).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("pcap.toml:1: key `threads`: `0`"), "{err}");
}

/// An output of a file format runs in copies when each writes its own
/// file (`{thread}`): the per-thread pcaps hold every record between them
/// (`capinfos`). A client does not, whatever its paths say: each copy of
/// `output.diff` would ask its own part and write its summary over the
/// others' (a quarter of the queries, on four threads).
#[test]
fn a_file_per_thread_splits_a_writer_but_never_a_client() {
    let dir = temp_dir("threads-own-files");
    let capture = testkit::corpus::corpus_dir().join("dns_edns_compression.pcap");
    let stage = |module: &str, more: &str| {
        format!(
            "threads = 2\n\n[[stage]]\nmodule = \"input.mmpcap\"\npath = {:?}\n[[stage]]\nmodule = {module:?}\n{more}",
            capture.display().to_string()
        )
    };
    let pcaps = format!(
        "path = {:?}\n",
        dir.join("out-{thread}.pcap").display().to_string()
    );
    let file = dir.join("pcaps.toml");
    std::fs::write(&file, stage("output.pcap", &pcaps)).unwrap();
    assert_ok(
        &dnsluice().args(["run", "-q"]).arg(&file).output().unwrap(),
        "pcaps",
    );
    let written: u64 = ["out-0.pcap", "out-1.pcap"]
        .iter()
        .map(|name| records_of(&dir.join(name)))
        .sum();
    assert_eq!(written, records_of(&capture));
    let diff = format!(
        "servers = [\"127.0.0.1:9\", \"127.0.0.2:9\"]\npath = {:?}\nsummary = {:?}\n",
        dir.join("d-{thread}.jsonl").display().to_string(),
        dir.join("s-{thread}.json").display().to_string()
    );
    let file = dir.join("diff.toml");
    std::fs::write(&file, stage("output.diff", &diff)).unwrap();
    let out = dnsluice().args(["run", "-q"]).arg(&file).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("diff.toml:1: key `threads`: `output.diff` cannot run in several threads"),
        "{err}"
    );
}

#[test]
fn a_reader_that_goes_away_ends_the_run_quietly() {
    // Far more lines than a pipe holds.
    let dir = temp_dir("threads-pipe");
    let capture = dir.join("long.pcap");
    let once = field_dir().join("dnscap-dns.pcap");
    run_ok(
        Command::new("mergecap")
            .args(["-a", "-F", "pcap", "-w"])
            .arg(&capture)
            .args(vec![&once; 40]),
    );
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/dump.toml");
    let mut child = dnsluice()
        .arg("run")
        .arg(&config)
        .args(["--threads", "2", "-q", "--set"])
        .arg(format!("0.path={}", capture.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 10];
    std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The corpus's classic pcaps on Ethernet merged into one classic pcap:
/// TCP streams cut into segments and IP fragments, readable in parts.
fn ethernet_pcap(dir: &Path) -> PathBuf {
    merged(dir, "ethernet.pcap", "pcap", |capture| {
        let head = std::fs::read(capture).unwrap();
        let classic = head.starts_with(&[0xd4, 0xc3, 0xb2, 0xa1]);
        classic && head.len() >= 24 && head[20..24] == [1, 0, 0, 0]
    })
}

/// The records of a capture, as `capinfos` counts them.
fn records_of(capture: &Path) -> u64 {
    let out = run_ok(
        Command::new("capinfos")
            .args(["-M", "-c", "-T", "-r"])
            .arg(capture),
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.split('\t').nth(1).unwrap().trim().parse().unwrap()
}

/// The summary line that says the threads read the capture in parts.
const IN_PARTS: &str = "each reading its own parts of the capture";

/// `one` (one thread) and `many` (threads reading in parts) wrote the same
/// lines in the same order, counted the same, and `many` said it read in parts.
fn same_run(one: &Ran, many: &Ran, what: &str) {
    same_lines_and_counts(one, many, what);
    let summary = String::from_utf8_lossy(&many.output.stderr).to_string();
    assert!(summary.contains(IN_PARTS), "{what}: {summary}");
}

#[test]
fn a_pcap_read_in_parts_by_every_thread_gives_one_threads_lines() {
    let dir = temp_dir("threads-parts");
    let ethernet = ethernet_pcap(&dir);
    let one = dump(&dir, "input.mmpcap", &ethernet, &["--threads", "1"]);
    assert_ok(&one.output, "one thread");
    assert_eq!(one.stats["stages"][0]["in"], records_of(&ethernet));
    let counters = &one.stats["stages"][2]["counters"];
    for kind in ["tcp_reassembled", "ip_reassembled"] {
        assert!(counters[kind].as_u64().unwrap() > 10, "{kind}: {counters}");
    }
    // Parts of 1 KiB: a few packets each, a flow's packets in many parts
    // read by different threads; of 64 KiB; and the default.
    for part in ["1", "64", "512"] {
        for threads in ["2", "3"] {
            let what = format!("{threads} threads, parts of {part} KiB");
            let args = ["--threads", threads, "--set", &format!("0.part_kib={part}")];
            let ordered = dump(&dir, "input.mmpcap", &ethernet, &args);
            same_run(&one, &ordered, &what);
            let loose = dump(
                &dir,
                "input.mmpcap",
                &ethernet,
                &[&args[..], &["--unordered"]].concat(),
            );
            assert_ok(&loose.output, &what);
            assert_eq!(
                sorted_lines(&one.lines),
                sorted_lines(&loose.lines),
                "{what}, unordered"
            );
            same_statistics(&one.stats, &loose.stats, &what);
        }
    }
    // More threads than cores, many parts in hand at once, every flow's
    // packets posted between threads that take turns on the cores.
    let args = ["--threads", "8", "--set", "0.part_kib=1"];
    let many = dump(&dir, "input.mmpcap", &ethernet, &args);
    same_run(&one, &many, "8 threads, parts of 1 KiB");
    // Many TCP connections open at once, each across parts.
    let tcp = tcp_capture(&dir);
    let one = dump(&dir, "input.mmpcap", &tcp, &["--threads", "1"]);
    assert_eq!(one.stats["stages"][2]["counters"]["tcp_reassembled"], 6000);
    for threads in ["2", "3"] {
        let many = dump(
            &dir,
            "input.mmpcap",
            &tcp,
            &["--threads", threads, "--set", "0.part_kib=4"],
        );
        same_run(&one, &many, &format!("TCP, {threads} threads"));
    }
}

/// A chain with no flow to keep on one thread (layers → JSON, the chain of
/// `configs/quickstart.toml`) is spread round-robin: the threads reading in
/// parts post nothing to each other's mailboxes, and move on past every
/// part by the parts read alone. They write one thread's lines in order
/// (as a multiset when unordered), from the corpus's Ethernet captures and
/// from many TCP connections, in parts of 1 KiB: one line a record, as
/// `capinfos` counts them.
#[test]
fn a_chain_without_flows_read_in_parts_round_robin_gives_one_threads_lines() {
    let dir = temp_dir("threads-round-robin");
    for capture in [ethernet_pcap(&dir), tcp_capture(&dir)] {
        let one = run_chain(&dir, "input.mmpcap", &capture, LAYERS, &["--threads", "1"]);
        assert_ok(&one.output, "one thread");
        let lines = one.lines.iter().filter(|b| **b == b'\n').count() as u64;
        assert_eq!(lines, records_of(&capture), "{}", capture.display());
        for threads in ["2", "3"] {
            let what = format!("{}, {threads} threads", capture.display());
            let args = ["--threads", threads, "--set", "0.part_kib=1"];
            let many = run_chain(&dir, "input.mmpcap", &capture, LAYERS, &args);
            same_run(&one, &many, &what);
            let summary = String::from_utf8_lossy(&many.output.stderr).to_string();
            let said = format!("on {threads} threads by round-robin");
            assert!(summary.contains(&said), "{what}: {summary}");
            let loose_args = [&args[..], &["--unordered"]].concat();
            let loose = run_chain(&dir, "input.mmpcap", &capture, LAYERS, &loose_args);
            assert_ok(&loose.output, &what);
            assert_eq!(
                sorted_lines(&one.lines),
                sorted_lines(&loose.lines),
                "{what}, unordered"
            );
        }
    }
}

/// 3,000 TCP connections, 200 open at a time (the benches' generator):
/// each connection's query and answer reassemble from segments that lie
/// far apart in the capture.
fn tcp_capture(dir: &Path) -> PathBuf {
    let tcp = dir.join("tcp.pcap");
    let args = ["--connections", "3000", "--open", "200"];
    generate("gen-tcp-pcap.py", &args, &tcp);
    tcp
}

/// Far more threads than cores (512; CI has 2) reading a capture of many
/// TCP connections in parts of 4 KiB: they take turns, and still write one
/// thread's lines in its order, holding memory that grows with the threads,
/// not with their square. The kernel's account of the run's peak memory
/// (`wait4`, through `timeout`, which bounds the run) stays under a
/// megabyte a thread: before, each thread's two merger lanes had room for
/// some six batches per thread, 1,129 MB at 512 threads on this capture
/// (the tests' debug build; 233 MB since).
#[test]
fn far_more_threads_than_cores_give_one_threads_lines_in_little_memory() {
    let dir = temp_dir("threads-far-more");
    let tcp = tcp_capture(&dir);
    let one = dump(&dir, "input.mmpcap", &tcp, &["--threads", "1"]);
    assert_eq!(one.stats["stages"][2]["counters"]["tcp_reassembled"], 6000);
    let threads = 512u64;
    let out = dir.join("many.jsonl");
    let stats = dir.join("many.json");
    let file = pipeline(&dir, "input.mmpcap", &tcp, &out, "");
    let child = Command::new("timeout")
        .arg("120")
        .arg(dnsluice().get_program())
        .arg("run")
        .arg(&file)
        .args(["--threads", &threads.to_string(), "--set", "0.part_kib=4"])
        .arg("--stats-json")
        .arg(&stats)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start timeout and dnsluice");
    let usage = wait_usage(child);
    assert!(usage.success, "{threads} threads: {}", usage.stderr);
    let many = Ran {
        lines: std::fs::read(&out).unwrap(),
        stats: serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap(),
        output: Output {
            status: std::process::ExitStatus::default(),
            stdout: Vec::new(),
            stderr: usage.stderr.clone().into_bytes(),
        },
    };
    same_run(&one, &many, "512 threads");
    let per_thread = usage.max_rss_bytes / threads;
    assert!(
        per_thread < 1024 * 1024,
        "peak {} MB on {threads} threads",
        usage.max_rss_bytes >> 20
    );
    // Read by one thread that hands batches to 512 workers, which sleep
    // up to a second when idle (they take turns: 256 a core on CI): each
    // is woken for what it must do, so the run is whole and ends.
    let one = dump(&dir, "input.fpcap", &tcp, &["--threads", "1"]);
    let workers = dump(&dir, "input.fpcap", &tcp, &["--threads", "512"]);
    same_lines_and_counts(&one, &workers, "512 workers");
}

/// Where the record at `index` (counted from 0) starts in a little-endian
/// classic pcap.
fn record_offset(capture: &[u8], index: usize) -> usize {
    let mut at = 24;
    for _ in 0..index {
        let caplen = u32::from_le_bytes(capture[at + 8..at + 12].try_into().unwrap());
        at += 16 + caplen as usize;
    }
    at
}

#[test]
fn a_pcap_cut_off_or_corrupt_reads_in_parts_as_on_one_thread() {
    let dir = temp_dir("threads-parts-broken");
    let ethernet = ethernet_pcap(&dir);
    let whole = std::fs::read(&ethernet).unwrap();
    let records = records_of(&ethernet) as usize;
    let middle = record_offset(&whole, records / 2);
    // Cut off inside a record half way; a record half way that claims more
    // bytes than any record may hold.
    let cut = dir.join("cut.pcap");
    std::fs::write(&cut, &whole[..middle + 20]).unwrap();
    let corrupt = dir.join("corrupt.pcap");
    let mut bytes = whole.clone();
    bytes[middle + 8..middle + 12].copy_from_slice(&u32::MAX.to_le_bytes());
    std::fs::write(&corrupt, &bytes).unwrap();
    for (capture, what) in [(&cut, "cut off"), (&corrupt, "corrupt")] {
        let one = dump(&dir, "input.mmpcap", capture, &["--threads", "1"]);
        assert_eq!(one.stats["stages"][0]["in"], records / 2, "{what}");
        let told = |ran: &Ran| {
            let stderr = String::from_utf8_lossy(&ran.output.stderr).to_string();
            let warnings = ran.stats["stages"][0]["warnings"].clone();
            (
                stderr
                    .lines()
                    .filter(|l| l.contains("error"))
                    .map(str::to_string)
                    .collect::<Vec<_>>(),
                warnings,
            )
        };
        for part in ["1", "512"] {
            let args = ["--threads", "2", "--set", &format!("0.part_kib={part}")];
            let many = dump(&dir, "input.mmpcap", capture, &args);
            same_run(&one, &many, what);
            assert_eq!(told(&one), told(&many), "{what}");
        }
        let (errors, warnings) = told(&one);
        match what {
            "cut off" => {
                assert!(one.output.status.success(), "{what}");
                let expected =
                    format!("the 20 bytes from byte offset {middle} are an incomplete record");
                assert!(warnings.to_string().contains(&expected), "{warnings}");
            }
            _ => {
                assert!(!one.output.status.success(), "{what}");
                let expected =
                    format!("at byte offset {middle}: record claims 4294967295 captured bytes");
                assert!(errors.iter().any(|e| e.contains(&expected)), "{errors:?}");
            }
        }
    }
}

/// Where each block of a little-endian pcapng starts, and its type.
fn pcapng_blocks(capture: &[u8]) -> Vec<(usize, u32)> {
    let mut blocks = Vec::new();
    let mut at = 0;
    while at + 12 <= capture.len() {
        let word = |from: usize| u32::from_le_bytes(capture[from..from + 4].try_into().unwrap());
        blocks.push((at, word(at)));
        at += word(at + 4) as usize;
    }
    blocks
}

#[test]
fn a_pcapng_read_in_parts_gives_one_threads_lines() {
    // Interfaces with their own link types and time units (mergecap's
    // merge, and the corpus's files one by one: two sections, big-endian,
    // several interfaces, nanoseconds) in parts of 1 KiB: many parts start
    // after an interface block or a new section.
    let dir = temp_dir("threads-pcapng-parts");
    let all = everything(&dir);
    let mut pcapngs: Vec<PathBuf> = captures()
        .into_iter()
        .filter(|c| c.extension().is_some_and(|e| e == "pcapng"))
        .collect();
    assert!(pcapngs.len() >= 5, "{pcapngs:?}");
    pcapngs.push(all.clone());
    for capture in &pcapngs {
        let one = dump(&dir, "input.mmpcap", capture, &["--threads", "1"]);
        assert_eq!(one.stats["stages"][0]["in"], records_of(capture));
        for threads in ["2", "3"] {
            let args = ["--threads", threads, "--set", "0.part_kib=1"];
            let many = dump(&dir, "input.mmpcap", capture, &args);
            let what = format!("{}, {threads} threads", capture.display());
            same_run(&one, &many, &what);
        }
    }
    // Cut off 10 bytes into the middle packet block; that block's trailing
    // length not its leading one.
    let whole = std::fs::read(&all).unwrap();
    let packets: Vec<usize> = pcapng_blocks(&whole)
        .into_iter()
        .filter(|&(_, kind)| kind == 6)
        .map(|(at, _)| at)
        .collect();
    let middle = packets[packets.len() / 2];
    let length = u32::from_le_bytes(whole[middle + 4..middle + 8].try_into().unwrap()) as usize;
    let cut = dir.join("cut.pcapng");
    std::fs::write(&cut, &whole[..middle + 10]).unwrap();
    let corrupt = dir.join("corrupt.pcapng");
    let mut bytes = whole.clone();
    let trailer = middle + length - 4;
    bytes[trailer..trailer + 4].copy_from_slice(&(length as u32 + 4).to_le_bytes());
    std::fs::write(&corrupt, &bytes).unwrap();
    for (capture, expected) in [
        (
            &cut,
            format!("the 10 bytes from byte offset {middle} are an incomplete record"),
        ),
        (
            &corrupt,
            format!(
                "at byte offset {middle}: block of type 0x00000006: leading length {length} and trailing length {} differ",
                length + 4
            ),
        ),
    ] {
        let one = dump(&dir, "input.mmpcap", capture, &["--threads", "1"]);
        assert_eq!(one.stats["stages"][0]["in"], packets.len() / 2);
        let many = dump(
            &dir,
            "input.mmpcap",
            capture,
            &["--threads", "2", "--set", "0.part_kib=1"],
        );
        same_run(&one, &many, &expected);
        for ran in [&one, &many] {
            let told = format!(
                "{} {}",
                String::from_utf8_lossy(&ran.output.stderr),
                ran.stats["stages"][0]["warnings"]
            );
            assert!(told.contains(&expected), "{told}");
        }
    }
}

#[test]
fn an_output_that_fails_stops_the_threads_reading_in_parts() {
    let dir = temp_dir("threads-parts-fail");
    let ethernet = ethernet_pcap(&dir);
    let file = pipeline(&dir, "input.mmpcap", &ethernet, Path::new("/dev/full"), "");
    let mut child = dnsluice()
        .arg("run")
        .arg(&file)
        .args(["--threads", "2", "--set", "0.part_kib=1"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("the run did not end after its output failed");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/dev/full: No space left on device"), "{err}");
}

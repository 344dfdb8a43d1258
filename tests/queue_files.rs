//! Capture files as work (`queue put --files`, `run --files`): the
//! summaries of workers (one killed mid-run) merge to what one run over all
//! the files concatenated by mergecap gives, and shards of lines and of
//! files cover each exactly once.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;
use testkit::queue::{
    assert_one_right_answer_each, consumer, freeze_and_kill, json_lines, status, wait_for, wait_ok,
    work_and_results,
};
use testkit::{dnsluice, run_ok, temp_dir, wait_within};

/// Ten captures: the corpus's eight small distinct captures, two of them
/// twice (as copies). (Their qtype and rcode kinds together fit the
/// summary's top-10 lists; `files_whose_query_types_together_pass_the_top_ten_merge_to_one_run`
/// has files whose kinds do not.)
fn capture_set(dir: &Path) -> Vec<PathBuf> {
    capture_set_with(dir, 0)
}

/// [`capture_set`], but the copy of `misc_l2l3.pcap` is that capture
/// concatenated `2^doublings` times by mergecap and is the third file: a
/// file long enough for a worker to be killed in after it did two others.
fn capture_set_with(dir: &Path, doublings: u32) -> Vec<PathBuf> {
    let corpus = testkit::corpus::corpus_dir();
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
    run_ok(Command::new("zstd").args(["-q", "-k", "-f"]).arg(&plain));
    files.push(zstd_of(&plain));
    if doublings > 0 {
        let long = files.remove(8);
        let twice = dir.join("twice.pcap");
        for _ in 0..doublings {
            run_ok(
                Command::new("mergecap")
                    .args(["-a", "-F", "pcap", "-w"])
                    .arg(&twice)
                    .args([&long, &long]),
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
    run_ok(
        Command::new("mergecap")
            .args(["-a", "-F", "pcapng", "-w"])
            .arg(&all)
            .args(&files),
    );
    let stats = dir.join("one.json");
    run_ok(
        dnsluice()
            .arg("run")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/qtype-stats.toml"))
            .arg("--set")
            .arg(format!("0.path={}", all.display()))
            .arg("--stats-json")
            .arg(&stats)
            .arg("-q"),
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
    two_workers_one_ended("queue-captures", "cap", freeze_and_kill);
}

/// A worker stopped by SIGTERM in the middle of a file neither publishes
/// that file's partial summary nor takes another file: it hands the file
/// back to the queue and ends (status 143), and the merge of every summary
/// is still one run's over all the files. (A SIGTERM used to end each run
/// early and publish it "OK": the stopped file's part, then an empty
/// summary for every file left in the queue, all acknowledged.)
#[test]
fn a_worker_stopped_by_sigterm_hands_its_file_back() {
    two_workers_one_ended("queue-captures-term", "capterm", |first: &mut Child| {
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(first.id() as i32, libc::SIGTERM) }, 0);
        let status = wait_within(first, Duration::from_secs(30)).expect("the worker did not stop");
        assert_eq!(status.code(), Some(143));
    });
}

/// Ten capture files put as work; a first worker does the two small ones
/// and is ended by `end` while it holds the long third one; a second worker
/// does the rest. Every file has one summary, and their merge is one run's
/// over all the files.
fn two_workers_one_ended(dir_name: &str, queue: &str, end: impl FnOnce(&mut Child)) {
    let dir = temp_dir(dir_name);
    // The third file takes about a second (2^15 copies of a capture).
    let files = capture_set_with(&dir, 15);
    let (work, results) = work_and_results(queue);
    let mut put_cmd = dnsluice();
    put_cmd
        .args(["queue", "put", &work, "--files"])
        .args(&files);
    run_ok(&mut put_cmd);
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
    // The first worker alone does the two small files, and is ended
    // while it holds the long third one; the second does the rest.
    let mut first = worker("first");
    wait_for(&work, &[], Duration::from_secs(30), |st| {
        st["acked"].as_u64().unwrap_or(0) >= 2
            && consumer(st, "workers")["in_flight"].as_u64().unwrap_or(0) >= 1
    });
    end(&mut first);
    let by_first = files_done("first");
    assert!(by_first >= 2, "the first worker did {by_first} files");
    // Its file and the ones it did not take are still in the queue (a file
    // it said was done may be too, if it was ended before acknowledging it).
    let left = status(&work, &[])["messages"].as_u64().unwrap_or(0);
    assert!(
        left >= 10 - by_first as u64,
        "{left} files left in the queue after the first worker did {by_first}:\n{}",
        std::fs::read_to_string(dir.join("first.err")).unwrap()
    );
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
        "the ended worker's file was not redelivered:\n{err}"
    );
    assert!(
        files_done("second") >= 10 - by_first,
        "the second worker did {} files:\n{err}",
        files_done("second")
    );
    assert_eq!(status(&work, &[])["messages"], 0);

    let out = run_ok(dnsluice().args(["queue", "get", &results, "--expect", "10", "--merge"]));
    let merged: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(merged["files"], 10, "{merged}");
    assert_eq!(merged["failed"], serde_json::json!([]));
    assert_eq!(comparable(&merged), comparable(&one_run_over(&dir, &files)));
    // The long capture and the concatenation are a quarter of a gigabyte.
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shards_cover_every_line_and_every_file_exactly_once() {
    const NAMES: u32 = 1_000;
    const SHARDS: u32 = 3;
    let s = testkit::servers();
    let dir = temp_dir("queue-shards");
    // Blank and comment lines count as lines (a shard is by position).
    let mut text = String::from("# names\n\n");
    text.extend((0..NAMES).map(|i| format!("n{i}.lookup.test\n")));
    let file = dir.join("names.txt");
    std::fs::write(&file, text).unwrap();
    let mut all = Vec::new();
    for i in 0..SHARDS {
        let out = run_ok(
            dnsluice()
                .args([
                    "lookup",
                    "A",
                    "--name-servers",
                    &s.knot.to_string(),
                    "--input",
                ])
                .arg(&file)
                .args(["--shard", &format!("{i}/{SHARDS}"), "-q"]),
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
        run_ok(
            dnsluice()
                .arg("run")
                .arg(&pipeline)
                .arg("--files")
                .args(&files)
                .args(["--shard", &format!("{i}/{SHARDS}"), "-q", "--stats-json"])
                .arg(&stats),
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

/// `run --files ... --jobs N`: the ten captures one, two and three at a
/// time (more runs at once than this machine's two cores) add up to what
/// one run over their concatenation by mergecap gives; a pipeline whose
/// runs would write one output file at once is refused.
#[test]
fn files_run_several_at_once_add_up_to_one_run() {
    let dir = temp_dir("files-jobs");
    let files = capture_set(&dir);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let one = comparable(&one_run_over(&dir, &files));
    for jobs in ["1", "2", "3"] {
        let v = files_run(&dir, &files, jobs);
        assert_eq!(v["files"], files.len(), "--jobs {jobs}");
        assert_eq!(comparable(&v), one, "--jobs {jobs}");
    }
    let out = dnsluice()
        .arg("run")
        .arg(root.join("configs/dump.toml"))
        .arg("--set")
        .arg(format!("3.path={}", dir.join("shared.jsonl").display()))
        .arg("--files")
        .args(&files)
        .args(["--jobs", "2"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--jobs 2: the runs would write output.json's output at once"),
        "{stderr}"
    );
}

/// Four captures, each with six query types of its own (24 in all), so
/// that each file's summary lists all of its own and the files together
/// have more than the ten the summary lists: `--files --jobs 2` lists the
/// ten most frequent of all four, as one run over their concatenation
/// does. (The runs' listed counters were added up: every type of every
/// file was listed.)
#[test]
fn files_whose_query_types_together_pass_the_top_ten_merge_to_one_run() {
    let dir = temp_dir("files-top");
    let files: Vec<PathBuf> = (0..4u16)
        .map(|k| {
            let queries: Vec<testkit::replay::Q> = (0..6u16)
                .flat_map(|t| {
                    let qtype = 1 + 6 * k + t;
                    // Counts 3 to 26, none the same: one order for any merge.
                    let count = 3 + usize::from((qtype * 7) % 24);
                    (0..count).map(move |i| testkit::replay::Q {
                        source: 1 + (i % 5) as u8,
                        name: format!("q{i}.t{qtype}.example"),
                        qtype,
                        at_us: u64::from(qtype) * 1000 + i as u64,
                    })
                })
                .collect();
            let path = dir.join(format!("types{k}.pcap"));
            testkit::replay::write_capture(&path, &queries);
            path
        })
        .collect();
    let one = one_run_over(&dir, &files);
    let listed = |summary: &Value| {
        summary["stages"][2]["counters"]
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| k.starts_with("qtype "))
            .count()
    };
    assert_eq!(listed(&one), 10, "{one}");
    let merged = files_run(&dir, &files, "2");
    assert_eq!(comparable(&merged), comparable(&one));
}

/// `dnsluice run configs/qtype-stats.toml --files FILES --jobs JOBS`: its
/// merged summary.
fn files_run(dir: &Path, files: &[PathBuf], jobs: &str) -> Value {
    let stats = dir.join(format!("jobs{jobs}.json"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    run_ok(
        dnsluice()
            .arg("run")
            .arg(root.join("configs/qtype-stats.toml"))
            .arg("--files")
            .args(files)
            .args(["--jobs", jobs, "-q", "--stats-json"])
            .arg(&stats),
    );
    serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap()
}

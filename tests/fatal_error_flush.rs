//! No output lost on a fatal error: a capture whose last record claims an
//! absurd length stops the run with an error (and a non-zero exit), but
//! every output first writes what it holds of the packets before it: the
//! JSON lines, the pcap records, a Parquet file's footer (read by DuckDB),
//! the answers `filter.dnscli` got. Also
//! `input.mmpcap` reading standard input.

use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use testkit::replay::{address_of, servers, write_capture, zone_queries, Q};
use testkit::{assert_ok, dnsluice, temp_path};

/// Queries before the corrupt record.
const GOOD: usize = 12;

/// A capture of `GOOD` queries (the generator's names, n0.lookup.test ...),
/// then a record header claiming 0xf0000000 captured bytes.
fn corrupt_capture(name: &str) -> (PathBuf, Vec<Q>) {
    let queries = zone_queries(GOOD, 3);
    let path = temp_path(name);
    write_capture(&path, &queries);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&[0x10, 0, 0, 0, 0, 0, 0, 0]);
    bytes.extend_from_slice(&0xf000_0000u32.to_le_bytes());
    bytes.extend_from_slice(&0xf000_0000u32.to_le_bytes());
    bytes.extend_from_slice(&[0xab; 40]);
    std::fs::write(&path, bytes).unwrap();
    (path, queries)
}

/// Runs `stages` (TOML after the input stage) on `capture` read by `input`,
/// with `--stats-json`; the process output and the stats.
fn run(input: &str, capture: &Path, stages: &str) -> (Output, Value) {
    let pipeline = temp_path("fatal.toml");
    let stats = temp_path("fatal-stats.json");
    std::fs::write(
        &pipeline,
        format!(
            "[[stage]]\nmodule = \"{input}\"\npath = \"{}\"\n{stages}",
            capture.display()
        ),
    )
    .unwrap();
    let out = dnsluice()
        .args(["run", pipeline.to_str().unwrap(), "--stats-json"])
        .arg(&stats)
        .output()
        .unwrap();
    let stats = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    (out, stats)
}

/// The run failed, said why and where, and the summary says how far the input got.
fn assert_failed_at_the_corrupt_record(out: &Output, stats: &Value) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("record claims 4026531840 captured bytes"),
        "{stderr}"
    );
    assert_eq!(stats["stages"][0]["in"], GOOD as u64, "{stats}");
}

fn json_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn first_qname(row: &Value) -> &str {
    row["dns"]["question"][0]["name"].as_str().unwrap()
}

#[test]
fn json_lines_before_a_corrupt_record_are_written() {
    let (capture, queries) = corrupt_capture("fatal-json.pcap");
    for input in ["input.fpcap", "input.mmpcap"] {
        let json = temp_path("fatal.jsonl");
        let (out, stats) = run(
            input,
            &capture,
            &format!(
                "[[stage]]\nmodule = \"filter.dns\"\n[[stage]]\nmodule = \"output.json\"\npath = \"{}\"\n",
                json.display()
            ),
        );
        assert_failed_at_the_corrupt_record(&out, &stats);
        let rows = json_lines(&json);
        let names: Vec<&str> = rows.iter().map(first_qname).collect();
        let want: Vec<String> = queries.iter().map(|q| format!("{}.", q.name)).collect();
        assert_eq!(names, want, "{input}");
    }
}

#[test]
fn a_parquet_file_before_a_corrupt_record_is_closed_and_read_by_duckdb() {
    let (capture, queries) = corrupt_capture("fatal-parquet.pcap");
    let parquet = temp_path("fatal.parquet");
    let (out, stats) = run(
        "input.mmpcap",
        &capture,
        &format!(
            "[[stage]]\nmodule = \"filter.dns\"\n[[stage]]\nmodule = \"output.parquet\"\npath = \"{}\"\n",
            parquet.display()
        ),
    );
    assert_failed_at_the_corrupt_record(&out, &stats);
    let rows = testkit::duckdb::query(&format!(
        "SELECT qname FROM read_parquet('{}', file_row_number = true) ORDER BY file_row_number",
        parquet.display()
    ));
    let names: Vec<&str> = rows.iter().map(|r| r["qname"].as_str().unwrap()).collect();
    let want: Vec<String> = queries.iter().map(|q| format!("{}.", q.name)).collect();
    assert_eq!(names, want);
}

#[test]
fn pcap_records_before_a_corrupt_record_are_written() {
    let (capture, _) = corrupt_capture("fatal-pcap.pcap");
    let written = temp_path("fatal-out.pcap");
    let (out, stats) = run(
        "input.fpcap",
        &capture,
        &format!(
            "[[stage]]\nmodule = \"output.pcap\"\npath = \"{}\"\n",
            written.display()
        ),
    );
    assert_failed_at_the_corrupt_record(&out, &stats);
    // Walked by hand (24-byte file header, 16-byte record headers): the
    // records written are the input's first GOOD records, byte for byte.
    let records = |bytes: &[u8]| -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut pos = 24;
        while pos + 16 <= bytes.len() {
            let caplen = u32::from_le_bytes(bytes[pos + 8..pos + 12].try_into().unwrap()) as usize;
            let Some(data) = bytes.get(pos + 16..pos + 16 + caplen) else {
                break;
            };
            out.push(data.to_vec());
            pos += 16 + caplen;
        }
        out
    };
    let input = records(&std::fs::read(&capture).unwrap());
    let output = records(&std::fs::read(&written).unwrap());
    assert_eq!(output.len(), GOOD);
    assert_eq!(output, input[..GOOD]);
}

/// Needs the test servers (`tests/servers/up.sh`): Knot answers the zone.
#[test]
fn answers_to_queries_before_a_corrupt_record_are_written() {
    let (capture, queries) = corrupt_capture("fatal-dnscli.pcap");
    let knot = &servers()["KNOT"];
    let json = temp_path("fatal-responses.jsonl");
    let (out, stats) = run(
        "input.mmpcap",
        &capture,
        &format!(
            "[[stage]]\nmodule = \"filter.dns\"\n[[stage]]\nmodule = \"filter.dnscli\"\nserver = \"{knot}\"\n[[stage]]\nmodule = \"output.json\"\npath = \"{}\"\n",
            json.display()
        ),
    );
    assert_failed_at_the_corrupt_record(&out, &stats);
    let rows = json_lines(&json);
    assert_eq!(rows.len(), GOOD, "{rows:?}");
    // Every query got its answer from the zone: n<i> has address_of(i)
    // and nothing else, missing<i> NXDOMAIN (names and addresses compared
    // whole: n1 is not n10, 10.0.0.1 is not 10.0.0.10).
    for (i, q) in queries.iter().enumerate() {
        let answered = |r: &&Value| {
            r["answer"]["dns"]["question"][0]["name"].as_str() == Some(&format!("{}.", q.name))
        };
        let found: Vec<&Value> = rows.iter().filter(answered).collect();
        assert_eq!(found.len(), 1, "{}: {found:?}", q.name);
        let answer = &found[0]["answer"]["dns"];
        let addresses: Vec<&str> = answer["answer"]
            .as_array()
            .unwrap()
            .iter()
            .map(|rr| rr["data"].as_str().unwrap())
            .collect();
        if q.name.starts_with("missing") {
            assert_eq!(answer["rcode"], "NXDOMAIN", "{answer}");
            assert!(addresses.is_empty(), "{answer}");
        } else {
            assert_eq!(answer["rcode"], "NOERROR", "{answer}");
            assert_eq!(addresses, [address_of(i as u32)], "{answer}");
        }
    }
}

#[test]
fn mmpcap_reads_standard_input_with_buffered_reads() {
    let queries = zone_queries(GOOD, 2);
    let capture = temp_path("stdin.pcap");
    write_capture(&capture, &queries);
    let pipeline = temp_path("stdin.toml");
    std::fs::write(
        &pipeline,
        "[[stage]]\nmodule = \"input.mmpcap\"\npath = \"-\"\n[[stage]]\nmodule = \"filter.dns\"\n[[stage]]\nmodule = \"output.json\"\n",
    )
    .unwrap();
    let mut child = dnsluice()
        .args(["run", pipeline.to_str().unwrap(), "-q"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let bytes = std::fs::read(&capture).unwrap();
    child.stdin.take().unwrap().write_all(&bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_read_buffered(&out, "standard input cannot be memory-mapped");
    assert_eq!(qnames(&out), asked(&queries));
}

/// A named pipe (what `<(zstdcat f)` hands over) cannot be mapped either:
/// read as a stream, with a note. It failed as "empty file".
#[test]
fn mmpcap_reads_a_named_pipe_with_buffered_reads() {
    let queries = zone_queries(GOOD, 2);
    let capture = temp_path("fifo.pcap");
    write_capture(&capture, &queries);
    let fifo = temp_path("capture.fifo");
    // spawns: mkfifo
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let writer = {
        let (fifo, bytes) = (fifo.clone(), std::fs::read(&capture).unwrap());
        std::thread::spawn(move || std::fs::write(fifo, bytes).unwrap())
    };
    let stages = "[[stage]]\nmodule = \"filter.dns\"\n[[stage]]\nmodule = \"output.json\"\n";
    let (out, _) = run("input.mmpcap", &fifo, stages);
    writer.join().unwrap();
    assert_read_buffered(
        &out,
        "is not a regular file (a pipe?): it cannot be memory-mapped",
    );
    assert_eq!(qnames(&out), asked(&queries));
}

/// The run succeeded and said, on stderr, `why` it read with buffered reads.
fn assert_read_buffered(out: &Output, why: &str) {
    assert_ok(out, "dnsluice");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(why), "{stderr}");
}

/// The names `queries` ask, as JSON lines give them.
fn asked(queries: &[Q]) -> Vec<String> {
    queries.iter().map(|q| format!("{}.", q.name)).collect()
}

/// The first question's name of each JSON line the run wrote.
fn qnames(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| first_qname(&serde_json::from_str(l).unwrap()).to_string())
        .collect()
}

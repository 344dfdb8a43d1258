//! Compressed captures: every capture of the corpus compressed with the
//! `zstd`, `lz4`, `gzip` and `xz` command-line tools reads exactly as the
//! uncompressed file (every record, every DNS message: the same JSON lines,
//! and as many messages as tshark counts), through both native inputs and
//! standard input; a truncated file keeps every complete record before the
//! cut (as many as tshark reads from what the tool itself decompresses) and
//! says so; a corrupt one is an error that says so.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use testkit::corpus::corpus;
use testkit::pipeline::json_run;
use testkit::{assert_ok, dnsluice, run_ok, run_pipeline, temp_path};

/// (tool, its arguments to compress to stdout, to decompress to stdout).
const TOOLS: [(&str, &[&str], &[&str]); 4] = [
    ("zstd", &["-q", "-c"], &["-q", "-d", "-c"]),
    ("lz4", &["-q", "-c"], &["-q", "-d", "-c"]),
    ("gzip", &["-c"], &["-d", "-c"]),
    ("xz", &["-c"], &["-d", "-c"]),
];

/// `program args... < input > output`; the exit status's success.
fn pipe(program: &str, args: &[&str], input: &Path, output: &Path) -> bool {
    // spawns: zstd lz4 gzip xz
    Command::new(program)
        .args(args)
        .stdin(std::fs::File::open(input).unwrap())
        .stdout(std::fs::File::create(output).unwrap())
        .stderr(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("{program}: {e}"))
        .success()
}

/// `capture` compressed by `tool`.
fn compress(tool: usize, capture: &Path) -> PathBuf {
    let (program, args, _) = TOOLS[tool];
    let name = capture.file_name().unwrap().to_string_lossy();
    let out = temp_path(&format!("{name}.{program}"));
    assert!(pipe(program, args, capture, &out), "{program} {name}");
    out
}

/// input → filter.layer → filter.dns (keeping non-DNS packets) →
/// output.json: every record and every DNS message, as JSON lines.
fn dump(input: &str, capture: &Path) -> (Vec<Value>, std::process::Output) {
    json_run(
        input,
        capture,
        "[[stage]]\nmodule = \"filter.layer\"\n[[stage]]\nmodule = \"filter.dns\"\nkeep_non_dns = true\n",
        &["-q"],
    )
}

/// input → output.null: how many records the input read, and the process output.
fn count(input: &str, capture: &Path) -> (u64, std::process::Output) {
    let stats = temp_path("count.json");
    let text = format!(
        "[[stage]]\nmodule = \"{input}\"\npath = \"{}\"\n[[stage]]\nmodule = \"output.null\"\n",
        capture.display()
    );
    let out = run_pipeline(&text, &["-q", "--stats-json", &stats.display().to_string()]);
    let records = std::fs::read_to_string(&stats)
        .ok()
        .and_then(|s| serde_json::from_str::<Value>(&s).ok())
        .and_then(|v| v["stages"][0]["out"].as_u64())
        .unwrap_or(0);
    (records, out)
}

fn messages(rows: &[Value]) -> usize {
    rows.iter().filter(|r| r.get("dns").is_some()).count()
}

#[test]
fn every_corpus_capture_reads_the_same_compressed() {
    let mut checked = 0;
    for (capture, truth) in corpus() {
        let (plain, out) = dump("input.fpcap", &capture);
        let name = capture.file_name().unwrap().to_string_lossy().to_string();
        // Every corpus capture reads (none is an error to read): each one
        // is a reference for its compressed copies.
        assert_ok(&out, format_args!("{name}"));
        for tool in 0..TOOLS.len() {
            let packed = compress(tool, &capture);
            // Alternate the inputs, so both see every compression.
            let input = ["input.mmpcap", "input.fpcap"][(checked + tool) % 2];
            let (rows, out) = dump(input, &packed);
            assert_ok(&out, format_args!("{input} {name} {}", TOOLS[tool].0));
            assert!(
                rows == plain,
                "{input} {name} {}: records differ",
                TOOLS[tool].0
            );
            if let Some(count) = truth["dns_messages"]["count"].as_u64() {
                if name != "malformed.pcap" && name != "live_mini_snaplen96.pcap" {
                    assert_eq!(messages(&rows) as u64, count, "{name}: tshark's count");
                }
            }
            std::fs::remove_file(&packed).unwrap();
        }
        checked += 1;
    }
    assert!(checked >= 26, "{checked} captures");
}

#[test]
fn a_compressed_stream_on_stdin_reads_the_same() {
    let capture = testkit::corpus::corpus_dir().join("live_lo_en10mb.pcap");
    let (plain, _) = dump("input.fpcap", &capture);
    for (tool, &(program, _, _)) in TOOLS.iter().enumerate() {
        let packed = compress(tool, &capture);
        let json = temp_path("stdin.jsonl");
        let pipeline = temp_path("stdin.toml");
        std::fs::write(
            &pipeline,
            format!("[[stage]]\nmodule = \"input.fpcap\"\npath = \"-\"\n[[stage]]\nmodule = \"filter.layer\"\n[[stage]]\nmodule = \"filter.dns\"\nkeep_non_dns = true\n[[stage]]\nmodule = \"output.json\"\npath = \"{}\"\n", json.display()),
        )
        .unwrap();
        run_ok(
            dnsluice()
                .args(["run", "-q"])
                .arg(&pipeline)
                .stdin(std::fs::File::open(&packed).unwrap()),
        );
        let rows: Vec<Value> = std::fs::read_to_string(&json)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(rows == plain, "stdin {}", program);
        let mut frames: Vec<u64> = rows.iter().map(|r| r["frame"].as_u64().unwrap()).collect();
        frames.dedup();
        assert_eq!(
            frames.len(),
            6435,
            "tshark's frame count of live_lo_en10mb.pcap"
        );
    }
}

/// The packets tshark reads from `path`, a capture that may be cut short
/// (tshark then says so and exits with an error, after printing every
/// complete packet).
fn tshark_count(path: &Path) -> usize {
    let out = Command::new("tshark")
        .args(["-n", "-T", "fields", "-e", "frame.number", "-r"])
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count()
}

/// A capture big enough that a cut at nine tenths falls after a complete
/// compressed block of every tool (lz4 writes 4 MiB blocks).
fn big_capture() -> PathBuf {
    let capture = testkit::corpus::corpus_dir().join("live_lo_en10mb.pcap");
    let bytes = std::fs::read(&capture).unwrap();
    // The file header once, then the records five times over.
    let mut big = bytes.clone();
    for _ in 0..4 {
        big.extend_from_slice(&bytes[24..]);
    }
    let out = temp_path("big.pcap");
    std::fs::write(&out, big).unwrap();
    out
}

/// `capture` compressed by tool `tool`, cut to the first `keep(length)`
/// bytes: the cut file, and what the tool itself decodes of it (it must
/// fail on it).
fn cut_compressed(
    tool: usize,
    capture: &Path,
    keep: impl Fn(usize) -> usize,
) -> (PathBuf, PathBuf) {
    let (program, _, decompress) = TOOLS[tool];
    let bytes = std::fs::read(compress(tool, capture)).unwrap();
    let cut = temp_path(&format!("cut.pcap.{program}"));
    std::fs::write(&cut, &bytes[..keep(bytes.len())]).unwrap();
    let partial = temp_path("partial.pcap");
    assert!(
        !pipe(program, decompress, &cut, &partial),
        "{program} must fail on a cut file"
    );
    (cut, partial)
}

#[test]
fn a_truncated_compressed_file_keeps_every_complete_record_and_warns() {
    let capture = big_capture();
    for (tool, &(program, ..)) in TOOLS.iter().enumerate() {
        // The truth: what the tool itself gets out of the cut file, read by tshark.
        let (cut, partial) = cut_compressed(tool, &capture, |len| len * 9 / 10);
        let want = tshark_count(&partial);
        assert!(want > 1000, "{program}: {want} frames before the cut");
        for input in ["input.mmpcap", "input.fpcap"] {
            let (records, out) = count(input, &cut);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_ok(&out, format_args!("{input} {program}"));
            assert_eq!(records, want as u64, "{input} {program}");
            assert!(
                stderr.contains(&format!(
                    "{}: file cut off: the {program} stream is cut off after",
                    cut.display()
                )) && stderr.contains(&format!(
                    "the {want} complete packet records before the cut were read"
                )),
                "{input} {program}: {stderr}"
            );
        }
    }
}

/// Cut off after its first 40 bytes (inside its first block: the tool
/// itself gets no byte out of it), a compressed capture is an error that
/// says the stream was cut off before a capture file header could be read,
/// not that the file is empty.
#[test]
fn a_compressed_file_cut_off_before_a_header_says_so() {
    let capture = big_capture();
    for (tool, &(program, ..)) in TOOLS.iter().enumerate() {
        let (cut, partial) = cut_compressed(tool, &capture, |_| 40);
        let decoded = std::fs::metadata(&partial).unwrap().len();
        assert!(decoded < 24, "{program}: {decoded} bytes decoded");
        for input in ["input.mmpcap", "input.fpcap"] {
            let (_, out) = count(input, &cut);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{input} {program}: {stderr}");
            assert!(
                stderr.contains(&format!("the {program} stream is cut off after"))
                    && stderr.contains("no capture file header before the cut"),
                "{input} {program}: {stderr}"
            );
        }
    }
}

#[test]
fn a_corrupt_compressed_file_is_an_error_that_says_so() {
    let capture = big_capture();
    for (tool, &(program, _, _)) in TOOLS.iter().enumerate() {
        let packed = compress(tool, &capture);
        let mut bytes = std::fs::read(&packed).unwrap();
        let middle = bytes.len() / 2;
        for b in &mut bytes[middle..middle + 16] {
            *b ^= 0x5a;
        }
        std::fs::write(&packed, &bytes).unwrap();
        for input in ["input.mmpcap", "input.fpcap"] {
            let (_, out) = count(input, &packed);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{input} {program}: {stderr}");
            // The decoder's checksum, or (lz4 has no block checksums by
            // default) the record walk of the garbage it made, says so.
            let said = stderr.contains(&format!("corrupt {program} stream"))
                || stderr.contains(&format!("of the decompressed {program} data"));
            assert!(
                said && stderr.contains(&packed.display().to_string()),
                "{input} {program}: {stderr}"
            );
        }
    }
}

#[test]
fn replay_reads_a_compressed_capture_by_default() {
    // --print-pipeline shows the input the replay would read with; the
    // default input.mmpcap reads compressed files (above), so the
    // pipeline needs nothing else: run it on a dead port with a short
    // timeout and count what was sent.
    let capture = testkit::corpus::corpus_dir().join("live_lo_en10mb.pcap");
    let packed = compress(0, &capture);
    let stats = temp_path("replay.json");
    run_ok(
        dnsluice()
            .arg("replay")
            .arg(&packed)
            .args([
                "--server",
                "127.0.0.1:9",
                "--timeout",
                "50ms",
                "-q",
                "--stats-json",
            ])
            .arg(&stats),
    );
    let stats: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    // tshark's count of the capture's queries (its truth file).
    let queries = testkit::corpus::truth("live_lo_en10mb.pcap")["counts"]["dns_queries"]
        .as_u64()
        .unwrap();
    assert!(queries > 1000);
    assert_eq!(stats["sent"].as_u64().unwrap(), queries);
}

/// `capture` cut after its `records`th record: its file header and those
/// records, and the records after them.
fn split_capture(capture: &Path, records: usize) -> (Vec<u8>, Vec<u8>) {
    let bytes = std::fs::read(capture).unwrap();
    let mut at = 24;
    for _ in 0..records {
        let caplen = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        at += 16 + caplen;
    }
    assert!(at < bytes.len(), "more than {records} records");
    (bytes[..at].to_vec(), bytes[at..].to_vec())
}

/// A capture compressed in two parts, one after the other in one file
/// (`tool -c a > f; tool -c b >> f`: two lz4 frames, two zstd frames, two
/// gzip members, two xz streams), reads whole, as the tool itself
/// decompresses it. lz4 used to read its first frame only, and say nothing.
#[test]
fn a_file_of_two_compressed_parts_reads_whole() {
    let capture = testkit::corpus::corpus_dir().join("live_lo_en10mb.pcap");
    let (plain, _) = dump("input.fpcap", &capture);
    let (first, rest) = split_capture(&capture, 1000);
    let (first_path, rest_path) = (temp_path("first.pcap"), temp_path("rest.pcap"));
    std::fs::write(&first_path, &first).unwrap();
    std::fs::write(&rest_path, &rest).unwrap();
    for (tool, &(program, _, decompress)) in TOOLS.iter().enumerate() {
        let mut joined = std::fs::read(compress(tool, &first_path)).unwrap();
        joined.extend(std::fs::read(compress(tool, &rest_path)).unwrap());
        let path = temp_path(&format!("two-parts.pcap.{program}"));
        std::fs::write(&path, &joined).unwrap();
        let decoded = temp_path("two-parts-decoded.pcap");
        assert!(pipe(program, decompress, &path, &decoded), "{program} -d");
        assert!(
            std::fs::read(&decoded).unwrap() == std::fs::read(&capture).unwrap(),
            "{program} itself decodes both parts"
        );
        for input in ["input.mmpcap", "input.fpcap"] {
            let (rows, out) = dump(input, &path);
            assert_ok(&out, format_args!("{input} {program}"));
            assert_eq!(rows.len(), plain.len(), "{input} {program}");
            assert!(rows == plain, "{input} {program}: records differ");
        }
    }
}

/// The length of the frame header (magic number and descriptor) of the LZ4
/// frame `lz4` starts with (the LZ4 frame format: the flags byte, the
/// block-size byte, an optional content size and dictionary id, a checksum
/// byte).
fn lz4_header_len(lz4: &[u8]) -> usize {
    assert_eq!(lz4[..4], [0x04, 0x22, 0x4d, 0x18], "an LZ4 frame");
    let flags = lz4[4];
    4 + 3 + if flags & 0x08 != 0 { 8 } else { 0 } + if flags & 0x01 != 0 { 4 } else { 0 }
}

/// Where each block of the one LZ4 frame of `lz4` ends: a block is a
/// 4-byte size and the data, then a checksum if the flags say so; a size
/// of 0 ends the frame.
fn lz4_block_ends(lz4: &[u8]) -> Vec<usize> {
    let checksum = if lz4[4] & 0x10 != 0 { 4 } else { 0 };
    let mut at = lz4_header_len(lz4);
    let mut ends = Vec::new();
    loop {
        let size = u32::from_le_bytes(lz4[at..at + 4].try_into().unwrap());
        at += 4;
        if size == 0 {
            return ends;
        }
        at += (size & 0x7fff_ffff) as usize + checksum;
        ends.push(at);
    }
}

/// An LZ4 file cut between two of its blocks (as a killed `tcpdump -w - |
/// lz4` leaves it), or right after its frame header, is a file cut off:
/// the warning says so, and every complete record the lz4 tool decodes
/// from it is read. The decoder's input ending at a block boundary looked
/// like the end of the stream, and such a file read as whole.
#[test]
fn an_lz4_file_cut_between_blocks_says_so() {
    let capture = big_capture();
    let packed = temp_path("blocks.pcap.lz4");
    // spawns: lz4 (64 KiB blocks: many in the file)
    run_ok(
        Command::new("lz4")
            .args(["-q", "-f", "-B4"])
            .arg(&capture)
            .arg(&packed),
    );
    let bytes = std::fs::read(&packed).unwrap();
    let ends = lz4_block_ends(&bytes);
    assert!(ends.len() > 20, "{} blocks", ends.len());
    let cut = temp_path("between-blocks.pcap.lz4");
    std::fs::write(&cut, &bytes[..ends[9]]).unwrap();
    let partial = temp_path("between-blocks.pcap");
    assert!(
        !pipe("lz4", &["-q", "-d", "-c"], &cut, &partial),
        "lz4 says the file is unfinished"
    );
    let want = tshark_count(&partial);
    assert!(want > 1000, "{want} frames before the cut");
    for input in ["input.mmpcap", "input.fpcap"] {
        let (records, out) = count(input, &cut);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ok(&out, format_args!("{input}"));
        assert_eq!(records, want as u64, "{input}");
        assert!(
            stderr.contains(&format!(
                "{}: file cut off: the lz4 stream is cut off after {} compressed bytes",
                cut.display(),
                ends[9]
            )) && stderr.contains("between two blocks of a frame, before its end mark"),
            "{input}: {stderr}"
        );
    }
    // Cut right after the frame header: no block at all.
    let header = temp_path("header-only.pcap.lz4");
    std::fs::write(&header, &bytes[..lz4_header_len(&bytes)]).unwrap();
    for input in ["input.mmpcap", "input.fpcap"] {
        let (_, out) = count(input, &header);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{input}: {stderr}");
        assert!(
            stderr.contains("the lz4 stream is cut off after")
                && stderr.contains("no capture file header before the cut"),
            "{input}: {stderr}"
        );
    }
}

//! `output.parquet` read back by DuckDB against independent truths: every
//! corpus capture against tshark's truth file (the canonical lines of the
//! corpus README: frame, qname, qtype, rcode, qr; the counts per qtype and
//! rcode; the messages with EDNS), the answers of a capture against
//! tshark's fields, and files started anew by `max_rows`. Lookups:
//! tests/parquet_lookup.rs; a file closed by SIGTERM: tests/parquet_stop.rs.

use dnsluice::core::dns::mnemonic;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use testkit::corpus::{
    canonical_qname, corpus, corpus_dir, sha256_of_lines, truth, truth_rows, unusual_names,
};
use testkit::duckdb::query;
use testkit::{assert_ok, run_pipeline, temp_path};

/// Runs input.mmpcap → filter.layer → filter.dns → output.parquet with the
/// extra options `parquet` (TOML lines) on `capture`.
fn write_parquet(capture: &Path, out: &Path, parquet: &str) {
    let text = format!(
        "[[stage]]\nmodule = \"input.mmpcap\"\npath = \"{}\"\n[[stage]]\nmodule = \"filter.layer\"\n[[stage]]\nmodule = \"filter.dns\"\n[[stage]]\nmodule = \"output.parquet\"\npath = \"{}\"\n{parquet}",
        capture.display(),
        out.display()
    );
    assert_ok(&run_pipeline(&text, &["-q"]), capture.display());
}

/// The README's canonical line of a row DuckDB read.
fn canonical(row: &Value, frame_of_record: &BTreeMap<u64, u64>, truth: &Value) -> String {
    let record = row["frame"].as_u64().unwrap();
    let frame = frame_of_record.get(&record).copied().unwrap_or(record);
    let qname = canonical_qname(frame, row["qname"].as_str(), &unusual_names(truth));
    let qtype = row["qtype"]
        .as_str()
        .map(|t| mnemonic::rtype_from_str(t).unwrap().to_string())
        .unwrap_or_default();
    let rcode = row["rcode"]
        .as_str()
        .map_or(0, |r| mnemonic::rcode_from_str(r).unwrap() & 0xf);
    let qr = u8::from(row["qr"] == json!(true));
    format!("{frame}\t{qname}\t{qtype}\t{rcode}\t{qr}\n")
}

/// The query of the rows of `files` (a path or a glob) in file order, then row order.
fn rows_in_order_sql(files: &str) -> String {
    format!(
        "SELECT frame, qname, qtype, rcode, qr FROM read_parquet('{files}', filename = true, file_row_number = true) ORDER BY filename, file_row_number"
    )
}

/// A histogram `{key: count}` of a DuckDB `GROUP BY` with columns `k`, `n`,
/// the key mapped by `name`.
fn histogram(rows: &[Value], name: impl Fn(&Value) -> String) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for row in rows {
        *out.entry(name(&row["k"])).or_default() += row["n"].as_u64().unwrap();
    }
    out
}

fn truth_histogram(value: &Value) -> BTreeMap<String, u64> {
    value
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect()
}

fn frame_of_record(truth: &Value) -> BTreeMap<u64, u64> {
    truth_rows(&truth["frames"])
        .iter()
        .filter_map(|f| Some((f["record"].as_u64()?, f["frame"].as_u64()?)))
        .collect()
}

/// The queries of one file: messages, qtypes, rcodes of responses,
/// messages with EDNS, and the rows in order.
fn corpus_queries(file: &str) -> [String; 5] {
    [
        format!("SELECT count(*) AS n FROM '{file}'"),
        format!("SELECT qtype AS k, count(*) AS n FROM '{file}' GROUP BY qtype"),
        format!("SELECT rcode AS k, count(*) AS n FROM '{file}' WHERE qr GROUP BY rcode"),
        format!("SELECT count(edns_udp_size) AS n FROM '{file}'"),
        rows_in_order_sql(file),
    ]
}

#[test]
fn every_corpus_capture_reads_back_in_duckdb_as_tsharks_truth() {
    let dir = testkit::temp_dir("parquet-corpus");
    let corpus = corpus();
    let mut sql = Vec::new();
    for (i, (capture, _)) in corpus.iter().enumerate() {
        let out = dir.join(format!("{i}.parquet"));
        // Small row groups: most files span several.
        write_parquet(capture, &out, "row_group_rows = 300\n");
        sql.extend(corpus_queries(&out.display().to_string()));
    }
    let mut results = testkit::duckdb::queries(&sql).into_iter();
    let mut files = 0;
    for (capture, truth) in &corpus {
        let name = capture.file_name().unwrap().to_string_lossy().to_string();
        let [count, qtypes, rcodes, edns, rows] = std::array::from_fn(|_| results.next().unwrap());
        // The snaplen-cut file and the crafted malformed one: tshark's partial
        // dissection of cut or broken messages is not a reference (corpus_dns.rs
        // judges them frame by frame).
        if name == "live_mini_snaplen96.pcap" || name == "malformed.pcap" {
            continue;
        }
        let counts = &truth["counts"];
        assert_eq!(count[0]["n"], counts["dns_messages"], "{name}: messages");
        let qtypes = histogram(&qtypes, |k| match k.as_str() {
            Some(t) => mnemonic::rtype_from_str(t).unwrap().to_string(),
            None => "None".into(),
        });
        let rcodes = histogram(&rcodes, |k| {
            (mnemonic::rcode_from_str(k.as_str().unwrap()).unwrap() & 0xf).to_string()
        });
        assert_eq!(qtypes, truth_histogram(&counts["qtypes"]), "{name}: qtypes");
        assert_eq!(rcodes, truth_histogram(&counts["rcodes"]), "{name}: rcodes");
        assert_eq!(edns[0]["n"], counts["dns_with_edns"], "{name}: with EDNS");
        let frames = frame_of_record(truth);
        let lines: Vec<String> = rows.iter().map(|r| canonical(r, &frames, truth)).collect();
        assert_eq!(
            sha256_of_lines(&lines),
            truth["dns_messages"]["sha256_of_canonical_lines"]
                .as_str()
                .unwrap(),
            "{name}: the canonical lines (frame, qname, qtype, rcode, qr)"
        );
        files += 1;
    }
    assert!(files >= 25, "{files} captures compared");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn max_rows_starts_new_files_that_together_hold_every_message() {
    let capture = corpus_dir().join("live_mini_en10mb.pcap");
    let truth = truth("live_mini_en10mb.pcap");
    let dir = testkit::temp_dir("parquet-rotate");
    let path = dir.join("part-{n}.parquet");
    // Twelve encoders: past ten, their names (`parquet-enc11`) still fit
    // what Linux keeps of a thread's name, and the row groups stay in order.
    let options = "max_rows = 500\nrow_group_rows = 200\nencoders = 12\n";
    write_parquet(&capture, &path, options);
    let per_file = query(&format!(
        "SELECT parse_filename(filename) AS f, count(*) AS n FROM read_parquet('{}/part-*.parquet', filename = true) GROUP BY f ORDER BY f",
        dir.display()
    ));
    assert_eq!(
        per_file,
        [
            json!({"f": "part-0.parquet", "n": 500}),
            json!({"f": "part-1.parquet", "n": 500}),
            json!({"f": "part-2.parquet", "n": 163}),
        ]
    );
    let frames = frame_of_record(&truth);
    let lines: Vec<String> = query(&rows_in_order_sql(&format!(
        "{}/part-*.parquet",
        dir.display()
    )))
    .iter()
    .map(|r| canonical(r, &frames, &truth))
    .collect();
    assert_eq!(
        sha256_of_lines(&lines),
        truth["dns_messages"]["sha256_of_canonical_lines"]
            .as_str()
            .unwrap()
    );
    std::fs::remove_dir_all(&dir).unwrap();
    // A capture that ends just as a file is full leaves no empty file
    // after it (part-1.parquet, no rows, was written).
    let messages = truth["counts"]["dns_messages"].as_u64().unwrap();
    let dir = testkit::temp_dir("parquet-rotate-exact");
    let path = dir.join("part-{n}.parquet");
    write_parquet(
        &capture,
        &path,
        &format!("max_rows = {messages}\nrow_group_rows = 200\n"),
    );
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["part-0.parquet"]);
    let count = query(&format!(
        "SELECT count(*) AS n FROM read_parquet('{}/part-0.parquet')",
        dir.display()
    ));
    assert_eq!(count, [json!({ "n": messages })]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// tshark's fields of the UDP responses of live_mini_en10mb.pcap (the
/// fixture of tests/json_dns.rs): frame → (types, ttls, A, AAAA, CNAME),
/// records of every section in section order, the OPT record left out.
fn tshark_records() -> BTreeMap<u64, [Vec<String>; 5]> {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/tshark/live_mini_en10mb.udp-responses.tsv"),
    )
    .unwrap();
    let list = |col: &str| -> Vec<String> {
        col.split('|')
            .filter(|v| !v.is_empty())
            .map(str::to_string)
            .collect()
    };
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|line| {
            let cols: Vec<&str> = line.split(';').collect();
            let mut types = list(cols[2]);
            types.retain(|t| t != "41");
            let fields = [
                types,
                list(cols[3]),
                list(cols[4]),
                list(cols[5]),
                list(cols[6]),
            ];
            (cols[0].parse().unwrap(), fields)
        })
        .collect()
}

#[test]
fn answers_are_tsharks_records_of_the_answer_section() {
    let capture = corpus_dir().join("live_mini_en10mb.pcap");
    let out = temp_path("answers.parquet");
    write_parquet(&capture, &out, "");
    let rows = query(&format!(
        "SELECT frame, ancount, answers FROM '{}' WHERE qr AND transport = 'udp'",
        out.display()
    ));
    let tshark = tshark_records();
    assert_eq!(rows.len(), tshark.len());
    let mut compared = 0;
    for row in &rows {
        let frame = row["frame"].as_u64().unwrap();
        let answers = row["answers"].as_array().unwrap();
        assert_eq!(
            answers.len() as u64,
            row["ancount"].as_u64().unwrap(),
            "frame {frame}"
        );
        // tshark lists the answer section first: ours are its first records.
        let [types, ttls, a, aaaa, cname] = &tshark[&frame];
        let n = answers.len();
        let ours_types: Vec<String> = answers
            .iter()
            .map(|r| {
                mnemonic::rtype_from_str(r["type"].as_str().unwrap())
                    .unwrap()
                    .to_string()
            })
            .collect();
        let ours_ttls: Vec<String> = answers.iter().map(|r| r["ttl"].to_string()).collect();
        assert_eq!(ours_types[..], types[..n], "frame {frame}");
        assert_eq!(ours_ttls[..], ttls[..n], "frame {frame}");
        for (rtype, theirs) in [("A", a), ("AAAA", aaaa), ("CNAME", cname)] {
            let data: Vec<String> = answers
                .iter()
                .filter(|r| r["type"] == rtype)
                .map(|r| {
                    r["data"]
                        .as_str()
                        .unwrap()
                        .trim_end_matches('.')
                        .to_string()
                })
                .collect();
            assert_eq!(data[..], theirs[..data.len()], "frame {frame} {rtype}");
        }
        compared += n;
    }
    assert!(compared > 250, "{compared} answer records compared");
    std::fs::remove_file(&out).unwrap();
}

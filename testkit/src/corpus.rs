//! The test captures of `tests/data/corpus` and their truth files: what
//! tshark reads in each capture, and the conversions that compare it with
//! what dnsluice writes.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The test captures and their tshark truth files (copied from the shared corpus).
pub fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testkit is inside the workspace")
        .join("tests/data/corpus")
}

/// Every capture in the corpus that has a truth file, with the truth parsed.
pub fn corpus() -> Vec<(PathBuf, Value)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(corpus_dir()).expect("corpus dir") {
        let path = entry.expect("entry").path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if let Some(capture) = name.strip_suffix(".truth.json") {
            let truth: Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            out.push((corpus_dir().join(capture), truth));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(
        out.len() >= 27,
        "corpus incomplete: {} truth files",
        out.len()
    );
    out
}

/// The tshark truth of the corpus capture `file` (`FILE.truth.json`).
pub fn truth(file: &str) -> Value {
    let path = corpus_dir().join(format!("{file}.truth.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The rows of a truth table as objects keyed by column name.
pub fn truth_rows(table: &Value) -> Vec<serde_json::Map<String, Value>> {
    let columns: Vec<String> = table["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            columns
                .iter()
                .cloned()
                .zip(row.as_array().unwrap().iter().cloned())
                .collect()
        })
        .collect()
}

/// `2024-01-01T00:00:00.123456000Z` → `1704067200.123456000` (seconds since the
/// epoch with 9 decimals, as tshark prints frame.time_epoch). Counts days year by
/// year and month by month: a deliberately plain method, independent of the
/// era-based conversion the engine uses to print.
pub fn rfc3339_to_epoch(ts: &str) -> String {
    let num = |range: std::ops::Range<usize>| ts[range].parse::<i64>().unwrap();
    let (year, month, day) = (num(0..4), num(5..7), num(8..10));
    let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let mut days = 0i64;
    for y in 1970..year {
        days += if leap(y) { 366 } else { 365 };
    }
    let month_days = [
        31,
        if leap(year) { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    days += month_days[..(month - 1) as usize].iter().sum::<i64>() + day - 1;
    let secs = days * 86_400 + num(11..13) * 3600 + num(14..16) * 60 + num(17..19);
    format!("{secs}.{}", &ts[20..29])
}

/// Our presentation name back to wire-label bytes (undoing `\.`, `\\` and `\DDD`).
pub fn unescape(name: &str) -> Vec<Vec<u8>> {
    if name == "." {
        return Vec::new();
    }
    let mut labels = vec![Vec::new()];
    let bytes = name.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if bytes.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                let digits = std::str::from_utf8(&bytes[i + 1..i + 4]).unwrap();
                labels
                    .last_mut()
                    .unwrap()
                    .push(digits.parse::<u8>().unwrap());
                i += 4;
            }
            b'\\' => {
                labels.last_mut().unwrap().push(bytes[i + 1]);
                i += 2;
            }
            b'.' => {
                labels.push(Vec::new());
                i += 1;
            }
            b => {
                labels.last_mut().unwrap().push(b);
                i += 1;
            }
        }
    }
    labels.pop(); // the empty label after the trailing dot
    labels
}

/// Wire-label bytes as tshark prints a name in hex (length-prefixed labels, a final `00`).
pub fn wire_hex(labels: &[Vec<u8>]) -> String {
    let mut hex = String::new();
    for label in labels {
        hex += &format!("{:02x}", label.len());
        for b in label {
            hex += &format!("{b:02x}");
        }
    }
    hex + "00"
}

/// The truth file's question names with unusual bytes, by frame: tshark's
/// text of each and the name's wire bytes in hex.
pub fn unusual_names(truth: &Value) -> BTreeMap<u64, (String, String)> {
    truth["extras"]["qnames_with_unusual_bytes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|u| {
            let (name, hex) = (
                u["qname"].as_str().unwrap(),
                u["qname_wire_hex"].as_str().unwrap(),
            );
            (
                u["frame"].as_u64().unwrap(),
                (name.to_string(), hex.to_string()),
            )
        })
        .collect()
}

/// The question name of frame `frame` as the canonical lines write it
/// (tshark's text): a name in our escaped presentation form, unescaped; a
/// name with unusual bytes is tshark's text in `unusual`, after checking
/// that ours is the same name on the wire.
pub fn canonical_qname(
    frame: u64,
    name: Option<&str>,
    unusual: &BTreeMap<u64, (String, String)>,
) -> String {
    let Some(name) = name else {
        return String::new();
    };
    match unusual.get(&frame) {
        Some((tshark, hex)) => {
            assert_eq!(
                &wire_hex(&unescape(name)),
                hex,
                "frame {frame}: {name} is not the name on the wire"
            );
            tshark.clone()
        }
        None if name == "." => ".".into(),
        None => unescape(name)
            .iter()
            .map(|l| String::from_utf8(l.clone()).unwrap())
            .collect::<Vec<_>>()
            .join("."),
    }
}

/// The SHA-256 of canonical lines, as the truth files give it (hex).
pub fn sha256_of_lines(lines: &[String]) -> String {
    let mut hash = Sha256::new();
    for line in lines {
        hash.update(line.as_bytes());
    }
    format!("{:x}", hash.finalize())
}

//! Helpers shared by the integration tests: run the real binary, read truth files.
#![allow(dead_code)]

pub mod daemon;
pub mod readers;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The test captures and their tshark truth files (copied from the shared corpus).
pub fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/corpus")
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

/// A fresh path for this test process, under the target directory (cargo's
/// `CARGO_TARGET_TMPDIR`, removed by `cargo clean`), so tests leave nothing in /tmp.
pub fn temp_path(name: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("tests");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("{}-{n}-{name}", std::process::id()))
}

/// The dnsluice binary built for these tests.
pub fn dnsluice() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dnsluice"))
}

/// Writes `text` as a pipeline file and runs `dnsluice run` on it with `args`.
pub fn run_pipeline(text: &str, args: &[&str]) -> Output {
    let file = temp_path("pipeline.toml");
    std::fs::write(&file, text).unwrap();
    let out = dnsluice()
        .arg("run")
        .arg(&file)
        .args(args)
        .output()
        .expect("run dnsluice");
    let _ = std::fs::remove_file(&file);
    out
}

/// Runs input → filter.layer → output.json on `capture`; the JSON lines and the process output.
pub fn layer_json(input: &str, capture: &Path) -> (Vec<Value>, Output) {
    let json = temp_path("out.jsonl");
    let text = format!(
        "[[stage]]\nmodule = \"{input}\"\npath = \"{}\"\n\n[[stage]]\nmodule = \"filter.layer\"\n\n[[stage]]\nmodule = \"output.json\"\npath = \"{}\"\n",
        capture.display(),
        json.display()
    );
    let out = run_pipeline(&text, &["--quiet"]);
    let rows = std::fs::read_to_string(&json)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("valid JSON line"))
        .collect();
    let _ = std::fs::remove_file(&json);
    (rows, out)
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

/// Runs input → filter.layer → filter.dns → output.json; the JSON lines and
/// the stats, asserting that the run succeeds.
pub fn dns_json(input: &str, capture: &Path) -> (Vec<Value>, Value) {
    let (rows, stats, out) = dns_run(input, capture);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (rows, stats)
}

/// [`dns_json`] for a run that may fail: the JSON lines written, the stats
/// (`Null` when none were written) and the process output.
pub fn dns_run(input: &str, capture: &Path) -> (Vec<Value>, Value, Output) {
    let json = temp_path("dns.jsonl");
    let stats = temp_path("stats.json");
    let text = format!(
        "[[stage]]\nmodule = \"{input}\"\npath = \"{}\"\n[[stage]]\nmodule = \"filter.layer\"\n[[stage]]\nmodule = \"filter.dns\"\n[[stage]]\nmodule = \"output.json\"\npath = \"{}\"\n",
        capture.display(),
        json.display()
    );
    let out = run_pipeline(&text, &["-q", "--stats-json", &stats.display().to_string()]);
    let rows = std::fs::read_to_string(&json)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let stats = std::fs::read_to_string(&stats)
        .map(|s| serde_json::from_str(&s).unwrap())
        .unwrap_or(Value::Null);
    (rows, stats, out)
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

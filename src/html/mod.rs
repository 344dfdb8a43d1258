//! The HTML report: one self-contained file (inline CSS and SVG, no script,
//! nothing loaded from anywhere) made from interval statistics files (see
//! [`crate::intervals`]), of one run or of several of the same command on
//! the same charts. The command line, version, start and end of each run
//! come first, then the charts ([`replay`], [`lookup`], [`run`] say which),
//! then tables whose numbers are those of `--stats-json` (each cell says
//! where in it with `data-key`, a JSON pointer, and `data-run`).

mod lookup;
mod replay;
mod run;
pub mod svg;

use crate::progress::group;
use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::Value;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// One run's records: its start line, interval lines and end line.
pub struct Run {
    /// Its name in legends and tables.
    pub label: String,
    /// The start line.
    pub start: Value,
    /// The interval lines, in order.
    pub intervals: Vec<Value>,
    /// The end line (absent when the run was cut short).
    pub end: Option<Value>,
}

impl Run {
    /// A run from its records, in the order they were written.
    pub fn from_records(label: &str, records: Vec<Value>) -> Result<Run> {
        let mut records = records.into_iter();
        let start = records
            .next()
            .filter(|r| r["type"] == "start")
            .context("no start line: not a file of --stats-jsonl")?;
        let mut run = Run {
            label: label.to_string(),
            start,
            intervals: Vec::new(),
            end: None,
        };
        for record in records {
            match record["type"].as_str() {
                Some("interval") => run.intervals.push(record),
                Some("end") => run.end = Some(record),
                _ => {}
            }
        }
        Ok(run)
    }

    /// A run read from a `--stats-jsonl` file.
    pub fn read(label: &str, path: &Path) -> Result<Run> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let mut records = Vec::new();
        for (n, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let record: Value = serde_json::from_str(line)
                .with_context(|| format!("{}:{}: not a JSON line", path.display(), n + 1))?;
            records.push(record);
        }
        Run::from_records(label, records).with_context(|| format!("{}", path.display()))
    }

    /// `run`, `replay` or `lookup`.
    pub fn command(&self) -> &str {
        self.start["command"].as_str().unwrap_or("?")
    }

    /// What `--stats-json` wrote (null when the run was cut short).
    pub fn stats(&self) -> &Value {
        self.end.as_ref().map_or(&Value::Null, |e| &e["stats"])
    }

    /// The stages of what `--stats-json` wrote (empty when the run was cut short).
    pub fn stats_stages(&self) -> &[Value] {
        self.stats()["stages"].as_array().map_or(&[], Vec::as_slice)
    }

    /// The stages in full at the end (breakdowns, histograms, top lists).
    pub fn stages(&self) -> &[Value] {
        self.end
            .as_ref()
            .and_then(|e| e["stages"].as_array())
            .map_or(&[], Vec::as_slice)
    }

    /// When the last interval ended, in seconds since the start.
    pub fn length(&self) -> f64 {
        self.intervals
            .last()
            .and_then(|i| i["t1_s"].as_f64())
            .unwrap_or(0.0)
    }

    /// Per interval, `value(line)` per second, as a step line's points (from
    /// each interval's start); lines without the value are left out.
    pub fn rates(&self, value: impl Fn(&Value) -> Option<f64>) -> Vec<(f64, f64)> {
        self.levels(|line| {
            let seconds = line["t1_s"].as_f64()? - line["t0_s"].as_f64()?;
            (seconds > 0.0).then_some(value(line)? / seconds)
        })
    }

    /// Per interval, `value(line)` as it is (a level, a percentile).
    pub fn levels(&self, value: impl Fn(&Value) -> Option<f64>) -> Vec<(f64, f64)> {
        self.intervals
            .iter()
            .filter_map(|line| Some((line["t0_s"].as_f64()?, value(line)?)))
            .collect()
    }
}

/// Colour and dash of series `series` of run `run` among `runs`: with one
/// run, colours tell series apart; with several, colours tell runs apart
/// and dashes series.
pub fn style(run: usize, series: usize, runs: usize) -> (&'static str, &'static str) {
    if runs <= 1 {
        (svg::PALETTE[series % svg::PALETTE.len()], "")
    } else {
        (
            svg::PALETTE[run % svg::PALETTE.len()],
            svg::DASHES[series % svg::DASHES.len()],
        )
    }
}

/// A line of run `run`: its name (with the run's label when there are
/// several), its points, drawn as steps until the run's end.
pub fn line(
    runs: &[Run],
    run: usize,
    series: usize,
    name: &str,
    points: Vec<(f64, f64)>,
) -> svg::Line {
    let (color, dash) = style(run, series, runs.len());
    svg::Line {
        name: if runs.len() > 1 {
            format!("{}: {name}", runs[run].label)
        } else {
            name.to_string()
        },
        points,
        step: Some(runs[run].length()),
        color,
        dash,
    }
}

/// `text` with `&`, `<`, `>` and `"` escaped.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            _ => out.push(c),
        }
    }
    out
}

/// A JSON pointer (RFC 6901) of `tokens`: `/per_nameserver/a~1b/queries`.
pub fn pointer(tokens: &[&str]) -> String {
    tokens
        .iter()
        .map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// A number as the tables show it: integers grouped (`1,234`), others to three decimals.
pub fn shown(v: &Value) -> String {
    match (v.as_u64(), v.as_f64()) {
        (Some(n), _) => group(n),
        (None, Some(x)) => format!("{x:.3}"),
        _ => "–".to_string(),
    }
}

/// A table cell showing `stats` at `key` (a JSON pointer), saying so.
pub fn cell(run: usize, stats: &Value, key: &str) -> String {
    format!(
        r#"<td class="num" data-run="{run}" data-key="{}">{}</td>"#,
        escape(key),
        shown(stats.pointer(key).unwrap_or(&Value::Null))
    )
}

/// A table: a caption, header cells and rows of ready cells.
pub fn table(id: &str, caption: &str, headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = format!(
        r#"<table id="{id}"><caption>{}</caption><thead><tr>"#,
        escape(caption)
    );
    for h in headers {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr></thead><tbody>");
    for row in rows {
        out.push_str("<tr>");
        for c in row {
            out.push_str(c);
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
    out
}

/// A plain (text) cell.
pub fn text_cell(text: &str) -> String {
    format!("<td>{}</td>", escape(text))
}

/// The first stage of `run` whose module is one of `modules`, with its index.
pub fn stage<'a>(run: &'a Run, modules: &[&str]) -> Option<(usize, &'a Value)> {
    run.stages()
        .iter()
        .enumerate()
        .find(|(_, s)| s["module"].as_str().is_some_and(|m| modules.contains(&m)))
}

/// The command line as a shell would take it back.
fn command_line(start: &Value) -> String {
    let words: Vec<String> = start["argv"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|w| {
            if !w.is_empty()
                && w.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_./:=,@+".contains(&b))
            {
                w.to_string()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect();
    words.join(" ")
}

/// When `run` ended, from its start and length.
fn ended(run: &Run) -> String {
    let start = run.start["started"]
        .as_str()
        .and_then(|s| humantime::parse_rfc3339(s).ok());
    let t = run
        .end
        .as_ref()
        .and_then(|e| e["t_s"].as_f64())
        .unwrap_or(run.length());
    match start {
        Some(s) => {
            humantime::format_rfc3339_millis(s + Duration::from_secs_f64(t.max(0.0))).to_string()
        }
        None => "?".to_string(),
    }
}

/// The table of runs: label, command line, version, start, end, length, interval.
fn runs_table(runs: &[Run]) -> String {
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|run| {
            let length = run
                .end
                .as_ref()
                .and_then(|e| e["t_s"].as_f64())
                .unwrap_or(run.length());
            let mut end = ended(run);
            if run.end.is_none() {
                end.push_str(" (cut short: no end line)");
            }
            vec![
                text_cell(&run.label),
                format!(
                    "<td><code>{}</code></td>",
                    escape(&command_line(&run.start))
                ),
                text_cell(run.start["version"].as_str().unwrap_or("?")),
                text_cell(run.start["started"].as_str().unwrap_or("?")),
                text_cell(&end),
                text_cell(&format!("{length:.3} s")),
                text_cell(&format!("{} s", run.start["interval_s"])),
            ]
        })
        .collect();
    table(
        "runs",
        "Runs",
        &[
            "run",
            "command line",
            "version",
            "started",
            "ended",
            "length",
            "interval",
        ],
        &rows,
    )
}

const STYLE: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;margin:24px;color:#222;background:#fff}\
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd}\
p.sub{color:#666;margin:0 0 16px}\
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:16px}\
figure.chart{margin:0;border:1px solid #e4e4e4;border-radius:6px;padding:6px;background:#fcfcfc}\
figure.chart svg{width:100%;height:auto;display:block}\
svg text{font-size:12px;fill:#333}svg text.title{font-size:14px;font-weight:600}svg text.note{fill:#888}\
svg text.value{font-size:10px;fill:#555}svg .grid{stroke:#e8e8e8}svg .axis{stroke:#888}\
.legend{font-size:12px;display:flex;flex-wrap:wrap;gap:4px 14px;padding:2px 8px}\
.legend span{display:inline-flex;align-items:center;gap:5px;white-space:nowrap}figure.chart .legend svg{width:24px;height:8px;flex:none;display:inline}\
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}caption{text-align:left;font-weight:600;padding:4px 0}\
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}th{background:#f3f3f3}\
td.num{text-align:right;font-variant-numeric:tabular-nums}code{font-size:12px;word-break:break-all}\
.tables{display:flex;flex-wrap:wrap;gap:0 24px;align-items:flex-start}";

/// The whole report for `runs` (all of one command).
pub fn render(runs: &[Run], title: Option<&str>) -> Result<String> {
    let Some(first) = runs.first() else {
        bail!("no runs to report on");
    };
    let command = first.command().to_string();
    if let Some(other) = runs.iter().find(|r| r.command() != command) {
        bail!(
            "{} is a {command} and {} a {}: one report compares runs of one command",
            first.label,
            other.label,
            other.command()
        );
    }
    let body = match command.as_str() {
        "replay" => replay::sections(runs),
        "lookup" => lookup::sections(runs),
        "run" => run::sections(runs),
        other => bail!(
            "{}: unknown command `{other}` in the start line",
            first.label
        ),
    };
    let title = title.map_or_else(|| format!("dnsluice {command} report"), str::to_string);
    let labels: Vec<&str> = runs.iter().map(|r| r.label.as_str()).collect();
    Ok(format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\">\
<title>{t}</title><style>{STYLE}</style></head><body data-command=\"{command}\">\
<h1>{t}</h1><p class=\"sub\">{} run{}: {}</p>{}{body}</body></html>\n",
        runs.len(),
        if runs.len() == 1 { "" } else { "s" },
        escape(&labels.join(", ")),
        runs_table(runs),
        t = escape(&title),
    ))
}

/// Writes the report for `runs` to `path`.
pub fn write(path: &Path, runs: &[Run], title: Option<&str>) -> Result<()> {
    let html = render(runs, title)?;
    std::fs::write(path, html).with_context(|| format!("cannot write {}", path.display()))
}

/// `dnsluice report`: an HTML report from interval statistics files.
#[derive(Args, Debug)]
#[command(
    after_long_help = "Each FILE is what --stats-jsonl wrote (run, replay or lookup); \
several files of one command share the charts, e.g. before and after a server change. \
LABEL=FILE names a run (default: the file's name without .jsonl).\n\nExamples:\n  \
dnsluice report run.jsonl -o report.html\n  \
dnsluice report before=a.jsonl after=b.jsonl -o compare.html --title 'knot 3.2 vs 3.3'"
)]
pub struct ReportArgs {
    /// The interval statistics files, `FILE` or `LABEL=FILE`.
    #[arg(required = true, value_name = "[LABEL=]FILE")]
    pub files: Vec<String>,
    /// Where the HTML goes.
    #[arg(short, long, value_name = "FILE.html")]
    pub output: PathBuf,
    /// The report's title (default: "dnsluice COMMAND report").
    #[arg(long)]
    pub title: Option<String>,
}

/// The label and path of a `[LABEL=]FILE` argument (a file that exists is a file, `=` and all).
fn label_and_path(arg: &str) -> (String, PathBuf) {
    let as_path = PathBuf::from(arg);
    match arg.split_once('=') {
        Some((label, path)) if !as_path.exists() && !label.is_empty() => {
            (label.to_string(), PathBuf::from(path))
        }
        _ => {
            let label = as_path
                .file_name()
                .map(|n| n.to_string_lossy().trim_end_matches(".jsonl").to_string())
                .unwrap_or_else(|| arg.to_string());
            (label, as_path)
        }
    }
}

/// Runs `dnsluice report`.
pub fn report_command(args: &ReportArgs) -> Result<ExitCode> {
    let mut runs = Vec::new();
    for arg in &args.files {
        let (label, path) = label_and_path(arg);
        runs.push(Run::read(&label, &path)?);
    }
    write(&args.output, &runs, args.title.as_deref())?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_escape_slashes_and_tildes() {
        assert_eq!(
            pointer(&["per_nameserver", "https://a/b", "queries"]),
            "/per_nameserver/https:~1~1a~1b/queries"
        );
        assert_eq!(pointer(&["a~b"]), "/a~0b");
        let v = json!({"per_nameserver": {"https://a/b": {"queries": 3}}});
        assert_eq!(
            v.pointer(&pointer(&["per_nameserver", "https://a/b", "queries"])),
            Some(&json!(3))
        );
    }

    #[test]
    fn labels_come_from_the_argument_or_the_file_name() {
        assert_eq!(
            label_and_path("before=x/a.jsonl"),
            ("before".into(), PathBuf::from("x/a.jsonl"))
        );
        assert_eq!(
            label_and_path("x/run-1.jsonl"),
            ("run-1".into(), PathBuf::from("x/run-1.jsonl"))
        );
    }

    #[test]
    fn runs_of_two_commands_do_not_mix() {
        let a =
            Run::from_records("a", vec![json!({"type": "start", "command": "replay"})]).unwrap();
        let b =
            Run::from_records("b", vec![json!({"type": "start", "command": "lookup"})]).unwrap();
        let e = render(&[a, b], None).unwrap_err().to_string();
        assert!(e.contains("one report compares runs of one command"), "{e}");
        assert!(Run::from_records("c", vec![json!({"type": "interval"})]).is_err());
    }

    #[test]
    fn command_lines_are_quoted_for_a_shell() {
        let start =
            json!({"argv": ["dnsluice", "run", "a b.toml", "--set", "0.path=x.pcap", "it's"]});
        assert_eq!(
            command_line(&start),
            r"dnsluice run 'a b.toml' --set 0.path=x.pcap 'it'\''s'"
        );
    }
}

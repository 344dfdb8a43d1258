//! Interval statistics: `--stats-interval`, `--stats-jsonl` and `--report`.
//!
//! A [`Recorder`] is handed snapshots of every stage's statistics (by the
//! driver between two objects, or by a timer thread for lookups) and, each
//! time an interval has passed, writes one JSON line with what happened in
//! it: the difference of two snapshots ([`dnsluice_core::stats::since`]),
//! so the hot path does no per-interval work. The file is:
//!
//! - a first line `{"type":"start","command","version","argv","started",
//!   "interval_s",...}` (the command adds its own keys: server, transport...);
//! - one `{"type":"interval","index","t0_s","t1_s",...}` line per interval
//!   (seconds since the start), the keys the command's view gives, written
//!   out as it is made (a run can be followed); the last one ends with the
//!   run, so the intervals add up to the totals;
//! - a last line `{"type":"end","t_s","stats","stages"}`: `stats` is what
//!   `--stats-json` writes, `stages` every stage in full (breakdowns,
//!   histograms, top lists).
//!
//! `dnsluice report` makes the HTML report from such files; `--report`
//! makes it at the end from the same records, kept in memory.

use crate::report::stage_value;
use anyhow::{bail, Context, Result};
use clap::Args;
use dnsluice_core::StageStats;
use serde_json::{json, Map, Value};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

/// The interval and report flags of `run`, `replay` and `lookup`.
#[derive(Args, Debug, Clone, Default)]
pub struct RecordFlags {
    /// Interval statistics every DURATION (`1s`, `100ms`; default 1s when
    /// --stats-jsonl or --report is given).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub stats_interval: Option<Duration>,
    /// Write the interval statistics to FILE as JSON lines (a start line,
    /// one line per interval, an end line with the totals).
    #[arg(long, value_name = "FILE")]
    pub stats_jsonl: Option<PathBuf>,
    /// Write a self-contained HTML report (charts and tables) to FILE at the end.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
}

impl RecordFlags {
    /// The first of these flags given, as typed (`None`: none).
    pub fn first_given(&self) -> Option<&'static str> {
        [
            (self.stats_interval.is_some(), "--stats-interval"),
            (self.stats_jsonl.is_some(), "--stats-jsonl"),
            (self.report.is_some(), "--report"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }
}

/// Reads a duration with a unit (`1s`, `250ms`, `1m`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text)
        .map_err(|e| format!("{e} (a duration with a unit: 1s, 250ms)"))?;
    if d < Duration::from_millis(1) {
        return Err("the interval must be at least 1ms".into());
    }
    if d > MOST_INTERVAL {
        return Err("the interval must be at most 1 day".into());
    }
    Ok(d)
}

/// The longest interval taken (an absurd one overflowed the clock).
const MOST_INTERVAL: Duration = Duration::from_secs(86_400);

/// Default interval when only a file or a report is asked for.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);

/// One interval, as a command's view sees it.
pub struct Interval<'a> {
    /// What each stage counted in the interval.
    pub diff: &'a [StageStats],
    /// The stages' totals at its end.
    pub now: &'a [StageStats],
    /// Its length in seconds.
    pub seconds: f64,
}

/// What a command writes for one interval (the keys beside type, index, t0_s, t1_s).
pub type View = fn(&Interval<'_>) -> Map<String, Value>;

/// Writes interval lines; see the module docs.
pub struct Recorder {
    view: View,
    started: Instant,
    period: Duration,
    next: Instant,
    last: Vec<StageStats>,
    last_t: f64,
    index: u64,
    /// Every record, kept when a report is to be made.
    kept: Option<Vec<Value>>,
    file: Option<(PathBuf, BufWriter<File>)>,
    report: Option<PathBuf>,
    error: Option<anyhow::Error>,
}

impl Recorder {
    /// A recorder for `flags`, or `None` when none of them is given. `header`
    /// holds the command's keys of the start line (`command` among them).
    pub fn new(
        flags: &RecordFlags,
        mut header: Map<String, Value>,
        view: View,
    ) -> Result<Option<Recorder>> {
        if flags.stats_jsonl.is_none() && flags.report.is_none() {
            if flags.stats_interval.is_some() {
                bail!("--stats-interval needs --stats-jsonl FILE or --report FILE.html (where the intervals go)");
            }
            return Ok(None);
        }
        let period = flags.stats_interval.unwrap_or(DEFAULT_INTERVAL);
        let file = match &flags.stats_jsonl {
            Some(path) => {
                let file = File::create(path)
                    .with_context(|| format!("cannot create {}", path.display()))?;
                Some((path.clone(), BufWriter::new(file)))
            }
            None => None,
        };
        let now = SystemTime::now();
        header.insert("type".into(), json!("start"));
        header.insert("version".into(), json!(env!("CARGO_PKG_VERSION")));
        header.insert("argv".into(), json!(std::env::args().collect::<Vec<_>>()));
        header.insert(
            "started".into(),
            json!(humantime::format_rfc3339_millis(now).to_string()),
        );
        header.insert("started_unix_s".into(), json!(unix_seconds(now)));
        header.insert("interval_s".into(), json!(period.as_secs_f64()));
        let started = Instant::now();
        let mut recorder = Recorder {
            view,
            started,
            period,
            next: started + period,
            last: Vec::new(),
            last_t: 0.0,
            index: 0,
            kept: flags.report.is_some().then(Vec::new),
            file,
            report: flags.report.clone(),
            error: None,
        };
        recorder.write(Value::Object(header));
        Ok(Some(recorder))
    }

    /// The interval.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// Takes a snapshot: writes an interval line when one has passed.
    pub fn observe(&mut self, now: Vec<StageStats>) {
        let at = Instant::now();
        if at < self.next {
            return;
        }
        while self.next <= at {
            self.next += self.period;
        }
        self.interval(now, at);
    }

    fn interval(&mut self, now: Vec<StageStats>, at: Instant) {
        let t1 = at.duration_since(self.started).as_secs_f64();
        let diff = dnsluice_core::stats::since(&now, &self.last);
        let view = (self.view)(&Interval {
            diff: &diff,
            now: &now,
            seconds: t1 - self.last_t,
        });
        let mut line = Map::new();
        line.insert("type".into(), json!("interval"));
        line.insert("index".into(), json!(self.index));
        line.insert("t0_s".into(), json!(round6(self.last_t)));
        line.insert("t1_s".into(), json!(round6(t1)));
        line.extend(view);
        self.write(Value::Object(line));
        self.index += 1;
        self.last = now;
        self.last_t = t1;
    }

    fn write(&mut self, record: Value) {
        if let Some((path, out)) = &mut self.file {
            let result = serde_json::to_writer(&mut *out, &record)
                .map_err(anyhow::Error::from)
                .and_then(|()| {
                    // Each line is there to be read while the run goes on.
                    out.write_all(b"\n")?;
                    out.flush()?;
                    Ok(())
                });
            if let Err(e) = result {
                if self.error.is_none() {
                    self.error = Some(e.context(format!("cannot write {}", path.display())));
                }
            }
        }
        if let Some(kept) = &mut self.kept {
            kept.push(record);
        }
    }

    /// Ends the run: the last interval (up to `now`, the final statistics),
    /// the end line with `stats` (the `--stats-json` object), and the report.
    pub fn finish(mut self, now: Vec<StageStats>, stats: Value) -> Result<()> {
        let at = Instant::now();
        let t = at.duration_since(self.started).as_secs_f64();
        let stages: Vec<Value> = now.iter().map(|s| stage_value(s, true)).collect();
        self.interval(now, at);
        self.write(json!({"type": "end", "t_s": round6(t), "stats": stats, "stages": stages}));
        if let Some((path, mut out)) = self.file.take() {
            out.flush()
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        if let (Some(path), Some(records)) = (&self.report, self.kept.take()) {
            let run = crate::html::Run::from_records("this run", records)?;
            crate::html::write(path, &[run], None)?;
        }
        Ok(())
    }
}

fn unix_seconds(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Seconds to the microsecond, so lines stay short.
fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_need_units_and_a_floor() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1s"), Ok(Duration::from_secs(1)));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("10us").unwrap_err().contains("at least 1ms"));
    }
}

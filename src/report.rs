//! End-of-run reporting: the per-stage summary on stderr, `--stats-json`, and
//! the progress line shown while a long run goes on.

use dnsluice_core::StageStats;
use serde_json::{json, Map, Value};
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Prints one line per stage (objects in/out, rate), then its errors and
/// counters on indented lines of at most about 100 characters.
pub fn print_summary(stats: &[StageStats], elapsed: f64) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "dnsluice: {:.3} s", elapsed);
    for s in stats {
        let rate = if elapsed > 0.0 {
            s.input as f64 / elapsed
        } else {
            0.0
        };
        let _ = writeln!(
            err,
            "  {:<16} in {:>10}  out {:>10}  {:>12.0}/s",
            s.module, s.input, s.output, rate
        );
        for (label, map) in [("errors", &s.errors), ("counts", &s.counters)] {
            for line in wrap(map, 96) {
                let _ = writeln!(err, "    {label:<7} {line}");
            }
        }
    }
}

/// `key=value` pairs joined with spaces, in lines of at most `width` characters.
fn wrap(map: &std::collections::BTreeMap<String, u64>, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for (k, v) in map {
        let item = format!("{k}={v}");
        match lines.last_mut() {
            Some(line) if line.len() + 1 + item.len() <= width => {
                line.push(' ');
                line.push_str(&item);
            }
            _ => lines.push(item),
        }
    }
    lines
}

/// The summary as one JSON object:
/// `{"stages":[{"module","in","out","errors","counters","warnings"}...],"elapsed_s"}`.
pub fn stats_json(stats: &[StageStats], elapsed: f64) -> String {
    let stages: Vec<Value> = stats
        .iter()
        .map(|s| {
            let map = |m: &std::collections::BTreeMap<String, u64>| {
                Value::Object(
                    m.iter()
                        .map(|(k, v)| (k.clone(), json!(v)))
                        .collect::<Map<_, _>>(),
                )
            };
            json!({
                "module": s.module,
                "in": s.input,
                "out": s.output,
                "errors": map(&s.errors),
                "counters": map(&s.counters),
                "warnings": s.warnings,
            })
        })
        .collect();
    let mut text = json!({ "stages": stages, "elapsed_s": elapsed }).to_string();
    text.push('\n');
    text
}

/// A progress line on stderr, redrawn at most twice a second, only when stderr is a terminal.
pub struct Progress {
    started: Instant,
    last: Instant,
    enabled: bool,
    shown: bool,
    unit: &'static str,
}

impl Progress {
    /// A progress line for a run that started at `started`.
    pub fn new(started: Instant) -> Self {
        Self::counting(started, "objects")
    }

    /// A progress line counting `unit` ("names", "queries").
    pub fn counting(started: Instant, unit: &'static str) -> Self {
        Progress {
            started,
            last: started,
            enabled: std::io::stderr().is_terminal(),
            shown: false,
            unit,
        }
    }

    /// Called with the number of objects moved so far.
    pub fn update(&mut self, objects: u64) {
        if !self.enabled || self.last.elapsed() < Duration::from_millis(500) {
            return;
        }
        self.last = Instant::now();
        let secs = self.started.elapsed().as_secs_f64();
        eprint!(
            "\r\x1b[K{objects} {}, {:.1} s, {:.0}/s",
            self.unit,
            secs,
            objects as f64 / secs
        );
        self.shown = true;
    }

    /// Erases the line, if one was drawn.
    pub fn clear(&mut self) {
        if self.shown {
            eprint!("\r\x1b[K");
            self.shown = false;
        }
    }
}

//! The progress bar on stderr while `run`, `replay` and `lookup` go on:
//! a bar with percentage and ETA when the total is known (a capture's or a
//! names file's size, a names file's lines), else a spinner; both with a
//! count and a rate. Nothing is drawn when stderr is not a terminal (or
//! with `--quiet`), and the bar is erased before the summary is printed,
//! so the summary is the same with or without one.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// How often the bar is brought up to date.
pub const REFRESH: Duration = Duration::from_millis(200);

/// The bar, or nothing.
pub struct Progress {
    bar: Option<ProgressBar>,
    started: Instant,
    /// Whether the bar has its total (set once, at the first update that knows it).
    sized: bool,
}

/// What the bar shows at one update.
pub struct Position {
    /// Done so far (bytes read, or names resolved), in the total's unit.
    pub done: u64,
    /// The total, when known.
    pub total: Option<u64>,
    /// The count shown beside the bar (`1,234 packets`), rate per second added.
    pub count: u64,
    /// What `count` counts ("packets", "queries sent", "names").
    pub unit: &'static str,
}

impl Progress {
    /// A bar on stderr, if `wanted` and stderr is a terminal.
    pub fn new(wanted: bool) -> Progress {
        let bar = (wanted && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            bar.set_style(spinner_style());
            bar
        });
        Progress {
            bar,
            started: Instant::now(),
            sized: false,
        }
    }

    /// Whether anything is drawn (so whether updates are worth making).
    pub fn enabled(&self) -> bool {
        self.bar.is_some()
    }

    /// Shows `at`.
    pub fn update(&mut self, at: &Position) {
        let Some(bar) = &self.bar else { return };
        if let (Some(total), false) = (at.total, self.sized) {
            bar.set_length(total);
            bar.set_style(bar_style());
            self.sized = true;
        }
        bar.set_position(at.done);
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        bar.set_message(format!(
            "{} {} · {}/s",
            group(at.count),
            at.unit,
            group((at.count as f64 / secs) as u64)
        ));
    }

    /// Erases the bar.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

fn bar_style() -> ProgressStyle {
    ProgressStyle::with_template(
        "{bar:32.cyan/blue} {percent:>3}%  {msg}  [{elapsed_precise}, ETA {eta}]",
    )
    .expect("a valid template")
    .progress_chars("█▓░")
}

fn spinner_style() -> ProgressStyle {
    ProgressStyle::with_template("{spinner} {msg}  [{elapsed_precise}]").expect("a valid template")
}

/// `1234567` as `1,234,567`.
pub fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_of_three() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1000), "1,000");
        assert_eq!(group(1234567), "1,234,567");
    }
}

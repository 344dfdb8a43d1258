//! Charts as inline SVG, written by hand: line charts (linear, logarithmic
//! or percentile axes; step lines for interval data) and horizontal bar
//! charts, with titles, axis labels, units and a legend.
//!
//! Hand-written rather than a plotting crate: the report needs two chart
//! kinds, and plotters (the usual choice) pulls a large dependency tree and
//! a font stack for text that a browser draws better itself. Nothing here
//! loads anything: fonts are the browser's, colours are inline.

use super::escape;
use std::fmt::Write as _;

/// Chart size in SVG units (the page scales it to the column's width).
const W: f64 = 640.0;
const H: f64 = 300.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 34.0;
const BOTTOM: f64 = 46.0;

/// Colours for lines and bars, in order (colour-blind friendly, after Tableau 10).
pub const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f",
    "#ff9da7", "#bab0ac",
];

/// Dash patterns, for telling series apart when colour tells runs apart.
pub const DASHES: [&str; 4] = ["", "6 4", "2 3", "8 3 2 3"];

/// How an axis maps values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scale {
    /// Linear, from zero (or the smallest value, if negative).
    Linear,
    /// Base 10 logarithm; values at or below zero are left out.
    Log,
    /// Percentiles on a "nines" axis: the value is `-log10(1 - p/100)`,
    /// ticks read 50 %, 90 %, 99 %, 99.9 %...
    Nines,
}

/// An axis: its label (with the unit) and scale.
#[derive(Clone, Debug)]
pub struct Axis {
    /// "time since start (s)", "latency (ms)".
    pub label: String,
    /// How values map.
    pub scale: Scale,
}

impl Axis {
    /// A linear axis.
    pub fn linear(label: &str) -> Axis {
        Axis {
            label: label.to_string(),
            scale: Scale::Linear,
        }
    }

    /// A logarithmic axis.
    pub fn log(label: &str) -> Axis {
        Axis {
            label: label.to_string(),
            scale: Scale::Log,
        }
    }
}

/// One line of a chart.
#[derive(Clone, Debug)]
pub struct Line {
    /// Its legend entry.
    pub name: String,
    /// `(x, y)`, in order of x. For a step line, each point starts a level
    /// that lasts until the next point's x (the last one's until `end`).
    pub points: Vec<(f64, f64)>,
    /// Drawn as steps (interval data), with the last level ending at `end`.
    pub step: Option<f64>,
    /// Colour (a [`PALETTE`] entry).
    pub color: &'static str,
    /// Dash pattern (a [`DASHES`] entry).
    pub dash: &'static str,
}

/// A line chart.
pub struct Plot {
    /// The figure's id (the browser test looks for it).
    pub id: String,
    /// Title above the chart.
    pub title: String,
    /// The horizontal axis.
    pub x: Axis,
    /// The vertical axis.
    pub y: Axis,
    /// The lines.
    pub lines: Vec<Line>,
}

/// Where values of one axis go: the range and the mapping to pixels.
struct Mapping {
    scale: Scale,
    lo: f64,
    hi: f64,
    from: f64,
    to: f64,
}

impl Mapping {
    fn new(scale: Scale, values: impl Iterator<Item = f64>, from: f64, to: f64) -> Mapping {
        let mut lo = f64::INFINITY;
        let mut hi = f64::NEG_INFINITY;
        for v in values.filter(|v| v.is_finite() && (scale != Scale::Log || *v > 0.0)) {
            let t = transform(scale, v);
            lo = lo.min(t);
            hi = hi.max(t);
        }
        if !lo.is_finite() {
            (lo, hi) = (0.0, 1.0);
        }
        match scale {
            Scale::Linear => {
                lo = lo.min(0.0);
                let step = nice_step(hi - lo);
                hi = (hi / step).ceil() * step;
                if hi <= lo {
                    hi = lo + 1.0;
                }
            }
            Scale::Log => {
                lo = lo.floor();
                hi = hi.ceil().max(lo + 1.0);
            }
            Scale::Nines => {
                lo = 0.0;
                hi = hi.ceil().max(1.0);
            }
        }
        Mapping {
            scale,
            lo,
            hi,
            from,
            to,
        }
    }

    fn at(&self, v: f64) -> f64 {
        let t = transform(self.scale, v);
        self.from + (t - self.lo) / (self.hi - self.lo) * (self.to - self.from)
    }

    /// Tick values (in data units) and their labels.
    fn ticks(&self) -> Vec<(f64, String)> {
        match self.scale {
            Scale::Linear => {
                let step = nice_step(self.hi - self.lo);
                let mut v = (self.lo / step).ceil() * step;
                let mut out = Vec::new();
                while v <= self.hi + step * 1e-9 {
                    out.push((v, number(v)));
                    v += step;
                }
                out
            }
            Scale::Log => (self.lo as i32..=self.hi as i32)
                .map(|e| (10f64.powi(e), number(10f64.powi(e))))
                .collect(),
            Scale::Nines => (0..=self.hi as i32)
                .map(|n| {
                    let p = 100.0 * (1.0 - 10f64.powi(-n));
                    let v = p;
                    let label = if n == 0 {
                        "0%".to_string()
                    } else {
                        format!("{}%", number(p))
                    };
                    (v, label)
                })
                .collect(),
        }
    }
}

/// The axis coordinate of `v`.
fn transform(scale: Scale, v: f64) -> f64 {
    match scale {
        Scale::Linear => v,
        Scale::Log => v.log10(),
        Scale::Nines => -(1.0 - v / 100.0).max(1e-12).log10(),
    }
}

/// A round step (1, 2 or 5 times a power of ten) giving about five ticks over `range`.
fn nice_step(range: f64) -> f64 {
    if range <= 0.0 || !range.is_finite() {
        return 1.0;
    }
    let rough = range / 5.0;
    let power = 10f64.powf(rough.log10().floor());
    let m = rough / power;
    let nice = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * power
}

/// A number for a tick or a label: `1.5k`, `2M`, `0.25`, `120`.
pub fn number(v: f64) -> String {
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let text = if scaled == scaled.trunc() || scaled.abs() >= 100.0 {
        format!("{scaled:.0}")
    } else if scaled.abs() >= 1.0 {
        trim(format!("{scaled:.2}"))
    } else {
        let digits = (-scaled.abs().log10().floor() as usize + 2).min(9);
        trim(format!("{scaled:.digits$}"))
    };
    format!("{text}{suffix}")
}

fn trim(text: String) -> String {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

fn frame(out: &mut String, id: &str, title: &str, width: f64, height: f64) {
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" aria-labelledby="{id}-title"><title id="{id}-title">{t}</title><text class="title" x="{x}" y="20" text-anchor="middle">{t}</text>"#,
        t = escape(title),
        x = width / 2.0
    );
}

fn legend(out: &mut String, entries: &[(String, &str, &str)]) {
    out.push_str(r#"<figcaption class="legend">"#);
    for (name, color, dash) in entries {
        let _ = write!(
            out,
            r#"<span><svg viewBox="0 0 24 8" width="24" height="8"><line x1="0" y1="4" x2="24" y2="4" stroke="{color}" stroke-width="3" stroke-dasharray="{dash}"/></svg>{}</span>"#,
            escape(name)
        );
    }
    out.push_str("</figcaption>");
}

/// An empty chart's figure: the title and why there is nothing to show.
pub fn empty(id: &str, title: &str, why: &str) -> String {
    let mut out = format!(r#"<figure class="chart" id="{id}" data-points="0">"#);
    frame(&mut out, id, title, W, 80.0);
    let _ = write!(
        out,
        r#"<text class="note" x="{}" y="52" text-anchor="middle">{}</text></svg></figure>"#,
        W / 2.0,
        escape(why)
    );
    out
}

/// The chart's figure (SVG and legend).
pub fn plot(p: &Plot) -> String {
    let points: usize = p.lines.iter().map(|l| l.points.len()).sum();
    if points == 0 {
        return empty(&p.id, &p.title, "no data");
    }
    let xs = p
        .lines
        .iter()
        .flat_map(|l| l.points.iter().map(|(x, _)| *x).chain(l.step));
    let x = Mapping::new(p.x.scale, xs, LEFT, W - RIGHT);
    let ys = p
        .lines
        .iter()
        .flat_map(|l| l.points.iter().map(|(_, y)| *y));
    let y = Mapping::new(p.y.scale, ys, H - BOTTOM, TOP);
    let mut out = format!(
        r#"<figure class="chart" id="{}" data-points="{points}">"#,
        p.id
    );
    frame(&mut out, &p.id, &p.title, W, H);
    axes(&mut out, &x, &y, &p.x.label, &p.y.label);
    let _ = write!(
        out,
        r#"<clipPath id="{id}-clip"><rect x="{LEFT}" y="{TOP}" width="{w}" height="{h}"/></clipPath><g clip-path="url(#{id}-clip)">"#,
        id = p.id,
        w = W - LEFT - RIGHT,
        h = H - TOP - BOTTOM
    );
    for line in &p.lines {
        let d = path(line, &x, &y);
        if d.is_empty() {
            continue;
        }
        let _ = write!(
            out,
            r#"<path class="series" d="{d}" fill="none" stroke="{}" stroke-width="2" stroke-dasharray="{}"><title>{}</title></path>"#,
            line.color,
            line.dash,
            escape(&line.name)
        );
    }
    out.push_str("</g></svg>");
    let entries: Vec<(String, &str, &str)> = p
        .lines
        .iter()
        .map(|l| (l.name.clone(), l.color, l.dash))
        .collect();
    legend(&mut out, &entries);
    out.push_str("</figure>");
    out
}

fn axes(out: &mut String, x: &Mapping, y: &Mapping, x_label: &str, y_label: &str) {
    let (x0, x1, y0, y1) = (LEFT, W - RIGHT, H - BOTTOM, TOP);
    for (v, label) in y.ticks() {
        let py = y.at(v);
        let _ = write!(
            out,
            r#"<line class="grid" x1="{x0}" y1="{py:.1}" x2="{x1}" y2="{py:.1}"/><text class="tick" x="{}" y="{:.1}" text-anchor="end">{label}</text>"#,
            x0 - 6.0,
            py + 4.0
        );
    }
    for (v, label) in x.ticks() {
        let px = x.at(v);
        let _ = write!(
            out,
            r#"<line class="grid" x1="{px:.1}" y1="{y0}" x2="{px:.1}" y2="{y1}"/><text class="tick" x="{px:.1}" y="{}" text-anchor="middle">{label}</text>"#,
            y0 + 16.0
        );
    }
    let _ = write!(
        out,
        r#"<line class="axis" x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}"/><line class="axis" x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}"/><text class="label" x="{}" y="{}" text-anchor="middle">{}</text><text class="label" transform="translate(16 {}) rotate(-90)" text-anchor="middle">{}</text>"#,
        (x0 + x1) / 2.0,
        H - 8.0,
        escape(x_label),
        (y0 + y1) / 2.0,
        escape(y_label)
    );
}

/// The path of `line` (points the scales cannot show are left out).
fn path(line: &Line, x: &Mapping, y: &Mapping) -> String {
    let shown = |v: f64, m: &Mapping| v.is_finite() && (m.scale != Scale::Log || v > 0.0);
    let mut d = String::new();
    let mut pen_down = false;
    for (i, &(px, py)) in line.points.iter().enumerate() {
        if !shown(px, x) || !shown(py, y) {
            pen_down = false;
            continue;
        }
        let (sx, sy) = (x.at(px), y.at(py));
        let _ = write!(d, "{}{sx:.1},{sy:.1}", if pen_down { "L" } else { "M" });
        pen_down = true;
        if let Some(end) = line.step {
            let until = line.points.get(i + 1).map_or(end, |p| p.0);
            let _ = write!(d, "L{:.1},{sy:.1}", x.at(until));
        }
    }
    d
}

/// A horizontal bar chart: one row per category, one bar per group in it.
pub struct Bars {
    /// The figure's id.
    pub id: String,
    /// Title above the chart.
    pub title: String,
    /// The value axis' label (with the unit).
    pub unit: String,
    /// Row labels.
    pub categories: Vec<String>,
    /// `(legend name, colour, one value per category)`.
    pub groups: Vec<(String, &'static str, Vec<f64>)>,
}

/// The bar chart's figure.
pub fn bars(b: &Bars) -> String {
    let points: usize = b
        .groups
        .iter()
        .map(|g| g.2.iter().filter(|v| **v > 0.0).count())
        .sum();
    if b.categories.is_empty() || points == 0 {
        return empty(&b.id, &b.title, "nothing counted");
    }
    let bar_h = 14.0;
    let row_h = bar_h * b.groups.len() as f64 + 8.0;
    let left = 150.0;
    let height = TOP + row_h * b.categories.len() as f64 + BOTTOM;
    let max = b
        .groups
        .iter()
        .flat_map(|g| g.2.iter().copied())
        .fold(0.0, f64::max);
    let x = Mapping::new(
        Scale::Linear,
        [0.0, max].into_iter(),
        left,
        W - RIGHT - 40.0,
    );
    let mut out = format!(
        r#"<figure class="chart" id="{}" data-points="{points}">"#,
        b.id
    );
    frame(&mut out, &b.id, &b.title, W, height);
    let y_end = height - BOTTOM;
    for (v, label) in x.ticks() {
        let px = x.at(v);
        let _ = write!(
            out,
            r#"<line class="grid" x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{y_end}"/><text class="tick" x="{px:.1}" y="{}" text-anchor="middle">{label}</text>"#,
            y_end + 16.0
        );
    }
    for (row, category) in b.categories.iter().enumerate() {
        let top = TOP + row as f64 * row_h + 4.0;
        let _ = write!(
            out,
            r#"<text class="tick" x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            left - 6.0,
            top + row_h / 2.0,
            escape(category)
        );
        for (g, (name, color, values)) in b.groups.iter().enumerate() {
            let v = values.get(row).copied().unwrap_or(0.0);
            let by = top + g as f64 * bar_h;
            let w = (x.at(v) - left).max(0.0);
            let _ = write!(
                out,
                r#"<rect x="{left}" y="{by:.1}" width="{w:.1}" height="{}" fill="{color}"><title>{}: {}</title></rect><text class="value" x="{:.1}" y="{:.1}">{}</text>"#,
                bar_h - 2.0,
                escape(name),
                number(v),
                left + w + 4.0,
                by + bar_h - 4.0,
                number(v)
            );
        }
    }
    let _ = write!(
        out,
        r#"<line class="axis" x1="{left}" y1="{TOP}" x2="{left}" y2="{y_end}"/><text class="label" x="{}" y="{}" text-anchor="middle">{}</text></svg>"#,
        (left + W - RIGHT) / 2.0,
        height - 8.0,
        escape(&b.unit)
    );
    if b.groups.len() > 1 {
        let entries: Vec<(String, &str, &str)> =
            b.groups.iter().map(|g| (g.0.clone(), g.1, "")).collect();
        legend(&mut out, &entries);
    }
    out.push_str("</figure>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(number(0.0), "0");
        assert_eq!(number(120.0), "120");
        assert_eq!(number(1500.0), "1500");
        assert_eq!(number(15000.0), "15k");
        assert_eq!(number(2_500_000.0), "2.5M");
        assert_eq!(number(0.25), "0.25");
        assert_eq!(number(0.001), "0.001");
        assert_eq!(number(99.9), "99.9");
    }

    #[test]
    fn steps_are_round() {
        assert_eq!(nice_step(10.0), 2.0);
        assert_eq!(nice_step(1000.0), 200.0);
        assert_eq!(nice_step(7.0), 2.0);
        assert_eq!(nice_step(0.3), 0.1);
    }

    #[test]
    fn nines_ticks_read_as_percentiles() {
        let m = Mapping::new(Scale::Nines, [99.95].into_iter(), 0.0, 100.0);
        let labels: Vec<String> = m.ticks().into_iter().map(|t| t.1).collect();
        assert_eq!(labels, ["0%", "90%", "99%", "99.9%", "99.99%"]);
        // 90 % is a quarter of the way along four nines.
        assert!((m.at(90.0) - 25.0).abs() < 1e-9);
    }

    #[test]
    fn a_step_line_holds_each_level_to_the_next_point() {
        let line = Line {
            name: "x".into(),
            points: vec![(0.0, 1.0), (1.0, 2.0)],
            step: Some(2.0),
            color: PALETTE[0],
            dash: "",
        };
        let x = Mapping::new(Scale::Linear, [0.0, 2.0].into_iter(), 0.0, 200.0);
        let y = Mapping::new(Scale::Linear, [0.0, 2.0].into_iter(), 100.0, 0.0);
        assert_eq!(
            path(&line, &x, &y),
            "M0.0,50.0L100.0,50.0L100.0,0.0L200.0,0.0"
        );
    }

    #[test]
    fn titles_and_labels_are_escaped() {
        let p = Plot {
            id: "c".into(),
            title: "a < b & c".into(),
            x: Axis::linear("x (s)"),
            y: Axis::log("y <ms>"),
            lines: vec![Line {
                name: "<run>".into(),
                points: vec![(0.0, 1.0), (1.0, 10.0)],
                step: None,
                color: PALETTE[0],
                dash: "",
            }],
        };
        let svg = plot(&p);
        assert!(svg.contains("a &lt; b &amp; c"));
        assert!(svg.contains("y &lt;ms&gt;"));
        assert!(svg.contains("&lt;run&gt;"));
        assert!(!svg.contains("<run>"));
    }
}

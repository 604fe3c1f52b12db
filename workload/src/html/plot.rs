//! Plots as inline SVG: axes with ticks and labels (logarithmic for heavy-tailed values),
//! cumulative distributions with their percentiles marked, and lines over categories. Every
//! number shown is grouped for reading.

use std::fmt::Write;

use kvlint_fleet::Distribution;

use super::text::{escape, grouped, percent, readable};

/// One colour per series, in order (the first workload, the one compared with, …).
pub const COLOURS: [&str; 10] = [
    "#1f5fa8", "#e07b00", "#2a9d4b", "#b03a8c", "#7a5c2e", "#5c6b73", "#d62728", "#17becf",
    "#9467bd", "#bcbd22",
];

pub fn colour(index: usize) -> &'static str {
    COLOURS[index % COLOURS.len()]
}

/// How an axis maps values to positions.
#[derive(Clone, Copy, Debug)]
pub enum Scale {
    /// Powers of ten from `10^low` to `10^high`; values at or below zero sit at the start.
    Log {
        low: i32,
        high: i32,
    },
    Linear {
        low: f64,
        high: f64,
    },
}

/// An axis between two positions on the page (`start` at `low`).
#[derive(Clone, Copy, Debug)]
pub struct Axis {
    pub scale: Scale,
    pub start: f64,
    pub end: f64,
}

impl Axis {
    /// A logarithmic axis over whole decades covering `values`' positive ones.
    pub fn log(values: impl IntoIterator<Item = f64>, start: f64, end: f64) -> Self {
        let (mut smallest, mut largest) = (f64::INFINITY, 0.0f64);
        for value in values.into_iter().filter(|value| *value > 0.0) {
            smallest = smallest.min(value);
            largest = largest.max(value);
        }
        let (low, mut high) = if largest > 0.0 {
            (
                smallest.log10().floor() as i32,
                largest.log10().ceil() as i32,
            )
        } else {
            (0, 1)
        };
        if high <= low {
            high = low + 1;
        }
        Self {
            scale: Scale::Log { low, high },
            start,
            end,
        }
    }

    pub fn linear(low: f64, high: f64, start: f64, end: f64) -> Self {
        let high = if high > low { high } else { low + 1.0 };
        Self {
            scale: Scale::Linear { low, high },
            start,
            end,
        }
    }

    /// Where `value` is drawn, kept within the axis.
    pub fn position(&self, value: f64) -> f64 {
        let share = match self.scale {
            Scale::Log { low, high } => {
                if value <= 0.0 {
                    0.0
                } else {
                    (value.log10() - f64::from(low)) / f64::from(high - low)
                }
            }
            Scale::Linear { low, high } => (value - low) / (high - low),
        };
        self.start + (self.end - self.start) * share.clamp(0.0, 1.0)
    }

    /// The labelled ticks: each power of ten, or round steps.
    pub fn ticks(&self) -> Vec<f64> {
        match self.scale {
            Scale::Log { low, high } => (low..=high).map(|power| 10f64.powi(power)).collect(),
            Scale::Linear { low, high } => {
                let rough = (high - low) / 5.0;
                let power = 10f64.powf(rough.log10().floor());
                let step = [1.0, 2.0, 2.5, 5.0, 10.0]
                    .into_iter()
                    .map(|factor| factor * power)
                    .find(|step| *step >= rough)
                    .unwrap_or(10.0 * power);
                let first = (low / step).ceil() as i64;
                let last = (high / step + 1e-9).floor() as i64;
                (first..=last).map(|index| index as f64 * step).collect()
            }
        }
    }

    /// Unlabelled ticks between the labelled ones: 2 to 9 times each power of ten.
    fn minor_ticks(&self) -> Vec<f64> {
        match self.scale {
            Scale::Log { low, high } => (low..high)
                .flat_map(|power| (2..10).map(move |factor| f64::from(factor) * 10f64.powi(power)))
                .collect(),
            Scale::Linear { .. } => Vec::new(),
        }
    }

    fn is_log(&self) -> bool {
        matches!(self.scale, Scale::Log { .. })
    }
}

/// A plot's frame: its size and the area inside the axes.
#[derive(Clone, Copy, Debug)]
pub struct Frame {
    pub width: f64,
    pub height: f64,
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub bottom: f64,
}

impl Frame {
    pub fn new(width: f64, height: f64) -> Self {
        Self {
            width,
            height,
            left: 56.0,
            right: width - 28.0,
            top: 14.0,
            bottom: height - 42.0,
        }
    }

    /// Opens the `<svg>`.
    pub fn open(&self, svg: &mut String, label: &str, x_scale: &str) {
        let _ = write!(
            svg,
            r#"<svg class="plot" role="img" aria-label="{label}" data-x-scale="{x_scale}" viewBox="0 0 {w} {h}" width="{w}" height="{h}">"#,
            label = escape(label),
            w = self.width,
            h = self.height,
        );
    }

    /// The horizontal axis along the bottom: grid lines, ticks, labels (`label` maps a tick's
    /// value to its text), and the axis' title.
    pub fn x_axis(
        &self,
        svg: &mut String,
        axis: &Axis,
        title: &str,
        label: impl Fn(f64) -> String,
    ) {
        for value in axis.minor_ticks() {
            let x = axis.position(value);
            let _ = write!(
                svg,
                r#"<line class="minor" x1="{x:.1}" y1="{b}" x2="{x:.1}" y2="{t:.1}"/>"#,
                b = self.bottom,
                t = self.bottom + 3.0,
            );
        }
        let ticks = axis.ticks();
        // Crowded decades: every other label.
        let every = if ticks.len() > 9 { 2 } else { 1 };
        for (index, value) in ticks.iter().enumerate() {
            let x = axis.position(*value);
            let _ = write!(
                svg,
                r#"<line class="grid" x1="{x:.1}" y1="{t}" x2="{x:.1}" y2="{b}"/><line class="axis" x1="{x:.1}" y1="{b}" x2="{x:.1}" y2="{tick:.1}"/>"#,
                t = self.top,
                b = self.bottom,
                tick = self.bottom + 5.0,
            );
            if index % every == 0 {
                let _ = write!(
                    svg,
                    r#"<text class="x-tick" x="{x:.1}" y="{y:.1}" text-anchor="middle">{}</text>"#,
                    escape(&label(*value)),
                    y = self.bottom + 17.0,
                );
            }
        }
        let _ = write!(
            svg,
            r#"<line class="axis" x1="{l}" y1="{b}" x2="{r}" y2="{b}"/><text class="axis-title" x="{mid:.1}" y="{y:.1}" text-anchor="middle">{}{}</text>"#,
            escape(title),
            if axis.is_log() { " (log scale)" } else { "" },
            l = self.left,
            r = self.right,
            b = self.bottom,
            mid = (self.left + self.right) / 2.0,
            y = self.height - 6.0,
        );
    }

    /// The vertical axis along the left: grid lines, ticks and labels.
    pub fn y_axis(&self, svg: &mut String, axis: &Axis, label: impl Fn(f64) -> String) {
        for value in axis.minor_ticks() {
            let _ = write!(
                svg,
                r#"<line class="minor" x1="{l:.1}" y1="{y:.1}" x2="{l}" y2="{y:.1}"/>"#,
                l = self.left - 3.0,
                y = axis.position(value),
            );
        }
        for value in axis.ticks() {
            let y = axis.position(value);
            let _ = write!(
                svg,
                r#"<line class="grid" x1="{l}" y1="{y:.1}" x2="{r}" y2="{y:.1}"/><text class="y-tick" x="{x:.1}" y="{ty:.1}" text-anchor="end">{}</text>"#,
                escape(&label(value)),
                l = self.left,
                r = self.right,
                x = self.left - 6.0,
                ty = y + 4.0,
            );
        }
        let _ = write!(
            svg,
            r#"<line class="axis" x1="{l}" y1="{t}" x2="{l}" y2="{b}"/>"#,
            l = self.left,
            t = self.top,
            b = self.bottom,
        );
    }

    /// The vertical axis of shares: 0 at the bottom, 100% at the top.
    pub fn share_axis(&self) -> Axis {
        Axis::linear(0.0, 1.0, self.bottom, self.top)
    }
}

pub const ROW_HEIGHT: f64 = 24.0;

/// A frame with one row per label, the labels on the left (about 6.2 pixels a character).
pub fn rows_frame(labels: &[String]) -> Frame {
    let longest = labels
        .iter()
        .map(|label| label.chars().count())
        .max()
        .unwrap_or(0);
    let left = (longest as f64 * 6.2 + 16.0).max(140.0);
    let mut frame = Frame::new(left + 600.0, 56.0 + ROW_HEIGHT * labels.len() as f64);
    frame.left = left;
    frame.right = left + 500.0;
    frame
}

/// Writes row `row`'s label; returns the row's top.
pub fn row_label_svg(svg: &mut String, frame: &Frame, row: usize, label: &str) -> f64 {
    let top = frame.top + row as f64 * ROW_HEIGHT + 3.0;
    let _ = write!(
        svg,
        r#"<text x="{x:.1}" y="{y:.1}" text-anchor="end">{}</text>"#,
        escape(label),
        x = frame.left - 8.0,
        y = top + 13.0,
    );
    top
}

/// A named distribution drawn in a colour.
pub struct Series<'a> {
    pub name: &'a str,
    pub distribution: &'a Distribution,
}

/// The percentiles marked: name, level, value.
type Quantile = (&'static str, f64, fn(&Distribution) -> f64);
const QUANTILES: [Quantile; 3] = [
    ("p50", 0.5, |distribution| distribution.p50),
    ("p90", 0.9, |distribution| distribution.p90),
    ("p99", 0.99, |distribution| distribution.p99),
];

/// The cumulative distributions of `series` on one logarithmic axis, p50, p90 and p99 of
/// each marked, with a legend giving their values. A series whose values are all 0 (a
/// recording without output lengths) is said in the legend, not drawn.
pub fn cdf_figure(id: &str, title: &str, unit: &str, series: &[Series<'_>]) -> String {
    let present: Vec<(usize, &Series<'_>)> = series
        .iter()
        .enumerate()
        .filter(|(_, series)| series.distribution.count > 0)
        .collect();
    let mut figure = format!(
        r#"<figure id="{id}" class="distribution"><figcaption>{}</figcaption>"#,
        escape(title)
    );
    if present.is_empty() {
        figure.push_str("<p class=\"empty\">no values</p></figure>");
        return figure;
    }
    let drawn: Vec<(usize, &Series<'_>)> = present
        .iter()
        .copied()
        .filter(|(_, series)| series.distribution.max > 0.0)
        .collect();
    if !drawn.is_empty() {
        figure.push_str(&cdf_svg(title, unit, &drawn));
    }
    figure.push_str("<ul class=\"legend\">");
    for (index, series) in &present {
        let distribution = series.distribution;
        let swatch = format!(
            r#"<li><span class="swatch" style="background:{}"></span>{} <small>n = {}</small>: "#,
            colour(*index),
            escape(series.name),
            grouped(distribution.count as u64),
        );
        figure.push_str(&swatch);
        if distribution.max <= 0.0 {
            let _ = write!(figure, "every value is 0 {}</li>", escape(unit));
            continue;
        }
        let zeros = distribution
            .cdf
            .iter()
            .take_while(|(value, _)| *value <= 0.0)
            .last()
            .map(|(_, share)| *share);
        let _ = write!(
            figure,
            r#"p50 <b>{}</b>, p90 <b>{}</b>, p99 <b>{}</b>, max {} {}{}</li>"#,
            readable(distribution.p50),
            readable(distribution.p90),
            readable(distribution.p99),
            readable(distribution.max),
            escape(unit),
            zeros.map_or(String::new(), |share| format!(
                "; {} at 0, drawn at the axis' left end",
                percent(share)
            )),
        );
    }
    figure.push_str("</ul></figure>");
    figure
}

/// The plot of [`cdf_figure`]: the series with a value above 0.
fn cdf_svg(title: &str, unit: &str, drawn: &[(usize, &Series<'_>)]) -> String {
    let frame = Frame::new(560.0, 250.0);
    let x = Axis::log(
        drawn
            .iter()
            .flat_map(|(_, series)| series.distribution.cdf.iter().map(|(value, _)| *value)),
        frame.left,
        frame.right,
    );
    let y = frame.share_axis();
    let mut svg = String::new();
    frame.open(&mut svg, title, "log");
    frame.y_axis(&mut svg, &y, |share| format!("{:.0}%", share * 100.0));
    frame.x_axis(&mut svg, &x, unit, readable);
    for (index, series) in drawn {
        let colour = colour(*index);
        let cdf = &series.distribution.cdf;
        let mut path = String::new();
        if let Some((first, share)) = cdf.first() {
            let _ = write!(
                path,
                "M{:.1},{:.1}V{:.1}",
                x.position(*first),
                y.position(0.0),
                y.position(*share)
            );
        }
        for (value, share) in cdf.iter().skip(1) {
            let _ = write!(path, "H{:.1}V{:.1}", x.position(*value), y.position(*share));
        }
        let _ = write!(path, "H{:.1}", frame.right);
        let _ = write!(
            svg,
            r#"<path class="cdf" data-series="{index}" d="{path}" stroke="{colour}"/>"#
        );
        for (name, level, quantile) in QUANTILES {
            let value = quantile(series.distribution);
            let (px, py) = (x.position(value), y.position(level));
            // The first series labels its marks on the right, the next on the left; a mark
            // at the right end, on the left.
            let (dx, anchor) = if index % 2 == 0 && px + 30.0 < frame.right {
                (5.0, "start")
            } else {
                (-5.0, "end")
            };
            let _ = write!(
                svg,
                r#"<g class="quantile" data-series="{index}" data-quantile="{name}" data-value="{value}"><line x1="{px:.1}" y1="{py:.1}" x2="{px:.1}" y2="{b}" stroke="{colour}"/><circle cx="{px:.1}" cy="{py:.1}" r="3.5" fill="{colour}"/><text x="{tx:.1}" y="{ty:.1}" text-anchor="{anchor}" fill="{colour}">{name}</text></g>"#,
                b = frame.bottom,
                tx = px + dx,
                ty = py + 12.0,
            );
        }
    }
    svg.push_str("</svg>");
    svg
}

/// One line per series over categories (`labels`, left to right): a sweep's points.
pub struct Lines<'a> {
    pub id: &'a str,
    pub title: &'a str,
    pub labels: &'a [String],
    pub series: &'a [(String, Vec<f64>)],
    /// The vertical axis and how its ticks read.
    pub y: Scale,
    pub y_label: fn(f64) -> String,
    pub x_title: &'a str,
    /// Points ringed, as (series, point), each with what its title says.
    pub marks: &'a [(usize, usize, String)],
}

pub fn lines_figure(lines: &Lines<'_>) -> String {
    let mut frame = Frame::new(560.0, 270.0);
    frame.bottom -= 10.0;
    let y = Axis {
        scale: lines.y,
        start: frame.bottom,
        end: frame.top,
    };
    let count = lines.labels.len().max(1);
    let step = (frame.right - frame.left - 40.0) / (count.saturating_sub(1).max(1)) as f64;
    let x_of = |index: usize| {
        if count == 1 {
            (frame.left + frame.right) / 2.0
        } else {
            frame.left + 20.0 + index as f64 * step
        }
    };
    let mut svg = String::new();
    let x_scale = "category";
    frame.open(&mut svg, lines.title, x_scale);
    frame.y_axis(&mut svg, &y, lines.y_label);
    for (index, label) in lines.labels.iter().enumerate() {
        let x = x_of(index);
        // A label's lines, one under the other.
        let lines_of_label: String = label
            .split('\n')
            .enumerate()
            .map(|(line, text)| {
                format!(
                    r#"<tspan x="{x:.1}" dy="{}">{}</tspan>"#,
                    if line == 0 { 0.0 } else { 12.0 },
                    escape(text)
                )
            })
            .collect();
        let _ = write!(
            svg,
            r#"<line class="axis" x1="{x:.1}" y1="{b}" x2="{x:.1}" y2="{t:.1}"/><text class="x-tick" x="{x:.1}" y="{ty:.1}" text-anchor="middle">{lines_of_label}</text>"#,
            b = frame.bottom,
            t = frame.bottom + 5.0,
            ty = frame.bottom + 15.0,
        );
    }
    let _ = write!(
        svg,
        r#"<line class="axis" x1="{l}" y1="{b}" x2="{r}" y2="{b}"/><text class="axis-title" x="{mid:.1}" y="{ty:.1}" text-anchor="middle">{}</text>"#,
        escape(lines.x_title),
        l = frame.left,
        r = frame.right,
        b = frame.bottom,
        mid = (frame.left + frame.right) / 2.0,
        ty = frame.height - 6.0,
    );
    for (index, (name, values)) in lines.series.iter().enumerate() {
        let colour = colour(index);
        let points: Vec<String> = values
            .iter()
            .enumerate()
            .filter(|(_, value)| value.is_finite())
            .map(|(point, value)| format!("{:.1},{:.1}", x_of(point), y.position(*value)))
            .collect();
        let _ = write!(
            svg,
            r#"<polyline class="line" data-series="{index}" points="{}" stroke="{colour}"/>"#,
            points.join(" ")
        );
        for (_, point, title) in lines.marks.iter().filter(|mark| mark.0 == index) {
            if let Some(value) = values.get(*point).filter(|value| value.is_finite()) {
                let _ = write!(
                    svg,
                    r#"<circle class="mark" data-series="{index}" cx="{:.1}" cy="{:.1}" r="7" fill="none" stroke="{colour}" stroke-width="2"><title>{}</title></circle>"#,
                    x_of(*point),
                    y.position(*value),
                    escape(title),
                );
            }
        }
        for (point, value) in values
            .iter()
            .enumerate()
            .filter(|(_, value)| value.is_finite())
        {
            let _ = write!(
                svg,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{colour}"><title>{}: {}</title></circle>"#,
                x_of(point),
                y.position(*value),
                escape(name),
                (lines.y_label)(*value),
            );
        }
    }
    svg.push_str("</svg>");
    let mut figure = format!(
        r#"<figure id="{}"><figcaption>{}</figcaption>{svg}<ul class="legend">"#,
        lines.id,
        escape(lines.title)
    );
    for (index, (name, _)) in lines.series.iter().enumerate() {
        let _ = write!(
            figure,
            r#"<li><span class="swatch" style="background:{}"></span>{}</li>"#,
            colour(index),
            escape(name)
        );
    }
    figure.push_str("</ul></figure>");
    figure
}

/// The page's head and style, up to the title.
pub fn page_start(title: &str) -> String {
    format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title}</title><style>
body{{font:14px/1.4 system-ui,sans-serif;margin:2em;max-width:1180px;color:#222}}
table{{border-collapse:collapse;margin:1em 0;font-size:13px}}td,th{{border:1px solid #ccc;padding:4px 6px;text-align:right;white-space:nowrap}}th{{white-space:normal}}
th:first-child,td:first-child{{text-align:left}}.plots{{display:flex;flex-wrap:wrap;gap:1.5em 2em}}
figure{{margin:0}}.distribution{{width:560px}}figcaption{{font-weight:600;margin-bottom:4px}}
.axis{{stroke:#555}}.grid{{stroke:#e4e4e4}}.minor{{stroke:#999}}
.cdf,.line{{fill:none;stroke-width:2}}.quantile line{{stroke-dasharray:3 3;stroke-width:1}}
.quantile text{{font-weight:600}}text{{font-size:11px;fill:#444}}.axis-title{{fill:#222}}
.legend{{list-style:none;padding:0;margin:4px 0 0 56px;font-size:12px;max-width:500px}}
.swatch{{display:inline-block;width:10px;height:10px;margin-right:6px;border-radius:2px}}
.served{{fill:#1f5fa8}}.computed{{fill:#c9ced6}}</style></head><body><h1>{title}</h1>"#,
        title = escape(title)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_of_zeros_is_said_not_drawn() {
        let zeros = Distribution::of(vec![0.0; 5]);
        let lengths = Distribution::of(vec![3.0, 30.0, 300.0]);
        let figure = cdf_figure(
            "output-tokens",
            "Output length",
            "tokens",
            &[
                Series {
                    name: "recorded",
                    distribution: &zeros,
                },
                Series {
                    name: "benchmark",
                    distribution: &lengths,
                },
            ],
        );
        assert!(figure.contains("every value is 0 tokens"), "{figure}");
        assert!(!figure.contains(r#"<path class="cdf" data-series="0""#));
        assert!(figure.contains(r#"<path class="cdf" data-series="1""#));
    }

    #[test]
    fn a_log_axis_spans_whole_decades_and_places_powers_of_ten_evenly() {
        let axis = Axis::log([0.0, 3.0, 4_500.0], 0.0, 400.0);
        assert_eq!(axis.ticks(), vec![1.0, 10.0, 100.0, 1000.0, 10000.0]);
        assert_eq!(axis.position(10.0), 100.0);
        assert_eq!(axis.position(1000.0), 300.0);
        assert_eq!(axis.position(0.0), 0.0);
    }
}

//! The HTML reports of `kvlint workload` and `kvlint simulate`, as a person sees them: each is
//! rendered by headless Chromium to a PNG (kept in the test's target folder, to be looked at),
//! and its SVG is checked against figures this test computes itself from the input: the
//! distributions' axes are logarithmic (ticks 1, 10, 100, … evenly spaced), the p99 mark
//! stands at the sample's p99, a compared workload is drawn on the same axes, and numbers are
//! grouped (4,958,720).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

use regex::Regex;
use serde_json::{Value, json};

use crate::common::{chromium, kvlint};

mod simulation;

/// Where the pages and their screenshots are kept: in the target folder, for a person to look
/// at after the run.
fn kept(name: &str) -> PathBuf {
    let folder = Path::new(env!("CARGO_TARGET_TMPDIR")).join("reports-html");
    std::fs::create_dir_all(&folder).unwrap();
    folder.join(name)
}

/// Renders `page` in headless Chromium to `page` with `.png`, and says it is no blank page.
/// Without Chromium: [`kvlint_fixtures::missing_oracle`] (fails under CI).
pub fn screenshot(page: &Path, height: u32) {
    let Some(browser) = chromium() else {
        return;
    };
    let shot = page.with_extension("png");
    std::fs::remove_file(&shot).ok();
    let output = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            &format!("--window-size=1240,{height}"),
            &format!("--screenshot={}", shot.display()),
            &format!("file://{}", page.display()),
        ])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let size = std::fs::metadata(&shot).unwrap().len();
    assert!(
        size > 40_000,
        "{}: {size} bytes, a blank page",
        shot.display()
    );
}

/// A deterministic stream of numbers in [0, 1).
struct Draws(u64);

impl Draws {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The nearest-rank quantile: the smallest value with at least `percent`% of the sample at or
/// below it.
fn nearest_rank(values: &[f64], percent: usize) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = (percent * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1]
}

fn grouped(number: u64) -> String {
    let digits = number.to_string();
    let mut text = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            text.push(',');
        }
        text.push(digit);
    }
    text
}

/// The figure `id` of `page`, up to its end.
fn figure<'a>(page: &'a str, id: &str) -> &'a str {
    let start = page
        .find(&format!("<figure id=\"{id}\""))
        .unwrap_or_else(|| panic!("no figure #{id}"));
    let end = page[start..].find("</figure>").unwrap();
    &page[start..start + end]
}

/// A figure's labelled x ticks: (label, position), left to right.
fn x_ticks(figure: &str) -> Vec<(String, f64)> {
    Regex::new(r#"<text class="x-tick" x="([\d.]+)"[^>]*>([^<]*)</text>"#)
        .unwrap()
        .captures_iter(figure)
        .map(|found| (found[2].to_owned(), found[1].parse().unwrap()))
        .collect()
}

/// Asserts the figure's x axis is logarithmic: its labels are consecutive powers of ten,
/// grouped, evenly spaced. Returns where 10^first is and the width of a decade.
fn log_axis(figure: &str) -> (i32, f64, f64) {
    let ticks = x_ticks(figure);
    assert!(ticks.len() >= 2, "{figure}");
    let first = ticks[0]
        .0
        .replace(',', "")
        .parse::<f64>()
        .unwrap()
        .log10()
        .round() as i32;
    let decade = ticks[1].1 - ticks[0].1;
    for (index, (label, x)) in ticks.iter().enumerate() {
        let power = first + index as i32;
        let expected = if power >= 0 {
            grouped(10u64.pow(power as u32))
        } else {
            format!("0.{}1", "0".repeat((-power - 1) as usize))
        };
        assert_eq!(label, &expected, "tick {index} of {figure}");
        assert!(
            (x - ticks[0].1 - index as f64 * decade).abs() < 0.15,
            "ticks not evenly spaced: {ticks:?}"
        );
    }
    (first, ticks[0].1, decade)
}

/// The mark of `quantile` of series `series`: its value and position.
fn mark(figure: &str, series: usize, quantile: &str) -> (f64, f64) {
    let pattern = format!(
        r#"<g class="quantile" data-series="{series}" data-quantile="{quantile}" data-value="([^"]+)"><line x1="([\d.]+)""#
    );
    let found = Regex::new(&pattern)
        .unwrap()
        .captures(figure)
        .unwrap_or_else(|| panic!("no {quantile} of series {series} in {figure}"));
    (found[1].parse().unwrap(), found[2].parse().unwrap())
}

/// Asserts the p99 of series 0 in `figure` is `p99` and stands where the log axis puts it.
fn assert_p99_marked(figure: &str, p99: f64) {
    let (first, origin, decade) = log_axis(figure);
    let (value, x) = mark(figure, 0, "p99");
    assert!(
        (value - p99).abs() <= 1e-9 * p99.abs().max(1.0),
        "p99 {value}, expected {p99}"
    );
    let expected = origin + (p99.log10() - f64::from(first)) * decade;
    assert!(
        (x - expected).abs() < 0.2,
        "p99 drawn at {x}, expected {expected}"
    );
}

/// Production: sessions sharing a long system prompt, each turn resending the session's
/// history; output lengths from 1 to ~30,000 tokens, log-uniform; think times 0.1 s to 100 s.
/// The benchmark: unrelated prompts, outputs of 100 to 1,000 tokens, a request every half
/// second. Both as kvlint's chat JSONL with `output_tokens` and `time`.
fn workloads(folder: &Path) -> (PathBuf, PathBuf, Vec<f64>, Vec<f64>) {
    let mut draws = Draws(26);
    let words = |draws: &mut Draws, count: usize| -> String {
        (0..count)
            .map(|_| format!("w{}", (draws.next() * 5000.0) as u32))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let system = words(&mut draws, 400);
    let (mut lines, mut outputs, mut times) = (Vec::new(), Vec::new(), Vec::new());
    let mut start = 0.0f64;
    for session in 0..60 {
        start += (draws.next() * 40.0).round() / 4.0;
        let mut time = start;
        let mut history = system.clone();
        for _turn in 0..1 + (draws.next() * 6.0) as usize {
            history.push(' ');
            let count = 20 + (draws.next() * 200.0) as usize;
            history.push_str(&words(&mut draws, count));
            let output = 10f64.powf(draws.next() * 4.5).round();
            // Milliseconds, written and read back exactly.
            let at: f64 = format!("{time:.3}").parse().unwrap();
            lines.push(json!({"prompt": history, "session": format!("s{session}"), "output_tokens": output as u64, "time": at}).to_string());
            outputs.push(output);
            times.push(at);
            time = at + 10f64.powf(draws.next() * 3.0 - 1.0);
        }
    }
    let production = folder.join("production.jsonl");
    std::fs::write(&production, lines.join("\n")).unwrap();
    let benchmark: Vec<String> = (0..150)
        .map(|index| {
            let count = 100 + (draws.next() * 400.0) as usize;
            json!({"prompt": words(&mut draws, count), "output_tokens": 100 + (draws.next() * 900.0) as u64, "time": index as f64 * 0.5}).to_string()
        })
        .collect();
    let bench = folder.join("benchmark.jsonl");
    std::fs::write(&bench, benchmark.join("\n")).unwrap();
    (production, bench, outputs, times)
}

fn json_report(dataset: &Path) -> Value {
    let (code, stdout, stderr) = kvlint(&[
        "workload",
        "--no-trace-cache",
        "--format",
        "json",
        "--dataset",
        dataset.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_str(&stdout).unwrap()
}

#[test]
fn the_workload_report_draws_log_cdfs_with_percentiles_over_a_compared_benchmark() {
    let folder = kept("workload");
    std::fs::create_dir_all(&folder).unwrap();
    let (production, benchmark, outputs, times) = workloads(&folder);
    let page_path = folder.join("production-vs-benchmark.html");
    let (code, _, stderr) = kvlint(&[
        "workload",
        "--no-trace-cache",
        "--dataset",
        production.to_str().unwrap(),
        "--compare-dataset",
        benchmark.to_str().unwrap(),
        "--format",
        "html",
        "--output",
        page_path.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let page = std::fs::read_to_string(&page_path).unwrap();
    assert!(
        !page.contains("http://") && !page.contains("https://") && !page.contains("<script"),
        "the page fetches or runs nothing"
    );

    // Output length: the sample's own p99, on a log axis.
    let output_figure = figure(&page, "output-tokens");
    assert_p99_marked(output_figure, nearest_rank(&outputs, 99));
    let (p50, _) = mark(output_figure, 0, "p50");
    assert_eq!(p50, nearest_rank(&outputs, 50));
    // The gaps between requests: from the recorded times.
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let gaps: Vec<f64> = sorted.windows(2).map(|pair| pair[1] - pair[0]).collect();
    assert_p99_marked(figure(&page, "arrival-gaps"), nearest_rank(&gaps, 99));

    // The benchmark over production, on the same axes.
    for id in [
        "input-tokens",
        "output-tokens",
        "arrival-gaps",
        "reuse-by-turn",
    ] {
        let drawn = figure(&page, id);
        for series in 0..2 {
            assert!(
                drawn.contains(&format!("data-series=\"{series}\"")),
                "#{id} lacks series {series}"
            );
        }
    }
    let (benchmark_p99, _) = mark(output_figure, 1, "p99");
    let benchmark_outputs: Vec<f64> = std::fs::read_to_string(&benchmark)
        .unwrap()
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["output_tokens"]
                .as_f64()
                .unwrap()
        })
        .collect();
    assert_eq!(benchmark_p99, nearest_rank(&benchmark_outputs, 99));
    let sharing = figure(&page, "sharing-rate");
    let rate = |series: usize| -> f64 {
        let pattern = format!(r#"data-series="{series}" data-rate="([^"]+)""#);
        Regex::new(&pattern).unwrap().captures(sharing).unwrap()[1]
            .parse()
            .unwrap()
    };
    let (production_report, benchmark_report) = (json_report(&production), json_report(&benchmark));
    assert_eq!(
        rate(0),
        production_report["reuse"]["prefix_sharing_rate"]
            .as_f64()
            .unwrap()
    );
    assert_eq!(
        rate(1),
        benchmark_report["reuse"]["prefix_sharing_rate"]
            .as_f64()
            .unwrap()
    );
    assert!(rate(0) > 0.5 && rate(1) < 0.1, "{} {}", rate(0), rate(1));

    // Numbers grouped for reading.
    let prompt_tokens = production_report["prompt_tokens"].as_u64().unwrap();
    assert!(prompt_tokens >= 100_000, "{prompt_tokens}");
    assert!(
        page.contains(&format!("{} prompt tokens", grouped(prompt_tokens))),
        "{prompt_tokens} not grouped"
    );
    assert!(!page.contains(&prompt_tokens.to_string()));
    screenshot(&page_path, 2350);
}

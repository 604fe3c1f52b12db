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

/// `kvlint simulate` on the corpus with `settings` (Poisson arrivals at 2 per second, bursty,
/// prefill at 2,000 tokens per second), run for its JSON results and for its HTML page, which
/// is kept as `name`: the results, the page and where it is kept.
fn simulated(name: &str, settings: &[&str]) -> (Vec<Value>, String, PathBuf) {
    let run = |format: &str| {
        let mut args = vec!["simulate", "fixtures/corpus/sessions", "--no-trace-cache"];
        args.extend_from_slice(settings);
        args.extend([
            "--arrival",
            "poisson:2,burstiness=2",
            "--prefill-tps",
            "2000",
            "--format",
            format,
        ]);
        let (code, stdout, stderr) = kvlint(&args);
        assert_eq!(code, 0, "{stderr}");
        stdout
    };
    let results: Vec<Value> = serde_json::from_str(&run("json")).unwrap();
    let page = run("html");
    let page_path = kept(name);
    std::fs::write(&page_path, &page).unwrap();
    (results, page, page_path)
}

#[test]
fn the_simulate_report_plots_policies_percentiles_and_the_sweep() {
    let (results, page, page_path) = simulated(
        "simulate.html",
        &[
            "--replicas",
            "2,4",
            "--cache",
            "200,2000,unbounded",
            "--routing",
            "round-robin,session-hash,prefix-aware,ideal",
        ],
    );
    assert_eq!(results.len(), 2 * 3 * 4);

    // Served and computed: one row per result, the numbers grouped.
    let served = figure(&page, "served");
    assert_eq!(
        served.matches("<rect class=\"served\"").count(),
        results.len()
    );
    let table_start = page.find("<table id=\"simulations\"").unwrap();
    let table = &page[table_start..];
    for result in &results {
        let tokens = result["served_tokens"].as_u64().unwrap();
        assert!(
            table.contains(&format!("<td>{}</td>", grouped(tokens))),
            "{tokens}"
        );
    }
    // Each row marks its two bounds, the numbers as the JSON run has them; the table has both.
    for (class, key) in [
        ("bound-infinite", "infinite_served_tokens"),
        ("bound-belady", "belady_served_tokens"),
    ] {
        let marks = Regex::new(&format!(
            r#"<line class="{class}"[^>]*><title>[^<]*: ([\d,]+) served</title>"#
        ))
        .unwrap();
        let drawn: Vec<String> = marks
            .captures_iter(served)
            .map(|found| found[1].to_owned())
            .collect();
        let expected: Vec<String> = results
            .iter()
            .map(|result| grouped(result["bounds"][key].as_u64().unwrap()))
            .collect();
        assert_eq!(drawn, expected, "{class}");
    }
    for result in &results {
        let bounds = &result["bounds"];
        let cell = format!(
            "<td>{} · {}</td>",
            grouped(bounds["infinite_served_tokens"].as_u64().unwrap()),
            grouped(bounds["belady_served_tokens"].as_u64().unwrap())
        );
        assert!(table.contains(&cell), "{cell}");
    }

    // TTFT: every result's percentiles, on a log axis in seconds.
    let ttft = figure(&page, "ttft");
    let (first, origin, decade) = log_axis(ttft);
    let marks = Regex::new(r#"<g class="ttft" data-p50="([^"]+)" data-p95="[^"]+" data-p99="([^"]+)"><line x1="([\d.]+)" y1="[\d.]+" x2="([\d.]+)""#)
        .unwrap();
    let drawn: Vec<_> = marks.captures_iter(ttft).collect();
    assert_eq!(drawn.len(), results.len());
    for (found, result) in drawn.iter().zip(&results) {
        let p99: f64 = found[2].parse().unwrap();
        // serde_json reads floats to within an ulp or so.
        let expected = result["ttft"]["p99"].as_f64().unwrap();
        assert!(
            (p99 - expected).abs() <= 1e-12 * expected.max(1.0),
            "{p99} {expected}"
        );
        if p99 > 0.0 {
            let x: f64 = found[4].parse().unwrap();
            let expected = origin + (p99.log10() - f64::from(first)) * decade;
            assert!((x - expected).abs() < 0.2, "{x} {expected}");
        }
    }

    // The sweep: one line per policy over the six points, in each plot.
    for id in ["sweep-hit-rate", "sweep-ttft"] {
        let sweep = figure(&page, id);
        assert_eq!(sweep.matches("<polyline").count(), 4, "#{id}");
        assert_eq!(sweep.matches("<text class=\"x-tick\"").count(), 6, "#{id}");
    }
    // The knees, worked out here from the JSON: along the caches 200, 2,000, unbounded (the
    // step to unbounded one doubling) and along the replicas 2, 4 (one doubling), the first
    // point whose next serves under 5 % more.
    let served = |policy: &str, replicas: u64, cache: &str| {
        results
            .iter()
            .find(|result| {
                result["policy"] == policy
                    && result["replicas"] == replicas
                    && result["cache"] == cache
            })
            .map(|result| result["served_tokens"].as_u64().unwrap() as f64)
            .unwrap()
    };
    let caches = ["200 blocks", "2000 blocks", "unbounded"];
    let doublings = [(2000.0f64 / 200.0).log2(), 1.0];
    let mut cache_knees = 0;
    let mut replica_knees = 0;
    for policy in [
        "round-robin",
        "session-hash",
        "prefix-aware:overload=5",
        "ideal",
    ] {
        for replicas in [2, 4] {
            let knee = (0..2).find(|step| {
                let (now, next) = (
                    served(policy, replicas, caches[*step]),
                    served(policy, replicas, caches[step + 1]),
                );
                next / now - 1.0 < 0.05 * doublings[*step]
            });
            if let Some(step) = knee {
                cache_knees += 1;
                let row = format!("<tr><td>{policy} · {replicas} replicas</td>");
                let table = &page[page
                    .find("<table class=\"sweep\" id=\"sweep-cache\"")
                    .unwrap()..];
                let cells = &table[table.find(&row).unwrap_or_else(|| panic!("{row}"))..];
                let cells = &cells[..cells.find("</tr>").unwrap()];
                assert_eq!(cells.matches("<td").count(), 4, "{cells}");
                let marked = cells.split("<td").nth(2 + step).unwrap();
                assert!(
                    marked.starts_with(" class=\"knee\">"),
                    "{policy} {replicas}: {cells}"
                );
            }
        }
        for cache in caches {
            if served(policy, 4, cache) / served(policy, 2, cache) - 1.0 < 0.05 {
                replica_knees += 1;
            }
        }
    }
    let sweep_cache = &page[page.find("id=\"sweep-cache\"").unwrap()..];
    let sweep_cache = &sweep_cache[..sweep_cache.find("</table>").unwrap()];
    assert_eq!(sweep_cache.matches("class=\"knee\"").count(), cache_knees);
    let sweep_replicas = &page[page.find("id=\"sweep-replicas\"").unwrap()..];
    let sweep_replicas = &sweep_replicas[..sweep_replicas.find("</table>").unwrap()];
    assert_eq!(
        sweep_replicas.matches("class=\"knee\"").count(),
        replica_knees
    );
    // Every knee ringed on the hit rate's lines.
    assert_eq!(
        figure(&page, "sweep-hit-rate")
            .matches("<circle class=\"mark\"")
            .count(),
        cache_knees + replica_knees
    );
    screenshot(&page_path, 2700);
}

/// `--compare` takes sessions as the positional arguments do: the human report follows with
/// theirs, the HTML page draws them as a second series; JSON, one report per document, refuses
/// it as a usage error.
#[test]
fn compare_takes_sessions_and_json_refuses_it() {
    let corpus = "fixtures/corpus/sessions";
    let one = "fixtures/corpus/sessions/crewai-1.jsonl";
    let run = |format: &str| {
        kvlint(&[
            "workload",
            "--no-trace-cache",
            corpus,
            "--compare",
            one,
            "--format",
            format,
        ])
    };
    let (code, human, stderr) = run("human");
    assert_eq!(code, 0, "{stderr}");
    let (_, alone, _) = kvlint(&["workload", "--no-trace-cache", one]);
    let compared = human
        .split_once("\ncompared with crewai-1.jsonl:\n")
        .unwrap_or_else(|| panic!("{human}"))
        .1;
    // The compared workload's own report, as run alone (its tracing time aside).
    let first_line = |text: &str| text.lines().next().unwrap().to_owned();
    assert_eq!(first_line(compared), first_line(&alone));
    assert!(first_line(compared).starts_with("1 sessions"), "{compared}");
    let (code, page, stderr) = run("html");
    assert_eq!(code, 0, "{stderr}");
    assert!(page.contains("<b>crewai-1.jsonl</b>: 1 sessions"), "{page}");
    assert!(figure(&page, "input-tokens").contains("data-series=\"1\""));
    let (code, _, stderr) = run("json");
    assert_eq!(code, 2);
    assert!(
        stderr.contains("--compare is drawn in the HTML report"),
        "{stderr}"
    );
}

/// A router with an index of its own (`sglang-cache-aware`) shows its belief against what the
/// engines served, in a figure and in the table, its numbers grouped as the JSON run has them;
/// round-robin, without an index, shows none. 200 blocks a replica: the tree predicts hits
/// the engines have evicted.
#[test]
fn the_simulate_report_shows_a_routers_belief_against_the_engines_truth() {
    let (results, page, page_path) = simulated(
        "simulate-belief.html",
        &[
            "--replicas",
            "2",
            "--cache",
            "200",
            "--routing",
            "sglang-cache-aware,round-robin",
        ],
    );
    assert_eq!(results.len(), 2);
    let (sglang, round_robin) = (&results[0], &results[1]);
    assert_eq!(sglang["policy"], "sglang-cache-aware");
    assert_eq!(round_robin["policy"], "round-robin");
    assert!(round_robin.get("belief").is_none(), "{round_robin}");
    let belief = |field: &str| grouped(sglang["belief"][field].as_u64().unwrap());
    let (predicted, not_served, unpredicted) = (
        belief("predicted_tokens"),
        belief("predicted_not_served_tokens"),
        belief("served_not_predicted_tokens"),
    );
    // Enough tokens for grouping to show, and a belief that parts from the truth.
    assert!(
        predicted.contains(',') && not_served.contains(','),
        "{sglang}"
    );

    // The figure: one row, sglang's, its three numbers grouped.
    let drawn = figure(&page, "belief");
    assert!(drawn.contains("Router's belief vs the engines' truth"));
    assert_eq!(drawn.matches("<g class=\"belief\"").count(), 1, "{drawn}");
    assert!(drawn.contains(">sglang-cache-aware</text>"), "{drawn}");
    assert!(!drawn.contains("round-robin"), "{drawn}");
    assert!(
        drawn.contains(&format!(
            "predicted {predicted} · not served {not_served} · served, not predicted {unpredicted}"
        )),
        "{drawn}"
    );

    // The table: sglang's row with the three numbers, round-robin's saying it has no index.
    let table_start = page.find("<table id=\"simulations\"").unwrap();
    let row = |policy: &str| {
        let start = table_start
            + page[table_start..]
                .find(&format!("<tr><td>{policy}</td>"))
                .unwrap();
        &page[start..start + page[start..].find("</tr>").unwrap()]
    };
    assert!(
        row("sglang-cache-aware").ends_with(&format!(
            "<td>{predicted}</td><td>{not_served}</td><td>{unpredicted}</td>"
        )),
        "{}",
        row("sglang-cache-aware")
    );
    assert!(
        row("round-robin").ends_with("<td colspan=\"3\">no index of its own</td>"),
        "{}",
        row("round-robin")
    );
    screenshot(&page_path, 1100);
}

//! `kvlint workload` from the command line: the reuse agrees with `kvlint check`'s own turn
//! diffs, the HTML report renders in a real headless browser, an exported benchmark read back
//! shares what the sessions did, and bad settings (of `kvlint simulate` too) are usage errors.
//! `kvlint simulate`'s own runs are in `simulate.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::common::{chromium, kvlint};

fn scratch(name: &str) -> PathBuf {
    let folder =
        std::env::temp_dir().join(format!("kvlint-workload-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    folder
}

const CORPUS: &str = "fixtures/corpus/sessions";

fn workload_json(args: &[&str]) -> Value {
    let mut all = vec!["workload", "--format", "json", "--no-trace-cache"];
    all.extend_from_slice(args);
    let (code, stdout, stderr) = kvlint(&all);
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_str(&stdout).unwrap()
}

#[test]
fn the_reuse_within_sessions_is_what_check_reports_turn_by_turn() {
    let report = workload_json(&[CORPUS]);
    let (_, checked, _) = kvlint(&["check", "--format", "json", CORPUS]);
    let checked: Value = serde_json::from_str(&checked).unwrap();
    let sessions = checked["sessions"].as_array().unwrap();
    let sum = |key: &str| -> u64 {
        sessions
            .iter()
            .map(|session| session["summary"][key].as_u64().unwrap())
            .sum()
    };
    assert_eq!(
        report["sessions"].as_u64().unwrap() as usize,
        sessions.len()
    );
    assert_eq!(
        report["prompt_tokens"].as_u64().unwrap(),
        sum("prompt_tokens")
    );
    assert_eq!(
        report["reuse"]["within_session_tokens"].as_u64().unwrap(),
        sum("reused_tokens")
    );
    let findings: u64 = report["finding_costs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cost| cost["turns"].as_u64().unwrap())
        .sum();
    let pair_findings = sessions
        .iter()
        .flat_map(|session| session["findings"].as_array().unwrap())
        .filter(|finding| finding["turn"].as_u64().is_some_and(|turn| turn > 0))
        .count() as u64;
    assert_eq!(findings, pair_findings);
}

#[test]
fn the_html_report_renders_in_a_headless_browser() {
    let folder = scratch("html");
    let page = folder.join("workload.html");
    let (code, _, stderr) = kvlint(&[
        "workload",
        CORPUS,
        "--no-trace-cache",
        "--format",
        "html",
        "--output",
        page.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let Some(browser) = chromium() else {
        return;
    };
    let url = format!("file://{}", page.display());
    let common = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
    ];
    let dom = Command::new(browser)
        .args(common)
        .args(["--dump-dom", &url])
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&dom.stdout);
    // The browser's own DOM: the tables and every plot, drawn.
    for id in [
        "summary",
        "reuse",
        "findings",
        "input-tokens",
        "new-tokens",
        "turns",
        "reuse-by-turn",
    ] {
        assert!(
            dom.contains(&format!("id=\"{id}\"")),
            "no #{id} in the rendered page"
        );
    }
    assert!(
        dom.matches("<path class=\"cdf\"").count() >= 3,
        "the distributions' curves (the corpus records no output length to draw)"
    );
    assert!(dom.contains("<polyline"), "the reuse line");
    let shot = folder.join("workload.png");
    let status = Command::new(browser)
        .args(common)
        .args([
            "--window-size=1200,1600",
            &format!("--screenshot={}", shot.display()),
            &url,
        ])
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let size = std::fs::metadata(&shot).unwrap().len();
    assert!(
        size > 20_000,
        "a screenshot of {size} bytes: the page looks empty"
    );
    std::fs::remove_dir_all(&folder).ok();
}

#[test]
fn an_exported_benchmark_measures_as_the_sessions_do() {
    let folder = scratch("export");
    let original = workload_json(&[CORPUS]);
    for format in ["vllm-custom", "guidellm", "sharegpt", "chat-jsonl"] {
        let exported = folder.join(format!("{format}.data"));
        let (code, _, stderr) = kvlint(&[
            "workload",
            CORPUS,
            "--no-trace-cache",
            "--export-benchmark",
            format,
            "--output",
            exported.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{format}: {stderr}");
        let measured = workload_json(&["--dataset", exported.to_str().unwrap()]);
        assert_eq!(
            measured["prompt_tokens"], original["prompt_tokens"],
            "{format}"
        );
        assert_eq!(
            measured["reuse"]["prefix_sharing_rate"], original["reuse"]["prefix_sharing_rate"],
            "{format}"
        );
    }
    std::fs::remove_dir_all(&folder).ok();
}

#[test]
fn bad_settings_are_usage_errors_that_say_what_is_expected() {
    for (args, expected) in [
        (vec!["--cache", "lots"], "a number of blocks"),
        (vec!["--cache", "10", "--engine", "tgi"], "one of vllm"),
        (vec!["--cache", "10", "--routing", "sticky"], "round-robin"),
        (
            vec!["--cache", "10", "--arrival", "poisson:-1"],
            "poisson:RATE",
        ),
        (
            vec!["--cache", "10", "--arrival", "recorded"],
            "no recorded time",
        ),
        (
            vec!["--cache", "10", "--engine", "vllm:block=0"],
            "positive integer",
        ),
        (
            vec![
                "--cache",
                "10",
                "--routing",
                "round-robin,sglang-cache-aware:threshold=2",
            ],
            "`threshold` must be a number from 0 to 1",
        ),
    ] {
        let mut all = vec![
            "simulate",
            CORPUS,
            "--no-trace-cache",
            "--prefill-tps",
            "1000",
        ];
        all.extend(args.iter().copied());
        let (code, _, stderr) = kvlint(&all);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    // A damaged trace in the cache is traced again, not trusted.
    let cache = scratch("cache");
    let cache_arg = cache.to_str().unwrap();
    let first = workload_json_cached(cache_arg);
    for entry in std::fs::read_dir(&cache).unwrap() {
        std::fs::write(entry.unwrap().path(), b"KVLTRC01 not a trace").unwrap();
    }
    assert_eq!(workload_json_cached(cache_arg), first);
    std::fs::remove_dir_all(&cache).ok();
}

fn workload_json_cached(cache: &str) -> Value {
    let (code, stdout, stderr) = kvlint(&[
        "workload",
        "--format",
        "json",
        "--trace-cache",
        cache,
        CORPUS,
    ]);
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_str(&stdout).unwrap()
}

/// The misses split: every prompt token an infinite shared cache computes is unavoidable
/// (sent for the first time) or avoidable (a break's, or expired); with a lifetime, a session
/// that starts 19 minutes after the one whose prefix it shares finds it expired at 5 minutes
/// and read at 30; priced, the dollars are the tokens at the model's row in `kvlint models`.
#[test]
fn misses_split_into_avoidable_and_unavoidable_in_tokens_and_dollars() {
    let recording = "fixtures/recordings/hand-made/cold-session-after-expiry.har";
    let misses = |report: &Value, key: &str| report["misses"][key].as_u64().unwrap();
    let corpus = workload_json(&[CORPUS]);
    let prompt = corpus["prompt_tokens"].as_u64().unwrap();
    let served = (corpus["reuse"]["prefix_sharing_rate"].as_f64().unwrap() * prompt as f64).round();
    assert_eq!(
        (misses(&corpus, "unavoidable_tokens") + misses(&corpus, "broken_tokens")) as f64,
        prompt as f64 - served
    );
    let broken: u64 = corpus["finding_costs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cost| cost["tokens"].as_u64().unwrap())
        .sum();
    assert!(misses(&corpus, "broken_tokens") > 0);
    assert!(misses(&corpus, "broken_tokens") <= broken);
    assert_eq!(misses(&corpus, "expired_tokens"), 0);

    let expired = workload_json(&[recording, "--cache-lifetime", "5m"]);
    let kept = workload_json(&[recording, "--cache-lifetime", "30m"]);
    assert_eq!(misses(&kept, "expired_tokens"), 0);
    // The second session's first request: the tools and system prompt it shares (about
    // 1,870 tokens, what `check` finds it loses), in whole blocks.
    let lost = misses(&expired, "expired_tokens");
    assert!((1800..=1900).contains(&lost), "{lost}");
    assert_eq!(
        misses(&expired, "unavoidable_tokens"),
        misses(&kept, "unavoidable_tokens")
    );

    // Priced: Anthropic's default lifetime (5 minutes), and the row's prices.
    let priced = workload_json(&[recording, "--priced-as", "anthropic:claude-sonnet-4-5"]);
    assert_eq!(priced["misses"]["lifetime_seconds"], 300.0);
    assert_eq!(misses(&priced, "expired_tokens"), lost);
    let (_, table, _) = kvlint(&["models", "claude-sonnet-4-5", "--format", "json"]);
    let table: Value = serde_json::from_str(&table).unwrap();
    let row = &table["models"][0];
    let price = |key: &str| row[key].as_f64().unwrap();
    let write = price("cache_write").max(price("input"));
    let dollars = &priced["misses"]["dollars"];
    let close = |value: &Value, expected: f64| (value.as_f64().unwrap() - expected).abs() < 1e-9;
    assert!(
        close(&dollars["avoidable"], lost as f64 * write / 1e6),
        "{dollars}"
    );
    assert!(close(
        &dollars["avoidable_savings"],
        lost as f64 * (write - price("cached_input")) / 1e6
    ));
    assert!(close(
        &dollars["unavoidable"],
        misses(&priced, "unavoidable_tokens") as f64 * write / 1e6
    ));
    // A self-hosted engine has no prices: a usage error.
    let (code, _, stderr) = kvlint(&["workload", recording, "--priced-as", "vllm"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("not a hosted API's model"), "{stderr}");
}

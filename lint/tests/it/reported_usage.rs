//! Recorded usage against the prediction (`check --engine`, offline): the cached tokens each
//! recorded response reports, read from real recordings, and the disagreements planted in
//! `fixtures/usage/` named turn by turn.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;

fn check(engine: &str, path: &str) -> Value {
    let run = kvlint_fixtures::run_kvlint(
        env!("CARGO_BIN_EXE_kvlint"),
        &["check", "--engine", engine, "--format", "json", path],
    );
    serde_json::from_str(&run.stdout).unwrap_or_else(|error| panic!("{error}: {}", run.stderr))
}

/// (turn, severity, a piece of the message) of each `reported-usage` finding.
fn reported(report: &Value) -> Vec<(u64, String, String)> {
    report["sessions"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|finding| finding["rule"] == "reported-usage")
        .map(|finding| {
            let message = finding["message"].as_str().unwrap();
            let kind = [
                "written to the cache",
                "nothing read",
                "read from the cache for a prompt",
            ]
            .into_iter()
            .find(|kind| message.contains(kind))
            .unwrap_or(message);
            (
                finding["turn"].as_u64().unwrap(),
                finding["severity"].as_str().unwrap().to_owned(),
                kind.to_owned(),
            )
        })
        .collect()
}

#[test]
fn disagreements_with_the_recorded_usage_are_named() {
    let written = check(
        "anthropic",
        "fixtures/usage/anthropic-written-never-read.jsonl",
    );
    let warning = |turn, kind: &str| (turn, "warning".to_owned(), kind.to_owned());
    assert_eq!(
        reported(&written),
        [
            warning(0, "written to the cache"),
            warning(1, "nothing read"),
            warning(1, "written to the cache"),
            warning(2, "nothing read"),
        ]
    );
    let openai = check(
        "openai",
        "fixtures/usage/openai-unread-and-impossible.jsonl",
    );
    assert_eq!(
        reported(&openai),
        [
            warning(1, "nothing read"),
            warning(2, "read from the cache for a prompt")
        ]
    );
    let turns = openai["sessions"][0]["turns"].as_array().unwrap();
    let cached: Vec<u64> = turns
        .iter()
        .map(|turn| turn["reported_cached_tokens"].as_u64().unwrap())
        .collect();
    assert_eq!(cached, [0, 0, 6400]);
}

/// A real Inspect run against llama-server: each turn's `reported_cached_tokens` is the
/// `timings.cache_n` of its call's response, read here from the JSON log directly.
#[test]
fn real_recordings_report_the_engines_own_counts() {
    let log: Value = serde_json::from_str(
        &std::fs::read_to_string(
            kvlint_fixtures::repository().join("fixtures/recordings/inspect/agent.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let mut expected = Vec::new();
    for sample in log["samples"].as_array().unwrap() {
        for event in sample["events"].as_array().unwrap() {
            if event["event"] == "model" {
                expected.push(
                    event["call"]["response"]["timings"]["cache_n"]
                        .as_u64()
                        .unwrap(),
                );
            }
        }
    }
    assert!(expected.iter().any(|cached| *cached > 0), "{expected:?}");
    for log in [
        "fixtures/recordings/inspect/agent.json",
        "fixtures/recordings/inspect/agent.eval",
    ] {
        let report = check("llamacpp", log);
        let found: Vec<u64> = report["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|session| session["turns"].as_array().unwrap().clone())
            .map(|turn| turn["reported_cached_tokens"].as_u64().unwrap())
            .collect();
        assert_eq!(found, expected, "{log}");
    }
}

//! `kvlint check` in engine mode: the fixture sessions parsed as vLLM parses requests (the
//! default engine), rendered through Qwen2.5's real chat template and tokenized with the real
//! Qwen tokenizer (assets of `scripts/fetch-assets.sh`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

use kvlint_fixtures::Expected;
use serde_json::Value;

/// `kvlint check --format json` through Qwen2.5's real template and tokenizer.
fn check_with_qwen(options: &[&str], paths: &[&str]) -> Value {
    let assets =
        kvlint_fixtures::assets().expect("test assets missing: run scripts/fetch-assets.sh");
    let output = Command::new(env!("CARGO_BIN_EXE_kvlint"))
        .current_dir(kvlint_fixtures::repository())
        .args([
            "check",
            "--format",
            "json",
            "--now",
            "2026-11-29T10:00:00",
            "--chat-template",
        ])
        .arg(assets.join("templates/Qwen-Qwen2.5-7B-Instruct.jinja"))
        .arg("--tokenizer")
        .arg(assets.join("tokenizers/qwen3/tokenizer.json"))
        .args(options)
        .args(paths)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    // Gemini and Bedrock bodies: no engine takes them, and engine mode says so.
    let refused: Vec<&str> = report["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|error| {
            let message = error["message"].as_str().unwrap();
            assert!(message.contains("no endpoint takes a"), "{message}");
            error["path"].as_str().unwrap()
        })
        .collect();
    assert!(
        refused
            .iter()
            .all(|path| PROVIDER_ONLY.iter().any(|only| path.ends_with(only))),
        "{refused:?}"
    );
    report
}

/// Rule fixtures in formats only their providers take.
const PROVIDER_ONLY: [&str; 2] = [
    "gemini-system-instruction-clock.jsonl",
    "bedrock-converse-tools-swapped.jsonl",
];

/// The findings of each session file.
fn findings(paths: &[&str]) -> Vec<(String, Vec<Expected>)> {
    check_with_qwen(&[], paths)["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|session| {
            assert!(
                session["renderer"]
                    .as_str()
                    .unwrap()
                    .starts_with("engine:vllm:Qwen-Qwen2.5-7B-Instruct.jinja")
            );
            (
                session["path"].as_str().unwrap().to_owned(),
                Expected::list(&session["findings"]),
            )
        })
        .collect()
}

#[test]
fn breakers_are_found_through_a_real_chat_template() {
    let sessions = findings(&[
        "fixtures/rules/volatile-timestamp/fail",
        "fixtures/rules/volatile-id/fail",
        "fixtures/rules/volatile-counter/fail",
        "fixtures/rules/tool-order/fail",
        "fixtures/rules/tool-set-change/fail",
        "fixtures/rules/prefix-edit/fail",
        "fixtures/rules/json-reserialized/fail/chat-schema-key-order.json",
        "fixtures/rules/json-reserialized/fail/schema-key-order.jsonl",
        "fixtures/rules/history-rewrite/fail/redact-secret-edit.jsonl",
        "fixtures/rules/history-rewrite/fail/sliding-window-drop-pairs.jsonl",
        "fixtures/rules/history-rewrite/fail/tool-output-pruned.jsonl",
        "fixtures/rules/history-rewrite/fail/truncate-tool-output.json",
        "fixtures/rules/history-rewrite/fail/whitespace-strip-batch.jsonl",
    ]);
    assert_eq!(sessions.len(), 26);
    for (path, actual) in sessions {
        let expected = Expected::beside(&kvlint_fixtures::repository().join(&path));
        assert!(
            kvlint_fixtures::all_match(&expected, &actual),
            "{path}: expected {expected:?}, got {actual:?}"
        );
    }
}

#[test]
fn what_the_engine_never_sees_is_no_break() {
    // Engines parse tool-call arguments into objects before the template serializes them
    // again, so spacing and escaping of the arguments string never reach the tokens;
    // Qwen2.5's template does not render reasoning; Qwen's tokenizer normalizes to NFC.
    let sessions = findings(&[
        "fixtures/rules/json-reserialized/fail/arguments-spacing.jsonl",
        "fixtures/rules/json-reserialized/fail/arguments-unicode-escape-pairs.jsonl",
        "fixtures/rules/history-rewrite/fail/thinking-removed-pairs.jsonl",
        "fixtures/rules/history-rewrite/fail/unicode-nfc.jsonl",
    ]);
    assert_eq!(sessions.len(), 4);
    for (path, actual) in sessions {
        assert!(
            actual.iter().all(|finding| finding.severity != "error"),
            "{path}: {actual:?}"
        );
    }
}

#[test]
fn encrypted_reasoning_is_refused_as_vllms_responses_endpoint_refuses_it() {
    let assets =
        kvlint_fixtures::assets().expect("test assets missing: run scripts/fetch-assets.sh");
    let output = Command::new(env!("CARGO_BIN_EXE_kvlint"))
        .current_dir(kvlint_fixtures::repository())
        .args(["check", "--format", "json", "--chat-template"])
        .arg(assets.join("templates/Qwen-Qwen2.5-7B-Instruct.jinja"))
        .arg("--tokenizer")
        .arg(assets.join("tokenizers/qwen3/tokenizer.json"))
        .arg("fixtures/rules/history-rewrite/fail/reasoning-items-dropped.jsonl")
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let message = report["errors"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("turn 1 cannot be rendered: vLLM refuses the request: Encrypted content is not supported."),
        "{message}"
    );
    assert_eq!(output.status.code(), Some(2), "an input error");
}

/// The turns of a session checked in engine mode with `--engine`.
fn cache_turns(engine: &str, session: &str) -> Vec<Value> {
    let report = check_with_qwen(&["--engine", engine], &[session]);
    report["sessions"][0]["turns"].as_array().unwrap().clone()
}

#[test]
fn engines_that_keep_generated_tokens_hit_through_the_answer_sent_back() {
    for engine in ["llamacpp", "sglang"] {
        let turns = cache_turns(engine, "fixtures/cache/answers-sent-back.jsonl");
        for pair in turns.windows(2) {
            let previous_prompt = pair[0]["prompt_tokens"].as_u64().unwrap();
            let cached = pair[1]["predicted_cached_tokens"].as_u64().unwrap();
            // The previous prompt ends with the generation prompt; the answer the engine
            // generated is rendered back verbatim, so the hit reaches past the prompt.
            assert_eq!(
                pair[1]["reused_tokens"].as_u64(),
                Some(previous_prompt),
                "{engine}"
            );
            assert!(
                cached > previous_prompt,
                "{engine}: {cached} ≤ {previous_prompt}"
            );
            assert!(
                pair[1].get("generated_not_reproduced").is_none(),
                "{engine}"
            );
        }
    }
}

#[test]
fn generated_reasoning_that_history_drops_is_flagged() {
    let turns = cache_turns("llamacpp", "fixtures/cache/reasoning-dropped.jsonl");
    for pair in turns.windows(2) {
        let previous_prompt = pair[0]["prompt_tokens"].as_u64().unwrap();
        // The cache held prompt + reasoning + answer; the next turn sends prompt + answer.
        assert_eq!(
            pair[1]["predicted_cached_tokens"].as_u64(),
            Some(previous_prompt)
        );
        assert!(pair[1]["generated_not_reproduced"].as_u64().unwrap() > 0);
    }
}

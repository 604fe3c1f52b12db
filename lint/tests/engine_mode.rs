//! `kvlint check` in engine mode: the fixture sessions rendered through Qwen2.5's real chat
//! template and tokenized with the real Qwen tokenizer (assets of `scripts/fetch-assets.sh`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn assets() -> PathBuf {
    let assets = std::env::var_os("KVLINT_ASSETS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(&std::env::var_os("HOME").unwrap()).join(".cache/kvlint/assets")
        });
    assert!(
        assets.join("STAMP").is_file(),
        "test assets missing: run scripts/fetch-assets.sh"
    );
    assets
}

/// A finding as (rule, turn, severity).
type Row = (String, u64, String);

/// The findings of each session file.
fn findings(paths: &[&str]) -> Vec<(String, Vec<Row>)> {
    let assets = assets();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let output = Command::new(env!("CARGO_BIN_EXE_kvlint"))
        .current_dir(&root)
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
        .args(paths)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["errors"], Value::Array(Vec::new()));
    report["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|session| {
            assert!(
                session["renderer"]
                    .as_str()
                    .unwrap()
                    .starts_with("engine:Qwen-Qwen2.5-7B-Instruct.jinja")
            );
            let rows = session["findings"]
                .as_array()
                .unwrap()
                .iter()
                .map(|finding| {
                    (
                        finding["rule"].as_str().unwrap().to_owned(),
                        finding["turn"].as_u64().unwrap(),
                        finding["severity"].as_str().unwrap().to_owned(),
                    )
                })
                .collect();
            (session["path"].as_str().unwrap().to_owned(), rows)
        })
        .collect()
}

fn expected(session: &str) -> Vec<Row> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let stem = session.trim_end_matches(".jsonl").trim_end_matches(".json");
    let expect: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join(format!("{stem}.expect.json"))).unwrap(),
    )
    .unwrap();
    expect["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|finding| {
            (
                finding["rule"].as_str().unwrap().to_owned(),
                finding["turn"].as_u64().unwrap(),
                finding["severity"].as_str().unwrap().to_owned(),
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
    assert_eq!(sessions.len(), 25);
    for (path, rows) in sessions {
        assert_eq!(rows, expected(&path), "{path}");
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
        "fixtures/rules/history-rewrite/fail/reasoning-items-dropped.jsonl",
        "fixtures/rules/history-rewrite/fail/unicode-nfc.jsonl",
    ]);
    assert_eq!(sessions.len(), 5);
    for (path, rows) in sessions {
        assert!(rows.iter().all(|row| row.2 != "error"), "{path}: {rows:?}");
    }
}

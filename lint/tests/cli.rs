//! The `kvlint` binary as a user runs it: output snapshots and exit codes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;

struct Run {
    stdout: String,
    code: i32,
}

/// Runs kvlint from the repository root, without colour, at a fixed width.
fn kvlint(args: &[&str]) -> Run {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let output = Command::new(env!("CARGO_BIN_EXE_kvlint"))
        .args(args)
        .current_dir(root)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "100")
        .output()
        .unwrap();
    Run {
        stdout: String::from_utf8(output.stdout).unwrap()
            + &String::from_utf8(output.stderr).unwrap(),
        code: output.status.code().unwrap_or(-1),
    }
}

#[test]
fn a_timestamp_in_the_system_prompt_is_an_error() {
    let run = kvlint(&[
        "check",
        "fixtures/rules/volatile-timestamp/fail/system-date-midnight.jsonl",
    ]);
    assert_eq!(run.code, 1);
    insta::assert_snapshot!(run.stdout);
}

#[test]
fn a_dropped_per_turn_reminder_is_info_and_exits_clean() {
    let run = kvlint(&[
        "check",
        "fixtures/rules/volatile-counter/pass/steps-remaining-tail.json",
    ]);
    assert_eq!(run.code, 0);
    insta::assert_snapshot!(run.stdout);
}

#[test]
fn json_report_version_1() {
    let run = kvlint(&[
        "check",
        "--format",
        "json",
        "fixtures/rules/tool-order/fail/mcp-hashmap-swap.jsonl",
    ]);
    assert_eq!(run.code, 1);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(report["version"], 1);
    insta::assert_json_snapshot!(report);
}

#[test]
fn bad_input_is_reported_with_its_place_and_the_rest_still_checked() {
    let run = kvlint(&[
        "check",
        "fixtures/bad",
        "fixtures/rules/prefix-edit/fail/agents-md-edited.jsonl",
    ]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(
        run.stdout.contains("agents-md-edited.jsonl: "),
        "the good file is still checked"
    );
    insta::assert_snapshot!(run.stdout);
}

#[test]
fn bad_input_in_json_output() {
    let run = kvlint(&[
        "check",
        "--format",
        "json",
        "fixtures/bad/deep.jsonl",
        "fixtures/bad/empty.jsonl",
    ]);
    assert_eq!(run.code, 2);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    insta::assert_json_snapshot!(report["errors"]);
}

#[test]
fn a_missing_tokenizer_or_unknown_flag_is_a_usage_error() {
    assert_eq!(
        kvlint(&[
            "check",
            "--tokenizer",
            "no/such/tokenizer.json",
            "fixtures/diff"
        ])
        .code,
        2
    );
    assert_eq!(kvlint(&["check", "--no-such-flag"]).code, 2);
    assert_eq!(kvlint(&["rule", "no-such-rule"]).code, 2);
}

#[test]
fn diff_of_two_requests() {
    let run = kvlint(&[
        "diff",
        "fixtures/diff/before.json",
        "fixtures/diff/after.json",
    ]);
    assert_eq!(run.code, 1);
    insta::assert_snapshot!(run.stdout);
}

#[test]
fn rule_prints_its_docs() {
    let run = kvlint(&["rule", "volatile-timestamp"]);
    assert_eq!(run.code, 0);
    insta::assert_snapshot!(run.stdout);
    let by_code = kvlint(&["rule", "KV101"]);
    assert_eq!(by_code.stdout, run.stdout);
    let listing = kvlint(&["rule"]);
    assert_eq!(listing.stdout.lines().count(), 8);
}

#[test]
fn a_template_that_raises_names_the_turn_and_the_rest_is_still_checked() {
    let run = kvlint(&[
        "check",
        "--chat-template",
        "fixtures/templates/system-first.jinja",
        "fixtures/diff/before.json",
        "fixtures/templates/user-first.jsonl",
    ]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(
        run.stdout
            .contains("user-first.jsonl:1: turn 0 cannot be rendered"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("the first message must be a system message"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("before.json: 1 turns"),
        "{}",
        run.stdout
    );
}

//! Configuration files as a user writes them: discovered upward, applied, and errors that
//! point at the key. The committed JSON schema must match the options kvlint reads.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn kvlint(folder: &Path, args: &[&str]) -> (i32, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_kvlint"))
        .args(args)
        .current_dir(folder)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let text =
        String::from_utf8(output.stdout).unwrap() + &String::from_utf8(output.stderr).unwrap();
    (output.status.code().unwrap_or(-1), text)
}

/// A scratch project with a session that has a volatile-timestamp error at turn 3.
fn project(name: &str) -> PathBuf {
    let folder = std::env::temp_dir().join(format!("kvlint-config-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(folder.join("sessions/nested")).unwrap();
    let session =
        kvlint_fixtures::root().join("rules/volatile-timestamp/fail/system-date-midnight.jsonl");
    std::fs::copy(&session, folder.join("sessions/nested/s.jsonl")).unwrap();
    folder
}

#[test]
fn the_committed_schema_is_current() {
    let (code, schema) = kvlint(&kvlint_fixtures::repository(), &["schema"]);
    assert_eq!(code, 0);
    let committed =
        std::fs::read_to_string(kvlint_fixtures::repository().join("kvlint.schema.json")).unwrap();
    assert!(
        schema == committed,
        "kvlint.schema.json is stale: run `kvlint schema > kvlint.schema.json`"
    );
}

#[test]
fn rule_levels_apply_from_a_config_found_upward() {
    let folder = project("levels");
    let (code, _) = kvlint(&folder, &["check", "sessions/nested/s.jsonl"]);
    assert_eq!(code, 1);
    std::fs::write(
        folder.join("kvlint.toml"),
        "[rules]\nvolatile-timestamp = \"warn\"\n",
    )
    .unwrap();
    let (code, output) = kvlint(
        &folder,
        &["check", "--format", "json", "sessions/nested/s.jsonl"],
    );
    assert_eq!(code, 0, "{output}");
    assert!(output.contains("\"severity\": \"warning\""), "{output}");
    std::fs::write(
        folder.join("kvlint.toml"),
        "[per-file-ignores]\n\"sessions/**\" = [\"volatile-timestamp\"]\n",
    )
    .unwrap();
    let (code, output) = kvlint(&folder, &["check", "--format", "json", "sessions"]);
    assert_eq!(code, 0, "{output}");
    assert!(output.contains("\"findings\": []"), "{output}");
    std::fs::remove_dir_all(&folder).ok();
}

#[test]
fn pyproject_tool_table_is_read() {
    let folder = project("pyproject");
    std::fs::write(
        folder.join("pyproject.toml"),
        "[project]\nname = \"agent\"\n\n[tool.kvlint.rules]\nvolatile-timestamp = \"off\"\n",
    )
    .unwrap();
    let (code, output) = kvlint(&folder.join("sessions"), &["check", "nested/s.jsonl"]);
    assert_eq!(code, 0, "{output}");
    std::fs::remove_dir_all(&folder).ok();
}

#[test]
fn an_unknown_key_is_an_error_that_points_at_it() {
    let folder = project("unknown");
    std::fs::write(
        folder.join("kvlint.toml"),
        "min-tokens-lost = 10\nvolatiles = [\"now\"]\n",
    )
    .unwrap();
    let (code, output) = kvlint(&folder, &["check", "sessions/nested/s.jsonl"]);
    assert_eq!(code, 2, "{output}");
    assert!(output.contains("unknown field `volatiles`"), "{output}");
    assert!(output.contains("kvlint.toml:2:1"), "{output}");
    std::fs::remove_dir_all(&folder).ok();
}

#[test]
fn init_writes_a_starter_config_once() {
    let folder = project("init");
    let (code, output) = kvlint(&folder, &["init"]);
    assert_eq!(code, 0, "{output}");
    let (code, _) = kvlint(&folder, &["check", "sessions"]);
    assert_eq!(code, 1, "the starter config changes nothing");
    let (code, output) = kvlint(&folder, &["init"]);
    assert_eq!(code, 2, "{output}");
    std::fs::remove_dir_all(&folder).ok();
}

#[test]
fn template_limits_are_read_from_the_configuration() {
    let folder = project("template-limits");
    // Prints 2 MB whatever the conversation.
    std::fs::write(
        folder.join("chat.jinja"),
        "{% for m in messages %}{{ m.content }}{% endfor %}\n{% for i in range(20000) %}{{ 'x' * 100 }}{% endfor %}",
    )
    .unwrap();
    let session = "sessions/nested/s.jsonl";
    // Over the default output cap: an input error naming the template line.
    let (code, text) = kvlint(
        &folder,
        &["check", "--chat-template", "chat.jinja", session],
    );
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("the template printed more than"), "{text}");
    // A trusted template given more room renders, in `check` and in `template`.
    std::fs::write(
        folder.join("kvlint.toml"),
        "[template-limits]\noutput-per-input-byte = 100000\n",
    )
    .unwrap();
    let (code, text) = kvlint(
        &folder,
        &["check", "--chat-template", "chat.jinja", session],
    );
    assert_ne!(code, 2, "{text}");
    let (code, text) = kvlint(&folder, &["template", "chat.jinja"]);
    assert_ne!(code, 2, "{text}");
    // Less work than the template needs: refused again.
    std::fs::write(
        folder.join("kvlint.toml"),
        "[template-limits]\nfuel = 1000\n",
    )
    .unwrap();
    let (code, text) = kvlint(
        &folder,
        &["check", "--chat-template", "chat.jinja", session],
    );
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("more work than its limit allows"), "{text}");
    std::fs::remove_dir_all(&folder).unwrap();
}

#[test]
fn each_session_is_checked_with_the_defaults_of_its_own_configuration() {
    let folder = project("per-file");
    // A second project beside the first, with its own configuration and a copy of the session.
    std::fs::create_dir_all(folder.join("other")).unwrap();
    std::fs::copy(
        folder.join("sessions/nested/s.jsonl"),
        folder.join("other/s.jsonl"),
    )
    .unwrap();
    std::fs::write(
        folder.join("sessions/kvlint.toml"),
        "engine = \"vllm:block=16\"\n",
    )
    .unwrap();
    std::fs::write(folder.join("other/kvlint.toml"), "engine = \"anthropic\"\n").unwrap();
    let (code, output) = kvlint(&folder, &["check", "--format", "json", "sessions", "other"]);
    assert_eq!(code, 1, "{output}");
    let report: serde_json::Value = serde_json::from_str(&output).unwrap();
    let engines: Vec<&str> = report["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|session| session["cache"]["engine"].as_str().unwrap())
        .collect();
    assert_eq!(engines, ["vllm:block=16", "anthropic"], "{output}");
    // A flag wins over every configuration.
    let (_, output) = kvlint(
        &folder,
        &[
            "check", "--format", "json", "--engine", "sglang", "sessions", "other",
        ],
    );
    assert_eq!(
        output.matches("\"engine\": \"sglang:page=1\"").count(),
        2,
        "{output}"
    );
    // A configuration naming a tokenizer that is not there: its sessions are not checked, and
    // the error names the configuration and the place of the key; the other project is checked.
    std::fs::write(
        folder.join("other/kvlint.toml"),
        "tokenizer = \"missing/tokenizer.json\"\n",
    )
    .unwrap();
    let (code, output) = kvlint(&folder, &["check", "sessions", "other"]);
    assert_eq!(code, 2, "{output}");
    assert!(
        output.contains("other/kvlint.toml: tokenizer `missing/tokenizer.json`"),
        "{output}"
    );
    assert!(output.contains("other/kvlint.toml:1:13]"), "{output}");
    assert!(output.contains("checked 1 sessions"), "{output}");
    std::fs::remove_dir_all(&folder).ok();
}

/// The Anthropic account's creation date decides whether a request whose returned thinking
/// blocks fail their prefix check is refused: unset, a new account is assumed and said; an
/// account from before 2026-08-31 lets it through (info); a date in another form is an input
/// error that names the key.
#[test]
fn the_anthropic_account_date_decides_whether_a_thinking_prefix_break_is_refused() {
    let folder = std::env::temp_dir().join(format!("kvlint-config-account-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(&folder).unwrap();
    // A reminder added to the first user turn: a history rewrite, and the thinking blocks
    // after it fail their prefix check (claude-sonnet-5-5, the behaviour not set).
    let session = kvlint_fixtures::root()
        .join("rules/thinking-prefix-check/fail/reminder-in-first-turn-drop-block.jsonl");
    let text = std::fs::read_to_string(session).unwrap().replace(
        r#", "block_binding": {"prefix_mismatch_behavior": "drop_block"}"#,
        "",
    );
    std::fs::write(folder.join("s.jsonl"), text).unwrap();
    let thinking_severity = |output: &str| {
        let report: serde_json::Value = serde_json::from_str(output).unwrap();
        report["sessions"][0]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|finding| finding["rule"] == "thinking-prefix-check")
            .map(|finding| {
                (
                    finding["severity"].as_str().unwrap().to_owned(),
                    finding["message"].as_str().unwrap().to_owned(),
                )
            })
            .unwrap()
    };
    let json = ["check", "--format", "json", "s.jsonl"];
    let (_, output) = kvlint(&folder, &json);
    let (severity, message) = thinking_severity(&output);
    assert_eq!(severity, "error");
    assert!(
        message.contains("assuming an account created on or after 2026-08-31"),
        "{message}"
    );
    std::fs::write(
        folder.join("kvlint.toml"),
        "anthropic-account-created = \"2026-03-02\"\n",
    )
    .unwrap();
    let (_, output) = kvlint(&folder, &json);
    let (severity, message) = thinking_severity(&output);
    assert_eq!(severity, "info");
    assert!(
        message.contains("refuses it (400) on newer ones"),
        "{message}"
    );
    std::fs::write(
        folder.join("kvlint.toml"),
        "anthropic-account-created = \"2026-09-15\"\n",
    )
    .unwrap();
    let (_, output) = kvlint(&folder, &json);
    let (severity, message) = thinking_severity(&output);
    assert_eq!(severity, "error");
    assert!(!message.contains("assuming"), "{message}");
    std::fs::write(
        folder.join("kvlint.toml"),
        "anthropic-account-created = \"March 2026\"\n",
    )
    .unwrap();
    let (code, output) = kvlint(&folder, &["check", "s.jsonl"]);
    assert_eq!(code, 2, "{output}");
    assert!(output.contains("anthropic-account-created"), "{output}");
    std::fs::remove_dir_all(&folder).ok();
}

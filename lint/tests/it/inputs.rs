//! Input as users have it, and input that is hostile: pretty-printed requests, a byte-order
//! mark, text that is not UTF-8, OpenAI Batch lines to other endpoints, and text that would
//! control the terminal if printed raw.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kvlint_fixtures::Printed as Run;

/// Runs kvlint from the repository root; stdout and stderr together.
fn kvlint(args: &[&str]) -> Run {
    kvlint_fixtures::run_kvlint_printed(env!("CARGO_BIN_EXE_kvlint"), args)
}

#[test]
fn input_text_cannot_control_the_terminal() {
    // A tool name with an escape sequence and a bell; a system prompt with a bidi override.
    let first = r#"{"tools":[{"type":"function","function":{"name":"read","parameters":{}}}],"messages":[{"role":"system","content":"Rules \u202e tnirp"},{"role":"user","content":"hi"}]}"#;
    let second = r#"{"tools":[{"type":"function","function":{"name":"read","parameters":{}}},{"type":"function","function":{"name":"evil\u001b]0;pwned\u0007","parameters":{}}}],"messages":[{"role":"system","content":"Rules \u202e tnirp"},{"role":"user","content":"hi"}]}"#;
    let path = std::env::temp_dir().join(format!("kvlint-escapes-{}.jsonl", std::process::id()));
    std::fs::write(&path, format!("{first}\n{second}\n")).unwrap();
    for format in ["human", "github", "junit", "sarif", "json"] {
        let run = kvlint(&["check", "--format", format, path.to_str().unwrap()]);
        assert_eq!(run.code, 1, "{format}: {}", run.stdout);
        for raw in ['\u{1b}', '\u{7}', '\u{202e}'] {
            assert!(
                !run.stdout.contains(raw),
                "{format} prints {raw:?}: {}",
                run.stdout
            );
        }
    }
    let human = kvlint(&["check", path.to_str().unwrap()]);
    assert!(
        human.stdout.contains("evil<U+001B>]0;pwned<U+0007>"),
        "{}",
        human.stdout
    );
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn requests_are_read_as_users_have_them() {
    let single = kvlint(&[
        "check",
        "--format",
        "json",
        "fixtures/inputs/pretty-single.json",
    ]);
    assert_eq!(single.code, 0, "{}", single.stdout);
    let report: serde_json::Value = serde_json::from_str(&single.stdout).unwrap();
    assert_eq!(report["sessions"][0]["summary"]["turns"], 1);
    for session in [
        "fixtures/inputs/pretty-session.json",
        "fixtures/inputs/bom.jsonl",
    ] {
        let run = kvlint(&["check", "--format", "json", session]);
        assert_eq!(run.code, 1, "{}", run.stdout);
        let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        let finding = &report["sessions"][0]["findings"][0];
        assert_eq!(finding["rule"], "volatile-timestamp", "{session}");
        assert_eq!(finding["part"], "messages[0].content", "{session}");
    }
    // Placed in the pretty-printed file: line 4 holds the second request's system prompt.
    let run = kvlint(&[
        "check",
        "--format",
        "json",
        "fixtures/inputs/pretty-session.json",
    ]);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let span = &report["sessions"][0]["findings"][0]["span"];
    let text = std::fs::read_to_string(
        kvlint_fixtures::repository().join("fixtures/inputs/pretty-session.json"),
    )
    .unwrap();
    let line = text
        .lines()
        .nth(span["line"].as_u64().unwrap() as usize - 1)
        .unwrap();
    assert!(line.contains("10:23:05"), "{line}");
    let diff = kvlint(&[
        "diff",
        "fixtures/inputs/pretty-single.json",
        "fixtures/diff/after.json",
    ]);
    assert_ne!(diff.code, 2, "{}", diff.stdout);
    let encoding = kvlint(&["check", "fixtures/inputs/not-utf8.jsonl"]);
    assert_eq!(encoding.code, 2);
    assert!(
        encoding.stdout.contains("not-utf8.jsonl:2:") && encoding.stdout.contains("byte 0xFF"),
        "{}",
        encoding.stdout
    );
}

#[test]
fn batch_lines_to_other_endpoints_are_skipped_and_said() {
    let run = kvlint(&[
        "check",
        "--format",
        "json",
        "fixtures/inputs/batch-embeddings.jsonl",
    ]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let session = &report["sessions"][0];
    assert_eq!(session["summary"]["turns"], 1);
    assert_eq!(session["format"], "openai-chat");
    let lines: Vec<u64> = session["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|skipped| skipped["line"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, [1, 3, 4]);
    let human = kvlint(&["check", "fixtures/inputs/batch-embeddings.jsonl"]);
    assert!(
        human.stdout.contains(
            "batch-embeddings.jsonl:3: skipped: an OpenAI Batch request to /v1/embeddings"
        ),
        "{}",
        human.stdout
    );
}

#[test]
fn a_model_missing_from_the_price_table_says_which_defaults_apply() {
    let session = "fixtures/examples/coding-agent.jsonl";
    let unlisted = kvlint(&["check", "--engine", "openai:gpt-9-turbo", session]);
    assert!(
        unlisted.stdout.contains(
            "`gpt-9-turbo` is not in the price table: the minimum cacheable length and prices are openai's defaults"
        ),
        "{}",
        unlisted.stdout
    );
    let listed = kvlint(&["check", "--format", "json", "--engine", "openai", session]);
    let report: serde_json::Value = serde_json::from_str(&listed.stdout).unwrap();
    let cost = &report["sessions"][0]["cache"]["cost"];
    assert_eq!(cost["model"], "openai/gpt-4o", "{cost}");
    assert!(cost.get("unlisted_model").is_none(), "{cost}");
    let unlisted = kvlint(&[
        "check",
        "--format",
        "json",
        "--engine",
        "openai:gpt-9-turbo",
        session,
    ]);
    let report: serde_json::Value = serde_json::from_str(&unlisted.stdout).unwrap();
    assert_eq!(
        report["sessions"][0]["cache"]["cost"]["unlisted_model"],
        "gpt-9-turbo"
    );
}

#[test]
fn a_file_name_cannot_control_the_terminal() {
    let folder = std::env::temp_dir().join(format!("kvlint-names-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    // A broken session whose name would set the terminal's title and ring its bell.
    std::fs::write(
        folder.join("evil\u{1b}]0;pwned\u{7}.jsonl"),
        "{\"messages\": [\n",
    )
    .unwrap();
    // Shown by name in a report, and in an error printed before any report exists (a request
    // that is not there, named by such a path).
    let missing = folder.join("gone\u{1b}]0;pwned\u{7}.json");
    for (args, shown) in [
        (
            vec!["check", folder.to_str().unwrap()],
            "evil<U+001B>]0;pwned<U+0007>.jsonl",
        ),
        (
            vec!["diff", missing.to_str().unwrap(), missing.to_str().unwrap()],
            "gone<U+001B>]0;pwned<U+0007>.json",
        ),
        // An argument clap cannot take, quoted in its usage error (off a terminal clap drops
        // escape sequences itself; on one, the guard names them).
        (
            vec!["check", "--format", "js\u{1b}]0;pwned\u{7}on"],
            "invalid value 'json' for '--format",
        ),
    ] {
        let run = kvlint(&args);
        assert_eq!(run.code, 2, "{}", run.stdout);
        let raw = run.stdout.contains('\u{1b}') || run.stdout.contains('\u{7}');
        assert!(!raw && run.stdout.contains(shown), "{}", run.stdout);
    }
    std::fs::remove_dir_all(&folder).unwrap();
}

#[test]
fn a_usage_error_on_a_terminal_names_control_characters() {
    // On a terminal clap colours its usage errors and quotes the argument as given: run under
    // a pseudo-terminal (util-linux `script`).
    let command = format!(
        "{} check --format 'js\u{1b}]0;pwned\u{7}on'",
        env!("CARGO_BIN_EXE_kvlint")
    );
    let output = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env_remove("NO_COLOR")
        .env("TERM", "xterm")
        .output()
        .expect("util-linux `script`");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(
        printed.contains("js<U+001B>]0;pwned<U+0007>on"),
        "{printed:?}"
    );
    assert!(
        !printed.contains('\u{7}') && !printed.contains("\u{1b}]"),
        "{printed:?}"
    );
}

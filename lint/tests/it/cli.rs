//! The `kvlint` binary as a user runs it: output snapshots and exit codes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use kvlint_fixtures::Printed as Run;

/// Runs kvlint from the repository root; stdout and stderr together.
fn kvlint(args: &[&str]) -> Run {
    kvlint_fixtures::run_kvlint_printed(env!("CARGO_BIN_EXE_kvlint"), args)
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
    for speed in ["0", "-5", "NaN", "inf", "0.001", "fast"] {
        let run = kvlint(&["check", "--prefill-tps", speed, "fixtures/diff"]);
        assert_eq!(run.code, 2, "{speed}");
        assert!(run.stdout.contains("tokens per second"), "{}", run.stdout);
    }
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
fn a_format_a_command_cannot_print_is_refused_before_any_work() {
    let diff = kvlint(&[
        "diff",
        "--format",
        "sarif",
        "fixtures/diff/before.json",
        "fixtures/diff/after.json",
    ]);
    assert_eq!(diff.code, 2);
    assert!(
        diff.stdout
            .contains("`kvlint diff` does not print `--format sarif`"),
        "{}",
        diff.stdout
    );
    // Nothing listens on port 9 of loopback: refused before the probe tries to connect.
    let probe = kvlint(&[
        "probe",
        "--engine-url",
        "http://127.0.0.1:9",
        "--format",
        "junit",
        "fixtures/examples/coding-agent.jsonl",
    ]);
    assert_eq!(probe.code, 2);
    assert!(
        probe
            .stdout
            .contains("`kvlint probe` does not print `--format junit`"),
        "{}",
        probe.stdout
    );
    assert!(!probe.stdout.contains("turn"), "{}", probe.stdout);
}

#[test]
fn rule_prints_its_docs() {
    let run = kvlint(&["rule", "volatile-timestamp"]);
    assert_eq!(run.code, 0);
    insta::assert_snapshot!(run.stdout);
    let by_code = kvlint(&["rule", "KV101"]);
    assert_eq!(by_code.stdout, run.stdout);
    let listing = kvlint(&["rule"]);
    assert_eq!(listing.stdout.lines().count(), kvlint_rules_count());
}

/// The figures kvlint prices with, each with the page it was read from: a dated model id
/// finds its row, and the JSON holds every row's source, quote and date.
#[test]
fn models_prints_each_row_with_its_source() {
    let run = kvlint(&["models", "claude-opus-5-5-20260922"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(
        run.stdout
            .contains("anthropic claude-opus-5-5: caches from 512 tokens"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("source: https://"), "{}", run.stdout);
    let json = kvlint(&["models", "--provider", "openai", "--format", "json"]);
    let table: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let rows = table["models"].as_array().unwrap();
    assert!(rows.iter().any(|row| row["name"] == "gpt-6.2-sol"));
    for row in rows {
        assert_eq!(row["provider"], "openai");
        for field in ["source", "quote", "checked"] {
            assert!(
                row[field].as_str().is_some_and(|text| !text.is_empty()),
                "{row}"
            );
        }
    }
    let grok = kvlint(&["models", "grok-4.6", "--provider", "xai"]);
    assert_eq!(grok.code, 0, "{}", grok.stdout);
    assert!(
        grok.stdout.contains("source: https://docs.x.ai/"),
        "{}",
        grok.stdout
    );
    let unknown = kvlint(&["models", "mistral-large", "--provider", "mistral"]);
    assert_eq!(unknown.code, 2);
    assert!(
        unknown.stdout.contains("no row of the model table"),
        "{}",
        unknown.stdout
    );
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

#[test]
fn engine_predictions_follow_each_engines_rule_turn_by_turn() {
    let session = "fixtures/rules/volatile-counter/fail/turns-left-system.jsonl";
    for (engine, rule) in [
        (
            "vllm:block=32",
            (|n: u64, reused: u64| 32 * (reused / 32).min((n - 1) / 32)) as fn(u64, u64) -> u64,
        ),
        ("llamacpp", |n, reused| reused.min(n - 1)),
        ("openai:gpt-4o", |_, reused| {
            if reused < 1024 {
                0
            } else {
                1024 + (reused - 1024) / 128 * 128
            }
        }),
    ] {
        let run = kvlint(&["check", "--format", "json", "--engine", engine, session]);
        let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        let session = &report["sessions"][0];
        assert_eq!(session["cache"]["engine"], engine);
        let mut cached_total = 0;
        for turn in session["turns"].as_array().unwrap() {
            let n = turn["prompt_tokens"].as_u64().unwrap();
            let reused = turn["reused_tokens"].as_u64().unwrap();
            let cached = turn["predicted_cached_tokens"].as_u64().unwrap();
            assert_eq!(cached, rule(n, reused), "{engine} turn {}", turn["index"]);
            assert_eq!(turn["computed_tokens"].as_u64().unwrap(), n - cached);
            cached_total += cached;
        }
        assert_eq!(
            session["cache"]["cached_tokens"].as_u64(),
            Some(cached_total)
        );
    }
}

#[test]
fn engine_table_in_human_output() {
    let run = kvlint(&[
        "check",
        "--engine",
        "openai:gpt-4.1",
        "--prefill-tps",
        "2500",
        "fixtures/rules/volatile-counter/fail/turns-left-system.jsonl",
    ]);
    assert_eq!(run.code, 1);
    let table: String = run
        .stdout
        .lines()
        .skip_while(|line| !line.contains(" on openai:gpt-4.1"))
        .collect::<Vec<_>>()
        .join("\n");
    insta::assert_snapshot!(table);
}

#[test]
fn an_unknown_engine_is_a_usage_error() {
    let run = kvlint(&["check", "--engine", "tgi", "fixtures/diff/before.json"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stdout.contains("unknown engine `tgi`"),
        "{}",
        run.stdout
    );
}

#[test]
fn a_session_never_marking_a_breakpoint_is_named_and_its_summary_lines_agree() {
    // vercel/ai#5883's wire form: caching asked for in code, no `cache_control` on the wire.
    let session = "fixtures/rules/no-cache-breakpoint/fail/cache-control-option-not-on-wire.jsonl";
    let json = kvlint(&[
        "check",
        "--format",
        "json",
        "--engine",
        "anthropic",
        session,
    ]);
    let report: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let checked = &report["sessions"][0];
    let finding = &checked["findings"][0];
    assert_eq!(finding["rule"], "no-cache-breakpoint", "{}", json.stdout);
    // What it loses is what the turns repeat of the turn before: every shared prefix here is
    // past the model's 1,024-token minimum.
    assert_eq!(finding["tokens_lost"], checked["summary"]["reused_tokens"]);
    assert_eq!(checked["summary"]["warnings"], 1);
    let human = kvlint(&["check", "--engine", "anthropic", session]);
    let prompt = checked["cache"]["prompt_tokens"].as_u64().unwrap();
    let reused = checked["summary"]["reused_tokens"].as_u64().unwrap();
    // Each line names its meaning: the engine's cache, then the prefix kept from turn to turn,
    // and the warning is counted where the JSON counts it.
    for line in [
        format!("served from cache on anthropic (predicted): 0 of {prompt} prompt tokens (0%)"),
        format!("{reused} unchanged from the turn before ("),
        "0 errors, 1 warnings, 0 info".to_owned(),
        "checked 1 sessions: 0 errors, 1 warnings, 0 info".to_owned(),
        "no request".to_owned(),
        // The table's first cause, a session's finding: no part to name.
        "  no-cache-breakpoint\n".to_owned(),
    ] {
        assert!(human.stdout.contains(&line), "{line}\n{}", human.stdout);
    }
}

/// The rules and the implied provider of plain `kvlint check --format json FILE`'s one session.
fn session_audit_without_engine(file: &str) -> (Vec<String>, serde_json::Value) {
    let run = kvlint(&["check", "--format", "json", file]);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let session = &report["sessions"][0];
    let rules = session["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|finding| finding["rule"].as_str().unwrap().to_owned())
        .collect();
    (rules, session["implied_provider"].clone())
}

#[test]
fn without_an_engine_the_session_audit_runs_under_the_provider_the_input_shows() {
    // An Anthropic Messages body is Anthropic's: the breakpoint never sent is named, and
    // which provider was assumed, from what, is said in both outputs.
    let fail = "fixtures/rules/no-cache-breakpoint/fail/cache-control-option-not-on-wire.jsonl";
    let (rules, implied) = session_audit_without_engine(fail);
    assert_eq!(rules, ["no-cache-breakpoint"]);
    assert_eq!(
        implied,
        serde_json::json!({"engine": "anthropic", "implied_by": "the request format"})
    );
    let human = kvlint(&["check", fail]);
    assert!(
        human.stdout.contains(
            "(provider anthropic implied by the request format; pass --engine to choose)"
        ),
        "{}",
        human.stdout
    );
    let pass = "fixtures/rules/no-cache-breakpoint/pass/top-level-cache-control.jsonl";
    assert_eq!(
        session_audit_without_engine(pass),
        (Vec::<String>::new(), serde_json::Value::Null)
    );
    // An OpenAI-format body could be vLLM's, SGLang's or llama.cpp's: no provider implied.
    let chat = "fixtures/rules/no-cache-routing-key/fail/chat-without-prompt-cache-key.jsonl";
    assert_eq!(
        session_audit_without_engine(chat),
        (Vec::<String>::new(), serde_json::Value::Null)
    );
    // The same bodies recorded against api.openai.com are OpenAI's; against a local server,
    // nobody's.
    let (rules, implied) = session_audit_without_engine(
        "fixtures/recordings/hand-made/openai-without-prompt-cache-key.yaml",
    );
    assert_eq!(rules, ["no-cache-routing-key"]);
    assert_eq!(
        implied,
        serde_json::json!({"engine": "openai", "implied_by": "the request URL's host api.openai.com"})
    );
    assert_eq!(
        session_audit_without_engine(
            "fixtures/recordings/hand-made/local-server-without-prompt-cache-key.yaml"
        ),
        (Vec::<String>::new(), serde_json::Value::Null)
    );
    // A chosen engine wins: vLLM has no breakpoints, no minimum and no routing key.
    let run = kvlint(&["check", "--format", "json", "--engine", "vllm", fail]);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(report["sessions"][0]["findings"], serde_json::json!([]));
    assert_eq!(
        report["sessions"][0]["implied_provider"],
        serde_json::Value::Null
    );
}

#[test]
fn a_reordered_tool_use_input_is_named_as_such() {
    let run = kvlint(&[
        "check",
        "--format",
        "json",
        "fixtures/rules/json-reserialized/fail/tool-use-input-key-order.jsonl",
    ]);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    // Its Anthropic session also never marks a breakpoint (no-cache-breakpoint, at turn 0).
    let findings = report["sessions"][0]["findings"].as_array().unwrap();
    let reserialized = findings
        .iter()
        .find(|finding| finding["rule"] == "json-reserialized")
        .unwrap();
    let message = reserialized["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "the `input` of a `tool_use` block is the same JSON value serialized with another key order"
        ),
        "{message}"
    );
}

#[test]
fn anthropic_breakpoints_are_audited() {
    // Turn 0 marks a 1-tool prefix (far under the 1,024-token minimum of Sonnet 4.5), a
    // timestamp block and the newest message, both after content turn 1 changes; turn 1
    // marks six blocks.
    let run = kvlint(&[
        "check",
        "--format",
        "json",
        "--engine",
        "anthropic",
        "fixtures/cache/anthropic-breakpoints.jsonl",
    ]);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let findings: Vec<(u64, String, String)> = report["sessions"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|finding| finding["rule"] == "cache-breakpoint")
        .map(|finding| {
            let message = finding["message"].as_str().unwrap();
            let kind = [
                "below the model's minimum",
                "is never read",
                "rejects more than 4",
            ]
            .into_iter()
            .find(|kind| message.contains(kind))
            .unwrap_or(message);
            (
                finding["turn"].as_u64().unwrap(),
                finding["part"].as_str().unwrap().to_owned(),
                kind.to_owned(),
            )
        })
        .collect();
    let expected = [
        (0, "tools[0]", "below the model's minimum"),
        (0, "system[1]", "is never read"),
        (0, "messages[0].content[0]", "is never read"),
        (1, "messages[3].content[0]", "rejects more than 4"),
        (1, "tools[0]", "below the model's minimum"),
    ];
    let expected: Vec<(u64, String, String)> = expected
        .iter()
        .map(|(turn, part, kind)| (*turn, (*part).to_owned(), (*kind).to_owned()))
        .collect();
    assert_eq!(findings, expected);
    // Turn 1 reads what turn 0 wrote at the end of the stable system block.
    let turn = &report["sessions"][0]["turns"][1];
    assert!(turn["predicted_cached_tokens"].as_u64().unwrap() > 1024);
    assert!(turn["predicted_cached_tokens"].as_u64() < turn["reused_tokens"].as_u64());
    assert_eq!(run.code, 1, "more than 4 breakpoints is an error");
}

fn kvlint_rules_count() -> usize {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"))
            .unwrap();
    readme
        .lines()
        .filter(|line| line.starts_with("| KV"))
        .count()
}

#[test]
fn a_new_cache_salt_shares_nothing_on_vllm() {
    let run = kvlint(&[
        "check",
        "--format",
        "json",
        "--engine",
        "vllm",
        "fixtures/cache/salted.jsonl",
    ]);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let cached: Vec<u64> = report["sessions"][0]["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|turn| turn["predicted_cached_tokens"].as_u64().unwrap())
        .collect();
    // Turn 1 extends turn 0 under the same salt; turn 2 extends turn 1 under another.
    assert!(cached[1] > 0);
    assert_eq!(cached[2], 0);
    assert_eq!(report["sessions"][0]["findings"], serde_json::json!([]));
}

#[test]
fn each_rule_has_its_documentation_page_as_kvlint_rule_prints_it() {
    // The pages the language server's diagnostics link to: `scripts/rule-docs.sh` writes them.
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/rules");
    let listing = kvlint(&["rule"]).stdout;
    let names: Vec<&str> = listing
        .lines()
        .filter_map(|line| line.split_whitespace().nth(1))
        .collect();
    assert_eq!(names.len(), kvlint_rules_count());
    for name in &names {
        let page =
            std::fs::read_to_string(folder.join(format!("{name}.md"))).unwrap_or_else(|_| {
                panic!("docs/rules/{name}.md is missing: run scripts/rule-docs.sh")
            });
        assert_eq!(
            page,
            kvlint(&["rule", name]).stdout,
            "docs/rules/{name}.md is stale: run scripts/rule-docs.sh"
        );
    }
    let pages = std::fs::read_dir(&folder).unwrap().count();
    assert_eq!(pages, names.len(), "a page in docs/rules names no rule");
}

#[test]
fn an_input_error_s_help_names_the_command_that_does_it() {
    // The library's error names the concept; the command line names its commands. miette
    // wraps long lines: the words are compared, not the lines.
    let words = |args: &[&str]| {
        let run = kvlint(args);
        assert_eq!(run.code, 2, "{}", run.stdout);
        run.stdout.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    let recording = words(&[
        "diff",
        "fixtures/recordings/ruby-llm-openai-system-replaced.yml",
        "fixtures/diff/after.json",
    ]);
    assert!(recording.contains("is a recording"), "{recording}");
    assert!(
        recording.contains(
            "`kvlint import fixtures/recordings/ruby-llm-openai-system-replaced.yml --out DIR`"
        ),
        "{recording}"
    );
    let session = words(&[
        "diff",
        "fixtures/corpus/sessions/crewai-2.jsonl",
        "fixtures/diff/after.json",
    ]);
    assert!(session.contains("expected one request body"), "{session}");
    assert!(
        session.contains("use `kvlint check` for a session"),
        "{session}"
    );
}

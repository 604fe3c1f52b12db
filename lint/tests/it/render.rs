//! `kvlint render`: what is prefilled for each turn, as text and token ids, in provider mode
//! and in engine mode through vLLM's request parsing (no assets needed: the fixture template
//! and the embedded tokenizer).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use kvlint_fixtures::run_kvlint;
use serde_json::{Value, json};

fn render(args: &[&str]) -> (Value, i32) {
    let run = run_kvlint(env!("CARGO_BIN_EXE_kvlint"), args);
    let report = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}{}", run.stdout, run.stderr));
    (report, run.code)
}

/// A session file of these bodies, one per line, under the system temp directory.
fn session(name: &str, bodies: &[Value]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kvlint-render-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let lines: Vec<String> = bodies.iter().map(Value::to_string).collect();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

#[test]
fn provider_mode_prints_every_turn_with_its_token_ids() {
    let (report, code) = render(&[
        "render",
        "--format",
        "json",
        "fixtures/examples/coding-agent.jsonl",
    ]);
    assert_eq!(code, 0);
    assert_eq!(report["version"], 1);
    assert_eq!(report["errors"], json!([]));
    let session = &report["sessions"][0];
    assert_eq!(session["renderer"], "provider:o200k_base");
    let turns = session["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 5);
    for (index, turn) in turns.iter().enumerate() {
        assert_eq!(turn["index"], index);
        assert_eq!(turn["format"], "openai-chat");
        assert!(!turn["text"].as_str().unwrap().is_empty());
        assert!(turn["token_ids"].as_array().unwrap().len() > 10);
    }

    let (report, code) = render(&[
        "render",
        "--format",
        "json",
        "--turn",
        "2",
        "fixtures/examples/coding-agent.jsonl",
    ]);
    assert_eq!(code, 0);
    assert_eq!(report["sessions"][0]["turns"][0]["index"], 2);
    assert_eq!(report["sessions"][0]["turns"].as_array().unwrap().len(), 1);

    let (report, code) = render(&[
        "render",
        "--format",
        "json",
        "--turn",
        "9",
        "fixtures/examples/coding-agent.jsonl",
    ]);
    assert_eq!(code, 2);
    let message = report["errors"][0]["message"].as_str().unwrap();
    assert!(message.contains("has no turn 9"), "{message}");
}

#[test]
fn engine_mode_renders_as_vllm_parses_and_names_what_vllm_refuses() {
    let path = session(
        "refused.jsonl",
        &[
            json!({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]}]}),
            json!({"messages": [{"role": "system", "content": null}, {"role": "user", "content": "hi"}]}),
        ],
    );
    let path = path.to_str().unwrap();
    let template = "fixtures/templates/stable.jinja";
    let (report, code) = render(&[
        "render",
        "--format",
        "json",
        "--chat-template",
        template,
        path,
    ]);
    assert_eq!(code, 1, "a refused turn exits 1");
    let session = &report["sessions"][0];
    assert_eq!(session["renderer"], "engine:vllm:stable.jinja+o200k_base");
    // vLLM hands the template "" for the null content.
    assert_eq!(
        session["turns"][0]["text"],
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<|im_end|>\n<|im_start|>assistant\n"
    );
    assert!(session["turns"][1].get("text").is_none());
    let error = session["turns"][1]["error"].as_str().unwrap();
    assert!(error.contains("turn 1 cannot be rendered"), "{error}");
    assert!(error.contains("vLLM refuses the request"), "{error}");

    // SGLang parses the same bodies its own way: a last assistant message becomes a user
    // message, and a null system content is "".
    let (report, code) = render(&[
        "render",
        "--format",
        "json",
        "--engine",
        "sglang",
        "--chat-template",
        template,
        path,
    ]);
    assert_eq!(code, 0);
    let session = &report["sessions"][0];
    assert_eq!(session["renderer"], "engine:sglang:stable.jinja+o200k_base");
    assert_eq!(
        session["turns"][0]["text"],
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n"
    );
    assert!(session["turns"][1]["text"].is_string());
}

#[test]
fn human_output_shows_each_turns_text_and_other_formats_are_refused() {
    let run = run_kvlint(
        env!("CARGO_BIN_EXE_kvlint"),
        &[
            "render",
            "--turn",
            "0",
            "fixtures/examples/coding-agent.jsonl",
        ],
    );
    assert_eq!(run.code, 0);
    assert!(
        run.stdout
            .starts_with("── fixtures/examples/coding-agent.jsonl · turn 0 · ")
    );
    assert!(run.stdout.contains("read_file"));
    assert!(run.stdout.ends_with("── end of turn 0 ──\n"));
    let run = run_kvlint(
        env!("CARGO_BIN_EXE_kvlint"),
        &[
            "render",
            "--format",
            "sarif",
            "fixtures/examples/coding-agent.jsonl",
        ],
    );
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("does not print `--format sarif`"),
        "{}",
        run.stderr
    );
}

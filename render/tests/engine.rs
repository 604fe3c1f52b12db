//! Engine mode against the real thing: real chat templates (llama.cpp's collection of about
//! 70 models' templates, and the tokenizer configs of Qwen3, Llama 3.1 and DeepSeek-V3)
//! rendered by kvlint and by Hugging Face transformers itself, and real tokenizers.
//!
//! Needs the assets of `scripts/fetch-assets.sh` and the venv of `scripts/setup-python.sh`
//! (both run by `scripts/test.sh`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use chrono::NaiveDateTime;
use kvlint_render::render::chat_view;
use kvlint_render::template::ChatTemplate;
use kvlint_render::tokenize::Tokenizer;
use kvlint_request::request::Request;
use serde_json::{Value, json};

fn assets() -> PathBuf {
    kvlint_fixtures::assets().expect("test assets missing: run scripts/fetch-assets.sh")
}

fn now() -> NaiveDateTime {
    NaiveDateTime::parse_from_str("2026-11-29T10:00:00", "%Y-%m-%dT%H:%M:%S").unwrap()
}

/// An agent conversation in OpenAI chat form: system, tools, a tool call and its result.
fn agent_body() -> Value {
    json!({
        "model": "m",
        "tools": [
            {"type": "function", "function": {"name": "read_file", "description": "Read a file from the repository.",
             "parameters": {"type": "object", "properties": {"path": {"type": "string", "description": "Path to read"}}, "required": ["path"]}}},
            {"type": "function", "function": {"name": "run_tests", "description": "Run the test suite.",
             "parameters": {"type": "object", "properties": {"filter": {"type": "string"}, "verbose": {"type": "boolean"}}}}}
        ],
        "messages": [
            {"role": "system", "content": "You are a careful coding agent. Work in small steps."},
            {"role": "user", "content": "The test `test_rounding` fails. Find out why — é, ü and 中文 are fine."},
            {"role": "assistant", "content": "Let me read the file.", "reasoning_content": "The bug is likely in price.py; read it first.", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"src/price.py\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "def price(x):\n    return round(x, 2)\n"},
            {"role": "assistant", "content": "The function rounds half to even."},
            {"role": "user", "content": "Fix it, then run the tests."}
        ]
    })
}

fn plain_body() -> Value {
    json!({"messages": [
        {"role": "user", "content": "Hello there."},
        {"role": "assistant", "content": "Hi! How can I help?"},
        {"role": "user", "content": "Summarize <b>this</b> & \"that\"\n\tplease."}
    ]})
}

struct Case {
    id: String,
    template: PathBuf,
    tokenizer_dir: PathBuf,
    body: Value,
    add_generation_prompt: bool,
}

fn cases(assets: &Path) -> Vec<Case> {
    let tokenizers = assets.join("tokenizers");
    let mut templates: Vec<(PathBuf, PathBuf)> = std::fs::read_dir(assets.join("templates"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "jinja")
        })
        .map(|path| (path, tokenizers.join("qwen3")))
        .collect();
    templates.sort();
    assert!(
        templates.len() >= 60,
        "expected llama.cpp's template collection"
    );
    for name in ["qwen3", "llama3_1", "deepseek_v3"] {
        templates.push((
            tokenizers.join(name).join("tokenizer_config.json"),
            tokenizers.join(name),
        ));
    }
    let mut cases = Vec::new();
    for (template, tokenizer_dir) in templates {
        let name = template.strip_prefix(assets).unwrap().display().to_string();
        for (kind, body, add_generation_prompt) in [
            ("agent", agent_body(), true),
            ("plain", plain_body(), false),
        ] {
            cases.push(Case {
                id: format!("{name} [{kind}]"),
                template: template.clone(),
                tokenizer_dir: tokenizer_dir.clone(),
                body,
                add_generation_prompt,
            });
        }
    }
    cases
}

/// Renders every case with transformers, in one Python process.
fn reference(cases: &[Case]) -> Vec<Value> {
    let input: Vec<Value> = cases
        .iter()
        .map(|case| {
            let request = Request::from_body(&case.body).unwrap();
            let (messages, tools) = chat_view(&request);
            let mut entry = json!({
                "id": case.id,
                "tokenizer_dir": case.tokenizer_dir,
                "messages": messages,
                "tools": tools,
                "add_generation_prompt": case.add_generation_prompt,
                "kwargs": {},
                "now": "2026-11-29T10:00:00",
            });
            if case
                .template
                .extension()
                .is_some_and(|extension| extension == "jinja")
            {
                entry["chat_template_file"] = json!(case.template);
            }
            entry
        })
        .collect();
    kvlint_fixtures::transformers_render(&input).unwrap()
}

#[test]
fn renders_and_tokenizes_exactly_like_transformers() {
    let assets = assets();
    let cases = cases(&assets);
    let references = reference(&cases);
    assert_eq!(references.len(), cases.len());
    let mut tokenizers = std::collections::HashMap::new();
    let mut compared = 0;
    let mut mismatches = Vec::new();
    for (case, reference) in cases.iter().zip(&references) {
        let tokenizer = tokenizers
            .entry(case.tokenizer_dir.clone())
            .or_insert_with(|| {
                Tokenizer::from_file(&case.tokenizer_dir.join("tokenizer.json")).unwrap()
            });
        let request = Request::from_body(&case.body).unwrap();
        let (messages, tools) = chat_view(&request);
        let ours = ChatTemplate::from_file(&case.template, now())
            .and_then(|template| {
                template.with_special_tokens_from(&case.tokenizer_dir.join("tokenizer_config.json"))
            })
            .and_then(|template| {
                template.render(&messages, tools.as_deref(), case.add_generation_prompt)
            });
        match (ours, reference.get("text").and_then(Value::as_str)) {
            (Ok(text), Some(expected)) => {
                compared += 1;
                if text != expected {
                    let at = text
                        .bytes()
                        .zip(expected.bytes())
                        .take_while(|(a, b)| a == b)
                        .count();
                    let context = |s: &str| {
                        s.get(at.saturating_sub(30)..(at + 40).min(s.len()))
                            .unwrap_or("")
                            .to_owned()
                    };
                    mismatches.push(format!(
                        "{}: text differs at byte {at}: ours {:?} vs transformers {:?}",
                        case.id,
                        context(&text),
                        context(expected)
                    ));
                    continue;
                }
                let ids: Vec<u32> = reference["ids"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|id| id.as_u64().unwrap() as u32)
                    .collect();
                if tokenizer.encode_text(&text).ids() != ids {
                    mismatches.push(format!("{}: token ids differ", case.id));
                }
            }
            (Err(error), None) => {
                // Both refuse: the template raises for this conversation in both.
                let _ = error;
            }
            (Ok(_), None) => {
                // Three failures are Python's alone: Jinja2 raises when a `for` loops over
                // None (minijinja loops zero times) and when `tojson` meets a generator
                // (minijinja's filters return lists), and transformers' immutable sandbox
                // refuses `list.append`, which plain Jinja2 and llama.cpp allow and kvlint
                // renders (Kimi K2's templates queue tool-call ids that way; the template
                // check notes it). Any other must fail here too.
                let error = reference["error"].as_str().unwrap_or_default();
                let python_only = error.contains("'NoneType' object is not iterable")
                    || error.contains("Object of type generator is not JSON serializable")
                    || error.contains("access to attribute 'append' of 'list' object is unsafe");
                if !python_only {
                    mismatches.push(format!(
                        "{}: transformers failed ({error}) but kvlint rendered",
                        case.id
                    ));
                }
            }
            (Err(error), Some(_)) => {
                mismatches.push(format!("{}: kvlint failed: {error}", case.id))
            }
        }
    }
    assert!(compared >= 100, "only {compared} cases rendered by both");
    assert!(
        mismatches.is_empty(),
        "{} of {} cases differ:\n{}",
        mismatches.len(),
        cases.len(),
        mismatches.join("\n")
    );
}

#[test]
fn encoding_chunk_by_chunk_equals_encoding_whole() {
    let assets = assets();
    // gpt-oss refuses reasoning beside content in a tool-calling message; leave it out here.
    let mut body = agent_body();
    body["messages"][2]
        .as_object_mut()
        .unwrap()
        .remove("reasoning_content");
    let request = Request::from_body(&body).unwrap();
    let (messages, tools) = chat_view(&request);
    for (tokenizer, template) in [
        ("qwen3", "tokenizers/qwen3/tokenizer_config.json"),
        (
            "llama3_1",
            "templates/meta-llama-Llama-3.1-8B-Instruct.jinja",
        ),
        (
            "deepseek_v3",
            "tokenizers/deepseek_v3/tokenizer_config.json",
        ),
        ("gptoss", "templates/openai-gpt-oss-120b.jinja"),
    ] {
        let tokenizer = Tokenizer::from_file(
            &assets
                .join("tokenizers")
                .join(tokenizer)
                .join("tokenizer.json"),
        )
        .unwrap();
        let text = ChatTemplate::from_file(&assets.join(template), now())
            .unwrap()
            .render(&messages, tools.as_deref(), true)
            .unwrap();
        let chunked = tokenizer.encode_text(&text);
        let whole = tokenizer.encode_uncached(&text);
        assert_eq!(chunked.ids(), whole.ids(), "{template}");
        assert_eq!(chunked.starts(), whole.starts(), "{template}");
        assert_eq!(tokenizer.decode(&chunked.ids()), text, "{template}");
        // Knowing the turn before changes nothing, wherever the two texts part: in text, at a
        // special token, inside one, or not at all.
        let specials: Vec<usize> = text.match_indices("<|").map(|(at, _)| at).collect();
        let mut edits = vec![0, text.len() / 2, text.len()];
        for &special in specials.iter().step_by(specials.len() / 4 + 1) {
            edits.extend([special.saturating_sub(1), special, special + 1, special + 3]);
        }
        for at in edits.into_iter().filter(|at| text.is_char_boundary(*at)) {
            for later in [
                format!("{}Z{}", &text[..at], &text[at..]),
                format!("{}<|im_end|>x", &text[..at]),
                text[..at].to_owned(),
            ] {
                let after = tokenizer.encode_text_after(&later, Some((&text, &chunked)));
                let expected = tokenizer.encode_uncached(&later);
                assert_eq!(after.ids(), expected.ids(), "{template}: edit at {at}");
                assert_eq!(after.len(), expected.len(), "{template}: edit at {at}");
                assert_eq!(
                    after.starts(),
                    expected.starts(),
                    "{template}: edit at {at}"
                );
            }
        }
    }
}

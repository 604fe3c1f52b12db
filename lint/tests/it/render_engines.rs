//! `kvlint render --engine vllm|sglang` against vLLM and SGLang themselves, on real traffic:
//! every turn of every corpus session (and of `fixtures/render/vllm-requests.jsonl`, bodies
//! made to touch each rule of vLLM's request handling, and `anthropic-blocks.jsonl`), through the chat templates and
//! tokenizers of Qwen3, DeepSeek-V3 and Llama 3.1 (and Qwen3.5's template, which takes
//! content as parts), rendered by kvlint and by the installed engine's own request parsing
//! and template application (`scripts/vllm_render.py`, `scripts/sglang_render.py`, in one
//! Python process each). Turn by turn: the same text and token ids, and the same turns
//! refused.
//!
//! Needs the assets of `scripts/fetch-assets.sh` and the venvs of `scripts/setup-vllm.sh` and
//! `scripts/setup-sglang.sh` (all run by `scripts/test.sh`); a missing venv fails the test under
//! `CI=true` and is a recorded skip elsewhere (`kvlint_fixtures::missing_oracle`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

const NOW: &str = "2026-11-29T10:00:00";

/// A model as vLLM serves it: a tokenizer of the assets, its chat template (the tokenizer
/// config's own, or a Jinja file of the assets or of `fixtures/` given as `--chat-template`) and the tool-call
/// parser it is served with.
struct Served {
    name: &'static str,
    tokenizer: &'static str,
    template: Option<&'static str>,
    tool_call_parser: &'static str,
    /// A gpt-oss model, which vLLM renders through Harmony rather than the template.
    gpt_oss: bool,
}

const SERVED: [Served; 6] = [
    Served {
        name: "qwen3",
        tokenizer: "qwen3",
        template: None,
        tool_call_parser: "hermes",
        gpt_oss: false,
    },
    Served {
        name: "deepseek_v3",
        tokenizer: "deepseek_v3",
        template: None,
        tool_call_parser: "deepseek_v3",
        gpt_oss: false,
    },
    // The Llama tokenizer of the assets has no `<|python_tag|>`, which `llama3_json` needs.
    Served {
        name: "llama3_1",
        tokenizer: "llama3_1",
        template: None,
        tool_call_parser: "pythonic",
        gpt_oss: false,
    },
    // A template that iterates content parts: vLLM hands it content as a list of parts.
    Served {
        name: "qwen3_5",
        tokenizer: "qwen3",
        template: Some("Qwen3.5-4B.jinja"),
        tool_call_parser: "hermes",
        gpt_oss: false,
    },
    // A template for tools without the OpenAI wrapper: SGLang renders it by retrying with each
    // tool's `function`; vLLM fails on it.
    Served {
        name: "flat_tools",
        tokenizer: "qwen3",
        template: Some("fixtures/render/flat-tools.jinja"),
        tool_call_parser: "hermes",
        gpt_oss: false,
    },
    // vLLM renders gpt-oss through Harmony (SGLang through its template, as any model).
    Served {
        name: "gpt_oss",
        tokenizer: "gptoss",
        template: Some("openai-gpt-oss-120b.jinja"),
        tool_call_parser: "openai",
        gpt_oss: true,
    },
];

/// The tokenizers that the transformers vLLM 0.32 pins (5.19) loads as another class than
/// their tokenizer.json describes: DeepSeek-V3's becomes a `LlamaTokenizer` whose Metaspace
/// pre-tokenizer drops the spaces. kvlint tokenizes as the tokenizer.json does; for these,
/// its token ids are compared with that, and vLLM's are checked to still differ. SGLang's own
/// `get_tokenizer` loads them as their tokenizer.json describes.
const TOKENIZED_UNLIKE_TOKENIZER_JSON: [&str; 1] = ["deepseek_v3"];

/// An engine's own request handling, run by a script in its venv.
struct Oracle {
    /// `--engine` of kvlint.
    engine: &'static str,
    /// The script under `scripts/` that renders cases through the engine.
    script: &'static str,
    python: PathBuf,
    /// The model config the script loads.
    model: PathBuf,
}

/// The oracle of `engine` (`vllm` or `sglang`), or `None` without its venv.
fn oracle(engine: &'static str) -> Option<Oracle> {
    let home = PathBuf::from(std::env::var_os("HOME")?).join(".cache/kvlint");
    let venv = |variable: &str, default: &str| {
        std::env::var_os(variable)
            .map_or_else(|| home.join(default), PathBuf::from)
            .join("bin/python")
    };
    let python = match engine {
        "vllm" => venv("KVLINT_VLLM_VENV", "vllm-venv"),
        _ => venv("KVLINT_SGLANG_VENV", "sglang-venv"),
    };
    let model = std::env::var_os("KVLINT_VLLM_MODEL")
        .map_or_else(|| home.join("tiny-qwen2-hf"), PathBuf::from);
    if !python.is_file() {
        kvlint_fixtures::missing_oracle(
            &format!("the {engine} venv ({})", python.display()),
            &format!("scripts/setup-{engine}.sh"),
        );
        return None;
    }
    assert!(
        model.is_dir(),
        "the {engine} venv is there but not the model {}: run scripts/setup-vllm.sh",
        model.display()
    );
    let script = if engine == "vllm" {
        "scripts/vllm_render.py"
    } else {
        "scripts/sglang_render.py"
    };
    Some(Oracle {
        engine,
        script,
        python,
        model,
    })
}

/// The sessions of `fixtures/render/` compared besides the corpus.
const FIXTURES: [&str; 5] = [
    "vllm-requests.jsonl",
    "anthropic-blocks.jsonl",
    "responses-items.jsonl",
    "anthropic-inline-system.jsonl",
    "harmony-tools.jsonl",
];

fn sessions() -> Vec<PathBuf> {
    let mut sessions = kvlint_fixtures::corpus_sessions();
    assert_eq!(sessions.len(), 38, "the corpus has 38 sessions");
    // Requests made to touch every rule of vLLM's request handling, one per line; Anthropic
    // blocks and Responses items the conversions treat their own ways; tool schemas and
    // messages that touch every rule of Harmony's rendering.
    let fixtures = kvlint_fixtures::repository().join("fixtures/render");
    sessions.extend(FIXTURES.iter().map(|file| fixtures.join(file)));
    sessions
}

/// `kvlint render --format json --engine ENGINE` of every session through one model.
fn kvlint_render(
    engine: &str,
    tokenizer_dir: &Path,
    template: &Path,
    sessions: &[PathBuf],
) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_kvlint"))
        .args([
            "render", "--format", "json", "--engine", engine, "--now", NOW,
        ])
        .arg("--chat-template")
        .arg(template)
        .arg("--tokenizer")
        .arg(tokenizer_dir.join("tokenizer.json"))
        .args(sessions)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}", String::from_utf8_lossy(&output.stderr)));
    assert_eq!(report["errors"], json!([]), "every session file reads");
    report
}

/// The request bodies of a session: one per line of its JSONL file.
fn bodies(session: &Path) -> Vec<Value> {
    std::fs::read_to_string(session)
        .unwrap()
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Runs every case through the engine (and, for vLLM, reads what it reads from each
/// template), in one Python process.
fn oracle_render(oracle: &Oracle, cases: Vec<Value>, templates: &[PathBuf]) -> Value {
    let script = kvlint_fixtures::repository().join(oracle.script);
    let model = &oracle.model;
    let mut child = Command::new(&oracle.python)
        .arg(script)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let input = json!({"model_dir": model, "cases": cases, "templates": templates});
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.to_string().as_bytes()));
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{} failed: {}",
        oracle.script,
        String::from_utf8_lossy(&output.stderr)
    );
    writer.join().unwrap().unwrap();
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn kvlint_renders_every_turn_as_vllm_does() {
    if let Some(vllm) = oracle("vllm") {
        renders_every_turn_as(&vllm);
    }
}

#[test]
fn kvlint_renders_every_turn_as_sglang_does() {
    if let Some(sglang) = oracle("sglang") {
        renders_every_turn_as(&sglang);
    }
}

fn renders_every_turn_as(oracle: &Oracle) {
    let engine = oracle.engine;
    let assets =
        kvlint_fixtures::assets().expect("test assets missing: run scripts/fetch-assets.sh");
    let sessions = sessions();
    // kvlint's turns, by (model, session file name, turn index).
    let mut kvlint_turns: BTreeMap<(String, String, u64), Value> = BTreeMap::new();
    let mut cases = Vec::new();
    for served in &SERVED {
        if served.gpt_oss && engine != "vllm" {
            continue;
        }
        let name = served.name;
        let tokenizer_dir = assets.join("tokenizers").join(served.tokenizer);
        let template = served.template.map_or_else(
            || tokenizer_dir.join("tokenizer_config.json"),
            |file| match file.strip_prefix("fixtures/") {
                Some(_) => kvlint_fixtures::repository().join(file),
                None => assets.join("templates").join(file),
            },
        );
        let report = kvlint_render(engine, &tokenizer_dir, &template, &sessions);
        for (session, rendered) in sessions.iter().zip(report["sessions"].as_array().unwrap()) {
            let file = session.file_name().unwrap().to_string_lossy().into_owned();
            assert!(rendered["path"].as_str().unwrap().ends_with(&file));
            assert!(
                rendered["renderer"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("engine:{engine}:"))
            );
            let bodies = bodies(session);
            for turn in rendered["turns"].as_array().unwrap() {
                let index = turn["index"].as_u64().unwrap();
                let key = (name.to_owned(), file.clone(), index);
                // Each body goes to the engine's endpoint for its format.
                let endpoint = match turn["format"].as_str() {
                    Some("openai-chat") => Some("chat"),
                    Some("anthropic-messages") => Some("messages"),
                    Some("openai-responses") => Some("responses"),
                    _ => None,
                };
                if let Some(endpoint) = endpoint {
                    let mut case = json!({
                        "endpoint": endpoint,
                        "id": [name, file, index],
                        "tokenizer_dir": tokenizer_dir,
                        "tool_call_parser": served.tool_call_parser,
                        "body": bodies[index as usize],
                        "now": NOW,
                    });
                    if served.template.is_some() {
                        case["chat_template_file"] = json!(template);
                    }
                    if served.gpt_oss {
                        case["model_type"] = json!("gpt_oss");
                    }
                    cases.push(case);
                } else {
                    // The gateway's chat view renders, or the engine's chat path refuses it
                    // (a built-in Responses tool has no function name).
                    assert!(
                        turn["error"]
                            .as_str()
                            .is_none_or(|error| error.contains("refuses the request")),
                        "{name} {file} turn {index}: {}",
                        turn["error"]
                    );
                }
                kvlint_turns.insert(key, turn.clone());
            }
        }
    }
    let results = oracle_render(oracle, cases, &[]);
    let results = results["cases"].as_array().unwrap();
    let mut mismatches = Vec::new();
    let mut refused_by_both = 0;
    let mut retokenized = 0;
    // Pairs of (model, session) with a turn that differs or that one side refuses.
    let mut pairs_not_matching = std::collections::BTreeSet::new();
    for result in results {
        let id = &result["id"];
        let key = (
            id[0].as_str().unwrap().to_owned(),
            id[1].as_str().unwrap().to_owned(),
            id[2].as_u64().unwrap(),
        );
        let ours = &kvlint_turns[&key];
        let place = format!("{} {} turn {}", key.0, key.1, key.2);
        let mismatches_before = mismatches.len();
        let oracle_failure = result["error"]
            .as_str()
            .is_some_and(|error| error.starts_with("oracle failure"));
        assert!(!oracle_failure, "{place}: {}", result["error"]);
        match (result.get("error"), ours.get("error")) {
            (Some(_), Some(_)) => {
                refused_by_both += 1;
                pairs_not_matching.insert((key.0.clone(), key.1.clone()));
            }
            (Some(theirs), None) => {
                mismatches.push(format!(
                    "{place}: {engine} refuses ({theirs}), kvlint renders"
                ));
            }
            (None, Some(ours)) => {
                mismatches.push(format!(
                    "{place}: kvlint refuses ({ours}), {engine} renders"
                ));
            }
            (None, None) => {
                if result["text"] != ours["text"] {
                    let (theirs, ours) = (
                        result["text"].as_str().unwrap(),
                        ours["text"].as_str().unwrap(),
                    );
                    let at = theirs
                        .char_indices()
                        .zip(ours.chars())
                        .find(|((_, a), b)| a != b)
                        .map_or(theirs.len().min(ours.len()), |((at, _), _)| at);
                    let window = |text: &str| {
                        let around: String = text
                            .char_indices()
                            .filter(|(index, _)| index + 60 >= at && *index < at + 60)
                            .map(|(_, character)| character)
                            .collect();
                        format!("{around:?}")
                    };
                    mismatches.push(format!(
                        "{place}: text differs at byte {at}:\n  {engine:6} {}\n  kvlint {}",
                        window(theirs),
                        window(ours)
                    ));
                } else if engine == "vllm"
                    && TOKENIZED_UNLIKE_TOKENIZER_JSON.contains(&key.0.as_str())
                {
                    if result["tokenizer_json_ids"] != ours["token_ids"] {
                        mismatches.push(format!(
                            "{place}: token ids differ from the tokenizer.json's"
                        ));
                    }
                    if result["token_ids"] != result["tokenizer_json_ids"] {
                        retokenized += 1;
                    }
                } else if result["token_ids"] != ours["token_ids"] {
                    mismatches.push(format!("{place}: same text, different token ids"));
                }
            }
        }
        if mismatches.len() > mismatches_before {
            pairs_not_matching.insert((key.0.clone(), key.1.clone()));
        }
    }
    // A text without spaces tokenizes alike either way; across all turns, some must differ.
    assert!(
        engine != "vllm" || retokenized > 0,
        "{engine} now tokenizes as the tokenizer.json does: empty TOKENIZED_UNLIKE_TOKENIZER_JSON"
    );
    let chat_pairs: std::collections::BTreeSet<(String, String)> = results
        .iter()
        .filter(|result| !FIXTURES.contains(&result["id"][1].as_str().unwrap()))
        .map(|result| {
            (
                result["id"][0].as_str().unwrap().to_owned(),
                result["id"][1].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    pairs_not_matching.retain(|(_, file)| !FIXTURES.contains(&file.as_str()));
    eprintln!(
        "{} turns compared with {engine} ({} refused by both; {} tokenized by {engine} unlike the \
         tokenizer.json says); {} of {} corpus session × template pairs \
         render every turn as {engine} does",
        results.len(),
        refused_by_both,
        retokenized,
        chat_pairs.len() - pairs_not_matching.len(),
        chat_pairs.len(),
    );
    assert!(
        mismatches.is_empty(),
        "{} turns differ from {engine}:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

#[test]
fn content_format_and_developer_role_are_read_from_templates_as_vllm_reads_them() {
    let Some(vllm) = oracle("vllm") else {
        return;
    };
    let assets =
        kvlint_fixtures::assets().expect("test assets missing: run scripts/fetch-assets.sh");
    let mut templates: Vec<PathBuf> = std::fs::read_dir(assets.join("templates"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "jinja")
        })
        .collect();
    templates.sort();
    assert!(templates.len() > 50, "llama.cpp's collection of templates");
    let facts = oracle_render(&vllm, Vec::new(), &templates);
    let mut differences = Vec::new();
    let mut parts = 0;
    for (path, theirs) in templates.iter().zip(facts["templates"].as_array().unwrap()) {
        let now = chrono::NaiveDate::from_ymd_opt(2026, 11, 29)
            .and_then(|date| date.and_hms_opt(10, 0, 0))
            .unwrap();
        let template = kvlint_render::ChatTemplate::from_file(path, now).unwrap();
        let server = kvlint_render::VllmServer::for_template(&template);
        let name = path.file_name().unwrap().to_string_lossy();
        let takes_parts = theirs["content_format"] == "openai";
        parts += usize::from(takes_parts);
        if server.takes_content_as_parts(false) != takes_parts {
            differences.push(format!(
                "{name}: vLLM's content format is {}",
                theirs["content_format"]
            ));
        }
        if Value::Bool(server.knows_developer_role(false)) != theirs["developer_role"] {
            differences.push(format!(
                "{name}: vLLM's developer role support is {}",
                theirs["developer_role"]
            ));
        }
    }
    eprintln!(
        "{} templates, {parts} of them take content as parts",
        templates.len()
    );
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

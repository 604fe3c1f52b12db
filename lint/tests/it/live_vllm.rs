//! kvlint against a real vLLM (CPU build from PyPI, `scripts/setup-vllm.sh`) serving a tiny
//! random-weight Qwen2 with the real tokenizer and chat template: `kvlint probe` observes
//! prefix caching in 32-token blocks, never the last prompt token; `kvlint render --engine
//! vllm` gives the token ids the server's own `/tokenize` gives for the corpus's chat turns.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::common;
use common::post;

/// The vLLM venv's python and the tiny model, when `scripts/setup-vllm.sh` has run.
fn vllm() -> (PathBuf, PathBuf) {
    let home = PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/kvlint");
    let python = std::env::var_os("KVLINT_VLLM_VENV")
        .map_or_else(|| home.join("vllm-venv"), PathBuf::from)
        .join("bin/python");
    let model = std::env::var_os("KVLINT_VLLM_MODEL")
        .map_or_else(|| home.join("tiny-qwen2-hf"), PathBuf::from);
    assert!(
        python.is_file() && model.is_dir(),
        "vLLM missing: run scripts/setup-vllm.sh"
    );
    (python, model)
}

/// vLLM's API server in its own process group, stopped with all its workers when dropped.
struct Server(kvlint_fixtures::Served);

impl Drop for Server {
    fn drop(&mut self) {
        let group = format!("-{}", self.0.child.id());
        let _ = Command::new("kill")
            .args(["-s", "TERM", "--", &group])
            .status();
        std::thread::sleep(std::time::Duration::from_secs(3));
        // Workers and the resource tracker that outlive the server.
        let _ = Command::new("kill")
            .args(["-s", "KILL", "--", &group])
            .status();
    }
}

fn start() -> Server {
    start_with(&[])
}

/// The server with `more` arguments (later ones win).
fn start_with(more: &[&str]) -> Server {
    let (python, model) = vllm();
    let port = kvlint_fixtures::free_port();
    let child = Command::new(python)
        .args(["-m", "vllm.entrypoints.openai.api_server", "--model"])
        .arg(model)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args([
            "--enforce-eager",
            "--enable-prefix-caching",
            "--enable-prompt-tokens-details",
            "--block-size",
            "32",
        ])
        .args([
            "--enable-auto-tool-choice",
            "--tool-call-parser",
            "hermes",
            "--max-model-len",
            "4096",
        ])
        .args(more)
        .env("HF_HUB_OFFLINE", "1")
        .env("VLLM_CPU_KVCACHE_SPACE", "1")
        .env("VLLM_HOST_IP", "127.0.0.1")
        // One unpinned thread: the CPU backend otherwise pins busy-waiting threads to every
        // core, starving everything else on a 2-core machine.
        .env("VLLM_CPU_OMP_THREADS_BIND", "nobind")
        .env("OMP_NUM_THREADS", "1")
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let served = kvlint_fixtures::Served {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    Server(served.wait_until_healthy_for("/health", std::time::Duration::from_secs(300)))
}

/// One server for both checks (it takes ~40 s and 4.6 GB to start).
#[test]
fn the_live_server_caches_and_tokenizes_as_kvlint_predicts() {
    let server = start();
    observed_equals_predicted_in_whole_blocks(&server);
    render_is_the_servers_own_tokenization_on_the_corpus(&server);
    drop(server);
    a_small_kv_cache_evicts_as_the_simulation_says();
}

/// Blocks of the small server's KV cache; vLLM keeps one of them as its null block.
const SMALL_CACHE_BLOCKS: usize = 16;

/// A server with a KV cache of 16 blocks of 32 tokens, sent three interleaved sessions that
/// need more: what it serves from cache, request by request, is what `kvlint simulate` with
/// vLLM's block pool of 15 blocks says, from the recording of the same run.
fn a_small_kv_cache_evicts_as_the_simulation_says() {
    let blocks = SMALL_CACHE_BLOCKS.to_string();
    let server = start_with(&[
        "--num-gpu-blocks-override",
        &blocks,
        "--max-model-len",
        "448",
    ]);
    let folder = std::env::temp_dir().join(format!("kvlint-vllm-evicts-{}", std::process::id()));
    let workload = common::interleaved_workload(3, 4);
    let (_, model) = vllm();
    let served_model = model.to_string_lossy().into_owned();
    let workload: Vec<(usize, Value)> = workload
        .into_iter()
        .map(|(session, mut body)| {
            body["model"] = json!(served_model);
            (session, body)
        })
        .collect();
    let observed: Vec<u64> = common::replay(&server.0.url, &workload, &folder)
        .into_iter()
        .flatten()
        .collect();
    drop(server);
    let usable = (SMALL_CACHE_BLOCKS - 1).to_string();
    let template = model.join("chat_template.jinja");
    let tokenizer = model.join("tokenizer.json");
    let results = common::simulated(
        &folder,
        &[
            "--engine",
            "vllm:block=32",
            "--cache",
            &usable,
            "--replicas",
            "1",
            "--routing",
            "round-robin",
            "--serving-engine",
            "vllm",
            "--chat-template",
            template.to_str().unwrap(),
            "--tokenizer",
            tokenizer.to_str().unwrap(),
        ],
    );
    let simulated: Vec<u64> = results[0]["served_per_request"]
        .as_array()
        .unwrap()
        .iter()
        .map(|value| value.as_u64().unwrap())
        .collect();
    eprintln!(
        "vLLM, 15 blocks: observed {observed:?}, simulated {simulated:?}, evicted {}",
        results[0]["evicted_blocks"]
    );
    assert!(
        results[0]["evicted_blocks"].as_u64().unwrap() > 0,
        "the workload must evict"
    );
    assert_eq!(simulated, observed);
    std::fs::remove_dir_all(&folder).ok();
}

fn observed_equals_predicted_in_whole_blocks(server: &Server) {
    let output = Command::new(env!("CARGO_BIN_EXE_kvlint"))
        .current_dir(kvlint_fixtures::repository())
        .args([
            "probe",
            "--format",
            "json",
            "--timeout",
            "120",
            "--engine-url",
            &server.0.url,
        ])
        .args([
            "fixtures/cache/answers-sent-back.jsonl",
            "fixtures/examples/coding-agent.jsonl",
        ])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&output.stderr)));
    assert_eq!(
        report["sessions"][0]["engine_kind"], "vllm",
        "detected from /metrics"
    );
    let mut hits = 0;
    for session in report["sessions"].as_array().unwrap() {
        for turn in session["turns"].as_array().unwrap() {
            assert_eq!(turn["match"], true, "{turn}");
            let cached = turn["observed_cached_tokens"].as_u64().unwrap();
            assert_eq!(cached % 32, 0, "whole 32-token blocks: {turn}");
            assert!(
                cached < turn["prompt_tokens"].as_u64().unwrap(),
                "never the last token: {turn}"
            );
            hits += usize::from(cached > 0);
        }
    }
    assert!(hits >= 2, "{report}");
    assert_eq!(output.status.code(), Some(0), "{report}");
}

/// Every corpus turn in OpenAI chat form, rendered by kvlint with the served model's template
/// and tokenizer, against the server's `/tokenize` with the turn's messages and tools (vLLM's
/// `TokenizeChatRequest`: the same request parsing and template application as its chat
/// endpoint, no generation); every Anthropic Messages turn against the server's own count.
fn render_is_the_servers_own_tokenization_on_the_corpus(server: &Server) {
    let (_, model) = vllm();
    let sessions = kvlint_fixtures::corpus_sessions();
    let output = Command::new(env!("CARGO_BIN_EXE_kvlint"))
        .args(["render", "--format", "json", "--engine", "vllm"])
        .arg("--chat-template")
        .arg(model.join("chat_template.jinja"))
        .arg("--tokenizer")
        .arg(model.join("tokenizer.json"))
        .args(&sessions)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&output.stderr)));
    let url = &server.0.url;
    let served_model = model.to_string_lossy().into_owned();
    let (mut equal, mut refused_by_both, mut too_long) = (0, 0, 0);
    let mut mismatches = Vec::new();
    for (session, rendered) in sessions.iter().zip(report["sessions"].as_array().unwrap()) {
        let file = session.file_name().unwrap().to_string_lossy();
        let bodies: Vec<Value> = std::fs::read_to_string(session)
            .unwrap()
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        for turn in rendered["turns"].as_array().unwrap() {
            let index = turn["index"].as_u64().unwrap();
            let body = &bodies[index as usize];
            // Chat turns against `/tokenize`, Anthropic turns against the token count of
            // `/v1/messages/count_tokens` (vLLM's conversion, then the same chat path).
            let (path, request, answer_of): (_, _, fn(&Value) -> Value) = match turn["format"]
                .as_str()
            {
                Some("openai-chat") => {
                    let mut tokenize = json!({"model": served_model, "messages": body["messages"]});
                    if let Some(tools) = body.get("tools") {
                        tokenize["tools"] = tools.clone();
                    }
                    ("/tokenize", tokenize, |answer| answer["tokens"].clone())
                }
                Some("anthropic-messages") => {
                    let mut count = body.clone();
                    count["model"] = json!(served_model);
                    ("/v1/messages/count_tokens", count, |answer| {
                        answer["input_tokens"].clone()
                    })
                }
                _ => continue,
            };
            let ours = if path == "/tokenize" {
                turn["token_ids"].clone()
            } else {
                json!(turn["token_ids"].as_array().map_or(0, Vec::len))
            };
            let place = format!("{file} turn {index}");
            match (post(url, path, &request), turn.get("error")) {
                (Ok(answer), None) => {
                    if answer_of(&answer) == ours {
                        equal += 1;
                    } else {
                        mismatches.push(format!("{place}: token ids differ"));
                    }
                }
                (Err(theirs), _) if theirs.contains("maximum context length") => too_long += 1,
                (Err(_), Some(_)) => refused_by_both += 1,
                (Err(theirs), None) => {
                    mismatches.push(format!("{place}: vLLM refuses ({theirs}), kvlint renders"));
                }
                (Ok(_), Some(ours)) => {
                    mismatches.push(format!("{place}: kvlint refuses ({ours}), vLLM tokenizes"));
                }
            }
        }
    }
    eprintln!(
        "live vLLM: {equal} corpus turns with equal token ids (chat) or counts (Anthropic), \
         {refused_by_both} refused by both, {too_long} over the served context length"
    );
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    assert!(equal >= 100, "most corpus chat turns are compared");
}

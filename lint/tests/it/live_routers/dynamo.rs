//! NVIDIA Dynamo 1.6.1 (`dynamo-kv`) against `kvlint simulate`'s model of it: its frontend's
//! KV router in front of two of its mock engines (not llama-server: Dynamo routes only to
//! workers it discovers), see
//! [`dynamo_kv_router_chooses_what_the_simulation_chooses_where_costs_differ`]; and its own
//! offline replay of kvlint's hashed trace against `kvlint simulate` on that trace.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use kvlint_fixtures::Served;
use serde_json::{Value, json};

use super::{calibrated, lists_a_model, log_field, model_id, plain_log, workload};
use crate::common;

/// `python -m dynamo.MODULE ARGS` from the Dynamo venv, its output into `log`, discovering
/// its peers through files in `discovery` (no etcd, no NATS).
fn dynamo(python: &Path, module: &str, args: &[&str], discovery: &Path, log: &Path) -> Served {
    let log = std::fs::File::create(log).unwrap();
    let child = Command::new(python)
        .args(["-m", &format!("dynamo.{module}")])
        .args(args)
        .args(["--discovery-backend", "file"])
        .env("DYN_FILE_KV", discovery)
        .env("HF_HUB_OFFLINE", "1")
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    Served {
        child,
        url: String::new(),
    }
}

/// NVIDIA Dynamo 1.6.1's frontend with its KV router (`--router-mode kv`, temperature 0: the
/// lowest cost wins, equal costs drawn uniformly) in front of two of Dynamo's mock engines
/// (vLLM-like paged blocks of 32 tokens with prefix caching, on the tiny model's tokenizer and
/// chat template), sent the workload one request after the other. The frontend logs each
/// decision (`Selected worker … request_id=… worker_id=…`); the responses' ids name the
/// requests. `kvlint simulate --calibrate --routing dynamo-kv` on those decisions:
///
/// - where the model's lowest cost is one worker's alone (a prefix cached on one worker), the
///   router chose that worker, exactly;
/// - where costs tie (no overlap anywhere: the first turn of a session whose prompt no worker
///   holds), the router's worker is one of the tied, as a uniform draw would be;
/// - the prompt tokens the mock engines report serving from cache are the simulated ones.
///
/// Tolerance: none on these sequential requests. The router learns the engines' cached blocks
/// from KV events, which arrive after the answer; a request sent before its predecessor's
/// event would see less overlap than the model, so the requests are sent 300 ms apart.
#[test]
fn dynamo_kv_router_chooses_what_the_simulation_chooses_where_costs_differ() {
    let Some(python) = kvlint_fixtures::router("dynamo-1.6.1", "bin/python") else {
        kvlint_fixtures::missing_oracle("dynamo-1.6.1", "scripts/setup-routers.sh");
        return;
    };
    let model = std::env::var_os("KVLINT_VLLM_MODEL").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/kvlint/tiny-qwen2-hf"),
        PathBuf::from,
    );
    if !model.join("tokenizer.json").is_file() {
        kvlint_fixtures::missing_oracle("the tiny model in HF format", "scripts/setup-vllm.sh");
        return;
    }
    let folder = std::env::temp_dir().join(format!("kvlint-routers-dynamo-{}", std::process::id()));
    let discovery = folder.join("discovery");
    std::fs::create_dir_all(&discovery).unwrap();
    let model_path = model.to_str().unwrap();
    let _engines = dynamo(
        &python,
        "mocker",
        &[
            "--model-path",
            model_path,
            "--block-size",
            "32",
            "--num-gpu-blocks-override",
            "4096",
            "--enable-prefix-caching",
            "--num-workers",
            "2",
        ],
        &discovery,
        &folder.join("mocker.log"),
    );
    let port = kvlint_fixtures::free_port();
    let log = folder.join("frontend.log");
    let _frontend = dynamo(
        &python,
        "frontend",
        &[
            "--http-host",
            "127.0.0.1",
            "--http-port",
            &port.to_string(),
            "--router-mode",
            "kv",
            "--router-temperature",
            "0",
        ],
        &discovery,
        &log,
    );
    let url = format!("http://127.0.0.1:{port}");
    // Up once both engines have registered and the frontend lists their model.
    let registered = || {
        std::fs::read_dir(discovery.join("v1/instances"))
            .into_iter()
            .flatten()
            .filter(|entry| {
                entry.as_ref().is_ok_and(|entry| {
                    entry
                        .file_name()
                        .to_string_lossy()
                        .starts_with("dynamo%2Fbackend%2Fgenerate")
                })
            })
            .count()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while registered() < 2 || !lists_a_model(&url) {
        assert!(
            std::time::Instant::now() < deadline,
            "Dynamo did not come up: see {}",
            folder.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    // The frontend's watch of the discovery folder sees both engines.
    std::thread::sleep(std::time::Duration::from_secs(2));

    let workload = workload(&model_id(&url));
    let mut answers = Vec::new();
    for (_, body) in &workload {
        // The router learns what an engine cached from its KV events, published after the
        // answer: a pause lets each request's events arrive before the next is sent (one
        // sent 28 ms after the one before saw none of them, a run on a loaded machine).
        std::thread::sleep(std::time::Duration::from_millis(300));
        let time = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let answer = common::post(&url, "/v1/chat/completions", body).unwrap();
        answers.push((answer, time));
    }
    let text = plain_log(&log);
    let chosen: BTreeMap<&str, &str> = text
        .lines()
        .filter(|line| line.contains("Selected worker"))
        .map(|line| (log_field(line, "request_id"), log_field(line, "worker_id")))
        .collect();
    let sessions = folder.join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let mut files: BTreeMap<usize, String> = BTreeMap::new();
    for ((session, body), (answer, time)) in workload.iter().zip(&answers) {
        let id = answer["id"].as_str().unwrap();
        let worker = chosen
            .get(id.trim_start_matches("chatcmpl-"))
            .unwrap_or_else(|| panic!("no decision logged for {id}: see {}", log.display()));
        let line = json!({"request": body, "response": answer, "time": time,
                          "replica": format!("worker-{worker}")});
        let file = files.entry(*session).or_default();
        file.push_str(&line.to_string());
        file.push('\n');
    }
    for (session, text) in files {
        std::fs::write(sessions.join(format!("session-{session:02}.jsonl")), text).unwrap();
    }
    // The mock engines answer in tens of milliseconds: each request arrives after the one
    // before it was served and its blocks published, as it does in the model at this speed.
    let args = [
        "--prefill-tps",
        "1000000",
        "--routing",
        "dynamo-kv",
        "--engine",
        "vllm:block=32",
        "--cache",
        "4096",
        "--serving-engine",
        "vllm",
        "--chat-template",
        model.join("chat_template.jinja").to_str().unwrap(),
        "--tokenizer",
        model.join("tokenizer.json").to_str().unwrap(),
    ]
    .map(String::from);
    let calibration = calibrated(&sessions, &args);
    eprintln!(
        "dynamo-1.6.1 against {}: agreement {}; served {}",
        calibration["policy"], calibration["agreement"], calibration["served"]
    );
    let requests = calibration["requests"].as_array().unwrap();
    assert_eq!(requests.len(), workload.len());
    for request in requests {
        let recorded = &request["recorded_replica"];
        match request["tie"].as_array() {
            None => assert_eq!(recorded, &request["simulated_replica"], "{request}"),
            Some(tie) => assert!(tie.contains(recorded), "{request}"),
        }
        assert_eq!(
            request["recorded_served_tokens"], request["simulated_served_tokens"],
            "{request}"
        );
    }

    // Dynamo's own offline replay (its simulator, compiled into ai-dynamo-runtime: two mock
    // workers behind the KV router) of kvlint's hashed trace of these sessions, against
    // `kvlint simulate --routing dynamo-kv` on the same trace.
    let trace = folder.join("trace.jsonl");
    let (code, _, stderr) = common::kvlint(&[
        "workload",
        sessions.to_str().unwrap(),
        "--serving-engine",
        "vllm",
        "--chat-template",
        model.join("chat_template.jinja").to_str().unwrap(),
        "--tokenizer",
        model.join("tokenizer.json").to_str().unwrap(),
        "--export-trace",
        "mooncake",
        "--block-size",
        "32",
        "-o",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let replay = Command::new(&python)
        .arg("-c")
        .arg(DYNAMO_REPLAY)
        .arg(&trace)
        .output()
        .unwrap();
    let replayed: f64 = String::from_utf8_lossy(&replay.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&replay.stderr)));
    let output = Command::new(env!("CARGO_BIN_EXE_kvlint"))
        .arg("simulate")
        .arg("--hashed-trace")
        .arg(&trace)
        .args([
            "--hashed-block",
            "32",
            "--replicas",
            "2",
            "--routing",
            "dynamo-kv",
        ])
        .args([
            "--engine",
            "vllm:block=32",
            "--cache",
            "4096",
            "--arrival",
            "recorded",
        ])
        .args([
            "--prefill-tps",
            "1000000",
            "--format",
            "json",
            "--no-trace-cache",
        ])
        .output()
        .unwrap();
    let simulated: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&output.stderr)));
    let share = simulated[0]["served_tokens"].as_f64().unwrap()
        / simulated[0]["prompt_tokens"].as_f64().unwrap();
    eprintln!("Dynamo's replay: prefix_cache_reused_ratio {replayed}; kvlint simulate: {share}");
    // Both count whole blocks of the same trace: equal up to the ratio's rounding.
    assert!(
        (replayed - share).abs() < 1e-9,
        "{replayed} against {share}"
    );
    std::fs::remove_dir_all(&folder).ok();
}

/// Dynamo's offline replay of the Mooncake trace named by the first argument, as the mock
/// engines above are set up: prints its `prefix_cache_reused_ratio`
/// (`dynamo/replay/reporting.py`), the share of input tokens served from cache.
const DYNAMO_REPLAY: &str = "
import sys
from dynamo.replay.api import run_trace_replay
report = run_trace_replay([sys.argv[1]], num_workers=2, router_mode='kv_router',
    trace_block_size=32, replay_mode='offline',
    extra_engine_args={'engine': {'num_gpu_blocks': 4096, 'block_size': 32,
                                  'enable_prefix_caching': True}})
print(report.to_dict()['summary']['prefix_cache_reused_ratio'])
";

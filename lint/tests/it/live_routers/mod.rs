//! The real routers against `kvlint simulate`'s models of them: Shepherd Model Gateway 1.13.0,
//! sglang-router 0.3.2 and vllm-router 0.1.17 (`scripts/setup-routers.sh`, one venv each) with
//! `--policy cache_aware`, each in front of two llama-server replicas as generic OpenAI
//! workers (their SGLang-specific probes 404 and they fall back to `/v1/models`).
//!
//! Each replica has its own `kvlint proxy --record`, and the router's `--worker-urls` are the
//! two proxies in a fixed order, so each recording says exactly which replica served which
//! request. Each request's last message is its own, which joins the two recordings back into
//! the client's sessions (sglang-router rewrites the body it forwards and drops fields such
//! as `user`; it keeps the messages): each line the body the client sent and when, the answer
//! its replica's proxy recorded, and the replica. `kvlint simulate --calibrate` then replays
//! those arrivals through the matching named policy, teacher-forced (the model is told each
//! recorded decision, so one disagreement does not cascade). The traffic is sequential, so
//! every load is 0 when a request is routed and no load gate fires. For every router:
//!
//! - the served tokens each engine reported are the ones simulated, exactly;
//! - every session stays on one replica.
//!
//! Per router, what was seen here and what is compared exactly:
//!
//! - **smg** (`smg-cache-aware:warmup=0`, smg's warm-up slice off): it logs its own decision
//!   per request at debug level (`Cache-aware selection … branch=… worker=…`). Its tree hits
//!   (`tree_match`) are deterministic: each goes to the replica the model chooses, the model's
//!   only choice. Its misses (`expected_wait_fallback`) go to the least expected wait, which
//!   for workers that report no load, as llama-server here, is the fewest requests in flight,
//!   equals drawn at random (`smg-cache-aware`'s default `miss=wait`): each miss must be one
//!   of the model's tied replicas, and which one it was is printed (over three runs the misses
//!   of sessions 2 and 3 went to the other replica once and to session 0's twice).
//! - **sglang-router** (`sglang-cache-aware`, whose default `miss=load` is sglang-router
//!   0.3.2's rule): every request goes to one replica, misses included, the replica varying
//!   from run to run. That is its source, not a quirk of these workers: below the threshold it
//!   takes the worker with the fewest requests in flight, the first of equals in its worker
//!   list, whose order comes from a `DashMap` over random worker ids (drawn at each start);
//!   one request after the other, every load is 0, so every miss goes to the first worker and
//!   every hit to the worker holding it, the same one (see `sglang_cache_aware.rs`; checked
//!   live by hand with `--log-level debug`: a miss sent while that worker had a request in
//!   flight went to the other). The workers registering under the model `unknown` does not
//!   matter: the tree is keyed by the workers' model and holds both. The first request is a
//!   tie the model cannot know (it prints which replica took it); teacher-forced, the model
//!   learns the router's order from it, and every later request, misses included, is
//!   compared exactly. Its load gate, with small thresholds on a burst of concurrent
//!   requests, is compared exactly too
//!   (`cache_aware.rs`, `sglang_router_load_gate_fires_where_the_simulation_says`).
//! - **vllm-router** (`sglang-cache-aware:flavor=vllm-router`): its cache-aware policy routes
//!   on token ids from its own chat renderer, which it cannot build for llama-server's model:
//!   its counter `vllm_router_prefix_routing_decisions_total{outcome="missing_tokens"}` counts
//!   every request, and the test checks that, so here its tree is never consulted and it
//!   cannot be compared with the model's; served tokens and stickiness still are.
//!
//! - **NVIDIA Dynamo 1.6.1** (`dynamo-kv`): in `dynamo.rs`.
//!
//! Routers that cannot run here (AIBrix, llm-d: Go services on Kubernetes) are checked
//! against their sources in the routers' unit tests instead.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use kvlint_fixtures::Served;
use serde_json::{Value, json};

use crate::common;

mod cache_aware;
mod dynamo;

/// A router as `scripts/setup-routers.sh` installs it and as the test launches it.
struct Router {
    /// Its venv and command in it.
    venv: &'static str,
    command: &'static str,
    /// What goes before the common flags (`launch`), and after them.
    subcommand: &'static [&'static str],
    options: &'static [&'static str],
    /// `kvlint simulate --routing`'s policy for it.
    policy: &'static str,
}

const SGLANG_ROUTER: Router = Router {
    venv: "sglang-router-0.3.2",
    command: "bin/sglang-router",
    subcommand: &["launch"],
    options: &[],
    policy: "sglang-cache-aware",
};

const VLLM_ROUTER: Router = Router {
    venv: "vllm-router-0.1.17",
    command: "bin/vllm-router",
    subcommand: &[],
    options: &[],
    policy: "sglang-cache-aware:flavor=vllm-router",
};

/// smg with its warm-up slice off, which the model does not have.
const SMG: Router = Router {
    venv: "smg-1.13.0",
    command: "bin/smg",
    subcommand: &["launch"],
    options: &[
        "--worker-warmup-secs",
        "0",
        "--worker-warmup-divert-every",
        "0",
    ],
    policy: "smg-cache-aware:warmup=0",
};

/// The router's command, or `None` after [`kvlint_fixtures::missing_oracle`] (which fails
/// under CI).
fn installed(router: &Router) -> Option<PathBuf> {
    let command = kvlint_fixtures::router(router.venv, router.command);
    if command.is_none() {
        kvlint_fixtures::missing_oracle(router.venv, "scripts/setup-routers.sh");
    }
    command
}

/// The workload's sessions.
const SESSIONS: usize = 4;

/// Four sessions of five turns, sent interleaved (turn 0 of each, then turn 1, …). Sessions
/// 0 and 1 share a long system prompt (session 1's first turn is a tree hit on session 0's
/// replica); sessions 2 and 3 each have their own, of different lengths, so their first turns
/// are misses. Each body carries the model id; each last message is the request's own.
fn workload(model: &str) -> Vec<(usize, Value)> {
    let shared = "You are a careful coding agent working in a large repository. Read files \
                  before editing them and run the tests after each change."
        .repeat(2);
    let systems: [String; SESSIONS] = [
        shared.clone(),
        shared,
        "Reviewer: point out risky changes in the diff you are shown.".repeat(2),
        "Translator: answer in French.".to_owned(),
    ];
    let mut histories: Vec<Vec<Value>> = systems
        .iter()
        .map(|system| vec![json!({"role": "system", "content": system})])
        .collect();
    let mut bodies = Vec::new();
    for turn in 0..5 {
        for (session, history) in histories.iter_mut().enumerate() {
            if turn > 0 {
                history.push(json!({"role": "assistant", "content": format!(
                    "Session {session}: step {} is done.", turn - 1
                )}));
            }
            history.push(json!({"role": "user", "content": format!(
                "Session {session}, step {turn}: look at src/module_{turn}.rs next."
            )}));
            bodies.push((
                session,
                json!({"model": model, "messages": history, "max_tokens": 2, "temperature": 0}),
            ));
        }
    }
    bodies
}

/// Each llama-server replica's slots and prompt cache, and `kvlint simulate`'s engine for it:
/// a slot per session and no prompt cache, so that what a replica serves is decided by which
/// sessions it was sent (llama.cpp gives a request the idle slot sharing most with it), not by
/// the prompt cache's saves of idle slots (`--cache-idle-slots`), which the model does not
/// have. (One slot with the default prompt cache is modelled, and checked in `live_simulate`.)
const REPLICA: &[&str] = &["-np", "4", "--cache-ram", "0"];
const ENGINE: &str = "llamacpp:slots=4";

/// Two llama-server replicas, each behind its own recording proxy.
struct Fleet {
    // Dropped in this order: proxies, then replicas.
    proxies: Vec<Served>,
    _replicas: Vec<Served>,
    recordings: Vec<PathBuf>,
}

fn fleet(folder: &Path) -> Fleet {
    let replica = || {
        kvlint_fixtures::start_llama_server_with(REPLICA)
            .expect("llama-server or the tiny model missing: run scripts/test.sh")
    };
    let replicas = vec![replica(), replica()];
    let recordings: Vec<PathBuf> = (0..2)
        .map(|i| folder.join(format!("replica-{i}")))
        .collect();
    let proxies = replicas
        .iter()
        .zip(&recordings)
        .map(|(replica, record)| {
            common::proxy_to(
                &[replica.url.as_str()],
                record,
                kvlint_fixtures::free_port(),
                &["--no-prediction"],
            )
        })
        .collect();
    Fleet {
        proxies,
        _replicas: replicas,
        recordings,
    }
}

/// `router` in front of the fleet's proxies (in order), logging to `log`; up once it lists
/// the model its workers serve. Its metrics are at the URL returned beside it.
fn start(router: &Router, command: &Path, fleet: &Fleet, log: &Path) -> (Served, String) {
    let port = kvlint_fixtures::free_port();
    let prometheus = kvlint_fixtures::free_port().to_string();
    let child = Command::new(command)
        .args(router.subcommand)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .arg("--worker-urls")
        .args(fleet.proxies.iter().map(|proxy| proxy.url.as_str()))
        .args(["--policy", "cache_aware", "--log-level", "debug"])
        .args(["--prometheus-port", &prometheus])
        .args(router.options)
        .stdout(std::fs::File::create(log).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let served = Served {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !lists_a_model(&served.url) {
        assert!(
            std::time::Instant::now() < deadline,
            "{} did not come up: see {}",
            router.venv,
            log.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    (served, format!("http://127.0.0.1:{prometheus}/metrics"))
}

/// Whether the server at `url` answers `/v1/models` with a model: it is up.
fn lists_a_model(url: &str) -> bool {
    ureq::get(format!("{url}/v1/models"))
        .call()
        .ok()
        .and_then(|mut answer| answer.body_mut().read_to_string().ok())
        .is_some_and(|models| models.contains("\"id\""))
}

/// The id llama-server reports in `/v1/models` (smg routes only to that model).
fn model_id(url: &str) -> String {
    let models: Value = serde_json::from_str(&common::get(&format!("{url}/v1/models"))).unwrap();
    models["data"][0]["id"].as_str().unwrap().to_owned()
}

/// The request's own text: its last message.
fn last_message(body: &Value) -> String {
    body["messages"].as_array().unwrap().last().unwrap()["content"].to_string()
}

/// The fleet's recorded lines by their request's last message, each with its replica's number.
fn recorded(fleet: &Fleet) -> BTreeMap<String, (usize, Value)> {
    let mut by_message = BTreeMap::new();
    for (replica, recording) in fleet.recordings.iter().enumerate() {
        for entry in std::fs::read_dir(recording).into_iter().flatten() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            for line in text.lines() {
                let line: Value = serde_json::from_str(line).unwrap();
                let key = last_message(&line["request"]);
                assert!(
                    by_message.insert(key.clone(), (replica, line)).is_none(),
                    "{key} recorded twice"
                );
            }
        }
    }
    by_message
}

/// The fleet's recordings joined into the client's sessions, in `folder/session-NN.jsonl`:
/// each line the body sent, when (`sent`, per request), the answer its replica's proxy
/// recorded, and the replica (its proxy's URL, as the router's `--worker-urls` give it);
/// returns the replica number per request, in sending order.
fn merge(fleet: &Fleet, workload: &[(usize, Value)], sent: &[f64], folder: &Path) -> Vec<usize> {
    // A proxy writes its record after forwarding the answer: wait for the last lines.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut by_message = recorded(fleet);
    while by_message.len() < workload.len() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
        by_message = recorded(fleet);
    }
    std::fs::create_dir_all(folder).unwrap();
    let mut sessions: BTreeMap<usize, String> = BTreeMap::new();
    let mut served_by = Vec::new();
    for ((session, body), time) in workload.iter().zip(sent) {
        let key = last_message(body);
        let (replica, recorded) = by_message
            .remove(&key)
            .unwrap_or_else(|| panic!("{key} was not recorded by either replica's proxy"));
        served_by.push(replica);
        let line = json!({"request": body, "response": recorded["response"],
                          "time": time, "replica": fleet.proxies[replica].url});
        let text = sessions.entry(*session).or_default();
        text.push_str(&line.to_string());
        text.push('\n');
    }
    for (session, text) in sessions {
        std::fs::write(folder.join(format!("session-{session:02}.jsonl")), text).unwrap();
    }
    served_by
}

/// `kvlint simulate --calibrate` of the joined recordings with `args` (the policy, engine,
/// rendering and replicas), as JSON.
fn calibrated(recordings: &Path, args: &[String]) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_kvlint"))
        .arg("simulate")
        .arg("--calibrate")
        .arg(recordings)
        .args(["--format", "json", "--no-trace-cache"])
        .args(args)
        .output()
        .unwrap();
    serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
        panic!(
            "kvlint simulate --calibrate: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// A router's log without the colours' escape sequences (written even to a file).
fn plain_log(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap();
    let mut plain = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(start) = rest.find('\u{1b}') {
        plain.push_str(&rest[..start]);
        rest = &rest[start..];
        rest = rest.find('m').map_or("", |end| &rest[end + 1..]);
    }
    plain.push_str(rest);
    plain
}

/// The value of `name=value` or `name="value"` in a log line.
fn log_field<'a>(line: &'a str, name: &str) -> &'a str {
    let start = line
        .find(&format!(" {name}="))
        .unwrap_or_else(|| panic!("no {name} in {line}"))
        + name.len()
        + 2;
    let value = &line[start..];
    match value.strip_prefix('"') {
        Some(quoted) => &quoted[..quoted.find('"').unwrap_or(quoted.len())],
        None => &value[..value.find(' ').unwrap_or(value.len())],
    }
}

/// smg's own decision per request, from its debug log: (branch, worker), in routing order.
fn smg_decisions(log: &Path) -> Vec<(String, String)> {
    plain_log(log)
        .lines()
        .filter(|line| line.contains("Cache-aware selection"))
        .map(|line| {
            (
                log_field(line, "branch").to_owned(),
                log_field(line, "worker").to_owned(),
            )
        })
        .collect()
}

/// What a router did with the workload, and the model's calibration on it.
struct Routed {
    /// The run's scratch folder (recordings, joined sessions, the router's log).
    folder: PathBuf,
    calibration: Value,
    /// The replica number per request, in sending order.
    served_by: Vec<usize>,
    /// When the last request was sent and when the first answer came back (seconds).
    last_sent: f64,
    first_answered: f64,
    /// The router's log and its Prometheus text after the run.
    log: PathBuf,
    metrics: String,
}

/// How the workload is sent, and the model's speeds for it (`--prefill-tps`, `--decode-tps`).
struct Sending {
    workload: fn(&str) -> Vec<(usize, Value)>,
    /// Each request `stagger` after the one before it, without waiting for its answer;
    /// `None`: one after the other.
    stagger: Option<std::time::Duration>,
    speeds: &'static [&'static str],
}

/// One request after the other, at speeds under which each is served before the next
/// arrives, as the client waits for each answer (at 1,000 tokens a second, a first turn was
/// still in flight in the model when the next session's arrived, 20 ms after it: a miss the
/// model sent to the other replica by load).
const SEQUENTIAL: Sending = Sending {
    workload,
    stagger: None,
    speeds: &["--prefill-tps", "1000000"],
};

/// The real router in front of two replicas, sent a workload, and the model of it calibrated
/// on what it did; `None` when the router is not installed.
fn run(router: &Router, sending: &Sending) -> Option<Routed> {
    let command = installed(router)?;
    let folder = std::env::temp_dir().join(format!(
        "kvlint-routers-{}-{}-{}",
        router.venv,
        router.policy.replace([':', '=', ','], "-"),
        std::process::id()
    ));
    std::fs::create_dir_all(&folder).unwrap();
    let fleet = fleet(&folder);
    let log = folder.join("router.log");
    let (gateway, metrics) = start(router, &command, &fleet, &log);
    let workload = (sending.workload)(&model_id(&fleet.proxies[0].url));
    let send = |body: &Value| {
        common::post(&gateway.url, "/v1/chat/completions", body)
            .unwrap_or_else(|error| panic!("{}: {error}", router.venv));
    };
    // When each request was sent: its arrival at the router (a replica's proxy sees it later,
    // and concurrent requests to two replicas in either order).
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    };
    let mut sent = Vec::new();
    let answered: Vec<f64> = match sending.stagger {
        None => workload
            .iter()
            .map(|(_, body)| {
                sent.push(now());
                send(body);
                now()
            })
            .collect(),
        Some(stagger) => std::thread::scope(|scope| {
            let answers: Vec<_> = workload
                .iter()
                .map(|(_, body)| {
                    sent.push(now());
                    let answer = scope.spawn(|| {
                        send(body);
                        now()
                    });
                    std::thread::sleep(stagger);
                    answer
                })
                .collect();
            answers
                .into_iter()
                .map(|answer| answer.join().unwrap())
                .collect()
        }),
    };
    let metrics = common::get(&metrics);
    drop(gateway);
    let served_by = merge(&fleet, &workload, &sent, &folder.join("sessions"));
    let worker_urls: Vec<&str> = fleet
        .proxies
        .iter()
        .map(|proxy| proxy.url.as_str())
        .collect();
    let mut args = common::engine_rendering();
    args.extend(
        [
            "--engine",
            ENGINE,
            "--cache",
            "0",
            "--routing",
            router.policy,
            "--calibrate-replicas",
            &worker_urls.join(","),
        ]
        .map(String::from),
    );
    args.extend(sending.speeds.iter().map(|arg| (*arg).to_owned()));
    let calibration = calibrated(&folder.join("sessions"), &args);
    eprintln!(
        "{} against {}: replicas {served_by:?}; agreement {}; served {}",
        router.venv, calibration["policy"], calibration["agreement"], calibration["served"]
    );
    Some(Routed {
        folder,
        calibration,
        served_by,
        last_sent: sent.iter().copied().fold(f64::MIN, f64::max),
        first_answered: answered.iter().copied().fold(f64::MAX, f64::min),
        log,
        metrics,
    })
}

/// What every router's sequential run must show against its model: the served tokens
/// simulated are the ones reported, and sessions stay on one replica.
fn assert_served_and_sticky(router: &Router, routed: &Routed) {
    let requests = routed.calibration["requests"].as_array().unwrap();
    assert_eq!(
        requests.len(),
        routed.served_by.len(),
        "{}",
        routed.calibration
    );
    for request in requests {
        assert_eq!(
            request["recorded_served_tokens"], request["simulated_served_tokens"],
            "{}: {request}",
            router.venv
        );
    }
    // Sending order is turn-major: session s is every SESSIONS-th request from s.
    for session in 0..SESSIONS {
        let replicas: Vec<usize> = routed
            .served_by
            .iter()
            .skip(session)
            .step_by(SESSIONS)
            .copied()
            .collect();
        assert!(
            replicas.iter().all(|replica| *replica == replicas[0]),
            "{}: session {session} moved: {replicas:?}",
            router.venv
        );
    }
}

/// No request the model sent elsewhere for a match its index held usable (`disagree-hit`; an
/// overlap under the threshold, such as the chat template's first tokens, is a miss).
fn assert_no_hit_elsewhere(router: &Router, routed: &Routed) {
    for request in routed.calibration["requests"].as_array().unwrap() {
        assert_ne!(
            request["class"], "disagree-hit",
            "{}: {request}",
            router.venv
        );
    }
}

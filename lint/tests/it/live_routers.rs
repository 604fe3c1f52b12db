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
//!   ([`sglang_router_load_gate_fires_where_the_simulation_says`]).
//! - **vllm-router** (`sglang-cache-aware:flavor=vllm-router`): its cache-aware policy routes
//!   on token ids from its own chat renderer, which it cannot build for llama-server's model:
//!   its counter `vllm_router_prefix_routing_decisions_total{outcome="missing_tokens"}` counts
//!   every request, and the test checks that, so here its tree is never consulted and it
//!   cannot be compared with the model's; served tokens and stickiness still are.
//!
//! - **NVIDIA Dynamo 1.6.1** (`dynamo-kv`): its frontend's KV router in front of two of its
//!   mock engines (not llama-server: Dynamo routes only to workers it discovers), see
//!   [`dynamo_kv_router_chooses_what_the_simulation_chooses_where_costs_differ`]; and its own
//!   offline replay of kvlint's hashed trace against `kvlint simulate` on that trace.
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
    while !ureq::get(format!("{}/v1/models", served.url))
        .call()
        .ok()
        .and_then(|mut answer| answer.body_mut().read_to_string().ok())
        .is_some_and(|models| models.contains("\"id\""))
    {
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

#[test]
fn smg_chooses_what_the_simulation_chooses_on_every_tree_hit() {
    let Some(routed) = run(&SMG, &SEQUENTIAL) else {
        return;
    };
    assert_served_and_sticky(&SMG, &routed);
    assert_no_hit_elsewhere(&SMG, &routed);
    let decisions = smg_decisions(&routed.log);
    let requests = routed.calibration["requests"].as_array().unwrap();
    assert_eq!(decisions.len(), requests.len(), "{decisions:?}");
    let replicas = routed.calibration["replicas"].as_array().unwrap();
    let mut hits = 0;
    for ((branch, worker), (request, replica)) in
        decisions.iter().zip(requests.iter().zip(&routed.served_by))
    {
        // smg's log names the worker the proxies recorded.
        let named = replicas[*replica].as_str().unwrap();
        assert!(
            worker.trim_start_matches("http://") == named.trim_start_matches("http://"),
            "smg logged {worker}, {named} served"
        );
        assert_eq!(request["recorded_replica"], json!(replica), "{request}");
        // The model's branch is smg's: a tree match, or (sequential, no spill) a miss.
        if branch == "tree_match" {
            hits += 1;
            assert_eq!(request["class"], "agree", "a tree hit: {request}");
            assert_eq!(request["branch"], "match", "a tree hit: {request}");
        } else {
            // smg 1.13's miss: the least expected wait, which for workers reporting no load
            // is the fewest requests in flight, drawn among equals: the model's tie.
            assert_eq!(branch, "expected_wait_fallback", "{request}");
            assert_eq!(request["branch"], "miss", "smg's {branch}: {request}");
            assert!(
                request["class"] == "agree" || request["class"] == "agree-in-tie",
                "smg's miss to {worker} is none of the model's: {request}"
            );
            eprintln!("smg miss ({branch}) to {worker}: the model {request}");
        }
    }
    // Every turn after a session's first, and session 1's first (session 0's system prompt).
    assert_eq!(hits, requests.len() - (SESSIONS - 1), "{decisions:?}");
    std::fs::remove_dir_all(&routed.folder).ok();
}

#[test]
fn sglang_router_serves_what_the_simulation_serves() {
    let Some(routed) = run(&SGLANG_ROUTER, &SEQUENTIAL) else {
        return;
    };
    assert_served_and_sticky(&SGLANG_ROUTER, &routed);
    let requests = routed.calibration["requests"].as_array().unwrap();
    // The first request: idle workers, empty trees, a tie between both replicas.
    let first = &requests[0];
    assert_eq!(first["tie"], json!([0, 1]), "{first}");
    eprintln!(
        "sglang-router's first request (a miss between idle workers) went to replica {}",
        first["recorded_replica"]
    );
    // Every later one, misses included: the model's only choice is the router's.
    for request in &requests[1..] {
        assert_eq!(request["class"], "agree", "{request}");
        assert_eq!(request["tie"], Value::Null, "{request}");
    }
    // Hence every request on one replica (sequential traffic, every load 0).
    assert!(
        routed
            .served_by
            .iter()
            .all(|replica| *replica == routed.served_by[0]),
        "{:?}",
        routed.served_by
    );
    std::fs::remove_dir_all(&routed.folder).ok();
}

#[test]
fn vllm_router_cannot_route_on_its_tree_in_front_of_llama_server() {
    let Some(routed) = run(&VLLM_ROUTER, &SEQUENTIAL) else {
        return;
    };
    assert_served_and_sticky(&VLLM_ROUTER, &routed);
    assert_no_hit_elsewhere(&VLLM_ROUTER, &routed);
    let missing = common::metric(
        &routed.metrics,
        "vllm_router_prefix_routing_decisions_total{policy=\"cache_aware\",stage=\"regular\",outcome=\"missing_tokens\"}",
    );
    assert_eq!(
        missing,
        routed.served_by.len() as f64,
        "vllm-router's cache-aware tree was consulted: {}",
        routed.metrics
    );
    std::fs::remove_dir_all(&routed.folder).ok();
}

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
    while registered() < 2
        || !ureq::get(format!("{url}/v1/models"))
            .call()
            .ok()
            .and_then(|mut answer| answer.body_mut().read_to_string().ok())
            .is_some_and(|models| models.contains("\"id\""))
    {
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

/// Eight sessions' first turns on one long shared system prompt, each generating 512 tokens
/// (end of text ignored), so that all are in flight together: the tiny model decodes 48
/// tokens in 150–300 ms here, and a faster host finished one within the burst's 70 ms.
fn burst(model: &str) -> Vec<(usize, Value)> {
    let system = "You are a careful coding agent working in a large repository. Read files \
                  before editing them and run the tests after each change."
        .repeat(2);
    (0..8)
        .map(|session| {
            let messages = [
                json!({"role": "system", "content": system}),
                json!({"role": "user", "content": format!("Session {session}: look at src/module_{session}.rs.")}),
            ];
            (
                session,
                json!({"model": model, "messages": messages, "max_tokens": 512,
                       "ignore_eos": true, "temperature": 0}),
            )
        })
        .collect()
}

/// sglang-router's load gate with small thresholds (imbalanced when the busiest worker has
/// more than 2 requests in flight over the idlest and over 1.5 times as many: then the least
/// loaded, the first in `--worker-urls` order), on a burst that keeps every request in flight
/// until the last is routed. Its loads are then the requests it routed, so its decisions do
/// not depend on timing: the model, whose requests also all stay in flight at these speeds,
/// must choose every replica the router chose (the first request's, a miss between empty
/// trees, within the tie). Served tokens under concurrency depend on when each prefill ran
/// and are reported, not compared.
#[test]
fn sglang_router_load_gate_fires_where_the_simulation_says() {
    const GATED: Router = Router {
        options: &[
            "--balance-abs-threshold",
            "2",
            "--balance-rel-threshold",
            "1.5",
        ],
        policy: "sglang-cache-aware:abs=2,rel=1.5",
        ..SGLANG_ROUTER
    };
    let sending = Sending {
        workload: burst,
        stagger: Some(std::time::Duration::from_millis(20)),
        speeds: &["--prefill-tps", "100", "--decode-tps", "10"],
    };
    let Some(routed) = run(&GATED, &sending) else {
        return;
    };
    // What the comparison rests on: no answer came back before the last request was sent
    // (the router then routed it with every request in flight, as the model does).
    assert!(
        routed.first_answered > routed.last_sent,
        "an answer came back {:.3} s before the burst's last request was sent: the loads the \
         router saw were not the requests it routed",
        routed.last_sent - routed.first_answered
    );
    for request in routed.calibration["requests"].as_array().unwrap() {
        let recorded = &request["recorded_replica"];
        match request["tie"].as_array() {
            None => assert_eq!(recorded, &request["simulated_replica"], "{request}"),
            Some(tie) => assert!(tie.contains(recorded), "{request}"),
        }
    }
    // The gate fired: both replicas took requests, and the model says its gate decided.
    assert!(
        routed.served_by.contains(&0) && routed.served_by.contains(&1),
        "{:?}",
        routed.served_by
    );
    assert!(
        routed.calibration["requests"]
            .as_array()
            .unwrap()
            .iter()
            .any(|request| request["branch"] == "gate"),
        "{}",
        routed.calibration
    );
    std::fs::remove_dir_all(&routed.folder).ok();
}

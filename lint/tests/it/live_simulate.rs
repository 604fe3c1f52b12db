//! `kvlint simulate` against real engines: a workload replayed through llama-server (slots
//! that other sessions take) and through two llama-server replicas behind nginx (round-robin
//! and hashing on the session), then simulated from its own recording; the served tokens per
//! request and the tokens lost to locality are compared with what the engines reported.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

use serde_json::{Value, json};

use crate::common;

fn served(result: &Value) -> Vec<u64> {
    result["served_per_request"]
        .as_array()
        .unwrap()
        .iter()
        .map(|value| value.as_u64().unwrap())
        .collect()
}

/// One llama-server, replayed a workload, then simulated from its recording.
struct Case {
    name: &'static str,
    server: &'static [&'static str],
    sessions: usize,
    engine: &'static str,
    cache: &'static str,
}

#[test]
fn llama_server_slots_and_prompt_cache_serve_what_the_simulation_says() {
    let cases = [
        // Three sessions, two slots, no prompt cache: sessions take each other's slots.
        Case {
            name: "slots taken",
            server: &["-np", "2", "--cache-ram", "0"],
            sessions: 3,
            engine: "llamacpp:slots=2",
            cache: "0",
        },
        // Two sessions, two slots: llama.cpp gives a request the idle slot its prompt shares
        // the most with, over an empty one, so the second session takes the first's slot on
        // their shared system prompt, and the two take turns in one slot.
        Case {
            name: "a slot each",
            server: &["-np", "2", "--cache-ram", "0"],
            sessions: 2,
            engine: "llamacpp:slots=2",
            cache: "0",
        },
        // One slot and a prompt cache that holds everything: each turn finds its session's
        // sequence in it.
        Case {
            name: "prompt cache",
            server: &["-np", "1", "--cache-ram", "64"],
            sessions: 3,
            engine: "llamacpp:slots=1",
            cache: "unbounded",
        },
        // Two slots and the default prompt cache, which also saves idle slots as each task
        // starts (`--cache-idle-slots`, not modelled): here no load takes such a copy.
        Case {
            name: "idle slots saved",
            server: &["-np", "2"],
            sessions: 3,
            engine: "llamacpp:slots=2",
            cache: "unbounded",
        },
    ];
    for case in cases {
        let folder = std::env::temp_dir().join(format!(
            "kvlint-simulate-{}-{}",
            case.name.replace(' ', "-"),
            std::process::id()
        ));
        let engine = kvlint_fixtures::start_llama_server_with(case.server)
            .expect("llama-server or the tiny model missing: run scripts/test.sh");
        let workload = common::interleaved_workload(case.sessions, 4);
        let observed: Vec<u64> = common::replay(&engine.url, &workload, &folder)
            .into_iter()
            .flatten()
            .collect();
        drop(engine);
        let args = [
            "--engine",
            case.engine,
            "--cache",
            case.cache,
            "--replicas",
            "1",
            "--routing",
            "round-robin",
        ];
        let results = common::simulated_as_llama_server(&folder, &args);
        let simulated = served(&results[0]);
        eprintln!(
            "{}: observed {observed:?}, simulated {simulated:?}",
            case.name
        );
        assert_eq!(simulated, observed, "{}", case.name);
        std::fs::remove_dir_all(&folder).ok();
    }
}

/// Two sessions whose prompts share their first 59 tokens (the system prompt) take turns in
/// llama-server's one slot, with its default prompt cache. Each turn-1 sequence is 117 prompt tokens and 1 of the 2
/// generated ones (the last is sampled, never decoded): 118, so the other session's turn 2
/// keeps exactly half of it (`f_keep` 0.5, not under 0.5) and `get_available_slot` neither
/// saves it nor loads from the prompt cache: 59 tokens served, not the session's own 117.
/// A model counting both generated tokens saw 59/119 and predicted 117.
#[test]
fn alternating_sessions_in_one_slot_with_the_default_prompt_cache() {
    let folder = std::env::temp_dir().join(format!(
        "kvlint-simulate-alternating-{}",
        std::process::id()
    ));
    let system = "You are a careful coding agent working in a large repository. Read files \
                  before editing them and run the tests after each change."
        .repeat(2);
    let mut histories = vec![vec![json!({"role": "system", "content": system})]; 2];
    let mut workload = Vec::new();
    for turn in 0..10 {
        for (session, history) in histories.iter_mut().enumerate() {
            if turn > 0 {
                history.push(json!({"role": "assistant", "content": format!(
                    "Session {session}: step {} is done now.", turn - 1
                )}));
            }
            history.push(json!({"role": "user", "content": format!(
                "Session {session}, step {turn}: look at src/module_{turn}.rs next."
            )}));
            workload.push((
                session,
                json!({"messages": history, "max_tokens": 2, "temperature": 0}),
            ));
        }
    }
    let engine = kvlint_fixtures::start_llama_server_with(&[])
        .expect("llama-server or the tiny model missing: run scripts/test.sh");
    let observed: Vec<u64> = common::replay(&engine.url, &workload, &folder)
        .into_iter()
        .flatten()
        .collect();
    drop(engine);
    let args = [
        "--engine",
        "llamacpp:slots=1",
        "--cache",
        "unbounded",
        "--replicas",
        "1",
        "--routing",
        "round-robin",
    ];
    let simulated = served(&common::simulated_as_llama_server(&folder, &args)[0]);
    eprintln!("observed {observed:?}, simulated {simulated:?}");
    // Session 0's turn 2 and session 1's (the third of each session's five) read the slot.
    assert_eq!((observed[2], observed[12]), (59, 59));
    assert_eq!(simulated, observed);
    std::fs::remove_dir_all(&folder).ok();
}

#[test]
fn lost_locality_behind_nginx_is_what_the_simulation_says() {
    let folder = std::env::temp_dir().join(format!("kvlint-simulate-fleet-{}", std::process::id()));
    let workload = common::interleaved_workload(1, 6);
    let mut runs = Vec::new();
    for (name, balance) in [
        ("round-robin", ""),
        ("hash", "hash $http_x_session consistent;"),
    ] {
        let (first, second) = (common::replica(), common::replica());
        let replicas = [&first, &second];
        let gateway = common::gateway(&replicas, balance, &folder.join(name));
        let computed = |replicas: &[&kvlint_fixtures::Served]| -> f64 {
            replicas
                .iter()
                .map(|replica| {
                    common::metric(
                        &common::get(&format!("{}/metrics", replica.url)),
                        "llamacpp:prompt_tokens_total",
                    )
                })
                .sum()
        };
        let before = computed(&replicas);
        let observed = common::replay(
            &gateway.url,
            &workload,
            &folder.join(format!("{name}-record")),
        );
        runs.push((computed(&replicas) - before, observed));
    }
    let observed_lost = runs[0].0 - runs[1].0;
    let args = [
        "--engine",
        "llamacpp:slots=1",
        "--cache",
        "unbounded",
        "--replicas",
        "2",
        "--routing",
        "round-robin,session-hash",
    ];
    let results = common::simulated_as_llama_server(&folder.join("round-robin-record"), &args);
    eprintln!(
        "observed computed {:?}; lost {observed_lost}; simulated {results:#?}",
        (runs[0].0, runs[1].0)
    );
    assert!(observed_lost > 0.0);
    assert_eq!(
        results[0]["lost_locality_tokens"].as_f64().unwrap(),
        observed_lost
    );
    assert_eq!(results[1]["lost_locality_tokens"].as_u64().unwrap(), 0);
    assert_eq!(served(&results[0]), runs[0].1.concat());
    assert_eq!(served(&results[1]), runs[1].1.concat());
    std::fs::remove_dir_all(&folder).ok();
}

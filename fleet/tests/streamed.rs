//! A Mooncake trace read as it goes ([`StreamedTrace`]) gives every figure the same trace
//! read whole gives, for every policy and engine, and is refused (to be read whole) when its
//! lines are not in time order.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use kvlint_fleet::hashed_trace::{HashedFormat, StreamedTrace, read_hashed};
use kvlint_fleet::{
    Arrival, CacheSize, FleetOptions, Policies, Policy, Setup, SimEngine, simulate,
    simulate_streamed,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const BLOCK: u32 = 16;

/// A Mooncake trace in time order, its times multiples of 125 ms (so that a `delay` added in
/// seconds is exact) with many requests at the same time: agent sessions with a
/// `session_id` (a `timestamp` first, then a `delay` or a `timestamp`), whose turns extend
/// the one before or rewrite its tail, among one-request lines sharing five system prompts.
fn mooncake_lines(seed: u64) -> Vec<String> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut next_id = 1000u64;
    let mut fresh = |count: usize| -> Vec<u64> {
        next_id += count as u64;
        (next_id - count as u64..next_id).collect()
    };
    let systems: Vec<Vec<u64>> = (0..5)
        .map(|system| (system * 10..system * 10 + 4).collect())
        .collect();
    // (time in units of 125 ms, session, ids, tokens)
    let mut events: Vec<(u64, Option<usize>, Vec<u64>, u32)> = Vec::new();
    for session in 0..40 {
        let mut time = rng.random_range(0..200u64);
        let mut ids = systems[rng.random_range(0..5)].clone();
        for _ in 0..rng.random_range(1..7) {
            if rng.random_bool(0.2) && ids.len() > 5 {
                ids.truncate(rng.random_range(3..ids.len()));
            }
            ids.extend(fresh(rng.random_range(1..4)));
            let tokens = ids.len() as u32 * BLOCK + rng.random_range(0..BLOCK);
            events.push((time, Some(session), ids.clone(), tokens));
            time += rng.random_range(0..12);
        }
    }
    for _ in 0..120 {
        let mut ids = systems[rng.random_range(0..5)].clone();
        ids.extend(fresh(rng.random_range(0..5)));
        let tokens = ids.len() as u32 * BLOCK + rng.random_range(0..BLOCK);
        events.push((rng.random_range(0..260), None, ids, tokens));
    }
    events.sort_by_key(|event| event.0);
    let mut last_sent: std::collections::HashMap<usize, u64> = Default::default();
    events
        .into_iter()
        .map(|(time, session, mut ids, tokens)| {
            // A partial block has an id of its own, as the published traces give it.
            if tokens % BLOCK != 0 {
                ids.push(next_id);
                next_id += 1;
            }
            let output = tokens % 97;
            let ids = format!("{ids:?}");
            match session {
                None => format!(
                    r#"{{"timestamp": {}, "input_length": {tokens}, "output_length": {output}, "hash_ids": {ids}}}"#,
                    time * 125
                ),
                Some(session) => {
                    let sent = match last_sent.insert(session, time) {
                        Some(previous) if rng.random_bool(0.5) => {
                            format!(r#""delay": {}"#, (time - previous) * 125)
                        }
                        _ => format!(r#""timestamp": {}"#, time * 125),
                    };
                    format!(
                        r#"{{"session_id": "agent-{session}", {sent}, "input_length": {tokens}, "output_length": {output}, "hash_ids": {ids}}}"#
                    )
                }
            }
        })
        .collect()
}

fn write_trace(name: &str, lines: &[String]) -> PathBuf {
    let folder = std::env::temp_dir().join(format!("kvlint-streamed-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let path = folder.join(name);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

fn read_whole(path: &Path) -> kvlint_fleet::Trace {
    let text = std::fs::read_to_string(path).unwrap();
    read_hashed(&path.display().to_string(), &text, None, Some(BLOCK)).unwrap()
}

fn setup(engine: SimEngine, cache: CacheSize, policy: Policy, fleet: FleetOptions) -> Setup {
    Setup {
        replicas: 3,
        cache,
        engine,
        policy,
        arrival: Arrival::Recorded,
        prefill_tps: 4000.0,
        decode_tps: Some(50.0),
        seed: 7,
        per_request: false,
        fleet,
    }
}

#[test]
fn a_trace_read_as_it_goes_gives_the_figures_of_the_trace_read_whole() {
    let path = write_trace("sessions.jsonl", &mooncake_lines(3));
    let whole = read_whole(&path);
    let streamed = StreamedTrace::open(&path, None, Some(BLOCK))
        .unwrap()
        .expect("a Mooncake trace in time order is read as it goes");
    assert_eq!(streamed.requests, whole.requests.len());
    let mut policies = Policy::named();
    policies.extend(
        "round-robin,random,least-loaded,session-hash,prefix-aware,ideal"
            .parse::<Policies>()
            .unwrap()
            .0,
    );
    let engines = [
        SimEngine::Vllm { block: BLOCK },
        "sglang:page=16".parse().unwrap(),
        "llamacpp:slots=2,block=16".parse().unwrap(),
    ];
    let fleets = [
        FleetOptions {
            bounds: false,
            ..FleetOptions::default()
        },
        FleetOptions {
            signal_delay: 0.4,
            routers: 2,
            replica_speed: vec![1.0, 0.5],
            bounds: false,
        },
    ];
    let mut evicting = 0;
    for engine in engines {
        for cache in [CacheSize::Blocks(24), CacheSize::Unbounded] {
            for &policy in &policies {
                for fleet in &fleets {
                    let setup = setup(engine, cache, policy, fleet.clone());
                    let expected = simulate(&whole, &setup).unwrap();
                    let got = simulate_streamed(&streamed, &setup).unwrap();
                    assert_eq!(
                        got, expected,
                        "{policy} on {engine} with {cache}, {fleet:?}"
                    );
                    assert!(
                        expected.served_tokens > 0,
                        "{policy} on {engine} serves nothing"
                    );
                    evicting += usize::from(expected.evicted_blocks > 0);
                }
            }
        }
    }
    assert!(
        evicting > 0,
        "no point evicted: the small cache is not small"
    );
}

#[test]
fn a_trace_not_in_time_order_is_left_to_be_read_whole() {
    let lines = mooncake_lines(5);
    let mut reversed = lines.clone();
    reversed.reverse();
    let unordered = write_trace("reversed.jsonl", &reversed);
    assert!(
        StreamedTrace::open(&unordered, None, Some(BLOCK))
            .unwrap()
            .is_none()
    );
    // A line without a time.
    let mut untimed = lines.clone();
    untimed.push(r#"{"input_length": 20, "output_length": 1, "hash_ids": [1, 2]}"#.into());
    let untimed = write_trace("untimed.jsonl", &untimed);
    assert!(
        StreamedTrace::open(&untimed, None, Some(BLOCK))
            .unwrap()
            .is_none()
    );
    // Another format.
    let bailian = write_trace(
        "bailian.jsonl",
        &[r#"{"chat_id": 0, "parent_chat_id": -1, "timestamp": 0.0, "input_length": 20, "output_length": 1, "type": "text", "turn": 1, "hash_ids": [1, 2]}"#.into()],
    );
    assert!(StreamedTrace::open(&bailian, None, None).unwrap().is_none());
    assert!(
        StreamedTrace::open(
            &write_trace("sorted.jsonl", &lines),
            Some(HashedFormat::Mooncake),
            Some(BLOCK)
        )
        .unwrap()
        .is_some()
    );
}

#[test]
fn a_bad_line_is_named_as_the_trace_read_whole_names_it() {
    let too_many_ids = r#"{"timestamp": 99999999, "input_length": 20, "hash_ids": [1, 2, 3]}"#;
    let not_an_id = r#"{"timestamp": 99999999, "input_length": 20, "hash_ids": [1, "x"]}"#;
    let mut lines = mooncake_lines(9);
    let count = lines.len();
    lines.push(too_many_ids.into());
    let errors = |lines: &[String]| {
        let path = write_trace("bad.jsonl", lines);
        let text = std::fs::read_to_string(&path).unwrap();
        let whole = read_hashed(&path.display().to_string(), &text, None, Some(BLOCK)).unwrap_err();
        let streamed = StreamedTrace::open(&path, None, Some(BLOCK)).unwrap_err();
        assert_eq!(streamed.to_string(), whole.to_string());
        whole.to_string()
    };
    let error = errors(&lines);
    assert!(
        error.contains(&format!(":{}: 3 hash ids for 20 tokens", count + 1)),
        "{error}"
    );
    // A line that is no request is named before one with too many ids, wherever it is.
    lines.push(not_an_id.into());
    let error = errors(&lines);
    assert!(
        error.contains(&format!(":{}: `hash_ids` holds \"x\"", count + 2)),
        "{error}"
    );
}

/// What needs the trace held whole, or another block size, is refused by name.
#[test]
fn a_run_that_needs_the_whole_trace_is_refused_by_its_setting() {
    let path = write_trace("refused.jsonl", &mooncake_lines(5));
    let streamed = StreamedTrace::open(&path, None, Some(BLOCK))
        .unwrap()
        .unwrap();
    let fine = setup(
        SimEngine::Vllm { block: BLOCK },
        CacheSize::Unbounded,
        Policy::RoundRobin,
        FleetOptions::default(),
    );
    assert!(simulate_streamed(&streamed, &fine).is_ok());
    let refusal = |setup: Setup| {
        simulate_streamed(&streamed, &setup)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        refusal(Setup {
            engine: SimEngine::Vllm { block: 32 },
            ..fine.clone()
        }),
        "an engine block of 32 tokens: the trace's blocks are another size"
    );
    assert_eq!(
        refusal(Setup {
            arrival: Arrival::Closed { concurrency: 4 },
            ..fine.clone()
        }),
        "arrival closed:4: a trace read as it goes is replayed at its recorded times"
    );
    for setup in [
        Setup {
            per_request: true,
            ..fine.clone()
        },
        Setup {
            fleet: FleetOptions {
                bounds: true,
                ..FleetOptions::default()
            },
            ..fine.clone()
        },
    ] {
        assert_eq!(
            refusal(setup),
            "the bounds or the per-request figures: they need the trace held whole"
        );
    }
}

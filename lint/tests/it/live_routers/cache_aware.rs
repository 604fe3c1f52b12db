//! smg, sglang-router and vllm-router with `--policy cache_aware` in front of two llama-server
//! replicas, held to `kvlint simulate`'s models of them (see the parent module).

use super::*;

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

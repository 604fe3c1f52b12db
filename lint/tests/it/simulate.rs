//! `kvlint simulate` from the command line: sweeps of policies and caches, session-hash and
//! ideal routing, the named routers' beliefs against the engines' truth, router replicas,
//! late signals and the bounds, the decision report that ranks every named router, and the
//! one engine cache model `kvlint check --engine` shares with it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;

use crate::common::kvlint;

const CORPUS: &str = "fixtures/corpus/sessions";

/// One engine cache model: a session alone on one replica with an unbounded cache is served,
/// request by request, what `kvlint check --engine` predicts for its turns, on every
/// self-hosted engine (one session of each source of the corpus).
#[test]
fn a_session_alone_is_served_what_check_predicts_on_every_engine() {
    let sessions: Vec<String> = [
        "crewai-2",
        "mini-swe-agent-1",
        "openhands-1",
        "pydantic-ai-3",
        "simonw-llm-1",
        "swe-agent-1",
        "tau-bench-1",
    ]
    .iter()
    .map(|name| format!("{CORPUS}/{name}.jsonl"))
    .collect();
    for engine in [
        "vllm",
        "vllm:block=32",
        "sglang",
        "sglang:page=4",
        "llamacpp",
    ] {
        let mut check_args = vec!["check", "--engine", engine, "--format", "json"];
        check_args.extend(sessions.iter().map(String::as_str));
        let (_, stdout, stderr) = kvlint(&check_args);
        let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("{stderr}"));
        for (session, checked) in sessions.iter().zip(report["sessions"].as_array().unwrap()) {
            assert_eq!(checked["path"], session.as_str());
            let turns = checked["turns"].as_array().unwrap();
            let predicted: u64 = turns
                .iter()
                .map(|turn| turn["predicted_cached_tokens"].as_u64().unwrap())
                .sum();
            let (code, stdout, stderr) = kvlint(&[
                "simulate",
                session,
                "--no-trace-cache",
                "--format",
                "json",
                "--replicas",
                "1",
                "--cache",
                "unbounded",
                "--engine",
                engine,
                "--routing",
                "round-robin",
                "--prefill-tps",
                "8000",
            ]);
            assert_eq!(code, 0, "{stderr}");
            let result = &serde_json::from_str::<Value>(&stdout).unwrap()[0];
            assert_eq!(result["requests"], turns.len(), "{engine} {session}");
            assert_eq!(
                result["served_tokens"], predicted,
                "{engine} {session}: simulated against predicted"
            );
            assert!(
                predicted > 0,
                "{engine} {session}: a session that reuses its prefix"
            );
        }
    }
}

#[test]
fn simulate_sweeps_policies_and_caches_in_one_run() {
    let (code, stdout, stderr) = kvlint(&[
        "simulate",
        CORPUS,
        "--no-trace-cache",
        "--format",
        "json",
        "--replicas",
        "2,4",
        "--cache",
        "500,unbounded",
        "--routing",
        "round-robin,random,least-loaded,session-hash,prefix-aware,ideal",
        "--arrival",
        "poisson:2,burstiness=2",
        "--prefill-tps",
        "5000",
        "--decode-tps",
        "40",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let results: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    assert_eq!(results.len(), 2 * 2 * 6);
    let ideal_served = results
        .iter()
        .filter(|result| result["policy"] == "ideal")
        .map(|result| result["served_tokens"].as_u64().unwrap())
        .min()
        .unwrap();
    for result in &results {
        let served = result["served_tokens"].as_u64().unwrap();
        assert_eq!(
            served + result["computed_tokens"].as_u64().unwrap(),
            result["prompt_tokens"].as_u64().unwrap()
        );
        assert!(served <= ideal_served, "{result}");
        if result["policy"] == "session-hash" {
            assert_eq!(result["lost_locality_tokens"], 0);
        }
        let ttft = &result["ttft"];
        assert!(ttft["p50"].as_f64().unwrap() <= ttft["p99"].as_f64().unwrap());
    }
}

/// `session-hash` hashes who a session is, not how its folder was typed: `prod`, `./prod`
/// and an absolute path route every session alike. `ideal` serves whole blocks of the
/// engine's, as every other policy does.
#[test]
fn session_hash_ignores_how_the_path_was_typed_and_ideal_serves_whole_blocks() {
    let absolute = kvlint_fixtures::repository().join(CORPUS);
    let spellings = [
        CORPUS.to_owned(),
        format!("./{CORPUS}"),
        absolute.display().to_string(),
    ];
    let routed: Vec<Value> = spellings
        .iter()
        .map(|sessions| {
            let (code, stdout, stderr) = kvlint(&[
                "simulate",
                sessions,
                "--no-trace-cache",
                "--format",
                "json",
                "--replicas",
                "4",
                "--cache",
                "unbounded",
                "--engine",
                "vllm:block=16",
                "--routing",
                "session-hash,ideal",
                "--prefill-tps",
                "5000",
                "--per-request",
            ]);
            assert_eq!(code, 0, "{stderr}");
            serde_json::from_str(&stdout).unwrap()
        })
        .collect();
    for other in &routed[1..] {
        assert_eq!(other[0]["per_replica"], routed[0][0]["per_replica"]);
    }
    // Four replicas share the sessions: the hash spreads them.
    let busy = routed[0][0]["per_replica"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|replica| replica["requests"].as_u64().unwrap() > 0)
        .count();
    assert!(busy > 1, "{}", routed[0][0]["per_replica"]);
    let ideal = &routed[0][1];
    assert_eq!(ideal["policy"], "ideal");
    for served in ideal["served_per_request"].as_array().unwrap() {
        assert_eq!(served.as_u64().unwrap() % 16, 0, "{served}");
    }
}

/// The named routers run with their knobs, and report what they believed against what the
/// engines served: those that follow the engines' KV events believe the truth.
#[test]
fn named_routers_report_their_belief_against_the_engines_truth() {
    let routing = "power-of-two,sglang-cache-aware:threshold=0.5,abs=32,dynamo-kv,\
                   dynamo-lmetric,llmd-prefix:weights=3/2/0,llmd-precise,aibrix-prefix:sigma=2,\
                   ray-prefix:match=0.2";
    let args = |format| {
        vec![
            "simulate",
            CORPUS,
            "--no-trace-cache",
            "--format",
            format,
            "--replicas",
            "3",
            "--cache",
            "400",
            "--routing",
            routing,
            "--prefill-tps",
            "5000",
        ]
    };
    let (code, stdout, stderr) = kvlint(&args("json"));
    assert_eq!(code, 0, "{stderr}");
    let results: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    let policies: Vec<&str> = results
        .iter()
        .map(|result| result["policy"].as_str().unwrap())
        .collect();
    assert_eq!(
        policies,
        [
            "power-of-two",
            "sglang-cache-aware:threshold=0.5,abs=32",
            "dynamo-kv",
            "dynamo-lmetric",
            "llmd-prefix:weights=3/2/0",
            "llmd-precise",
            "aibrix-prefix:sigma=2",
            "ray-prefix:match=0.2"
        ]
    );
    assert!(results[0].get("belief").is_none(), "{}", results[0]);
    for result in &results[1..] {
        let belief = &result["belief"];
        let count = |key: &str| belief[key].as_u64().unwrap();
        assert_eq!(
            count("predicted_tokens") - count("predicted_not_served_tokens")
                + count("served_not_predicted_tokens"),
            result["served_tokens"].as_u64().unwrap(),
            "{result}"
        );
        let follows_kv_events = ["dynamo-kv", "dynamo-lmetric", "llmd-precise"]
            .contains(&result["policy"].as_str().unwrap());
        if follows_kv_events {
            assert_eq!(count("predicted_not_served_tokens"), 0, "{result}");
            // llm-d's precise scorer counts whole 64-token blocks of its own: at most the
            // engine's three 16-token blocks past the last of them go unpredicted.
            let unpredicted = if result["policy"] == "llmd-precise" {
                48 * result["requests"].as_u64().unwrap()
            } else {
                0
            };
            assert!(
                count("served_not_predicted_tokens") <= unpredicted,
                "{result}"
            );
        }
    }
    let (code, stdout, stderr) = kvlint(&args("human"));
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("the router's belief against the engines' truth"),
        "{stdout}"
    );
}

/// Fleet realism and the bounds from the command line: router replicas without shared state
/// are simulated beside one router, late signals and unequal speeds are reported, and every
/// run shows its two bounds, which no policy beats.
#[test]
fn simulate_reports_router_replicas_late_signals_and_the_bounds() {
    let args = |format| {
        vec![
            "simulate",
            CORPUS,
            "--no-trace-cache",
            "--format",
            format,
            "--replicas",
            "2",
            "--cache",
            "400",
            "--routing",
            "round-robin,sglang-cache-aware,prefix-aware,ideal",
            "--prefill-tps",
            "5000",
            "--routers",
            "3",
            "--signal-delay",
            "500",
            "--replica-speed",
            "1,0.5",
        ]
    };
    let (code, stdout, stderr) = kvlint(&args("json"));
    assert_eq!(code, 0, "{stderr}");
    let results: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    // Each policy with one router (always simulated beside) and with three.
    let points: Vec<(&str, u64)> = results
        .iter()
        .map(|result| {
            (
                result["policy"].as_str().unwrap(),
                result["routers"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        points,
        [
            ("round-robin", 1),
            ("round-robin", 3),
            ("sglang-cache-aware", 1),
            ("sglang-cache-aware", 3),
            ("prefix-aware:overload=5", 1),
            ("prefix-aware:overload=5", 3),
            ("ideal", 1),
            ("ideal", 3)
        ]
    );
    for result in &results {
        assert_eq!(result["signal_delay"], 0.5, "{result}");
        assert_eq!(result["replica_speed"], serde_json::json!([1.0, 0.5]));
        let served = result["served_tokens"].as_u64().unwrap();
        let infinite = result["bounds"]["infinite_served_tokens"].as_u64().unwrap();
        let belady = result["bounds"]["belady_served_tokens"].as_u64().unwrap();
        // A pool of 2 × 400 blocks serves less than an infinite cache on the corpus.
        assert!(belady < infinite, "{result}");
        if result["policy"] == "ideal" {
            // Its one cache is the infinite one, beyond the capacity.
            assert_eq!(served, infinite, "{result}");
        } else {
            assert!(served <= belady, "{result}");
        }
    }
    let (code, stdout, stderr) = kvlint(&args("human"));
    assert_eq!(code, 0, "{stderr}");
    for expected in [
        "signals 500 ms late; replica speeds 1, 0.5",
        "what no router and no eviction beats",
        "router replicas without shared state against one router",
        "sglang-cache-aware ×3 routers",
    ] {
        assert!(stdout.contains(expected), "{expected}: {stdout}");
    }
    // --no-bounds leaves both out.
    let (code, stdout, stderr) = kvlint(&[args("json"), vec!["--no-bounds"]].concat());
    assert_eq!(code, 0, "{stderr}");
    let results: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    assert!(results.iter().all(|result| result["bounds"].is_null()));
    for (flag, value, expected) in [
        ("--routers", "0", "--routers must be 1 or more"),
        ("--replica-speed", "1,0", "--replica-speed must be positive"),
        ("--signal-delay", "NaN", "--signal-delay must be a number"),
    ] {
        let (code, _, stderr) = kvlint(&[
            "simulate",
            CORPUS,
            "--no-trace-cache",
            "--cache",
            "10",
            "--prefill-tps",
            "1000",
            flag,
            value,
        ]);
        assert_eq!(code, 2, "{flag} {value}: {stderr}");
        assert!(stderr.contains(expected), "{flag} {value}: {stderr}");
    }
}

/// The decision report: every named router ranked by the sum of its places on served tokens,
/// TTFT p99 and imbalance, each below the winner with its measured reason; with three routers
/// the policies rank with three, and a cache-aware router's tree per router is named as what
/// it loses against one.
#[test]
fn simulate_compare_ranks_every_named_router_and_says_why_each_loses() {
    let args = |format| {
        vec![
            "simulate",
            CORPUS,
            "--no-trace-cache",
            "--format",
            format,
            "--replicas",
            "4",
            "--cache",
            "2000",
            "--arrival",
            "poisson:2",
            "--prefill-tps",
            "8000",
            "--routers",
            "3",
            "--compare",
        ]
    };
    let (code, stdout, stderr) = kvlint(&args("json"));
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let rankings = report["rankings"].as_array().unwrap();
    assert_eq!(rankings.len(), 1);
    assert_eq!(rankings[0]["routers"], 3);
    let ranked = rankings[0]["ranked"].as_array().unwrap();
    let mut policies: Vec<String> = ranked
        .iter()
        .map(|entry| entry["policy"].as_str().unwrap().to_owned())
        .collect();
    policies.sort();
    let mut named: Vec<String> = kvlint_fleet::Policy::named()
        .iter()
        .map(ToString::to_string)
        .collect();
    named.sort();
    assert_eq!(policies, named);
    let results = report["results"].as_array().unwrap();
    let mut sums = Vec::new();
    for (position, entry) in ranked.iter().enumerate() {
        assert_eq!(entry["rank"], position + 1);
        let places: Vec<u64> = entry["places"]
            .as_array()
            .unwrap()
            .iter()
            .map(|place| place.as_u64().unwrap())
            .collect();
        sums.push(places.iter().sum::<u64>());
        // The figures ranked are those of the policy's run with three routers.
        let run = results
            .iter()
            .find(|result| result["policy"] == entry["policy"] && result["routers"] == 3)
            .unwrap();
        assert_eq!(entry["served_tokens"], run["served_tokens"]);
        assert_eq!(entry["ttft_p99"], run["ttft"]["p99"]);
        assert_eq!(entry["imbalance"], run["imbalance"]);
        assert_eq!(entry["reason"].is_null(), position == 0, "{entry}");
    }
    assert!(sums.windows(2).all(|pair| pair[0] <= pair[1]), "{sums:?}");
    // SGLang's router keeps a tree per router: with three, its sessions' hits split.
    let tree = ranked
        .iter()
        .find(|entry| entry["policy"] == "sglang-cache-aware")
        .unwrap();
    assert!(
        tree["reason"]
            .as_str()
            .unwrap()
            .contains("3 routers, each with its own index, serve"),
        "{tree}"
    );
    let (code, human, stderr) = kvlint(&args("human"));
    assert_eq!(code, 0, "{stderr}");
    assert!(human.starts_with("decision report: 4 replicas, cache 2000 blocks, 3 routers"));
    assert!(human.contains("sglang-cache-aware loses: "), "{human}");
    let (code, page, stderr) = kvlint(&args("html"));
    assert_eq!(code, 0, "{stderr}");
    assert!(
        page.find("class=\"ranking\"").unwrap() < page.find("<div class=\"plots\">").unwrap(),
        "the ranked table is on top"
    );
}

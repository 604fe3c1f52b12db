//! `kvlint simulate --calibrate` on a fleet recorded live: two llama-server replicas behind
//! nginx, one `kvlint proxy` in front recording each request with the replica nginx names
//! (`X-Kvlint-Replica: $upstream_addr`) and the cached tokens the engine reported. Replayed
//! through the model of nginx's balancing, every request must go where nginx sent it, and
//! serve from cache what the engine reported. And, without engines, what it refuses.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::common;

/// Two fresh replicas behind nginx balancing with `balance`, the interleaved workload sent
/// through a recording proxy: the recordings' folder, and the cached tokens each request's
/// answer reported, in the order sent.
fn record_fleet(balance: &str, folder: &Path) -> (std::path::PathBuf, Vec<u64>) {
    let (first, second) = (common::replica(), common::replica());
    let gateway = common::gateway(&[&first, &second], balance, &folder.join("nginx"));
    let recorded = folder.join("recorded");
    let proxy = common::proxy_to(
        &[gateway.url.as_str()],
        &recorded,
        kvlint_fixtures::free_port(),
        // The proxy's own requests to the engine would pass through nginx and move its
        // balancing: record only.
        &["--no-prediction", "--engine-kind", "llamacpp"],
    );
    let workload = common::interleaved_workload(3, 3);
    let observed = common::replay(&proxy.url, &workload, &folder.join("client"));
    // The proxy records after it answers: wait for the last line.
    let lines = || -> usize {
        std::fs::read_dir(&recorded).map_or(0, |entries| {
            entries
                .filter_map(|entry| std::fs::read_to_string(entry.ok()?.path()).ok())
                .map(|text| text.lines().count())
                .sum()
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while lines() < workload.len() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    drop(proxy);
    // In the order sent: turn by turn, session by session.
    let mut per_session: Vec<std::vec::IntoIter<u64>> =
        observed.into_iter().map(Vec::into_iter).collect();
    let sent = workload
        .iter()
        .map(|(session, _)| per_session[*session].next().unwrap())
        .collect();
    (recorded, sent)
}

/// `kvlint simulate --calibrate` of `recorded` with `routing` and `options`, as JSON.
fn calibrated(recorded: &Path, routing: &str, options: &[&str]) -> Value {
    let mut args = common::engine_rendering();
    args.extend(
        [
            "--engine",
            "llamacpp:slots=1",
            "--cache",
            "unbounded",
            "--prefill-tps",
            "1000",
            "--routing",
            routing,
            "--format",
            "json",
            "--no-trace-cache",
        ]
        .map(String::from),
    );
    let output = Command::new(env!("CARGO_BIN_EXE_kvlint"))
        .arg("simulate")
        .arg("--calibrate")
        .arg(recorded)
        .args(&args)
        .args(options)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn column(calibration: &Value, field: &str) -> Vec<Value> {
    calibration["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|request| request[field].clone())
        .collect()
}

#[test]
fn calibrate_on_a_round_robin_fleet_agrees_on_every_request_and_serves_what_the_engines_reported() {
    let folder = std::env::temp_dir().join(format!("kvlint-calibrate-rr-{}", std::process::id()));
    let (recorded, observed) = record_fleet("", &folder);
    let calibration = calibrated(&recorded, "round-robin", &[]);
    eprintln!("observed {observed:?}; calibration {calibration:#}");
    assert_eq!(calibration["replicas"].as_array().unwrap().len(), 2);
    // nginx alternates: the recorded replicas are 0, 1, 0, 1, … in arrival order.
    let recorded_replicas: Vec<u64> = column(&calibration, "recorded_replica")
        .iter()
        .map(|replica| replica.as_u64().unwrap())
        .collect();
    assert_eq!(
        recorded_replicas,
        (0..observed.len() as u64)
            .map(|index| index % 2)
            .collect::<Vec<_>>()
    );
    assert!(
        column(&calibration, "class")
            .iter()
            .all(|class| class == "agree"),
        "{calibration:#}"
    );
    assert_eq!(calibration["agreement"]["agreement"], 1.0);
    let reported: Vec<u64> = column(&calibration, "recorded_served_tokens")
        .iter()
        .map(|tokens| tokens.as_u64().unwrap())
        .collect();
    assert_eq!(reported, observed);
    let simulated: Vec<u64> = column(&calibration, "simulated_served_tokens")
        .iter()
        .map(|tokens| tokens.as_u64().unwrap())
        .collect();
    assert_eq!(simulated, observed);
    assert!(observed.iter().any(|tokens| *tokens > 0), "{observed:?}");
    // Told the replicas the other way round, the model starts its turn on the other one:
    // the first request disagrees. Teacher-forced, its turn then continues after the replica
    // nginx chose, and the rest agree; free, every request disagrees.
    let names: Vec<&str> = calibration["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|name| name.as_str().unwrap())
        .collect();
    let reversed = format!("http://{}/,{}", names[1], names[0]);
    let classes = |options: &[&str]| -> Vec<String> {
        let calibration = calibrated(&recorded, "round-robin", options);
        column(&calibration, "class")
            .iter()
            .map(|class| class.as_str().unwrap().to_owned())
            .collect()
    };
    let mut expected = vec!["agree".to_owned(); observed.len()];
    expected[0] = "disagree-miss".to_owned();
    assert_eq!(classes(&["--calibrate-replicas", &reversed]), expected);
    assert_eq!(
        classes(&["--calibrate-replicas", &reversed, "--calibrate-free"]),
        vec!["disagree-miss".to_owned(); observed.len()]
    );
    std::fs::remove_dir_all(&folder).ok();
}

#[test]
fn calibrate_on_a_hashing_fleet_serves_what_the_engines_reported_and_keeps_sessions_together() {
    let folder = std::env::temp_dir().join(format!("kvlint-calibrate-hash-{}", std::process::id()));
    let (recorded, observed) = record_fleet("hash $http_x_session consistent;", &folder);
    let calibration = calibrated(&recorded, "session-hash", &[]);
    eprintln!("observed {observed:?}; calibration {calibration:#}");
    // Teacher-forced, the engines' caches are where nginx sent each request: the served
    // tokens are the engines', whatever the model would have chosen.
    let simulated: Vec<u64> = column(&calibration, "simulated_served_tokens")
        .iter()
        .map(|tokens| tokens.as_u64().unwrap())
        .collect();
    assert_eq!(simulated, observed);
    assert_eq!(calibration["served"]["absolute_error_tokens"], 0);
    // nginx's ring and kvlint's hash differ (nginx hashes the replicas' addresses, here on
    // random ports), so a session agrees or disagrees as a whole: both keep it on one
    // replica.
    let mut by_file: std::collections::BTreeMap<String, Vec<Value>> = Default::default();
    for request in calibration["requests"].as_array().unwrap() {
        by_file
            .entry(request["file"].as_str().unwrap().to_owned())
            .or_default()
            .push(request["class"].clone());
    }
    assert_eq!(by_file.len(), 3, "{by_file:?}");
    for classes in by_file.values() {
        assert!(
            classes.iter().all(|class| class == &classes[0]),
            "{by_file:?}"
        );
    }
    std::fs::remove_dir_all(&folder).ok();
}

#[test]
fn calibrate_refuses_a_recording_without_its_replica_naming_the_file_and_the_line() {
    let folder =
        std::env::temp_dir().join(format!("kvlint-calibrate-input-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let line = |replica: &str| {
        format!(
            r#"{{"request": {{"messages": [{{"role": "user", "content": "Fix the test."}}]}}, "response": {{"usage": {{"prompt_tokens": 12, "prompt_tokens_details": {{"cached_tokens": 0}}}}}}, "time": "2026-12-01T00:00:00.000Z"{replica}}}"#
        )
    };
    let recording = folder.join("session-0001.jsonl");
    std::fs::write(
        &recording,
        format!(
            "{}\n{}\n",
            line(r#", "replica": "127.0.0.1:8081""#),
            line("")
        ),
    )
    .unwrap();
    let recording = recording.display().to_string();
    let (code, stdout, stderr) = common::kvlint(&[
        "simulate",
        "--calibrate",
        &recording,
        "--routing",
        "round-robin",
        "--cache",
        "unbounded",
        "--prefill-tps",
        "1000",
    ]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    // Without the wrapping at the terminal's width (at spaces and hyphens) and its frame.
    let squeezed = |text: &str| {
        text.split_whitespace()
            .filter(|word| *word != "|")
            .collect::<String>()
    };
    assert!(
        squeezed(&stderr).contains(&squeezed(&format!(
            "{recording}:2: the request has no `replica` field"
        ))),
        "{stderr}"
    );
    // One policy: the router that was deployed.
    let (code, _, stderr) = common::kvlint(&[
        "simulate",
        "--calibrate",
        &recording,
        "--routing",
        "round-robin,session-hash",
        "--cache",
        "unbounded",
        "--prefill-tps",
        "1000",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("one policy"), "{stderr}");
    std::fs::remove_dir_all(&folder).ok();
}

//! The fleet check against real engines: two llama-server replicas behind nginx (Debian's
//! package, started on loopback ports by the test). Round-robin loses locality, and kvlint
//! finds and counts it; hashing on the SDK's routing-key header loses none.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;

use common::{gateway, replica};
use kvlint_fixtures::Served;

use serde_json::Value;

use crate::common;

fn probe(gateway: &Served, replicas: &[&Served], session: &Path) -> Value {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kvlint"));
    command.current_dir(kvlint_fixtures::repository()).args([
        "probe",
        "--format",
        "json",
        "--gateway",
        &gateway.url,
    ]);
    for replica in replicas {
        command.args(["--replica", &replica.url]);
    }
    let output = command.arg(session).output().unwrap();
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&output.stderr)))
}

#[test]
fn round_robin_loses_locality_and_hashing_on_the_routing_key_keeps_it() {
    let (first, second) = (replica(), replica());
    let replicas = [&first, &second];
    let folder = std::env::temp_dir().join(format!("kvlint-fleet-{}", std::process::id()));

    let recorded = kvlint_fixtures::root().join("cache/answers-sent-back.jsonl");
    let round_robin = gateway(&replicas, "", &folder.join("round-robin"));
    let report = probe(&round_robin, &replicas, &recorded);
    drop(round_robin);
    let turns = report["sessions"][0]["turns"].as_array().unwrap().clone();
    for turn in &turns {
        assert_eq!(turn["match"], true, "{turn}");
    }
    let served_by: Vec<u64> = turns
        .iter()
        .map(|turn| turn["replica"].as_u64().unwrap())
        .collect();
    assert!(
        served_by.windows(2).all(|pair| pair[0] != pair[1]),
        "round-robin alternates: {served_by:?}"
    );
    // Turn 1 went to the replica that never saw turn 0.
    assert_eq!(turns[1]["observed_cached_tokens"], 0);
    assert!(
        turns[1]["lost_locality_tokens"].as_u64().unwrap() > 0,
        "{}",
        turns[1]
    );
    assert!(
        turns[1]["note"]
            .as_str()
            .unwrap()
            .contains("had not seen the prefix")
    );

    // Fresh replicas: kvlint models each replica's slot from what it sent in this run.
    drop((first, second));
    let (first, second) = (replica(), replica());
    let replicas = [&first, &second];
    // A session assembled with the SDK: its bodies carry the SDK's routing key, which the
    // probe sends in the header nginx hashes on.
    let (session, routing_key) = common::sdk_session(&folder);
    let hashed = gateway(
        &replicas,
        "hash $http_x_kvlint_routing_key consistent;",
        &folder.join("hash"),
    );
    let report = probe(&hashed, &replicas, &session);
    assert_eq!(report["sessions"][0]["routing_key"], routing_key.as_str());
    let turns = report["sessions"][0]["turns"].as_array().unwrap().clone();
    let served_by: Vec<u64> = turns
        .iter()
        .map(|turn| turn["replica"].as_u64().unwrap())
        .collect();
    assert!(
        served_by.windows(2).all(|pair| pair[0] == pair[1]),
        "one replica: {served_by:?}"
    );
    for turn in &turns {
        assert_eq!(turn["match"], true, "{turn}");
        assert_eq!(turn["lost_locality_tokens"], 0, "{turn}");
    }
    std::fs::remove_dir_all(&folder).ok();
}

//! The fleet check against real engines: two llama-server replicas behind nginx (Debian's
//! package, started on loopback ports by the test). Round-robin loses locality, and kvlint
//! finds and counts it; hashing on the SDK's routing-key header loses none.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use kvlint_fixtures::Served;

use serde_json::Value;

mod common;

fn replica() -> Served {
    kvlint_fixtures::start_llama_server()
        .expect("llama-server or the tiny model missing: run scripts/build-llama-server.sh and scripts/make-tiny-model.py")
}

fn nginx() -> PathBuf {
    ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .iter()
        .map(PathBuf::from)
        .find(|path| path.is_file())
        .expect("nginx missing: apt-get install nginx (scripts/test.sh does)")
}

/// nginx in front of the replicas, with `balance` as the upstream's balancing line: one
/// process (no master and workers), so that stopping it leaves none behind.
fn gateway(replicas: &[&Served], balance: &str, folder: &Path) -> Served {
    std::fs::create_dir_all(folder).unwrap();
    let port = kvlint_fixtures::free_port();
    let servers: String = replicas
        .iter()
        .map(|replica| {
            format!(
                "    server {};\n",
                replica.url.trim_start_matches("http://")
            )
        })
        .collect();
    let dir = folder.display();
    let config = format!(
        "daemon off;\nmaster_process off;\npid {dir}/nginx.pid;\nerror_log {dir}/error.log;\nevents {{}}\n\
         http {{\n  access_log off;\n  client_body_temp_path {dir}/body;\n  proxy_temp_path {dir}/proxy;\n\
         fastcgi_temp_path {dir}/fastcgi;\n  uwsgi_temp_path {dir}/uwsgi;\n  scgi_temp_path {dir}/scgi;\n\
         upstream replicas {{\n    {balance}\n{servers}  }}\n\
         server {{\n    listen 127.0.0.1:{port};\n    location / {{ proxy_pass http://replicas; proxy_http_version 1.1; }}\n  }}\n}}\n"
    );
    let path = folder.join("nginx.conf");
    std::fs::write(&path, config).unwrap();
    let child = Command::new(nginx())
        .arg("-c")
        .arg(&path)
        .arg("-p")
        .arg(folder)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Served {
        child,
        url: format!("http://127.0.0.1:{port}"),
    }
    .wait_until_healthy("/health")
}

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

//! `kvlint proxy` in front of a real llama-server: requests and responses pass through
//! (streamed ones as a stream), the recorded session checks like the bodies sent, and the
//! proxy's counters add up to the engine's own.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};

use kvlint_fixtures::Served;
use serde_json::{Value, json};

mod common;

fn llama_server() -> Served {
    kvlint_fixtures::start_llama_server()
        .expect("llama-server or the tiny model missing: run scripts/build-llama-server.sh and scripts/make-tiny-model.py")
        .wait_until_healthy("/health")
}

fn proxy(upstream: &Served, record: &Path, metrics_port: u16) -> Served {
    proxy_with(upstream, record, metrics_port, &[])
}

fn proxy_with(upstream: &Served, record: &Path, metrics_port: u16, options: &[&str]) -> Served {
    let port = kvlint_fixtures::free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_kvlint"))
        .args(["proxy", "--listen", &format!("127.0.0.1:{port}")])
        .args(options)
        .args(["--upstream", &upstream.url])
        .args(["--metrics", &format!("127.0.0.1:{metrics_port}")])
        .arg("--record")
        .arg(record)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Served {
        child,
        url: format!("http://127.0.0.1:{port}"),
    }
    // /health is forwarded: healthy once both the proxy and the engine answer.
    .wait_until_healthy("/health")
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|line| line.starts_with(name) && !line.starts_with('#'))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn get(url: &str) -> String {
    ureq::get(url)
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap()
}

/// Sends `body` streamed and returns the raw server-sent events.
fn post_streamed(url: &str, body: &Value) -> String {
    let mut response = ureq::post(format!("{url}/v1/chat/completions"))
        .send_json(body)
        .unwrap();
    assert_eq!(
        response
            .headers()
            .get("content-type")
            .unwrap()
            .to_str()
            .unwrap(),
        "text/event-stream"
    );
    let mut text = String::new();
    response
        .body_mut()
        .as_reader()
        .read_to_string(&mut text)
        .unwrap();
    text
}

fn findings(session: &Path) -> Vec<(String, u64)> {
    let output = Command::new(env!("CARGO_BIN_EXE_kvlint"))
        .args(["check", "--format", "json"])
        .arg(session)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&output.stderr)));
    report["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|session| session["findings"].as_array().unwrap())
        .map(|finding| {
            (
                finding["rule"].as_str().unwrap().to_owned(),
                finding["turn"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn the_recorded_session_checks_like_the_bodies_sent_and_the_counters_add_up() {
    let engine = llama_server();
    let record = std::env::temp_dir().join(format!("kvlint-proxy-{}", std::process::id()));
    let metrics_port = kvlint_fixtures::free_port();
    let proxy = proxy(&engine, &record, metrics_port);
    let metrics_url = format!("http://127.0.0.1:{metrics_port}/metrics");
    let session = kvlint_fixtures::repository().join("fixtures/examples/coding-agent.jsonl");
    let engine_before = get(&format!("{}/metrics", engine.url));

    let bodies: Vec<Value> = std::fs::read_to_string(&session)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    for (turn, body) in bodies.iter().enumerate() {
        let mut sent = body.clone();
        sent["max_tokens"] = json!(1);
        sent["temperature"] = json!(0);
        if turn % 2 == 1 {
            // Streamed: the events arrive through the proxy as the engine sends them.
            sent["stream"] = json!(true);
            sent["stream_options"] = json!({"include_usage": true});
            let events = post_streamed(&proxy.url, &sent);
            assert!(events.trim_end().ends_with("data: [DONE]"), "{events}");
        } else {
            let answer = common::post(&proxy.url, "/v1/chat/completions", &sent).unwrap();
            assert!(answer["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
        }
    }

    // The counters, once the analysis has seen every turn.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let counted = loop {
        let text = get(&metrics_url);
        if metric(&text, "kvlint_requests_total") as usize == bodies.len()
            || std::time::Instant::now() > deadline
        {
            break text;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let engine_after = get(&format!("{}/metrics", engine.url));
    let engine_delta = |name: &str| metric(&engine_after, name) - metric(&engine_before, name);
    assert_eq!(
        metric(&counted, "kvlint_requests_total") as usize,
        bodies.len()
    );
    assert_eq!(
        metric(&counted, "kvlint_prompt_tokens_total"),
        engine_delta("llamacpp:prompt_tokens_total")
            + metric(&counted, "kvlint_prompt_tokens_cached_total"),
        "prompt tokens: the engine counts those it computed; the proxy, computed and cached\n{counted}\n{engine_after}"
    );

    // The recording: one session, one line per turn, that checks like the bodies sent.
    drop(proxy);
    let recorded: Vec<_> = std::fs::read_dir(&record)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    let lines = std::fs::read_to_string(&recorded[0]).unwrap();
    assert_eq!(lines.lines().count(), bodies.len());
    let expected = findings(&session);
    assert!(!expected.is_empty(), "the example session has breaks");
    assert_eq!(findings(&recorded[0]), expected);
    let findings_counted = metric(&counted, "kvlint_findings_total");
    assert_eq!(findings_counted as usize, expected.len(), "{counted}");

    // Recorded with --redact: no text of the session, the same findings in the same turns.
    let redacted_folder = record.with_extension("redacted");
    let redacting_metrics = kvlint_fixtures::free_port();
    let redacting = proxy_with(&engine, &redacted_folder, redacting_metrics, &["--redact"]);
    for body in &bodies {
        let mut sent = body.clone();
        sent["max_tokens"] = json!(1);
        common::post(&redacting.url, "/v1/chat/completions", &sent).unwrap();
    }
    wait_for_requests(
        &format!("http://127.0.0.1:{redacting_metrics}/metrics"),
        bodies.len(),
    );
    drop(redacting);
    let redacted: Vec<_> = std::fs::read_dir(&redacted_folder)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(redacted.len(), 1, "{redacted:?}");
    let text = std::fs::read_to_string(&redacted[0]).unwrap();
    assert_eq!(text.lines().count(), bodies.len());
    assert!(
        !text.contains("careful coding agent"),
        "the system prompt is hidden"
    );
    assert_eq!(findings(&redacted[0]), expected);
    std::fs::remove_dir_all(&redacted_folder).ok();

    // The Grafana dashboard reads only counters the proxy exports.
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(
            kvlint_fixtures::repository().join("docs/grafana-kvlint-proxy.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let expressions: Vec<&str> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|panel| panel["targets"].as_array().unwrap())
        .map(|target| target["expr"].as_str().unwrap())
        .collect();
    assert!(expressions.len() >= 6);
    for expression in expressions {
        for name in expression
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|word| word.starts_with("kvlint_") && word.ends_with("_total"))
        {
            let family = name.trim_end_matches("_total");
            assert!(
                counted.contains(&format!("# TYPE {family} counter")),
                "the dashboard reads {name}, which the proxy does not export\n{counted}"
            );
        }
    }
    std::fs::remove_dir_all(&record).ok();
}

/// Sends each body of `session` through the proxy with the SDK's routing header, as the
/// agent would (one generated token, greedy).
fn send_session(proxy: &Served, session: &Path, routing_key: &str) -> usize {
    let bodies = std::fs::read_to_string(session).unwrap();
    let mut sent = 0;
    for line in bodies.lines() {
        let mut body: Value = serde_json::from_str(line).unwrap();
        body["max_tokens"] = json!(1);
        body["temperature"] = json!(0);
        ureq::post(format!("{}/v1/chat/completions", proxy.url))
            .header("x-kvlint-routing-key", routing_key)
            .send_json(&body)
            .unwrap();
        sent += 1;
    }
    sent
}

/// Prompt tokens the replicas computed (not served from cache), from their own counters.
fn computed(replicas: &[&Served]) -> f64 {
    replicas
        .iter()
        .map(|replica| {
            metric(
                &get(&format!("{}/metrics", replica.url)),
                "llamacpp:prompt_tokens_total",
            )
        })
        .sum()
}

fn wait_for_requests(metrics_url: &str, requests: usize) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let text = get(metrics_url);
        if metric(&text, "kvlint_requests_total") as usize >= requests
            || std::time::Instant::now() > deadline
        {
            return text;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Two replicas behind nginx, the proxy in front. Round-robin sends turns of one session to
/// the replica that did not see the turn before: the proxy counts those tokens as lost to
/// locality, and they are exactly what the replicas computed beyond what the same session
/// costs when nginx hashes on the SDK's routing key, where none are lost.
#[test]
fn lost_locality_adds_up_to_what_the_replicas_computed_again() {
    let folder = std::env::temp_dir().join(format!("kvlint-proxy-fleet-{}", std::process::id()));
    let (session, routing_key) = common::sdk_session(&folder);
    let mut runs = Vec::new();
    for (name, balance) in [
        ("round-robin", ""),
        ("hash", "hash $http_x_kvlint_routing_key consistent;"),
    ] {
        let (first, second) = (common::replica(), common::replica());
        let replicas = [&first, &second];
        let gateway = common::gateway(&replicas, balance, &folder.join(name));
        let metrics_port = kvlint_fixtures::free_port();
        let proxy = proxy(
            &gateway,
            &folder.join(format!("{name}-sessions")),
            metrics_port,
        );
        let before = computed(&replicas);
        let turns = send_session(&proxy, &session, &routing_key);
        let counted = wait_for_requests(&format!("http://127.0.0.1:{metrics_port}/metrics"), turns);
        let computed_again = computed(&replicas) - before;
        let lost = |cause: &str| {
            let label = format!("cause=\"{cause}\"");
            counted
                .lines()
                .filter(|line| {
                    line.starts_with("kvlint_prompt_tokens_lost_total{") && line.contains(&label)
                })
                .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>()
        };
        runs.push((
            name,
            computed_again,
            lost("locality"),
            lost("eviction") + lost("unknown"),
            counted,
        ));
    }
    let (_, round_robin_computed, round_robin_lost, round_robin_other, round_robin_metrics) =
        &runs[0];
    let (_, hash_computed, hash_lost, hash_other, hash_metrics) = &runs[1];
    assert_eq!(*hash_lost, 0.0, "{hash_metrics}");
    assert_eq!(*hash_other, 0.0, "{hash_metrics}");
    assert_eq!(*round_robin_other, 0.0, "{round_robin_metrics}");
    assert!(*round_robin_lost > 0.0, "{round_robin_metrics}");
    assert_eq!(
        *round_robin_lost,
        round_robin_computed - hash_computed,
        "{round_robin_metrics}"
    );
    std::fs::remove_dir_all(&folder).ok();
}

/// Whatever the upstream or the client does, the proxy answers as the upstream answered, or
/// says why it could not, and keeps serving.
#[test]
fn the_proxy_survives_a_dead_upstream_big_bodies_many_clients_and_clients_that_leave() {
    let folder = std::env::temp_dir().join(format!("kvlint-proxy-hostile-{}", std::process::id()));
    // An upstream nobody listens on: 502 with the reason, counted.
    let nobody = Served {
        child: Command::new("sleep").arg("60").spawn().unwrap(),
        url: format!("http://127.0.0.1:{}", kvlint_fixtures::free_port()),
    };
    let metrics_port = kvlint_fixtures::free_port();
    let port = kvlint_fixtures::free_port();
    let dead = Served {
        child: Command::new(env!("CARGO_BIN_EXE_kvlint"))
            .args([
                "proxy",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--upstream",
                &nobody.url,
            ])
            .args(["--metrics", &format!("127.0.0.1:{metrics_port}")])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
        url: format!("http://127.0.0.1:{port}"),
    }
    .wait_until_healthy_for("/metrics-is-not-here", std::time::Duration::from_secs(2));
    let errors = || {
        let counted = get(&format!("http://127.0.0.1:{metrics_port}/metrics"));
        metric(&counted, "kvlint_proxy_upstream_errors_total")
    };
    let before = errors();
    let answer = ureq::post(format!("{}/v1/chat/completions", dead.url))
        .config()
        .http_status_as_error(false)
        .build()
        .send_json(json!({"messages": [{"role": "user", "content": "hi"}]}))
        .unwrap();
    assert_eq!(answer.status(), 502);
    assert_eq!(errors(), before + 1.0);
    drop((dead, nobody));

    let engine = llama_server();
    let proxy = proxy(&engine, &folder, kvlint_fixtures::free_port());
    // A 10 MB body: forwarded whole, and the engine's own answer comes back unchanged.
    let huge = json!({"messages": [{"role": "user", "content": "word ".repeat(2_000_000)}], "max_tokens": 1});
    let status = |url: &str| {
        ureq::post(format!("{url}/v1/chat/completions"))
            .config()
            .http_status_as_error(false)
            .build()
            .send_json(&huge)
            .unwrap()
            .status()
    };
    assert_eq!(status(&proxy.url), status(&engine.url));
    // A client that leaves in the middle of a stream.
    {
        let mut response = ureq::post(format!("{}/v1/chat/completions", proxy.url))
            .send_json(json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 64, "stream": true}))
            .unwrap();
        let mut first = [0u8; 16];
        response
            .body_mut()
            .as_reader()
            .read_exact(&mut first)
            .unwrap();
    }
    // 1,000 clients at once.
    let clients: Vec<_> = (0..1000)
        .map(|_| {
            let url = format!("{}/health", proxy.url);
            std::thread::spawn(move || ureq::get(&url).call().map(|answer| answer.status()))
        })
        .collect();
    for client in clients {
        assert_eq!(client.join().unwrap().unwrap(), 200);
    }
    assert_eq!(
        ureq::get(format!("{}/health", proxy.url))
            .call()
            .unwrap()
            .status(),
        200
    );
    // The peak memory of all that: the 10 MB body, a stream cut short, 1,000 connections.
    let status = std::fs::read_to_string(format!("/proc/{}/status", proxy.child.id())).unwrap();
    let peak_kb: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.split_whitespace().next()?.parse().ok())
        .unwrap();
    eprintln!("kvlint proxy peak resident memory: {} MB", peak_kb / 1024);
    assert!(peak_kb < 512 * 1024, "{peak_kb} kB");
    std::fs::remove_dir_all(&folder).ok();
}

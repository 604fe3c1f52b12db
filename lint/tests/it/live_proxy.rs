//! `kvlint proxy` in front of a real llama-server: requests and responses pass through
//! (streamed ones as a stream), the recorded session checks like the bodies sent, and the
//! proxy's counters add up to the engine's own.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Read;
use std::path::Path;
use std::process::Command;

use kvlint_fixtures::Served;
use serde_json::{Value, json};

use crate::common;

use common::{get, metric, proxy_to};

fn llama_server() -> Served {
    kvlint_fixtures::start_llama_server()
        .expect("llama-server or the tiny model missing: run scripts/build-llama-server.sh and scripts/make-tiny-model.py")
        .wait_until_healthy("/health")
}

fn proxy(upstream: &Served, record: &Path, metrics_port: u16) -> Served {
    proxy_with(upstream, record, metrics_port, &[])
}

fn proxy_with(upstream: &Served, record: &Path, metrics_port: u16, options: &[&str]) -> Served {
    proxy_to(&[upstream.url.as_str()], record, metrics_port, options)
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

/// How the fleet test puts two replicas behind the proxy.
enum Front {
    /// nginx with this balancing line, naming the replica in a response header.
    Gateway(&'static str),
    /// nginx round-robin, silent: the proxy reads the replicas' metrics.
    SilentGateway,
    /// The proxy itself, with these options, each replica an `--upstream`.
    Upstreams(&'static [&'static str]),
}

/// Two replicas, the proxy in front, sent one session. Round-robin (nginx's, or the proxy's)
/// sends turns of the session to the replica that did not see the turn before: the proxy
/// counts those tokens as lost to locality, and they are exactly what the replicas computed
/// beyond what the same session costs when nginx hashes on the SDK's routing key, where none
/// are lost, as none are when the proxy balances on the routing key itself.
#[test]
fn lost_locality_adds_up_to_what_the_replicas_computed_again() {
    let folder = std::env::temp_dir().join(format!("kvlint-proxy-fleet-{}", std::process::id()));
    let (session, routing_key) = common::sdk_session(&folder);
    let runs: Vec<(&str, f64, f64, f64, String)> = [
        (
            "nginx hash",
            Front::Gateway("hash $http_x_kvlint_routing_key consistent;"),
        ),
        ("nginx round-robin", Front::Gateway("")),
        (
            "nginx round-robin, replicas read off their metrics",
            Front::SilentGateway,
        ),
        (
            "proxy round-robin",
            Front::Upstreams(&["--balance", "round-robin"]),
        ),
        ("proxy routing-key", Front::Upstreams(&[])),
    ]
    .into_iter()
    .map(|(name, front)| {
        let (first, second) = (common::replica(), common::replica());
        let (first, second) = (
            first.wait_until_healthy("/health"),
            second.wait_until_healthy("/health"),
        );
        let replicas = [&first, &second];
        let scratch = folder.join(name.replace([' ', ','], "-"));
        let metrics_port = kvlint_fixtures::free_port();
        let record = scratch.join("sessions");
        let (_gateway, proxy) = match front {
            Front::Gateway(balance) => {
                let gateway = common::gateway(&replicas, balance, &scratch);
                // The proxy asks a replica for tokens, not the gateway, whose balancing its
                // own requests would shift.
                let options = ["--engine-api", &first.url];
                let proxy = proxy_with(&gateway, &record, metrics_port, &options);
                (Some(gateway), proxy)
            }
            Front::SilentGateway => {
                let gateway = common::silent_gateway(&replicas, "", &scratch);
                let options = [
                    "--replica-metrics",
                    &first.url,
                    "--replica-metrics",
                    &second.url,
                ];
                let proxy = proxy_with(&gateway, &record, metrics_port, &options);
                (Some(gateway), proxy)
            }
            Front::Upstreams(options) => {
                let upstreams = [first.url.as_str(), second.url.as_str()];
                (None, proxy_to(&upstreams, &record, metrics_port, options))
            }
        };
        let before = computed(&replicas);
        let turns = send_session(&proxy, &session, &routing_key);
        let counted = wait_for_requests(&format!("http://127.0.0.1:{metrics_port}/metrics"), turns);
        let computed_again = computed(&replicas) - before;
        // Each turn's record names the replica that served it.
        let named: Vec<String> = walk(&record)
            .iter()
            .flat_map(|path| {
                std::fs::read_to_string(path)
                    .unwrap()
                    .lines()
                    .map(|line| serde_json::from_str::<Value>(line).unwrap()["replica"].to_string())
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(named.len(), turns, "{name}");
        assert!(
            named.iter().all(|replica| replica.contains("127.0.0.1:")),
            "{name}: {named:?}"
        );
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
        let other = [
            "eviction",
            "locality_or_eviction",
            "ttl",
            "below_minimum",
            "unknown",
        ]
        .map(lost)
        .iter()
        .sum();
        (name, computed_again, lost("locality"), other, counted)
    })
    .collect();
    let (_, hash_computed, ..) = runs[0];
    for (name, computed_again, locality, other, metrics) in &runs {
        eprintln!("{name}: computed {computed_again}, lost to locality {locality}, other {other}");
        assert_eq!(*other, 0.0, "{name}\n{metrics}");
        assert_eq!(
            *locality,
            computed_again - hash_computed,
            "{name}\n{metrics}"
        );
        let keeps_locality = name.contains("hash") || name.contains("routing-key");
        assert_eq!(*locality == 0.0, keeps_locality, "{name}\n{metrics}");
    }
    std::fs::remove_dir_all(&folder).ok();
}

/// Sends `sessions` growing conversations of `turns` turns through the proxy at `url`,
/// interleaved (turn 0 of each, then turn 1, …), as agents do (each answer sent back in the
/// next turn), the system prompt of a session's turn `system(session, turn)`; returns which
/// of `replicas` served each request, read off their generated-token counters.
fn converse(
    url: &str,
    replicas: &[&Served],
    system: impl Fn(usize, usize) -> String,
    (sessions, turns): (usize, usize),
) -> Vec<usize> {
    let generated = |replica: &&Served| {
        metric(
            &get(&format!("{}/metrics", replica.url)),
            "llamacpp:tokens_predicted_total",
        )
    };
    let mut histories = vec![Vec::new(); sessions];
    let mut served_by = Vec::new();
    for (turn, session) in
        (0..turns).flat_map(|turn| (0..sessions).map(move |session| (turn, session)))
    {
        let history = &mut histories[session];
        history.push(json!({"role": "user", "content": format!("Step {turn}: read the next file and say what it does.")}));
        let mut messages = vec![json!({"role": "system", "content": system(session, turn)})];
        messages.extend(history.iter().cloned());
        let before: Vec<f64> = replicas.iter().map(generated).collect();
        let body = json!({"messages": messages, "max_tokens": 4, "temperature": 0});
        let answer = common::post(url, "/v1/chat/completions", &body).unwrap();
        let moved: Vec<usize> = replicas
            .iter()
            .map(generated)
            .zip(&before)
            .enumerate()
            .filter(|(_, (now, before))| now > *before)
            .map(|(index, _)| index)
            .collect();
        assert_eq!(moved.len(), 1, "turn {turn}: {moved:?}");
        served_by.push(moved[0]);
        history.push(answer["choices"][0]["message"].clone());
    }
    served_by
}

/// Two llama-server replicas behind nginx round-robin that does not say which one served.
/// The proxy asks one replica itself for tokens and settings, so only the agent's requests
/// pass through the gateway and its turns alternate replicas. With the replicas read off their
/// metrics, the prediction (llama.cpp's slots and host prompt cache, generated tokens kept, as
/// `kvlint simulate` models them) is what the replicas served, three sessions taking turns on
/// each replica's one slot. Without, the losses the
/// alternation causes are `locality_or_eviction` (the replica cannot be known), never
/// `eviction`; and a timestamp in the system prompt is a loss named by its rule.
#[test]
fn behind_a_silent_round_robin_gateway_the_causes_are_honest() {
    if common::nginx_binary().is_none() {
        return kvlint_fixtures::missing_oracle(
            "nginx",
            "apt-get install nginx (scripts/test.sh does)",
        );
    }
    let folder = std::env::temp_dir().join(format!("kvlint-proxy-silent-{}", std::process::id()));
    let (first, second) = (common::replica(), common::replica());
    let (first, second) = (
        first.wait_until_healthy("/health"),
        second.wait_until_healthy("/health"),
    );
    let replicas = [&first, &second];
    let gateway = common::silent_gateway(&replicas, "", &folder.join("nginx"));
    let rules = "You are a careful coding agent: read before you write, and test what you change. "
        .repeat(12);
    let alternates = |served_by: &[usize]| served_by.windows(2).all(|pair| pair[0] != pair[1]);

    let metrics_port = kvlint_fixtures::free_port();
    let options = [
        "--replica-metrics",
        &first.url,
        "--replica-metrics",
        &second.url,
    ];
    let known = proxy_with(&gateway, &folder.join("known"), metrics_port, &options);
    let turns = 6;
    let project = |session: usize, _| format!("Project {session}.\n{rules}");
    let served_by = converse(&known.url, &replicas, project, (3, turns));
    assert!(alternates(&served_by), "{served_by:?}");
    let counted = wait_for_requests(
        &format!("http://127.0.0.1:{metrics_port}/metrics"),
        3 * turns,
    );
    let served = metric(&counted, "kvlint_prompt_tokens_cached_total");
    let predicted = metric(&counted, "kvlint_prompt_tokens_predicted_cached_total");
    eprintln!("served {served}, predicted {predicted}");
    assert!(served > 0.0, "{counted}");
    assert_eq!(predicted, served, "{counted}");
    drop(known);

    let metrics_port = kvlint_fixtures::free_port();
    let options = ["--engine-api", &first.url];
    let unknown = proxy_with(&gateway, &folder.join("unknown"), metrics_port, &options);
    let timestamped = |_, turn: usize| {
        let minute = if turn < 3 { 0 } else { 5 };
        format!("Current time: 2026-12-01T10:{minute:02}:00Z.\n{rules}")
    };
    let served_by = converse(&unknown.url, &replicas, timestamped, (1, turns));
    assert!(alternates(&served_by), "{served_by:?}");
    let counted = wait_for_requests(&format!("http://127.0.0.1:{metrics_port}/metrics"), turns);
    let lost = |cause: &str| {
        metric(
            &counted,
            &format!(
                "kvlint_prompt_tokens_lost_total{{upstream=\"{}\",cause=\"{cause}\"}}",
                gateway.url
            ),
        )
    };
    eprintln!(
        "locality_or_eviction {}, volatile-timestamp {}",
        lost("locality_or_eviction"),
        lost("volatile-timestamp")
    );
    assert!(lost("locality_or_eviction") > 0.0, "{counted}");
    assert_eq!(
        lost("eviction") + lost("locality") + lost("unknown"),
        0.0,
        "{counted}"
    );
    assert!(lost("volatile-timestamp") > 0.0, "{counted}");
    std::fs::remove_dir_all(&folder).ok();
}

/// An engine behind https (nginx with a certificate of its own authority): forwarded,
/// predicted and counted as over http once the proxy trusts that authority, and refused
/// (502, with the reason) when it does not.
#[test]
fn an_https_upstream_is_forwarded_and_its_certificate_checked() {
    let folder = std::env::temp_dir().join(format!("kvlint-proxy-tls-{}", std::process::id()));
    let engine = llama_server();
    let gateway = common::tls_gateway(&engine, &folder.join("nginx"));
    let authority = folder.join("nginx/ca.pem");
    let metrics_port = kvlint_fixtures::free_port();
    let trusting = proxy_with(
        &gateway,
        &folder.join("sessions"),
        metrics_port,
        &["--upstream-ca", authority.to_str().unwrap()],
    );
    let engine_before = get(&format!("{}/metrics", engine.url));
    let mut messages =
        vec![json!({"role": "system", "content": "You are a careful coding agent. ".repeat(20)})];
    let turns = 4;
    for turn in 0..turns {
        messages
            .push(json!({"role": "user", "content": format!("Step {turn}: read the next file.")}));
        let body = json!({"messages": messages, "max_tokens": 1, "temperature": 0});
        let answer = common::post(&trusting.url, "/v1/chat/completions", &body).unwrap();
        let text = answer["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_owned();
        messages.push(json!({"role": "assistant", "content": text}));
    }
    let counted = wait_for_requests(&format!("http://127.0.0.1:{metrics_port}/metrics"), turns);
    let engine_after = get(&format!("{}/metrics", engine.url));
    let engine_delta = |name: &str| metric(&engine_after, name) - metric(&engine_before, name);
    assert_eq!(metric(&counted, "kvlint_requests_total"), turns as f64);
    assert_eq!(
        metric(&counted, "kvlint_prompt_tokens_total"),
        engine_delta("llamacpp:prompt_tokens_total")
            + metric(&counted, "kvlint_prompt_tokens_cached_total"),
        "{counted}"
    );
    // The engine's tokens came over https too: the prediction is the engine's own count.
    let cached = metric(&counted, "kvlint_prompt_tokens_cached_total");
    assert!(cached > 0.0, "{counted}");
    assert_eq!(
        metric(&counted, "kvlint_prompt_tokens_predicted_cached_total"),
        cached,
        "{counted}"
    );
    drop(trusting);

    // Without the authority: the certificate is not trusted, and the client is told.
    let doubting = proxy(
        &gateway,
        &folder.join("refused"),
        kvlint_fixtures::free_port(),
    );
    let refused = common::post(
        &doubting.url,
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}),
    )
    .unwrap_err();
    assert!(
        refused.contains("kvlint proxy") && refused.contains("certificate"),
        "{refused}"
    );
    std::fs::remove_dir_all(&folder).ok();
}

/// Whatever the upstream or the client does, the proxy answers as the upstream answered, or
/// says why it could not, and keeps serving.
#[test]
fn the_proxy_survives_a_dead_upstream_big_bodies_many_clients_and_clients_that_leave() {
    let folder = std::env::temp_dir().join(format!("kvlint-proxy-hostile-{}", std::process::id()));
    // An upstream nobody listens on (port 1): 502 with the reason, counted.
    let metrics_port = kvlint_fixtures::free_port();
    let dead = proxy_to(
        &["http://127.0.0.1:1"],
        &folder.join("dead"),
        metrics_port,
        &[],
    );
    let errors = || {
        let counted = get(&format!("http://127.0.0.1:{metrics_port}/metrics"));
        metric(&counted, "kvlint_proxy_upstream_errors_total")
    };
    let before = errors();
    let refused = common::post(
        &dead.url,
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": "hi"}]}),
    )
    .unwrap_err();
    assert!(refused.contains("Connection refused"), "{refused}");
    assert_eq!(errors(), before + 1.0);
    drop(dead);

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

/// What a client gets through the proxy and directly from `url`: status, `Retry-After`, and
/// the body as far as it arrived (a truncated one ends where the upstream cut it).
fn answered(url: &str, path: &str, body: &Value) -> (u16, Option<String>, Vec<u8>, bool) {
    let mut response = ureq::post(format!("{url}{path}"))
        .config()
        .http_status_as_error(false)
        .build()
        .send_json(body)
        .unwrap();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|value| value.to_str().unwrap().to_owned());
    let mut bytes = Vec::new();
    let whole = response
        .body_mut()
        .as_reader()
        .read_to_end(&mut bytes)
        .is_ok();
    (response.status().as_u16(), retry_after, bytes, whole)
}

/// An upstream that answers 429, 500, a malformed body, slowly, or cuts its answer short:
/// the client gets what it would have got directly, the proxy keeps serving, and each
/// exchange is recorded once, the cut ones marked so.
#[test]
fn the_upstream_s_errors_reach_the_client_as_the_upstream_sent_them() {
    let folder = std::env::temp_dir().join(format!("kvlint-proxy-troubled-{}", std::process::id()));
    let engine = llama_server();
    let gateway = common::troubled_gateway(&engine, &folder.join("nginx"));
    // A server that sends a head and part of the body it announced, then hangs up.
    let cutter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let cutter_url = format!("http://{}", cutter.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in cutter.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = [0u8; 65536];
            let _ = std::io::Read::read(&mut stream, &mut request);
            let _ = std::io::Write::write_all(
                &mut stream,
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 400\r\n\r\n{\"id\": \"chatcmpl-cut\", \"choices\": [",
            );
        }
    });
    let record = folder.join("sessions");
    let metrics_port = kvlint_fixtures::free_port();
    let proxy = proxy(&gateway, &record, metrics_port);
    let body = |text: &str| json!({"messages": [{"role": "user", "content": text}], "max_tokens": 2, "temperature": 0});
    let mut sent = 0;
    for prefix in ["/rate-limited", "/failing", "/malformed", "/slow"] {
        let path = format!("{prefix}/v1/chat/completions");
        let request = body(&format!("Through {prefix}."));
        let direct = answered(&gateway.url, &path, &request);
        let proxied = answered(&proxy.url, &path, &request);
        sent += 1;
        assert_eq!(proxied.0, direct.0, "{prefix}");
        assert_eq!(proxied.1, direct.1, "{prefix}");
        assert!(proxied.3 && direct.3, "{prefix}");
        if prefix != "/slow" {
            assert_eq!(proxied.2, direct.2, "{prefix}");
        } else {
            // The engine's answer, slowly: its id and timings differ from one run to the next.
            let answer: Value = serde_json::from_slice(&proxied.2).unwrap();
            assert!(answer["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
        }
    }
    assert_eq!(
        answered(
            &gateway.url,
            "/rate-limited/v1/chat/completions",
            &body("x")
        )
        .0,
        429
    );
    // Cut short: the client sees the same cut, through the proxy as directly.
    let cutting_metrics = kvlint_fixtures::free_port();
    let cutting = proxy_to(
        &[cutter_url.as_str()],
        &record.join("cut"),
        cutting_metrics,
        &[],
    );
    let request = body("Cut me short.");
    let direct = answered(&cutter_url, "/v1/chat/completions", &request);
    let proxied = answered(&cutting.url, "/v1/chat/completions", &request);
    assert_eq!(
        (proxied.0, &proxied.2, proxied.3),
        (direct.0, &direct.2, direct.3)
    );
    assert!(!proxied.3, "the body ends before its announced length");
    wait_for_requests(&format!("http://127.0.0.1:{cutting_metrics}/metrics"), 1);
    drop(cutting);
    // Still serving.
    let answer = common::post(&proxy.url, "/v1/chat/completions", &body("Still there?")).unwrap();
    assert!(answer["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    sent += 1;
    let counted = wait_for_requests(&format!("http://127.0.0.1:{metrics_port}/metrics"), sent);
    assert_eq!(
        metric(&counted, "kvlint_requests_total"),
        sent as f64,
        "{counted}"
    );
    assert_eq!(
        metric(&counted, "kvlint_proxy_upstream_errors_total"),
        0.0,
        "{counted}"
    );
    drop(proxy);
    // Each exchange recorded once: the failed ones with what the upstream said, the cut one
    // marked as cut; and the records read as sessions.
    let lines: Vec<Value> = walk(&record)
        .iter()
        .flat_map(|path| {
            std::fs::read_to_string(path)
                .unwrap()
                .lines()
                .map(|line| serde_json::from_str(line).unwrap())
                .collect::<Vec<Value>>()
        })
        .collect();
    assert_eq!(lines.len(), sent + 1, "{lines:#?}");
    let said = |text: &str| {
        lines
            .iter()
            .filter(|line| line["request"]["messages"][0]["content"] == text)
            .collect::<Vec<_>>()
    };
    for (text, status) in [("Through /rate-limited.", 429), ("Through /failing.", 500)] {
        let recorded = said(text);
        assert_eq!(recorded.len(), 1, "{text}");
        assert_eq!(recorded[0]["status"], status, "{text}");
    }
    let cut = said("Cut me short.");
    assert_eq!(cut.len(), 1);
    assert_eq!(cut[0]["complete"], false);
    let checked = Command::new(env!("CARGO_BIN_EXE_kvlint"))
        .args(["check", "--format", "json"])
        .args(walk(&record))
        .output()
        .unwrap();
    assert_ne!(
        checked.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    std::fs::remove_dir_all(&folder).ok();
}

fn walk(folder: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(folder).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// Two agents on one connection, their requests interleaved: Claude Code (a main agent and a
/// sub-agent it spawned) and OpenCode, both opening with the same system prompt and task. The
/// agents' own session headers keep them apart, and the main agent's hand-off to another
/// system prompt stays in its session though that prompt shares more of its text with the
/// sub-agent's than with its own before (which the tokens alone would have joined to the
/// sub-agent's session).
#[test]
fn two_agents_interleaved_on_one_connection_are_told_apart_by_their_session_ids() {
    let engine = llama_server();
    let record = std::env::temp_dir().join(format!("kvlint-proxy-agents-{}", std::process::id()));
    std::fs::remove_dir_all(&record).ok();
    let metrics_port = kvlint_fixtures::free_port();
    let proxy = proxy(&engine, &record, metrics_port);
    // One agent: one connection, kept alive between requests.
    let connection = ureq::Agent::new_with_defaults();
    let main_agent = [("x-claude-code-session-id", "cc-session-1")];
    let sub_agent = [
        ("x-claude-code-session-id", "cc-session-1"),
        ("x-claude-code-agent-id", "agent-7"),
    ];
    let opencode = [("x-session-id", "ses_open_1")];
    let system = |text: &str| json!({"role": "system", "content": text});
    let user = |text: &str| json!({"role": "user", "content": text});
    let said = |text: &str| json!({"role": "assistant", "content": text});
    let main_system = "You are the main agent. Plan the work.";
    let send = |headers: &[(&str, &str)], messages: Vec<Value>| {
        let mut request = connection.post(format!("{}/v1/chat/completions", proxy.url));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let body = json!({"model": "m", "messages": messages, "max_tokens": 1, "temperature": 0});
        assert_eq!(request.send_json(&body).unwrap().status(), 200);
    };
    let task = || vec![system(main_system), user("Fix the failing test.")];
    send(&main_agent, task());
    send(&opencode, task());
    send(
        &sub_agent,
        vec![
            system("You are a helper that searches files."),
            user("Find the test file."),
        ],
    );
    let mut next = task();
    next.extend([said("I will look."), user("Go on.")]);
    send(&opencode, next.clone());
    // The main agent hands off: another system prompt on the same history.
    next[0] = system("You are a helper that edits files.");
    send(&main_agent, next);
    send(
        &sub_agent,
        vec![
            system("You are a helper that searches files."),
            user("Find the test file."),
            said("tests/test_app.py"),
            user("Thanks."),
        ],
    );
    wait_for_requests(&format!("http://127.0.0.1:{metrics_port}/metrics"), 6);
    drop(proxy);
    // Each recorded session's requests, by their last user message and system prompt.
    let mut sessions: Vec<Vec<(String, String)>> = walk(&record)
        .iter()
        .map(|file| {
            std::fs::read_to_string(file)
                .unwrap()
                .lines()
                .map(|line| {
                    let exchange: Value = serde_json::from_str(line).unwrap();
                    let messages = exchange["request"]["messages"].as_array().unwrap();
                    let text = |message: &Value| message["content"].as_str().unwrap().to_owned();
                    (text(&messages[0]), text(messages.last().unwrap()))
                })
                .collect()
        })
        .collect();
    sessions.sort();
    let turn = |system: &str, user: &str| (system.to_owned(), user.to_owned());
    assert_eq!(
        sessions,
        [
            vec![
                turn(
                    "You are a helper that searches files.",
                    "Find the test file."
                ),
                turn("You are a helper that searches files.", "Thanks."),
            ],
            vec![
                turn(main_system, "Fix the failing test."),
                turn("You are a helper that edits files.", "Go on."),
            ],
            vec![
                turn(main_system, "Fix the failing test."),
                turn(main_system, "Go on."),
            ],
        ]
    );
    std::fs::remove_dir_all(&record).ok();
}

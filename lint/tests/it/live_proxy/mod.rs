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

mod agents;
mod fleet;
mod signed;
mod upstream;

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

/// The requests the proxy's `--record` wrote to `record`, per session file.
fn recorded_requests(record: &Path) -> Vec<Vec<Value>> {
    walk(record)
        .iter()
        .map(|file| {
            std::fs::read_to_string(file)
                .unwrap()
                .lines()
                .map(|line| serde_json::from_str::<Value>(line).unwrap()["request"].take())
                .collect()
        })
        .collect()
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
    let mut sessions: Vec<Vec<(String, String)>> = recorded_requests(&record)
        .iter()
        .map(|requests| {
            requests
                .iter()
                .map(|request| {
                    let messages = request["messages"].as_array().unwrap();
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

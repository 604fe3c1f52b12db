//! Sessions of one recording read together (`check --engine`, offline): a session or
//! sub-agent that opens with the prefix an earlier session sent is served it from cache, or
//! starts cold (rule `cold-start`), as planted in `fixtures/recordings/hand-made/`: a
//! sub-agent sharing its main agent's tools with no breakpoint at their end, a second session
//! 19 minutes after the first one's last request (the entry kept 5), and the same 2 minutes
//! after (read).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;

fn check(file: &str) -> Value {
    let path = kvlint_fixtures::repository()
        .join("fixtures/recordings/hand-made")
        .join(file);
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
    let report = check("cold-sub-agent.har");
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
    let expired = check("cold-session-after-expiry.har");
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
    let warm = check("warm-second-session.har");
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

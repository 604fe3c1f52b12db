//! Sessions as agents make them, read from recordings: breaks kept in their session, agents
//! handed a session's history and sub-agents as sessions of their own, linked, and
//! `import --explain`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;

use super::import::{imported_json, json_of, kvlint, recordings};

/// A session is kept whole across its breaks: a system prompt re-rendered from state or
/// replaced, and a hand-off after which the first agent never comes back, each a finding of
/// the one session at its turn, the reading said in `grouped_by`. An agent handed the history
/// is a session of its own when the first one comes back (`EXPECTED`'s customer support):
/// its breaks are its own. The turns and causes are written from reading the cassettes
/// (INDEX.json's notes; the tools and system prompt of each request), not from kvlint's output.
#[test]
fn sessions_are_kept_whole_across_their_breaks() {
    // (file, the session, its breaks: turn, rule, part)
    type Breaks = (
        &'static str,
        usize,
        &'static [(usize, &'static str, &'static str)],
    );
    let cases: [Breaks; 5] = [
        (
            "langgraph-customer-support.msgpack.zlib",
            0,
            &[
                // The primary assistant's system prompt re-rendered with the flights the
                // flight assistant cancelled (`<Flights>[]</Flights>`).
                (4, "prefix-edit", "system"),
                // The excursion assistant, after which the primary never comes back: its
                // tools first in Anthropic's order.
                (10, "tool-set-change", "tools[0]"),
            ],
        ),
        (
            "langgraph-customer-support.msgpack.zlib",
            1,
            // The flight assistant's system prompt re-rendered with the flight list.
            &[(6, "prefix-edit", "system")],
        ),
        (
            "ruby-llm-anthropic-system-replaced.yml",
            0,
            &[(1, "prefix-edit", "system[0].text")],
        ),
        (
            "ruby-llm-openai-system-replaced.yml",
            0,
            &[(1, "prefix-edit", "instructions")],
        ),
        (
            "ruby-llm-gemini-system-replaced.yml",
            0,
            &[(1, "prefix-edit", "systemInstruction.parts[0].text")],
        ),
    ];
    for (file, session, breaks) in cases {
        let (code, report) = json_of("check", &[recordings().join(file)]);
        assert_eq!(code, 1, "{file}: {report}");
        let session = &report["sessions"][session];
        // The breaks between turns (a finding at turn 0 speaks of the session as a whole).
        let found: Vec<(u64, &str, &str)> = session["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|finding| finding["turn"] != 0)
            .map(|finding| {
                (
                    finding["turn"].as_u64().unwrap(),
                    finding["rule"].as_str().unwrap(),
                    finding["part"].as_str().unwrap(),
                )
            })
            .collect();
        let expected: Vec<(u64, &str, &str)> = breaks
            .iter()
            .map(|(turn, rule, part)| (*turn as u64, *rule, *part))
            .collect();
        assert_eq!(found, expected, "{file}");
        // Each break's turn is said to have been kept in the session on purpose.
        let readings: Vec<(u64, &str)> = session["source"]["grouped_by"]["readings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|reading| {
                (
                    reading["turn"].as_u64().unwrap(),
                    reading["reading"].as_str().unwrap(),
                )
            })
            .collect();
        let kept: Vec<(u64, &str)> = expected
            .iter()
            .map(|(turn, ..)| (*turn, "instructions-changed"))
            .collect();
        assert_eq!(readings, kept, "{file}");
    }
    // The human output says so in one line per session.
    let run = kvlint_fixtures::run_kvlint(
        env!("CARGO_BIN_EXE_kvlint"),
        &[
            "check",
            recordings()
                .join("ruby-llm-anthropic-system-replaced.yml")
                .to_str()
                .unwrap(),
        ],
    );
    assert!(
        run.stdout.contains(
            "turn 1 kept in the session: the conversation goes on under other instructions or tools"
        ),
        "{}",
        run.stdout
    );
}

/// The agents' own session ids decide the session, recorded headers counting (a cassette's,
/// a HAR file's, a trace's `http.request.header.*`), and a sub-agent's session is linked to
/// its parent's, in `import`'s report and `check`'s.
#[test]
fn sub_agent_sessions_are_linked_to_their_parent() {
    // (file, per session: interactions, key source, parent session)
    type Expected = (
        &'static str,
        &'static [(&'static [usize], &'static str, Option<u64>)],
    );
    let cases: [Expected; 3] = [
        (
            "hand-made/claude-code-sub-agent.yaml",
            &[
                (&[0, 3], "header x-claude-code-session-id", None),
                (&[1, 2], "header x-claude-code-session-id", Some(1)),
                // The title side call: another model, another opening.
                (&[4], "header x-claude-code-session-id", None),
            ],
        ),
        (
            "hand-made/opencode-sub-agent.har",
            &[
                (&[0, 3], "header x-session-id", None),
                (&[1, 2], "header x-session-id", Some(1)),
            ],
        ),
        (
            "hand-made/dynamo-sub-agent.otlp.json",
            &[
                (&[0, 3], "header X-Dynamo-Session-ID", None),
                (&[1, 2], "header X-Dynamo-Session-ID", Some(1)),
            ],
        ),
    ];
    let out = std::env::temp_dir().join(format!("kvlint-import-agents-{}", std::process::id()));
    for (file, expected) in cases {
        let path = recordings().join(file);
        let report = imported_json(&path, &out);
        let (_, checked) = json_of("check", std::slice::from_ref(&path));
        let imported = report["recordings"][0]["sessions"].as_array().unwrap();
        let checked = checked["sessions"].as_array().unwrap();
        assert_eq!(imported.len(), expected.len(), "{file}: {report}");
        assert_eq!(checked.len(), expected.len(), "{file}");
        for ((session, source), (interactions, key, parent)) in
            imported.iter().zip(checked).zip(expected)
        {
            assert_eq!(
                session["interactions"],
                serde_json::json!(interactions),
                "{file}"
            );
            assert_eq!(session["grouped_by"]["key"], *key, "{file}");
            assert_eq!(session["parent"].as_u64(), *parent, "{file}");
            assert_eq!(source["source"]["parent"].as_u64(), *parent, "{file}");
        }
    }
    // The human output names the parent.
    let run = kvlint_fixtures::run_kvlint(
        env!("CARGO_BIN_EXE_kvlint"),
        &[
            "import",
            "--force",
            "--out",
            out.to_str().unwrap(),
            recordings()
                .join("hand-made/opencode-sub-agent.har")
                .to_str()
                .unwrap(),
        ],
    );
    assert!(
        run.stdout.contains(
            "grouped by its session key (header x-session-id) and continuation; a sub-agent of session 1"
        ),
        "{}",
        run.stdout
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// `import --explain` says where each interaction went and why: the supervisor's conversation,
/// the two agents it hands the history to (sessions of their own, linked to it), the web
/// search passed over. Read off the cassette: each agent's requests by their instructions.
#[test]
fn explain_says_where_each_interaction_went_and_why() {
    let out = std::env::temp_dir().join(format!("kvlint-import-explain-{}", std::process::id()));
    let path = recordings().join("langgraph-agent-supervisor.msgpack.zlib");
    let (code, stdout, stderr) = kvlint(
        &[
            "import",
            "--explain",
            "--format",
            "json",
            "--force",
            path.to_str().unwrap(),
        ],
        &out,
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let placements = report["recordings"][0]["placements"].as_array().unwrap();
    let placed: Vec<(u64, Option<u64>, Option<u64>)> = placements
        .iter()
        .map(|placement| {
            (
                placement["interaction"].as_u64().unwrap(),
                placement["session"].as_u64(),
                placement["turn"].as_u64(),
            )
        })
        .collect();
    assert_eq!(
        placed,
        [
            (0, Some(1), Some(0)),
            (1, Some(2), Some(0)),
            (2, None, None),
            (3, Some(2), Some(1)),
            (4, Some(1), Some(1)),
            (5, Some(3), Some(0)),
            (6, Some(3), Some(1)),
            (7, Some(3), Some(2)),
            (8, Some(1), Some(2)),
        ]
    );
    let why = |interaction: usize| placements[interaction]["why"].as_str().unwrap();
    assert!(
        why(1).contains("another agent, handed the history of session 1"),
        "{}",
        why(1)
    );
    assert!(why(4).contains("continues"), "{}", why(4));
    assert!(why(2).contains("not a request body"), "{}", why(2));
    // The human output lists the same, one line each.
    let (_, human, _) = kvlint(
        &["import", "--explain", "--force", path.to_str().unwrap()],
        &out,
    );
    assert!(
        human.contains("interaction 5 → session 3, turn 0 (sub-agent): starts the session"),
        "{human}"
    );
    std::fs::remove_dir_all(&out).ok();
}

/// One recording per pattern multi-agent apps make, each built after a public example
/// (`scripts/make-agent-fixtures.py`; the example named in INDEX.json): a Bedrock app that
/// switches to streaming, retries after an overload and an error between two customers'
/// conversations, a writer/critic loop, a supervisor ending every request with its routing
/// instruction and its workers, a summarizing memory. The truth (`EXPECTED.json`: each
/// session's exact requests, its parent, its retries, each request's kind) was written as the
/// files were built, not read off kvlint. `check` finds every session whole (`workload` the
/// same sessions), with no break but the compaction, reported as the history rewrite it is.
#[test]
fn each_multi_agent_pattern_is_grouped_as_its_app_made_it() {
    let agents = recordings().join("agents");
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(agents.join("EXPECTED.json")).unwrap())
            .unwrap();
    for (file, truth) in expected["files"].as_object().unwrap() {
        let (code, report) = json_of("check", &[agents.join(file)]);
        let sessions = report["sessions"].as_array().unwrap();
        let expected_sessions = truth["sessions"].as_array().unwrap();
        let found: Vec<Value> = sessions
            .iter()
            .map(|session| {
                let source = &session["source"];
                serde_json::json!({
                    "entries": source["interactions"],
                    // The reports number sessions from 1.
                    "parent": source["parent"].as_u64().map(|parent| parent - 1),
                    "retries": source["grouped_by"]["retries"].as_u64().unwrap_or(0),
                })
            })
            .collect();
        let wanted: Vec<Value> = expected_sessions
            .iter()
            .map(|session| {
                serde_json::json!({
                    "entries": session["entries"],
                    "parent": session["parent"],
                    "retries": session["retries"],
                })
            })
            .collect();
        assert_eq!(found, wanted, "{file}");
        // `workload` reads the same sessions.
        let (_, workload) = json_of("workload", &[agents.join(file)]);
        assert_eq!(workload["sessions"], wanted.len(), "{file}");
        // Each request's kind, in the recording's order.
        let mut kinds = vec![Value::Null; truth["kinds"].as_array().unwrap().len()];
        for session in sessions {
            let source = &session["source"];
            for (entry, kind) in source["interactions"]
                .as_array()
                .unwrap()
                .iter()
                .zip(source["grouped_by"]["kinds"].as_array().unwrap())
            {
                kinds[entry.as_u64().unwrap() as usize] = kind.clone();
            }
        }
        assert_eq!(Value::Array(kinds), truth["kinds"], "{file}");
        // No break between turns but the compaction's.
        let breaks: Vec<(u64, &str)> = sessions
            .iter()
            .flat_map(|session| session["findings"].as_array().unwrap())
            .filter(|finding| finding["turn"] != 0 && finding["severity"] == "error")
            .map(|finding| {
                (
                    finding["turn"].as_u64().unwrap(),
                    finding["rule"].as_str().unwrap(),
                )
            })
            .collect();
        let compactions: Vec<(u64, &str)> = truth["kinds"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .filter(|(_, kind)| *kind == "compaction")
            .map(|(entry, _)| {
                let session = expected_sessions
                    .iter()
                    .find_map(|session| {
                        let entries = session["entries"].as_array()?;
                        entries
                            .iter()
                            .position(|at| at.as_u64() == Some(entry as u64))
                    })
                    .unwrap();
                (session as u64, "history-rewrite")
            })
            .collect();
        assert_eq!(breaks, compactions, "{file}: {report}");
        assert_eq!(code, i32::from(!compactions.is_empty()), "{file}");
    }
}

//! End to end: a six-turn agent session assembled with the SDK, written as a session file per
//! output adapter and checked with the analysis `kvlint check` runs; the guard must agree.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

mod common;

use kvlint_core::session::SessionFile;
use kvlint_render::render::Renderer;
use kvlint_request::diagnostic::{Diagnostic, Severity};
use kvlint_sdk::{Conversation, Guard, GuardMode, ToolCall};
use serde_json::{Value, json};

use common::{
    agent_tools, assert_breakpoints_only_below_minimum, shuffled, temp_path, template_renderer,
};

const INSTRUCTIONS: &str = "You are a coding agent working in the repository `acme-api`.\n\
    Work in small steps: read before you edit, run the tests after each change, and explain \
    what you changed in one sentence.";

type Adapter = fn(&Conversation) -> Value;

const ADAPTERS: [(&str, Adapter); 4] = [
    ("openai-chat", |conversation| {
        conversation.to_openai_chat("gpt-4.1")
    }),
    ("openai-responses", |conversation| {
        conversation.to_openai_responses("gpt-4.1")
    }),
    // GPT-6.2 appends `instructions` after the input, uncached: the static blocks must lead
    // the input instead, or `instructions-uncached` is one finding more.
    ("openai-responses-gpt-6.2", |conversation| {
        conversation.to_openai_responses("gpt-6.2-sol")
    }),
    ("anthropic", |conversation| {
        conversation.to_anthropic("claude-sonnet-4-5")
    }),
];

/// The volatile context of turn `turn`: a clock, a request id and a budget.
fn turn_context(conversation: &mut Conversation, turn: u64) {
    let seconds = 31 + turn * 7;
    conversation
        .add_turn_context(format!("Current time: 2025-03-04T10:22:{seconds:02}Z"))
        .add_turn_context(format!(
            "Request id: req_{:016x}",
            turn.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ))
        .add_turn_context(format!("Budget: {} tokens left", 90_000 - turn * 1_250));
}

/// A six-turn session: tools added in shuffled order, tiers added out of order, a clock and a
/// request id every turn, a memory update mid-session, tool calls and parallel results.
/// Returns the conversation at each request, cloned.
fn six_turns(seed: u64) -> Vec<Conversation> {
    let mut conversation = Conversation::new();
    conversation
        .add_session("memory", "The user prefers small commits.")
        .into_result()
        .unwrap();
    for tool in shuffled(agent_tools(), seed) {
        conversation.add_tool(tool).into_result().unwrap();
    }
    conversation
        .add_static(INSTRUCTIONS)
        .add_session("profile", "Name: Ada. Language: Rust.")
        .into_result()
        .unwrap();
    let mut turns = Vec::new();
    let mut request = |conversation: &mut Conversation, turn: u64| {
        turn_context(conversation, turn);
        // Building a body commits the prefix, as sending it would.
        conversation.to_openai_chat("gpt-4.1");
        turns.push(conversation.clone());
    };

    conversation
        .push_user("The test `parses_dates` fails. Fix it.")
        .into_result()
        .unwrap();
    request(&mut conversation, 0);
    conversation
        .push_assistant(
            "",
            [ToolCall::new(
                "call_a1",
                "run_tests",
                &json!({"filter": "parses_dates"}),
            )],
        )
        .into_result()
        .unwrap();
    conversation
        .push_tool_result(
            "call_a1",
            "FAILED parses_dates: expected 2025-03-04, got 2025-04-03",
        )
        .into_result()
        .unwrap();
    request(&mut conversation, 1);
    conversation
        .push_assistant(
            "The day and month are swapped.",
            [ToolCall::verbatim(
                "call_b2",
                "read_file",
                r#"{"path": "src/date.rs"}"#,
            )],
        )
        .into_result()
        .unwrap();
    conversation
        .push_tool_result(
            "call_b2",
            "fn parse(s: &str) -> Date { let [y, d, m] = split(s); … }",
        )
        .into_result()
        .unwrap();
    // The agent learns something worth remembering: the memory changes mid-session.
    conversation
        .add_session(
            "memory",
            "The user prefers small commits. Dates are ISO 8601.",
        )
        .into_result()
        .unwrap();
    request(&mut conversation, 2);
    conversation.push_assistant(
        "",
        [ToolCall::new(
            "call_c3",
            "write_file",
            &json!({"path": "src/date.rs", "content": "let [y, m, d] = split(s);", "mode": "overwrite"}),
        )],
    ).into_result().unwrap();
    conversation
        .push_tool_result("call_c3", "ok")
        .into_result()
        .unwrap();
    request(&mut conversation, 3);
    conversation
        .push_assistant(
            "",
            [
                ToolCall::new("call_d4", "run_tests", &json!({"filter": null})),
                ToolCall::new("call_d5", "search", &json!({"query": "split(s)"})),
            ],
        )
        .into_result()
        .unwrap();
    conversation
        .push_tool_result("call_d4", "42 passed")
        .push_tool_result("call_d5", "src/date.rs:12")
        .into_result()
        .unwrap();
    request(&mut conversation, 4);
    conversation
        .push_assistant("Fixed: the parser read the month as the day.", [])
        .into_result()
        .unwrap();
    conversation
        .push_user("Thanks. Also add a changelog entry.")
        .into_result()
        .unwrap();
    request(&mut conversation, 5);
    turns
}

/// What `kvlint check FILE` finds: the same calls as the CLI's report.
fn kvlint_check(bodies: &[Value], renderer: &Renderer, name: &str) -> Vec<Diagnostic> {
    let path = temp_path(&format!("{name}.jsonl"));
    let jsonl: String = bodies.iter().map(|body| format!("{body}\n")).collect();
    std::fs::write(&path, &jsonl).unwrap();
    let session = SessionFile::read(&path).unwrap();
    kvlint_rules::check_session(&session, renderer, None)
        .unwrap()
        .findings
}

fn guard_findings(bodies: &[Value], renderer: Renderer) -> Vec<Diagnostic> {
    let mut guard = Guard::new(renderer, GuardMode::Error);
    bodies
        .iter()
        .flat_map(|body| guard.observe(body).unwrap())
        .collect()
}

/// A finding without its place in a file (the guard's file is the body alone).
fn without_span(diagnostics: &[Diagnostic]) -> Vec<Diagnostic> {
    diagnostics
        .iter()
        .map(|diagnostic| Diagnostic {
            span: None,
            ..diagnostic.clone()
        })
        .collect()
}

fn assert_no_errors(findings: &[Diagnostic], what: &str) {
    for finding in findings {
        eprintln!(
            "{what}: turn {} {} {:?}: {}",
            finding.turn, finding.rule, finding.severity, finding.message
        );
    }
    assert!(
        findings
            .iter()
            .all(|finding| finding.severity != Severity::Error),
        "{what}: error findings"
    );
}

#[test]
fn every_adapter_is_clean_and_the_guard_agrees() {
    let turns = six_turns(7);
    for (name, adapter) in ADAPTERS {
        let bodies: Vec<Value> = turns.iter().map(adapter).collect();
        let checked = kvlint_check(&bodies, &Renderer::provider(), name);
        assert_no_errors(&checked, name);
        // Each dropped turn tier is one info finding; nothing else breaks.
        assert_eq!(checked.len(), 5, "{name}");
        let guarded = guard_findings(&bodies, Renderer::provider());
        assert_eq!(without_span(&guarded), without_span(&checked), "{name}");
    }
}

#[test]
fn the_template_adapter_is_clean_in_engine_mode() {
    let turns = six_turns(11);
    let bodies: Vec<Value> = turns
        .iter()
        .map(|conversation| conversation.to_openai_chat("qwen"))
        .collect();
    let renderer = template_renderer(true);
    let checked = kvlint_check(&bodies, &renderer, "engine");
    assert_no_errors(&checked, "engine");
    let guarded = guard_findings(&bodies, template_renderer(true));
    assert_eq!(without_span(&guarded), without_span(&checked));
    // `render` gives what the engine prefills: the same text the session analysis diffed.
    let rendered = turns[2].render(&renderer).unwrap();
    assert!(
        rendered.text.starts_with("<|tool|>{\"type\": \"function\""),
        "{}",
        rendered.text
    );
    assert!(rendered.text.contains("Dates are ISO 8601."));
}

#[test]
fn anthropic_bodies_carry_valid_breakpoints() {
    let turns = six_turns(3);
    let bodies: Vec<Value> = turns
        .iter()
        .map(|conversation| conversation.to_anthropic("claude-sonnet-4-5"))
        .collect();
    for body in &bodies {
        let markers = body.to_string().matches("cache_control").count();
        assert!(markers <= 4, "{markers} breakpoints");
        let system = body["system"].as_array().unwrap();
        // The static block is the first system block; the session blocks follow, unmarked.
        assert!(system[0]["cache_control"].is_object());
        assert!(
            system[1..]
                .iter()
                .all(|block| block.get("cache_control").is_none())
        );
        let messages = body["messages"].as_array().unwrap();
        let newest = messages.last().unwrap()["content"].as_array().unwrap();
        // The turn tier is the newest block; the breakpoint is right before it.
        assert!(
            newest.last().unwrap()["text"]
                .as_str()
                .unwrap()
                .starts_with("Current time")
                || newest.last().unwrap()["text"]
                    .as_str()
                    .unwrap()
                    .starts_with("Session context update")
        );
        assert!(newest[newest.len() - 2]["cache_control"].is_object());
        assert_eq!(markers, 2);
    }
    // kvlint's own breakpoint audit finds nothing but the short test prompt's size.
    let jsonl: String = bodies.iter().map(|body| format!("{body}\n")).collect();
    assert_breakpoints_only_below_minimum(&jsonl);
}

#[test]
fn a_new_session_shares_the_static_prefix_and_its_replica() {
    let first = six_turns(1).pop().unwrap();
    let mut second = Conversation::new();
    for tool in shuffled(agent_tools(), 99) {
        second.add_tool(tool).into_result().unwrap();
    }
    second
        .add_session(
            "memory",
            "The user prefers small commits. Dates are ISO 8601.",
        )
        .add_session("profile", "Name: Ada. Language: Rust.")
        .add_static(INSTRUCTIONS)
        .push_user("Next task: add a `--json` flag.")
        .into_result()
        .unwrap();
    let (first_print, second_print) = (first.fingerprint(), second.fingerprint());
    // Four tools and the static block: the memory block (sorted first) differs.
    assert_eq!(first_print.common_blocks(&second_print), 5);
    // The key covers what both sessions share and every compaction keeps: same replica.
    assert_eq!(first_print.key, second_print.key);
    let mut other_instructions = Conversation::new();
    other_instructions
        .add_static("You are a reviewer.")
        .into_result()
        .unwrap();
    assert_ne!(other_instructions.routing_key(), second_print.key);
    let chat = |conversation: &Conversation| conversation.to_openai_chat("gpt-4.1");
    assert_eq!(chat(&first)["tools"], chat(&second)["tools"]);
    assert_eq!(chat(&first)["messages"][0], chat(&second)["messages"][0]);
}

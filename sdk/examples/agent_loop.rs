//! An agent loop that assembles each turn with the SDK and checks it with the guard.
//!
//! The model is scripted (this runs offline): it reads a file, runs the tests, fixes the bug,
//! and answers. Each turn is built for all three APIs; one guard per API checks that every
//! turn extends the previous one, with the same analysis as `kvlint check`.
//!
//! ```sh
//! cargo run -p kvlint-sdk --example agent_loop
//! ```
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;

use kvlint_sdk::{
    Conversation, ConversationError, Guard, GuardMode, HistoryWindow, Tool, ToolCall,
};
use kvlint_sdk::{Renderer, Severity};
use serde_json::{Value, json};

/// Builds the request body of the current turn for one API.
type Adapter = fn(&Conversation) -> Value;

/// What the scripted model answers on each turn: text and tool calls.
fn model_answer(turn: usize) -> (&'static str, Vec<ToolCall>) {
    match turn {
        0 => (
            "Let me run the failing test first.",
            vec![ToolCall::new(
                format!("call_{turn}"),
                "run_tests",
                &json!({"filter": "parses_dates"}),
            )],
        ),
        1 => (
            "",
            vec![ToolCall::verbatim(
                format!("call_{turn}"),
                "read_file",
                r#"{"path": "src/date.rs"}"#,
            )],
        ),
        2 => (
            "Day and month are swapped; fixing.",
            vec![ToolCall::new(
                format!("call_{turn}"),
                "write_file",
                &json!({"path": "src/date.rs", "content": "let [y, m, d] = split(s);"}),
            )],
        ),
        3 => (
            "",
            vec![ToolCall::new(
                format!("call_{turn}"),
                "run_tests",
                &json!({"filter": null}),
            )],
        ),
        _ => (
            "Fixed: the parser read the month as the day. All tests pass.",
            Vec::new(),
        ),
    }
}

/// What the tools return.
fn run_tool(call: &ToolCall) -> String {
    match call.name() {
        "run_tests" if call.arguments().contains("parses_dates") => {
            "FAILED parses_dates: expected 2025-03-04, got 2025-04-03".into()
        }
        "run_tests" => "42 passed".into(),
        "read_file" => {
            "fn parse(s: &str) -> Date { let [y, d, m] = split(s); Date { y, m, d } }".into()
        }
        _ => "ok".into(),
    }
}

fn tools() -> Vec<Tool> {
    let path = json!({"type": "string", "description": "Path from the repository root"});
    vec![
        // Added in no particular order, schema keys in no particular order: the SDK sorts.
        Tool::new(
            "write_file",
            "Write a file.",
            json!({"required": ["path", "content"], "type": "object",
                   "properties": {"path": path, "content": {"type": "string"}}}),
        ),
        Tool::new(
            "run_tests",
            "Run the test suite.",
            json!({"type": "object", "properties": {"filter": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}),
        ),
        Tool::new(
            "read_file",
            "Read a file.",
            json!({"properties": {"path": path}, "type": "object", "required": ["path"]}),
        ),
    ]
}

fn main() -> Result<ExitCode, ConversationError> {
    let mut conversation = Conversation::new();
    for tool in tools() {
        conversation.add_tool(tool).into_result()?;
    }
    conversation
        .add_session("memory", "The user prefers small commits.")
        .add_static(
            "You are a coding agent in the repository `acme-api`. Read before you edit, and \
             run the tests after each change.",
        )
        .add_session("profile", "Name: Ada. Language: Rust.")
        .into_result()?;
    let window = HistoryWindow::new(64, 16);

    let adapters: [(&str, Adapter); 3] = [
        ("openai-chat", |conversation| {
            conversation.to_openai_chat("gpt-4.1")
        }),
        ("openai-responses", |conversation| {
            conversation.to_openai_responses("gpt-4.1")
        }),
        ("anthropic", |conversation| {
            conversation.to_anthropic("claude-sonnet-4-5")
        }),
    ];
    let mut guards: Vec<Guard> = adapters
        .iter()
        .map(|_| Guard::new(Renderer::provider(), GuardMode::Error))
        .collect();

    conversation
        .push_user("The test `parses_dates` fails. Please fix it.")
        .into_result()?;
    println!(
        "routing key {} (prompt_cache_key, {:?})",
        conversation.routing_key(),
        conversation.routing_headers().map(|(name, _)| name)
    );
    let mut failed = false;
    for turn in 0..5 {
        // Volatile context: a clock, a request id, a budget. The SDK puts it last.
        conversation
            .add_turn_context(format!(
                "Current time: 2025-03-04T10:22:{:02}Z",
                31 + turn * 9
            ))
            .add_turn_context(format!("Request id: req_{:08x}", 0x5eed_0000 + turn * 7919))
            .add_turn_context(format!("Budget: {} tokens left", 90_000 - turn * 1_700));
        if turn == 2 {
            // The agent learned something: memory changes mid-session, the prefix does not.
            conversation
                .add_session(
                    "memory",
                    "The user prefers small commits. Dates are ISO 8601.",
                )
                .into_result()?;
        }
        for ((name, adapter), guard) in adapters.iter().zip(&mut guards) {
            let body = adapter(&conversation);
            match guard.observe(&body) {
                Ok(findings) => {
                    for finding in findings {
                        if finding.severity == Severity::Error {
                            println!(
                                "  ✗ {name} turn {turn}: [{}] {}",
                                finding.rule, finding.message
                            );
                        } else {
                            // The previous turn's tier, dropped as designed: its cost, not a bug.
                            println!(
                                "  · {name} turn {turn}: previous turn tier dropped ({} tokens)",
                                finding.tokens_lost
                            );
                        }
                    }
                }
                Err(error) => {
                    eprintln!("{name} turn {turn}: {error}");
                    failed = true;
                }
            }
        }
        let prints = conversation.fingerprint();
        println!(
            "turn {turn}: {} prefix blocks, {} messages",
            prints.blocks.len(),
            conversation.history().len()
        );

        let (text, calls) = model_answer(turn);
        conversation
            .push_assistant(text, calls.clone())
            .into_result()?;
        if calls.is_empty() {
            break;
        }
        for call in &calls {
            conversation
                .push_tool_result(call.id(), run_tool(call))
                .into_result()?;
        }
        if let Some(cache_break) = conversation.enforce_window(&window) {
            println!("compacted: {cache_break:?}");
            guards.iter_mut().for_each(Guard::expect_break);
        }
    }

    for ((name, _), guard) in adapters.iter().zip(&guards) {
        let counters = guard.counters();
        println!(
            "{name}: {} turns, {} of {} prompt tokens reused, {} recomputed, {} dropped by design, breaks {:?}",
            counters.turns,
            counters.reused_tokens,
            counters.prompt_tokens,
            counters.recomputed_tokens,
            counters.dropped_tokens,
            counters.breaks_by_rule,
        );
        failed |= counters.recomputed_tokens > 0;
    }
    if failed {
        Ok(ExitCode::FAILURE)
    } else {
        println!("every turn extends the previous one");
        Ok(ExitCode::SUCCESS)
    }
}

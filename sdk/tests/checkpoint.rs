//! A loop that saves its conversation between turns and resumes from the saved JSON builds the
//! same bodies, byte for byte, as the loop that never stopped: tiers, history, the committed
//! prefix and the changes waiting for compaction all survive.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kvlint_sdk::{Conversation, Tool, ToolCall};
use serde_json::json;

/// One step of the loop, applied to either conversation.
type Step = fn(&mut Conversation);

/// The bodies a turn sends, in the three formats.
fn bodies(conversation: &Conversation) -> [String; 3] {
    [
        conversation.to_openai_chat("gpt-4.1").to_string(),
        conversation.to_openai_responses("gpt-4.1").to_string(),
        conversation.to_anthropic("claude-sonnet-4-5").to_string(),
    ]
}

fn save_and_restore(conversation: &Conversation) -> Conversation {
    let saved = serde_json::to_string(conversation).unwrap();
    serde_json::from_str(&saved).unwrap()
}

#[test]
fn a_restored_conversation_sends_what_the_uninterrupted_one_sends() {
    let steps: [Step; 6] = [
        |conversation| {
            conversation
                .add_tool(Tool::new(
                    "read_file",
                    "Read a file",
                    json!({"type": "object", "properties": {"path": {"type": "string"}}}),
                ))
                .add_static("You are a careful coding agent.")
                .add_session("repository", "kvlint at main")
                .push_user("Fix the failing test.")
                .add_turn_context("Now: 10:00:01");
        },
        |conversation| {
            // Arguments kept as the model wrote them, spacing included.
            let call = ToolCall::verbatim("call_1", "read_file", r#"{"path": "src/lib.rs"}"#);
            conversation
                .push_assistant("Reading the file.", [call])
                .push_tool_result("call_1", "fn main() {}")
                .into_result()
                .unwrap();
        },
        |conversation| {
            // After the commit: waits for the next compaction, in the saved state too.
            conversation
                .add_tool(Tool::new(
                    "run_tests",
                    "Run the tests",
                    json!({"type": "object"}),
                ))
                .add_session("repository", "kvlint at a1b2c3")
                .push_assistant(
                    "",
                    [ToolCall::new(
                        "call_2",
                        "read_file",
                        &json!({"path": "Cargo.toml"}),
                    )],
                )
                .push_tool_result("call_2", "[package]")
                .into_result()
                .unwrap();
        },
        |conversation| {
            conversation
                .push_assistant("Done: the test passes.", [])
                .push_user("Thanks. Summarize.")
                .into_result()
                .unwrap();
        },
        |conversation| {
            conversation.compact(2);
        },
        |conversation| {
            conversation
                .push_user("And the changelog?")
                .into_result()
                .unwrap();
        },
    ];
    let mut uninterrupted = Conversation::new();
    let mut resumed = Conversation::new();
    for (turn, step) in steps.iter().enumerate() {
        step(&mut uninterrupted);
        step(&mut resumed);
        let sent = bodies(&uninterrupted);
        assert_eq!(bodies(&resumed), sent, "turn {turn}");
        resumed = save_and_restore(&resumed);
        assert_eq!(
            resumed.is_committed(),
            uninterrupted.is_committed(),
            "turn {turn}"
        );
        assert_eq!(
            resumed.pending_changes(),
            uninterrupted.pending_changes(),
            "turn {turn}"
        );
        assert_eq!(
            resumed.routing_key(),
            uninterrupted.routing_key(),
            "turn {turn}"
        );
    }
    // The changes made after the commit waited, and the compaction applied them.
    assert!(uninterrupted.tools().any(|tool| tool.name() == "run_tests"));
}

#[test]
fn a_restored_tool_is_canonical_and_a_call_keeps_its_bytes() {
    let saved = json!({"name": "t", "description": "d",
        "parameters": {"type": "object", "required": ["b", "a"], "properties": {"b": {}, "a": {}}}});
    let restored: Tool = serde_json::from_value(saved).unwrap();
    assert_eq!(
        restored,
        Tool::new(
            "t",
            "d",
            json!({"properties": {"a": {}, "b": {}}, "required": ["a", "b"], "type": "object"})
        )
    );
    let call = ToolCall::verbatim("c", "t", r#"{"b": 1,  "a": 2}"#);
    let restored: ToolCall = serde_json::from_str(&serde_json::to_string(&call).unwrap()).unwrap();
    assert_eq!(restored.arguments(), r#"{"b": 1,  "a": 2}"#);
    assert_eq!(restored, call);
}

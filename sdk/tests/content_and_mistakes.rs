//! Content beyond text (images, documents, thinking, reasoning items, server tools), answers
//! pushed as the provider returned them, conversations imported from bodies, and the mistakes
//! the conversation refuses or reports at the call that makes them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kvlint_sdk::{
    Conversation, ConversationError, Effect, Guard, GuardMode, HistoryWindow, Part, Renderer,
    Source, Tool, ToolCall,
};
use serde_json::{Value, json};

const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

fn read_tool() -> Tool {
    Tool::new(
        "read_file",
        "Read a file.",
        json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
    )
}

fn strip_cache_control(value: &Value) -> Value {
    match value {
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .filter(|(key, _)| *key != "cache_control")
                .map(|(key, value)| (key.clone(), strip_cache_control(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(strip_cache_control).collect()),
        other => other.clone(),
    }
}

/// Every message the earlier body sent is sent again unchanged, in the same place (a
/// breakpoint marker aside: it moves to the newest message by design).
fn assert_extends(previous: &Value, next: &Value, list: &str) {
    let previous = strip_cache_control(&previous[list]);
    let next = strip_cache_control(&next[list]);
    let (previous, next) = (previous.as_array().unwrap(), next.as_array().unwrap());
    assert!(
        next.len() >= previous.len(),
        "{list}: the next body is shorter"
    );
    for (index, (a, b)) in previous.iter().zip(next).enumerate() {
        assert_eq!(a.to_string(), b.to_string(), "{list}[{index}] changed");
    }
}

/// A real Anthropic answer's shape with extended thinking and a server tool: the signature,
/// the redacted data and the search result must come back byte for byte.
fn anthropic_answer() -> Value {
    json!({
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [
            {"type": "thinking", "thinking": "The user wants main.rs.", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxB"},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"},
            {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {"query": "rust 2024 edition"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": [
                {"type": "web_search_result", "url": "https://example.org", "title": "Edition", "encrypted_content": "EqgfCioIARgB", "page_age": null}]},
            {"type": "text", "text": "Reading it."},
            {"type": "tool_use", "id": "toolu_01", "name": "read_file", "input": {"path": "src/main.rs", "limit": 20}}
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 10, "output_tokens": 5}
    })
}

#[test]
fn an_anthropic_answer_goes_back_as_returned_and_the_next_turn_extends_it() {
    let mut conversation = Conversation::new();
    conversation.add_tool(read_tool()).into_result().unwrap();
    conversation.add_static("Be terse.").into_result().unwrap();
    conversation
        .push_user_parts([
            Part::text("What is in main.rs? Here is a screenshot."),
            Part::image(Source::Base64 {
                media_type: "image/png".into(),
                data: PNG.into(),
            }),
        ])
        .into_result()
        .unwrap();
    let first = conversation.to_anthropic("claude-sonnet-4-5");
    conversation
        .push_anthropic_response(&anthropic_answer())
        .into_result()
        .unwrap();
    conversation
        .push_tool_result("toolu_01", "fn main() {}")
        .into_result()
        .unwrap();
    let second = conversation.to_anthropic("claude-sonnet-4-5");
    assert_extends(&first, &second, "messages");
    let returned = &anthropic_answer()["content"];
    let sent = strip_cache_control(&second["messages"][1]["content"]);
    assert_eq!(sent.to_string(), returned.to_string());
    // The tool call's input keeps the model's key order in every API.
    let chat = conversation.to_openai_chat("gpt-4.1");
    assert_eq!(
        chat["messages"][2]["tool_calls"][0]["function"]["arguments"],
        r#"{"path":"src/main.rs","limit":20}"#
    );
    // Thinking and server blocks are Anthropic's: the OpenAI bodies carry the text and call.
    assert_eq!(chat["messages"][2]["content"], "Reading it.");
    assert_eq!(
        chat["messages"][1]["content"][1]["image_url"]["url"],
        format!("data:image/png;base64,{PNG}")
    );
}

#[test]
fn thinking_goes_first_and_never_carries_the_breakpoint() {
    let mut conversation = Conversation::new();
    conversation.push_user("hi").into_result().unwrap();
    conversation
        .push_assistant_parts(
            [Part::text("Hello."), Part::thinking("Greet back.", "sig-1")],
            [],
        )
        .into_result()
        .unwrap();
    let body = conversation.to_anthropic("claude-sonnet-4-5");
    let content = &body["messages"][1]["content"];
    assert_eq!(content[0]["type"], "thinking");
    assert_eq!(content[0]["signature"], "sig-1");
    assert!(content[0].get("cache_control").is_none());
    assert!(content[1]["cache_control"].is_object());
}

/// A Responses answer of a reasoning model: the reasoning item (encrypted), the message and
/// the call go back with their ids, in order (the API pairs a reasoning item with the item
/// after it by id).
#[test]
fn a_responses_answer_goes_back_with_its_items_and_ids() {
    let output = json!([
        {"type": "reasoning", "id": "rs_01", "summary": [], "encrypted_content": "gAAAAABo_encrypted=="},
        {"type": "message", "id": "msg_01", "status": "completed", "role": "assistant",
         "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}]},
        {"type": "function_call", "id": "fc_01", "call_id": "call_01", "name": "read_file",
         "arguments": "{\"path\":\"a.rs\"}", "status": "completed"}
    ]);
    let mut conversation = Conversation::new();
    conversation.add_tool(read_tool()).into_result().unwrap();
    conversation.push_user("Read a.rs").into_result().unwrap();
    let first = conversation.to_openai_responses("gpt-5");
    conversation
        .push_responses_output(&json!({"id": "resp_01", "output": output}))
        .into_result()
        .unwrap();
    conversation
        .push_tool_result("call_01", "fn a() {}")
        .into_result()
        .unwrap();
    let second = conversation.to_openai_responses("gpt-5");
    assert_extends(&first, &second, "input");
    let input = second["input"].as_array().unwrap();
    assert_eq!(input[1..4].to_vec(), output.as_array().unwrap().clone());
    assert_eq!(input[4]["type"], "function_call_output");
    // Chat Completions and Anthropic get the text and the call.
    let anthropic = conversation.to_anthropic("claude-sonnet-4-5");
    assert_eq!(
        anthropic["messages"][1]["content"][0]["text"],
        "Let me look."
    );
    assert_eq!(
        anthropic["messages"][1]["content"][1]["input"]["path"],
        "a.rs"
    );
}

#[test]
fn an_openai_answer_keeps_the_model_s_argument_bytes() {
    let mut conversation = Conversation::new();
    conversation.push_user("Read a.rs").into_result().unwrap();
    let response = json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": null, "refusal": null,
        "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "read_file", "arguments": "{\"path\": \"a.rs\" }"}}]}}]});
    conversation
        .push_openai_response(&response)
        .into_result()
        .unwrap();
    let body = conversation.to_openai_chat("gpt-4.1");
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "read_file", "arguments": "{\"path\": \"a.rs\" }"}}]})
    );
}

/// A conversation with every kind of content, built by this crate.
fn rich_conversation() -> Conversation {
    let mut conversation = Conversation::new();
    conversation.add_tool(read_tool()).into_result().unwrap();
    conversation.add_static("Be terse.").into_result().unwrap();
    conversation
        .add_session("memory", "Ada prefers Rust.")
        .into_result()
        .unwrap();
    conversation
        .push_user_parts([
            Part::text("Compare the two."),
            Part::image(Source::from_url("https://example.org/a.png")),
            Part::document(
                Source::Base64 {
                    media_type: "application/pdf".into(),
                    data: "JVBERi0xLjQK".into(),
                },
                Some("spec.pdf".into()),
            ),
        ])
        .into_result()
        .unwrap();
    conversation
        .push_assistant(
            "Reading.",
            [ToolCall::new(
                "call_1",
                "read_file",
                &json!({"path": "a.rs"}),
            )],
        )
        .into_result()
        .unwrap();
    conversation
        .push_tool_result("call_1", "fn a() {}")
        .into_result()
        .unwrap();
    conversation
        .push_assistant("Done.", [])
        .into_result()
        .unwrap();
    conversation.push_user("Thanks.").into_result().unwrap();
    conversation
}

#[test]
fn a_body_imported_in_any_format_builds_the_same_body_again() {
    type Build = fn(&Conversation) -> Value;
    let builders: [(&str, Build); 3] = [
        ("chat", |c| c.to_openai_chat("m")),
        ("responses", |c| c.to_openai_responses("m")),
        ("anthropic", |c| c.to_anthropic("m")),
    ];
    for (name, build) in builders {
        let body = build(&rich_conversation());
        let imported =
            Conversation::from_body(&body).unwrap_or_else(|error| panic!("{name}: {error}"));
        assert_eq!(build(&imported), body, "{name}");
        // The import continues: the next turn extends the imported body.
        let mut continued = imported;
        continued
            .push_assistant("You're welcome.", [])
            .into_result()
            .unwrap();
        continued.push_user("Bye.").into_result().unwrap();
        let list = if name == "responses" {
            "input"
        } else {
            "messages"
        };
        assert_extends(&body, &build(&continued), list);
    }
}

#[test]
fn a_checkpoint_with_every_kind_of_content_resumes_byte_for_byte() {
    let mut conversation = rich_conversation();
    conversation
        .push_anthropic_response(&anthropic_answer())
        .into_result()
        .unwrap();
    conversation
        .push_tool_result("toolu_01", "ok")
        .into_result()
        .unwrap();
    let saved = serde_json::to_string(&conversation).unwrap();
    let resumed: Conversation = serde_json::from_str(&saved).unwrap();
    for (a, b) in [
        (conversation.to_anthropic("m"), resumed.to_anthropic("m")),
        (
            conversation.to_openai_chat("m"),
            resumed.to_openai_chat("m"),
        ),
        (
            conversation.to_openai_responses("m"),
            resumed.to_openai_responses("m"),
        ),
    ] {
        assert_eq!(a.to_string(), b.to_string());
    }
}

#[test]
fn inputs_the_provider_would_reject_are_refused_with_the_reason() {
    let mut conversation = Conversation::new();
    let error = |change: kvlint_sdk::Change<'_>| change.into_result().unwrap_err();
    assert_eq!(
        error(conversation.push_assistant("Hello.", [])),
        ConversationError::AssistantFirst
    );
    assert_eq!(
        error(conversation.push_user("")),
        ConversationError::Empty { role: "user" }
    );
    conversation.push_user("Read a.rs").into_result().unwrap();
    let broken = ToolCall::verbatim("call_1", "read_file", r#"{"path": "a.rs""#);
    let ConversationError::ToolArguments { call_id, reason } =
        error(conversation.push_assistant("", [broken]))
    else {
        panic!("invalid arguments must be refused");
    };
    assert_eq!(call_id, "call_1");
    assert!(reason.starts_with("invalid JSON"), "{reason}");
    assert_eq!(
        error(conversation.push_tool_result("call_9", "?")),
        ConversationError::UnknownToolCall {
            call_id: "call_9".into()
        }
    );
    assert_eq!(
        error(conversation.push_assistant("", [])),
        ConversationError::Empty { role: "assistant" }
    );
    // Nothing refused reached history.
    assert_eq!(conversation.history().len(), 1);
}

#[test]
fn a_compaction_never_leaves_history_starting_with_the_assistant() {
    let mut conversation = Conversation::new();
    conversation.push_user("first").into_result().unwrap();
    for turn in 0..6 {
        let call = ToolCall::new(format!("call_{turn}"), "read_file", &json!({"path": "a"}));
        conversation
            .push_assistant("", [call])
            .into_result()
            .unwrap();
        conversation
            .push_tool_result(format!("call_{turn}"), "ok")
            .into_result()
            .unwrap();
    }
    conversation
        .push_assistant("Done.", [])
        .into_result()
        .unwrap();
    // The last three messages hold no user message: the cut goes back to the last one.
    let cache_break = conversation.compact(3);
    assert_eq!(cache_break.dropped_messages, 0);
    assert_eq!(cache_break.kept_beyond_asked, 11);
    assert_eq!(conversation.history()[0].role(), kvlint_sdk::Role::User);
}

#[test]
fn a_tier_change_after_the_first_request_says_what_it_costs() {
    let mut conversation = Conversation::new();
    conversation.add_tool(read_tool()).into_result().unwrap();
    conversation.add_static("Be terse.").into_result().unwrap();
    conversation.push_user("hi").into_result().unwrap();
    conversation.to_openai_chat("m");
    // A tool sorted before `read_file`: everything from the first tool on is recomputed.
    let grep = Tool::new("grep", "Search.", json!({"type": "object"}));
    let change = conversation.add_tool(grep.clone());
    assert_eq!(
        change.effect(),
        Some(&Effect::Deferred {
            change: kvlint_sdk::PrefixChange::Tool(grep),
            lost_blocks: 3
        })
    );
    // Adding it again changes nothing.
    assert!(conversation.add_static("Be terse.").is_clean());
    // Strict mode refuses it instead.
    let mut strict = Conversation::strict();
    strict.push_user("hi").into_result().unwrap();
    strict.to_openai_chat("m");
    assert!(matches!(
        strict.add_static("Answer in French.").into_result(),
        Err(ConversationError::CommittedTier { lost_blocks: 1, .. })
    ));
    assert!(strict.pending_changes().is_empty());
}

/// The issue's case: a clock given to `add_static` every turn. Each call reports it, and in
/// strict mode refuses it, so four timestamps never pile up in the system prompt.
#[test]
fn a_timestamp_in_a_cached_tier_is_reported_at_the_call() {
    let mut conversation = Conversation::new();
    let change = conversation.add_static("You are an agent. Now: 2025-03-04T10:22:31Z.");
    let volatile = change.volatile();
    assert_eq!(volatile.len(), 1);
    assert_eq!(
        (volatile[0].rule, volatile[0].value.as_str()),
        ("volatile-timestamp", "2025-03-04T10:22:31Z")
    );
    let change = conversation.add_session("request", "Request id: req_7f3a9c2e41d04b8a");
    assert_eq!(change.volatile()[0].rule, "volatile-id");
    // A counter the text labels as one is reported; an ordinary number is not.
    let change = conversation.add_session("budget", "Token budget left: 180863");
    assert_eq!(
        (
            change.volatile()[0].rule,
            change.volatile()[0].value.as_str()
        ),
        ("volatile-counter", "180863")
    );
    assert!(
        conversation
            .add_session("style", "Answer in at most 3 sentences.")
            .is_clean()
    );
    assert!(
        conversation
            .add_session("memory", "Ada prefers Rust.")
            .is_clean()
    );

    let mut strict = Conversation::strict();
    let refused = strict
        .add_static("Now: 10:22:31.")
        .into_result()
        .unwrap_err();
    assert!(matches!(
        refused,
        ConversationError::Volatile {
            tier: "static",
            class: "timestamp",
            ..
        }
    ));
    assert!(
        strict.to_openai_chat("m")["messages"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn the_routing_key_holds_across_compaction() {
    let mut conversation = Conversation::new();
    conversation.add_tool(read_tool()).into_result().unwrap();
    conversation.add_static("Be terse.").into_result().unwrap();
    conversation
        .add_session("memory", "v1")
        .into_result()
        .unwrap();
    let key = conversation.routing_key();
    let window = HistoryWindow::new(6, 2);
    let mut compactions = 0;
    for turn in 0..12 {
        conversation
            .push_user(format!("q{turn}"))
            .into_result()
            .unwrap();
        conversation.to_openai_chat("m");
        conversation
            .push_assistant(format!("a{turn}"), [])
            .into_result()
            .unwrap();
        if turn == 3 {
            // A session update: folded into the session tier at the next compaction.
            let _ = conversation.add_session("memory", "v2");
        }
        if conversation.enforce_window(&window).is_some() {
            compactions += 1;
        }
        assert_eq!(conversation.routing_key(), key, "turn {turn}");
    }
    assert!(compactions >= 2);
}

#[test]
fn a_clean_loop_is_clean_and_its_tail_is_a_cost() {
    let mut guard = Guard::new(Renderer::provider(), GuardMode::Error);
    let mut conversation = Conversation::new();
    conversation.add_static("Be terse.").into_result().unwrap();
    conversation.push_user("hi").into_result().unwrap();
    conversation.add_turn_context("Now: 10:00:01");
    assert!(
        guard
            .observe(&conversation.to_openai_chat("m"))
            .unwrap()
            .is_clean()
    );
    conversation
        .push_assistant("hello", [])
        .into_result()
        .unwrap();
    conversation.push_user("bye").into_result().unwrap();
    conversation.add_turn_context("Now: 10:00:09");
    let observed = guard.observe(&conversation.to_openai_chat("m")).unwrap();
    assert!(observed.is_clean());
    assert_eq!(observed.errors().count(), 0);
    let costs: Vec<_> = observed.costs().collect();
    assert_eq!(costs.len(), 1);
    assert!(costs[0].tokens_lost > 0);
    assert_eq!(observed.tokens_lost(), costs[0].tokens_lost);
}

/// The readers the language bindings share: a call's arguments given as the model's text stay
/// that text; given as a value, they are serialized canonically; both shapes of a call read.
#[test]
fn tool_calls_and_content_are_read_as_the_bindings_pass_them() {
    let verbatim = ToolCall::from_json(
        &json!({"id": "c1", "name": "read", "arguments": "{\"b\": 1, \"a\": 2}"}),
    )
    .unwrap();
    assert_eq!(verbatim.arguments(), "{\"b\": 1, \"a\": 2}");
    let chat = ToolCall::from_json(
        &json!({"id": "c2", "function": {"name": "read", "arguments": {"b": 1, "a": 2}}}),
    )
    .unwrap();
    assert_eq!(
        (chat.id(), chat.name(), chat.arguments()),
        ("c2", "read", "{\"a\":2,\"b\":1}")
    );
    let error = ToolCall::from_json(&json!({"name": "read"})).unwrap_err();
    assert_eq!(error.to_string(), "`tool call`: no `id` string");

    assert_eq!(
        Part::from_content(&json!("Hi.")).unwrap(),
        vec![Part::text("Hi.")]
    );
    let blocks = Part::from_content(
        &json!([{"type": "text", "text": "Hi."}, {"type": "input_text", "text": "Go."}]),
    )
    .unwrap();
    assert_eq!(blocks, vec![Part::text("Hi."), Part::text("Go.")]);
    assert!(Part::from_content(&json!(42)).is_err());
}

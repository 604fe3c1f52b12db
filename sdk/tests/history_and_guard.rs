//! Compaction, the history window, changes after commit, breakpoints, and the guard's modes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use kvlint_render::render::Renderer;
use kvlint_request::diagnostic::Severity;
use kvlint_sdk::{
    Conversation, Guard, GuardError, GuardMode, HistoryWindow, PrefixChange, Role, Tool, ToolCall,
};
use serde_json::{Value, json};

use common::{agent_tools, assert_breakpoints_only_below_minimum};

fn started() -> Conversation {
    let mut conversation = Conversation::new();
    for tool in agent_tools() {
        conversation.add_tool(tool).into_result().unwrap();
    }
    conversation
        .add_static("You are a coding agent.")
        .add_session("memory", "Prefers small commits.")
        .into_result()
        .unwrap();
    conversation
}

/// `turns` user/assistant exchanges with one tool call each.
fn exchanges(conversation: &mut Conversation, turns: usize) {
    for turn in 0..turns {
        conversation
            .push_user(format!("step {turn}"))
            .into_result()
            .unwrap();
        conversation.to_openai_chat("gpt-4.1");
        let id = format!("call_{turn}");
        conversation
            .push_assistant("", [ToolCall::new(&id, "search", &json!({"query": turn}))])
            .into_result()
            .unwrap();
        conversation
            .push_tool_result(&id, format!("{turn} hits"))
            .into_result()
            .unwrap();
        conversation
            .push_assistant(format!("done {turn}"), [])
            .into_result()
            .unwrap();
    }
}

#[test]
fn compaction_is_the_one_way_to_drop_history_and_says_what_is_lost() {
    let mut conversation = started();
    exchanges(&mut conversation, 5);
    assert_eq!(conversation.history().len(), 20);
    let cache_break = conversation.compact(6);
    // The cut moves forward to a user message: no tool result loses its call.
    assert_eq!(cache_break.dropped_messages, 16);
    assert_eq!(cache_break.kept_messages, 4);
    assert_eq!(conversation.history()[0].role(), Role::User);
    // Tools, the static block and the session block are still cached.
    assert_eq!(cache_break.reused_blocks, 6);
    assert_eq!(cache_break.lost_blocks, 20);
    assert!(!cache_break.is_empty());
    assert!(cache_break.applied_changes.is_empty());
}

#[test]
fn the_window_drops_in_large_steps() {
    let mut conversation = started();
    let window = HistoryWindow::new(24, 8);
    let mut breaks = Vec::new();
    for turn in 0..40 {
        let before = conversation.fingerprint();
        exchanges(&mut conversation, 1);
        match conversation.enforce_window(&window) {
            Some(cache_break) => breaks.push((turn, cache_break.dropped_messages)),
            // Without a break, the turn extends the previous one.
            None => assert_eq!(
                conversation.fingerprint().common_blocks(&before),
                before.blocks.len()
            ),
        }
        assert!(conversation.history().len() <= 24);
    }
    // 160 messages through a 24-message window, 20 dropped at a time.
    assert_eq!(breaks.len(), 7, "{breaks:?}");
    assert!(breaks.iter().all(|(_, dropped)| *dropped == 20));
}

#[test]
fn tier_changes_after_commit_keep_the_prefix() {
    let mut conversation = started();
    conversation.push_user("hi").into_result().unwrap();
    let first = conversation.to_anthropic("claude-sonnet-4-5");
    assert!(conversation.is_committed());
    let tools_before = first["tools"].clone();

    // A new tool waits for compaction; a new static block travels in history until then.
    conversation
        .add_tool(Tool::new("deploy", "Deploy.", json!({"type": "object"})))
        .add_static("Never deploy on Fridays.")
        .into_result()
        .unwrap();
    // A memory update shows in the turn tier, then travels with the next message.
    conversation
        .add_session("memory", "Prefers small commits. Uses jj.")
        .into_result()
        .unwrap();
    assert!(conversation.turn_tier().unwrap().contains("Uses jj."));
    conversation
        .push_assistant("hello", [])
        .push_user("deploy it")
        .into_result()
        .unwrap();
    let second = conversation.to_anthropic("claude-sonnet-4-5");
    assert_eq!(second["tools"], tools_before);
    assert_eq!(second["system"], first["system"]);
    assert_eq!(
        conversation.history().last().unwrap().notes(),
        [
            "Instructions update:\nNever deploy on Fridays.",
            "Session context update (memory):\nPrefers small commits. Uses jj."
        ]
    );
    assert_eq!(conversation.turn_tier(), None);
    assert_eq!(conversation.pending_changes().len(), 3);

    // Compaction applies them, and says so.
    let key_before = conversation.routing_key();
    let cache_break = conversation.compact(usize::MAX);
    assert_eq!(cache_break.dropped_messages, 0);
    assert_eq!(cache_break.applied_changes.len(), 3);
    assert!(
        matches!(&cache_break.applied_changes[0], PrefixChange::Tool(tool) if tool.name() == "deploy")
    );
    assert_eq!(
        cache_break.reused_blocks, 0,
        "a new tool sorts first: nothing is kept"
    );
    assert_ne!(conversation.routing_key(), key_before);
    let third = conversation.to_anthropic("claude-sonnet-4-5");
    assert_eq!(third["tools"].as_array().unwrap().len(), 5);
    assert_eq!(third["system"][1]["text"], "Never deploy on Fridays.");
    assert_eq!(
        third["system"][2]["text"],
        "Prefers small commits. Uses jj."
    );
}

#[test]
fn adding_what_is_already_there_changes_nothing() {
    let mut conversation = started();
    conversation.push_user("hi").into_result().unwrap();
    let body = conversation.to_openai_responses("gpt-4.1");
    for tool in agent_tools().into_iter().rev() {
        conversation.add_tool(tool).into_result().unwrap();
    }
    conversation
        .add_static("You are a coding agent.")
        .add_session("memory", "Prefers small commits.")
        .into_result()
        .unwrap();
    assert!(conversation.pending_changes().is_empty());
    assert_eq!(conversation.to_openai_responses("gpt-4.1"), body);
}

#[test]
fn turn_context_lasts_one_request_even_without_an_answer_between() {
    let mut conversation = started();
    conversation
        .add_turn_context("Time: 10:00:01")
        .push_user("one")
        .into_result()
        .unwrap();
    conversation.to_openai_chat("gpt-4.1");
    conversation.to_anthropic("claude-sonnet-4-5"); // the same request, for another API
    assert_eq!(conversation.turn_tier().as_deref(), Some("Time: 10:00:01"));
    conversation
        .add_turn_context("Time: 10:00:09")
        .push_user("two")
        .into_result()
        .unwrap();
    assert_eq!(conversation.turn_tier().as_deref(), Some("Time: 10:00:09"));
    conversation.to_openai_chat("gpt-4.1");
    conversation.push_user("three").into_result().unwrap();
    assert_eq!(conversation.turn_tier(), None);
}

/// Tool calls and results enough for the newest turn to add more than 20 blocks.
fn long_turn(conversation: &mut Conversation) {
    let calls: Vec<ToolCall> = (0..12)
        .map(|index| {
            ToolCall::new(
                format!("call_{index}"),
                "read_file",
                &json!({"path": index}),
            )
        })
        .collect();
    conversation
        .push_assistant("Reading everything.", calls)
        .into_result()
        .unwrap();
    for index in 0..12 {
        conversation
            .push_tool_result(format!("call_{index}"), format!("file {index}"))
            .into_result()
            .unwrap();
    }
}

#[test]
fn a_long_turn_gets_a_breakpoint_where_the_previous_turn_had_its_own() {
    let mut conversation = started();
    conversation
        .push_user("Read the whole crate.")
        .into_result()
        .unwrap();
    let first = conversation.to_anthropic("claude-sonnet-4-5");
    long_turn(&mut conversation);
    conversation.add_turn_context("Time: 10:00:07");
    let second = conversation.to_anthropic("claude-sonnet-4-5");
    let marked = |body: &Value| -> Vec<String> {
        let mut paths = Vec::new();
        for (key, items) in [("tools", &body["tools"]), ("system", &body["system"])] {
            for (index, item) in items.as_array().into_iter().flatten().enumerate() {
                if item.get("cache_control").is_some() {
                    paths.push(format!("{key}[{index}]"));
                }
            }
        }
        for (index, message) in body["messages"].as_array().unwrap().iter().enumerate() {
            for (block, item) in message["content"].as_array().unwrap().iter().enumerate() {
                if item.get("cache_control").is_some() {
                    paths.push(format!("messages[{index}].content[{block}]"));
                }
            }
        }
        paths
    };
    assert_eq!(marked(&first), ["system[0]", "messages[0].content[0]"]);
    assert_eq!(
        marked(&second),
        [
            "system[0]",
            "messages[0].content[0]",
            "messages[2].content[11]"
        ]
    );
    // kvlint's audit agrees: every breakpoint is read by the next turn within the lookback.
    assert_breakpoints_only_below_minimum(&format!("{first}\n{second}\n"));
}

#[test]
fn the_guard_refuses_breaks_in_error_mode_unless_announced() {
    let mut conversation = started();
    exchanges(&mut conversation, 3);
    conversation
        .push_user("next")
        .add_turn_context("Time: 10:00:01");
    let mut guard = Guard::new(Renderer::provider(), GuardMode::Error);
    assert!(
        guard
            .observe(&conversation.to_openai_chat("gpt-4.1"))
            .unwrap()
            .is_empty()
    );

    // A hand-edited body: the system prompt is reworded.
    let mut edited = conversation.to_openai_chat("gpt-4.1");
    edited["messages"][0]["content"] = json!("You are a careful coding agent.");
    let Err(GuardError::Breaks { turn, diagnostics }) = guard.observe(&edited) else {
        panic!("an edited system prompt must be refused");
    };
    assert_eq!(turn, 1);
    assert_eq!(diagnostics[0].rule, "prefix-edit");
    assert_eq!(diagnostics[0].severity, Severity::Error);
    assert_eq!(guard.counters().refused_turns, 1);

    // The refused body was not recorded: the SDK's next turn is checked against turn 0.
    conversation
        .push_assistant("ok", [])
        .push_user("and then?")
        .into_result()
        .unwrap();
    let findings = guard
        .observe(&conversation.to_openai_chat("gpt-4.1"))
        .unwrap();
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(
        findings[0].severity,
        Severity::Info,
        "the dropped turn tier"
    );

    // An announced compaction passes and is counted as expected.
    assert_eq!(conversation.compact(4).kept_messages, 3);
    guard.expect_break();
    let findings = guard
        .observe(&conversation.to_openai_chat("gpt-4.1"))
        .unwrap();
    assert_eq!(findings[0].rule, "history-rewrite");
    let counters = guard.counters();
    assert_eq!(counters.expected_breaks, 1);
    assert_eq!(counters.turns, 4);
    assert!(counters.reused_tokens > 0 && counters.recomputed_tokens > 0);
    assert!(counters.dropped_tokens > 0);
    // The compaction is a break; the dropped turn tier, a cost by design, is counted apart.
    assert_eq!(counters.breaks_by_rule["history-rewrite"], 1);
    assert_eq!(guard.costs_by_rule()["history-rewrite"], 1);
}

#[test]
fn an_announced_compaction_to_one_message_is_counted_whatever_its_findings_cost() {
    let mut conversation = started();
    conversation
        .push_user("List the files.")
        .into_result()
        .unwrap();
    let mut guard = Guard::new(Renderer::provider(), GuardMode::Error);
    for turn in 0..3 {
        guard
            .observe(&conversation.to_openai_chat("gpt-4.1"))
            .unwrap();
        conversation
            .push_assistant(format!("answer {turn}"), [])
            .push_user(format!("question {turn}"))
            .into_result()
            .unwrap();
    }
    assert_eq!(conversation.compact(1).kept_messages, 1);
    guard.expect_break();
    assert!(guard.is_break_expected());
    let findings = guard
        .observe(&conversation.to_openai_chat("gpt-4.1"))
        .unwrap();
    assert!(!findings.is_empty());
    assert!(!guard.is_break_expected());
    assert_eq!(guard.counters().expected_breaks, 1);
}

#[test]
fn warn_mode_returns_findings_and_records_the_turn() {
    let mut guard = Guard::new(Renderer::provider(), GuardMode::Warn);
    let body =
        |tools: Value| json!({"messages": [{"role": "user", "content": "hi"}], "tools": tools});
    let read = json!({"type": "function", "function": {"name": "read", "parameters": {}}});
    let write = json!({"type": "function", "function": {"name": "write", "parameters": {}}});
    guard.observe(&body(json!([read, write]))).unwrap();
    let findings = guard.observe(&body(json!([write, read]))).unwrap();
    assert_eq!(findings[0].rule, "tool-order");
    assert!(
        guard
            .observe(&body(json!([write, read])))
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        guard.observe(&json!({"prompt": "not a chat"})),
        Err(GuardError::Body { turn: 3, .. })
    ));
}

/// What a caller goes on from (a cache model's prediction, as `kvlint proxy` makes): the last
/// accepted turn is the renderer's own rendering of its body, a turn's reused tokens are the
/// prefix its rendering shares with the previous one's, and a refused turn changes neither.
#[test]
fn the_guard_hands_on_the_turn_it_accepted_as_the_renderer_renders_it() {
    let renderer = Renderer::provider();
    let rendered = |body: &Value| {
        let request = kvlint_request::request::Request::from_body(body).unwrap();
        renderer.render(&request).unwrap().tokens
    };
    let body = |stamp: &str, turns: usize| {
        let mut messages = vec![json!({"role": "system", "content": format!("Run {stamp}.")})];
        for index in 0..turns {
            if index > 0 {
                messages.push(json!({"role": "assistant", "content": format!("Answer {index}")}));
            }
            messages.push(json!({"role": "user", "content": format!("Question {index}")}));
        }
        json!({"messages": messages})
    };
    let mut guard = Guard::new(Renderer::provider(), GuardMode::Error);
    assert!(guard.last_accepted().is_none());
    let first = body("1", 1);
    let observed = guard.observe(&first).unwrap();
    assert_eq!(observed.reused_tokens(), 0);
    assert_eq!(observed.prompt_tokens(), rendered(&first).len());
    let second = body("1", 2);
    let observed = guard.observe(&second).unwrap();
    let (before, now) = (rendered(&first), rendered(&second));
    assert_eq!(observed.reused_tokens(), before.common_prefix_len(&now));
    assert!(observed.reused_tokens() > 0 && observed.reused_tokens() < now.len());
    let accepted = guard.last_accepted().unwrap();
    assert_eq!(accepted.rendered.tokens.ids(), now.ids());
    assert_eq!(accepted.request.body, second);
    // Refused (its stamp moved): the turn kept is still the second.
    assert!(guard.observe(&body("2", 3)).is_err());
    assert_eq!(guard.last_accepted().unwrap().request.body, second);
    guard.reset();
    assert!(guard.last_accepted().is_none());
}

/// A body that sends thinking blocks back to a model that checks their prefix, after the
/// system prompt changed: the API would refuse it with a 400, so the guard in error mode
/// refuses it before it is sent, naming the first failing block.
#[test]
fn the_guard_refuses_a_body_whose_thinking_blocks_fail_the_prefix_check() {
    let body = |system: &str, turns: usize| {
        let mut messages = vec![json!({"role": "user", "content": "Fix the failing test."})];
        for turn in 0..turns {
            messages.push(json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": format!("Step {turn}: read the test first."),
                 "signature": format!("EqSig{turn}")},
                {"type": "tool_use", "id": format!("toolu_{turn}"), "name": "read_file",
                 "input": {"path": "tests/test_pricing.py"}}]}));
            messages.push(json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": format!("toolu_{turn}"), "content": "ok"}]}));
        }
        json!({"model": "claude-opus-5-5", "max_tokens": 1024,
               "thinking": {"type": "enabled", "budget_tokens": 1024},
               "system": system, "messages": messages})
    };
    let mut guard = Guard::new(Renderer::provider(), GuardMode::Error);
    guard.observe(&body("You are a coding agent.", 1)).unwrap();
    // Appending a turn keeps every block's prefix.
    guard.observe(&body("You are a coding agent.", 2)).unwrap();
    let refused = guard.observe(&body("You are a careful coding agent.", 3));
    let Err(GuardError::Breaks { diagnostics, .. }) = refused else {
        panic!("not refused: {refused:?}");
    };
    let thinking = diagnostics
        .iter()
        .find(|diagnostic| diagnostic.rule == "thinking-prefix-check")
        .unwrap();
    assert_eq!(thinking.severity, Severity::Error);
    assert_eq!(thinking.part.to_string(), "messages[1].content[0]");
    assert!(thinking.message.contains("400"), "{}", thinking.message);
    assert!(
        thinking.help.contains("role: \"system\""),
        "{}",
        thinking.help
    );
    // On an account created before the check was on by default, the API lets it through:
    // said as info, and the guard does not refuse it for that.
    let older = kvlint_sdk::AnthropicAccount::created_on("2026-03-02").unwrap();
    let mut guard = Guard::new(Renderer::provider(), GuardMode::Error).on_anthropic_account(older);
    guard.observe(&body("You are a coding agent.", 1)).unwrap();
    guard.observe(&body("You are a coding agent.", 2)).unwrap();
    let let_through = guard.observe(&body("You are a careful coding agent.", 3));
    let Err(GuardError::Breaks { diagnostics, .. }) = let_through else {
        panic!("the system change is still a cache break: {let_through:?}");
    };
    let thinking = diagnostics
        .iter()
        .find(|diagnostic| diagnostic.rule == "thinking-prefix-check")
        .unwrap();
    assert_eq!(thinking.severity, Severity::Info);
}

/// The answer goes back to Anthropic exactly as returned: thinking blocks with empty text and
/// their signatures, redacted thinking, server tool blocks and block types this SDK does not
/// know, with every field; else the prefix check refuses the next request.
#[test]
fn an_anthropic_answer_is_sent_back_exactly_as_returned() {
    let answer = serde_json::json!([
        {"type": "thinking", "thinking": "", "signature": "EqEmpty"},
        {"type": "redacted_thinking", "data": "EqRedacted"},
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "kvlint"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
        {"type": "some_block_of_2027", "payload": {"kept": true}, "empty": ""},
        {"type": "text", "text": "Found it.", "citations": []},
    ]);
    let mut conversation = Conversation::new();
    conversation
        .add_static("You are a research agent.")
        .into_result()
        .unwrap();
    conversation
        .push_user("Find kvlint.")
        .into_result()
        .unwrap();
    conversation
        .push_anthropic_response(&serde_json::json!({"content": answer}))
        .into_result()
        .unwrap();
    conversation.push_user("Thanks.").into_result().unwrap();
    let body = conversation.to_anthropic("claude-opus-5-5");
    let sent = &body["messages"][1]["content"];
    let without_markers: Vec<Value> = sent
        .as_array()
        .unwrap()
        .iter()
        .map(|block| {
            let mut block = block.clone();
            if let Some(object) = block.as_object_mut() {
                object.remove("cache_control");
            }
            block
        })
        .collect();
    assert_eq!(Value::Array(without_markers), answer);
}

/// An instruction update after the first request goes in the newest user turn, as Anthropic's
/// preserved-thinking docs advise, not into `system`: every thinking block sent back keeps its
/// prefix, and a guard in error mode on a model that checks lets every turn through.
#[test]
fn an_instruction_update_keeps_the_thinking_blocks_valid() {
    let mut conversation = Conversation::new();
    conversation
        .add_static("You are a coding agent.")
        .push_user("Fix the failing test.")
        .into_result()
        .unwrap();
    let mut guard = Guard::new(Renderer::provider(), GuardMode::Error);
    for turn in 0..3 {
        let body = conversation.to_anthropic("claude-opus-5-5");
        assert_eq!(body["system"][0]["text"], "You are a coding agent.");
        guard.observe(&body).unwrap();
        conversation
            .push_anthropic_response(&json!({"content": [
                {"type": "thinking", "thinking": format!("Step {turn}."), "signature": format!("EqSig{turn}")},
                {"type": "text", "text": format!("Done {turn}.")}]}))
            .into_result()
            .unwrap();
        if turn == 0 {
            let change = conversation.add_static("Never edit the tests.");
            assert!(matches!(
                change.effect(),
                Some(kvlint_sdk::Effect::Deferred { .. })
            ));
        }
        conversation
            .push_user(format!("Next {turn}."))
            .into_result()
            .unwrap();
    }
    let body = conversation.to_anthropic("claude-opus-5-5");
    assert_eq!(
        body["messages"][2]["content"][1]["text"],
        "Instructions update:\nNever edit the tests."
    );
    guard.observe(&body).unwrap();
}

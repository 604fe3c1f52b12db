//! The grouping's readings, one pattern each.
use serde_json::json;

use super::*;

const CHAT: &str = "/v1/chat/completions";

fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

fn said(text: &str) -> Value {
    json!({"role": "assistant", "content": text})
}

fn chat(system: &str, conversation: &[Value]) -> Value {
    let mut messages = vec![json!({"role": "system", "content": system})];
    messages.extend_from_slice(conversation);
    json!({"model": "m", "messages": messages})
}

fn join(grouping: &mut Grouping, body: &Value) -> (usize, Option<Reading>) {
    let joined = grouping.join(CHAT, body, &Carried::body(body), true);
    (joined.session, joined.reading)
}

/// Sent, and refused or cut short.
fn fail(grouping: &mut Grouping, body: &Value) -> (usize, Option<Reading>) {
    let joined = grouping.join(CHAT, body, &Carried::body(body), false);
    (joined.session, joined.reading)
}

/// A request that carries a session's history under wholly other instructions starts a
/// session of its own, linked; the original agent coming back shows it was another
/// agent's, and never coming back that it was the same agent under new instructions.
#[test]
fn a_hand_off_to_other_instructions_is_told_from_what_follows() {
    let mut grouping = Grouping::default();
    let first = chat("You are the primary assistant.", &[user("q")]);
    assert_eq!(join(&mut grouping, &first), (0, None));
    // The hand-off: another system prompt and tools on the same history.
    let mut handed_off = chat(
        "You are the flight assistant.",
        &[user("q"), said("a"), user("q2")],
    );
    handed_off["tools"] = json!([{"type": "function", "function": {"name": "f"}}]);
    let joined = grouping.join(CHAT, &handed_off, &Carried::body(&handed_off), true);
    assert_eq!(
        (joined.session, joined.started, joined.parent),
        (1, true, Some(0))
    );
    // A side call opening another conversation is a session of its own, unlinked.
    let title = chat("Make a title.", &[user("Title for: q")]);
    assert_eq!(join(&mut grouping, &title), (2, None));
    // The primary assistant has not come back yet: the hand-off may be its own change.
    assert_eq!(grouping.unconfirmed(), [(1, 0)]);
    let back = chat(
        "You are the primary assistant.",
        &[user("q"), said("a"), user("q2"), said("booked")],
    );
    assert_eq!(join(&mut grouping, &back), (0, None));
    assert!(grouping.unconfirmed().is_empty());
    // The flight assistant's next request is its own session's.
    let mut again = chat(
        "You are the flight assistant.",
        &[user("q"), said("a"), user("q2"), said("booked"), user("q3")],
    );
    again["tools"] = handed_off["tools"].clone();
    assert_eq!(join(&mut grouping, &again).0, 1);
}

#[test]
fn a_rewrite_keeping_the_opening_exchange_is_read_as_one() {
    let mut grouping = Grouping::default();
    let long = [user("q"), said("a"), user("q2"), said("b"), user("q3")];
    join(&mut grouping, &chat("s", &long));
    // Trimmed in the middle, the opening exchange kept: the same session, a rewrite.
    let trimmed = chat("s", &[user("q"), said("a"), user("q4")]);
    assert_eq!(join(&mut grouping, &trimmed), (0, Some(Reading::Rewrite)));
    // Under instructions rebuilt (a clock), the same conversation is the session's break.
    assert_eq!(
        join(
            &mut grouping,
            &chat("s2", &trimmed["messages"].as_array().unwrap()[1..])
        ),
        (0, Some(Reading::InstructionsChanged))
    );
    // The opening sent again from the start has no exchange yet: a session of its own.
    assert_eq!(join(&mut grouping, &chat("s", &[user("q")])), (1, None));
    // Answered, the same request again is a conversation of its own (opened alike).
    assert_eq!(join(&mut grouping, &chat("s", &[user("q")])), (2, None));
}

/// An SDK retrying after a 529 sends the same body again: a turn of its session, not a
/// session of one request that cuts the conversation.
#[test]
fn a_request_sent_again_is_a_retry_of_its_session() {
    let mut grouping = Grouping::default();
    let first = chat("s", &[user("q")]);
    let second = chat("s", &[user("q"), said("a"), user("q2")]);
    join(&mut grouping, &first);
    join(&mut grouping, &chat("other", &[user("hello")]));
    assert_eq!(fail(&mut grouping, &second), (0, None));
    assert_eq!(fail(&mut grouping, &second), (0, Some(Reading::Retry)));
    assert_eq!(join(&mut grouping, &second), (0, Some(Reading::Retry)));
    let third = chat(
        "s",
        &[user("q"), said("a"), user("q2"), said("b"), user("q3")],
    );
    assert_eq!(join(&mut grouping, &third), (0, None));
    // Answered, sent again: another conversation opened alike (two chats in parallel).
    assert_eq!(join(&mut grouping, &third), (2, None));
    let mut grouped = GroupedBy::default();
    grouped.read(2, Reading::Retry);
    grouped.read(3, Reading::Retry);
    assert_eq!(grouped.retries, 2);
    assert!(
        grouped
            .describe()
            .unwrap()
            .contains("turns 2, 3 the same request sent again")
    );
}

/// The streamed and the plain call of one model are one cache: a conversation that goes
/// from one to the other stays one session (Bedrock invoke and converse, Gemini).
#[test]
fn the_streamed_and_plain_endpoints_of_a_model_are_one() {
    let bedrock =
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-sonnet-4-5-v1:0";
    for (plain, streamed) in [
        (
            format!("{bedrock}/invoke"),
            format!("{bedrock}/invoke-with-response-stream"),
        ),
        (
            format!("{bedrock}/converse"),
            format!("{bedrock}/converse-stream"),
        ),
        (
            "/v1beta/models/gemini-2.5-flash:generateContent".to_owned(),
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse".to_owned(),
        ),
    ] {
        let mut grouping = Grouping::default();
        let first = chat("s", &[user("q")]);
        let next = chat("s", &[user("q"), said("a"), user("q2")]);
        assert_eq!(
            grouping
                .join(&plain, &first, &Carried::body(&first), true)
                .session,
            0
        );
        let joined = grouping.join(&streamed, &next, &Carried::body(&next), true);
        assert_eq!((joined.session, joined.started), (0, false), "{streamed}");
        // Another endpoint is another cache.
        let elsewhere = grouping.join("/v1/chat/completions", &next, &Carried::body(&next), true);
        assert!(elsewhere.started);
    }
}

/// A supervisor that ends every request with the same system message and inserts the new
/// items before it continues its session; an unrelated worker call is not joined to it.
#[test]
fn an_instruction_re_sent_at_the_end_of_every_request_is_set_aside() {
    let route =
        json!({"role": "system", "content": "Given the conversation above, who should act next?"});
    let supervisor = |conversation: &[Value]| {
        let mut body = chat("You are a supervisor.", conversation);
        body["messages"].as_array_mut().unwrap().push(route.clone());
        body
    };
    let mut grouping = Grouping::default();
    assert_eq!(
        join(&mut grouping, &supervisor(&[user("Plot the GDP.")])),
        (0, None)
    );
    let worker = chat("You are a researcher.", &[user("Plot the GDP.")]);
    assert_eq!(join(&mut grouping, &worker), (1, None));
    // It continues the worker's conversation too: the supervisor's own instructions
    // decide, no guess (the worker's are wholly other).
    let next = supervisor(&[user("Plot the GDP."), said("researcher: found it")]);
    assert_eq!(join(&mut grouping, &next), (0, None));
    let after = supervisor(&[
        user("Plot the GDP."),
        said("researcher: found it"),
        said("chart: done"),
    ]);
    assert_eq!(join(&mut grouping, &after), (0, None));
}

#[test]
fn of_two_sessions_continued_alike_the_one_with_its_instructions_is_chosen() {
    let mut grouping = Grouping::default();
    join(&mut grouping, &chat("supervisor", &[user("q")]));
    join(&mut grouping, &chat("worker", &[user("q")]));
    let next = [user("q"), said("a"), user("q2")];
    assert_eq!(
        join(&mut grouping, &chat("supervisor", &next)),
        (0, Some(Reading::SeveralSessions))
    );
    // Forgotten, a session is no candidate.
    grouping.forget(0);
    let further = [user("q"), said("a"), user("q2"), said("b"), user("q3")];
    assert_eq!(
        join(&mut grouping, &chat("supervisor", &further)),
        (1, Some(Reading::InstructionsChanged))
    );
}

/// A client that marks the newest message for the cache sends it as text parts, then as
/// a string once the marker moved on: the same message.
#[test]
fn a_message_sent_as_text_parts_then_as_a_string_is_the_same() {
    let mut grouping = Grouping::default();
    let marked = json!({"role": "user", "content": [
        {"type": "text", "text": "q", "cache_control": {"type": "ephemeral"}}]});
    join(&mut grouping, &chat("s", &[marked]));
    let next = chat("s", &[user("q"), said("a"), user("q2")]);
    assert_eq!(join(&mut grouping, &next), (0, None));
}

/// The SDK's turn tier: a per-turn tail on the newest message, dropped the turn after.
#[test]
fn a_turn_that_dropped_the_newest_message_s_tail_continues_its_session() {
    let mut grouping = Grouping::default();
    join(&mut grouping, &chat("s", &[user("Fix it. Time: 10:00")]));
    let next = [user("Fix it."), said("a"), user("Time: 10:01")];
    assert_eq!(join(&mut grouping, &chat("s", &next)), (0, None));
    // The tail sent as a text part of its own, joined without a space.
    let parts = json!({"role": "user", "content": [
        {"type": "text", "text": "The parser test fails. Fix it."},
        {"type": "text", "text": "Current time: 10:00"}]});
    join(&mut grouping, &chat("s", &[parts]));
    let next = [
        user("The parser test fails. Fix it."),
        said("a"),
        user("Time: 10:01"),
    ];
    assert_eq!(join(&mut grouping, &chat("s", &next)).0, 1);
    // A message that is not the newest one's start is another conversation.
    let other = [user("Fix that."), said("a"), user("Time: 10:02")];
    assert_eq!(join(&mut grouping, &chat("s", &other)), (2, None));
}

#[test]
fn different_keys_are_different_sessions() {
    let mut grouping = Grouping::default();
    let body = chat("s", &[user("q")]);
    let next = chat("s", &[user("q"), said("a"), user("q2")]);
    let a = [("x-session-id", "ses_a")];
    let b = [("x-session-id", "ses_b"), ("x-parent-session-id", "ses_a")];
    let carried = |headers| Carried {
        body: None,
        headers,
        trace_conversation: None,
    };
    assert_eq!(grouping.join(CHAT, &body, &carried(&a), true).session, 0);
    assert_eq!(grouping.join(CHAT, &body, &carried(&b), true).session, 1);
    assert_eq!(grouping.join(CHAT, &next, &carried(&b), true).session, 1);
    assert_eq!(grouping.join(CHAT, &next, &carried(&a), true).session, 0);
    let grouped = GroupedBy::of(&carried(&b));
    assert_eq!(grouped.key.as_deref(), Some("header x-session-id"));
    assert_eq!(grouped.parent_key.as_deref(), Some("ses_a"));
}

/// A summarizer without tools on a session's history is a side call of its own; the agent's
/// compacted request (a summary, then the session's last user message) is the session's
/// compaction, and the summarizer is confirmed another agent's.
#[test]
fn a_summary_is_a_side_call_and_the_compacted_request_the_session_s_compaction() {
    let tools = json!([{"type": "function", "function": {
        "name": "search", "description": "Searches the web. ".repeat(40)}}]);
    let agent = |system: &str, conversation: &[Value]| {
        let mut body = chat(system, conversation);
        body["tools"] = tools.clone();
        body
    };
    let mut grouping = Grouping::default();
    let turns = [user("q1"), said("a1"), user("q2"), said("a2"), user("q3")];
    let first = grouping.join(
        CHAT,
        &agent("agent", &turns[..1]),
        &Carried::body(&json!({})),
        true,
    );
    assert_eq!((first.session, first.kind), (0, RequestKind::MainTurn));
    join(&mut grouping, &agent("agent", &turns[..3]));
    join(&mut grouping, &agent("agent", &turns));
    // The opening exchange kept, the last user message replaced, no tools.
    let summary = chat(
        "You summarize conversations.",
        &[
            user("q1"),
            said("a1"),
            user("q2"),
            said("a2"),
            user("Summarize the above."),
        ],
    );
    let side = grouping.join(CHAT, &summary, &Carried::body(&summary), true);
    assert_eq!(
        (side.session, side.started, side.parent, side.kind),
        (1, true, Some(0), RequestKind::SideCall)
    );
    let compacted = agent(
        "agent\nSummary of the conversation earlier: q1, q2.",
        &[user("q3"), said("a3"), user("q4")],
    );
    let joined = grouping.join(CHAT, &compacted, &Carried::body(&compacted), true);
    assert_eq!(
        (joined.session, joined.reading, joined.kind),
        (0, Some(Reading::Compaction), RequestKind::Compaction)
    );
    assert!(grouping.unconfirmed().is_empty());
    let next = agent(
        "agent\nSummary of the conversation earlier: q1, q2.",
        &[user("q3"), said("a3"), user("q4"), said("a4"), user("q5")],
    );
    assert_eq!(join(&mut grouping, &next), (0, None));
}

/// LangGraph's summary node asks the agent's own model for the summary (the conversation
/// and one more user message), then sends the summary as a system message with the last two
/// messages kept: a compaction of the session whose summary request is dropped.
#[test]
fn a_compaction_that_drops_the_summary_request_is_the_session_s() {
    let mut grouping = Grouping::default();
    let plain = |conversation: &[Value]| json!({"model": "m", "messages": conversation});
    let talk = [
        user("hi, I'm Bob"),
        said("Hi Bob"),
        user("I like the Celtics"),
        said("Nice"),
    ];
    join(&mut grouping, &plain(&talk[..1]));
    join(&mut grouping, &plain(&talk[..3]));
    let mut asked = talk.to_vec();
    asked.push(user("Create a summary of the conversation above:"));
    assert_eq!(join(&mut grouping, &plain(&asked)), (0, None));
    let mut compacted = vec![json!({"role": "system",
        "content": "Summary of conversation earlier: Bob likes the Celtics."})];
    compacted.extend_from_slice(&talk[2..]);
    compacted.push(user("Who is their best player?"));
    assert_eq!(
        join(&mut grouping, &plain(&compacted)),
        (0, Some(Reading::Compaction))
    );
    // A new conversation that opens with the same words is not a compaction.
    assert_eq!(
        join(&mut grouping, &plain(&[user("I like the Celtics")])).0,
        1
    );
}

/// Each request's kind: a turn that sends back tool results is a round trip, in every
/// format's way of sending them.
#[test]
fn a_turn_that_sends_back_tool_results_is_a_tool_round_trip() {
    let called = json!({"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "search", "arguments": "{}"}}]});
    for result in [
        json!({"role": "tool", "tool_call_id": "c1", "content": "found"}),
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1",
            "content": "found"}]}),
        json!({"role": "user", "content": [{"toolResult": {"toolUseId": "c1",
            "content": [{"text": "found"}]}}]}),
        json!({"role": "user", "parts": [{"functionResponse": {"name": "search",
            "response": {}}}]}),
    ] {
        let mut grouping = Grouping::default();
        join(&mut grouping, &chat("s", &[user("q")]));
        let next = chat("s", &[user("q"), called.clone(), result.clone()]);
        let joined = grouping.join(CHAT, &next, &Carried::body(&next), true);
        assert_eq!(joined.kind, RequestKind::ToolRoundTrip, "{result}");
        let after = chat(
            "s",
            &[user("q"), called.clone(), result, said("a"), user("q2")],
        );
        let joined = grouping.join(CHAT, &after, &Carried::body(&after), true);
        assert_eq!(joined.kind, RequestKind::MainTurn);
    }
}

/// Under one session key (a supervisor and its worker sharing the application's user id),
/// each agent's last request is kept: the worker's turn does not replace the supervisor's, so
/// the supervisor's next request still continues its own and the session is not cut.
#[test]
fn under_one_key_each_agent_s_last_request_is_kept() {
    let mut grouping = Grouping::default();
    let keyed = |system: &str, conversation: &[Value]| {
        let mut body = chat(system, conversation);
        body["user"] = json!("user-42");
        body
    };
    let join_keyed = |grouping: &mut Grouping, body: &Value| {
        let joined = grouping.join(CHAT, body, &Carried::body(body), true);
        (joined.session, joined.reading)
    };
    let supervisor = "You are a supervisor. Route the request to a worker, or finish.";
    let worker = "You are a researcher with a web search tool; answer with sources.";
    assert_eq!(
        join_keyed(&mut grouping, &keyed(supervisor, &[user("q")])),
        (0, None)
    );
    // The worker carries the conversation and adds its own answer, under the same key.
    let handed = keyed(worker, &[user("q"), said("research this")]);
    assert_eq!(
        join_keyed(&mut grouping, &handed),
        (0, Some(Reading::InstructionsChanged))
    );
    // The supervisor continues its own last request, not the worker's: the same session.
    let back = keyed(
        supervisor,
        &[user("q"), said("route: researcher"), user("found")],
    );
    assert_eq!(join_keyed(&mut grouping, &back), (0, None));
    let again = keyed(worker, &[user("q"), said("research this"), said("more")]);
    assert_eq!(join_keyed(&mut grouping, &again).0, 0);
}

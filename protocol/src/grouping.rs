//! Which session a request belongs to: the one grouping that `kvlint import`, `kvlint check`
//! on recordings, `kvlint workload` (both through the recordings' reader) and the proxy
//! (request by request) call.
//!
//! Sessions are told apart by endpoint (the streamed and plain variants of one endpoint are
//! one: [`crate::endpoint::cache_endpoint`]), model and session key ([`crate::key`]: the
//! agent's own session id first). A request joins the session of those whose conversation it
//! continues — the items after the system prompt or instructions and before an instruction
//! re-sent at the end of every request (`messages`, a Responses `input`, Gemini's
//! `contents`, without the cache markers a client moves each turn), the
//! session's last one whole (its newest message without the per-turn tail a client drops the
//! turn after is whole too) and more — whatever happened to the system prompt, the tools or
//! the instructions: those changes are the session's breaks, which the rules then find. A request that rewrote the history
//! (compaction, trimming, an edited answer) joins the session it rewrote when it keeps that
//! session's opening exchange (its first user message and what came after it) under the same
//! key, and is reported as a rewrite. The same request sent again after it got no answer (a
//! retry after an error, an overload, a timeout) joins the session it repeats, as a turn that
//! appends nothing; sent again after an answer, it is a conversation of its own (two chats
//! opened alike, in parallel). Anything else
//! starts a session: parallel conversations,
//! side calls (a title made from the conversation opens another), a conversation sent again
//! from the start, and sub-agents, whose key is their own ([`crate::key::SUB_AGENT_LINKS`]).
//!
//! Where two readings were possible the choice is kept as a [`Reading`] of the turn: a turn
//! that continued its session with other instructions (not another agent), a rewrite (not a
//! new session), or a turn that continued several sessions alike (the one whose instructions
//! are most like its own, else the earliest, was chosen).

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;

use crate::key::{Carried, KeySource};

/// The sessions seen so far, each with its last request's conversation.
#[derive(Clone, Debug, Default)]
pub struct Grouping {
    sessions: Vec<Open>,
    /// Per key, the sessions not forgotten, in the order first seen: a request is compared
    /// with these alone, however many sessions were seen before.
    candidates: HashMap<Key, Vec<usize>>,
}

#[derive(Clone, Debug)]
struct Open {
    key: Key,
    /// `None` once forgotten: no later request joins it.
    last: Option<Last>,
}

#[derive(Clone, Debug)]
struct Last {
    conversation: Vec<Value>,
    instructions: Value,
    /// The whole body, for telling a retry: the same request sent again.
    body: Value,
    /// Whether it got an answer: a request sent again after one that did not is its retry.
    answered: bool,
}

/// What sessions are told apart by before their conversations are compared: the endpoint,
/// the model (as JSON) and the session key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    endpoint: String,
    model: String,
    session_key: Option<String>,
}

/// Where a request went: its session (an index, in the order sessions were first seen), and
/// the reading chosen where another was possible.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Joined {
    pub session: usize,
    /// Whether the request started the session.
    pub started: bool,
    pub reading: Option<Reading>,
}

/// A choice between two readings of a turn, said in the reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reading {
    /// Its conversation continues the session's while its system prompt, instructions or
    /// tools changed: read as the session's break, not as another agent's session.
    InstructionsChanged,
    /// The session's last request sent again, the same, after it got no answer: a retry
    /// (after an error, an overload, a timeout), a turn that appends nothing, not a session
    /// of its own.
    Retry,
    /// It rewrote the session's history (same key, same opening exchange): read as a rewrite
    /// of the session, not as a session of its own.
    Rewrite,
    /// It continued several sessions alike: joined the one whose instructions are most like
    /// its own, else the earliest.
    SeveralSessions,
}

impl Reading {
    /// The reading in words, for the human output.
    pub fn describe(self) -> &'static str {
        match self {
            Self::InstructionsChanged => {
                "kept in the session: the conversation goes on under other instructions or tools"
            }
            Self::Rewrite => "read as a rewrite of the history: same key, same opening exchange",
            Self::Retry => "the same request sent again: a retry",
            Self::SeveralSessions => {
                "continued more than one session alike: joined the one with the closest instructions, else the earliest"
            }
        }
    }
}

/// How a session was told apart, for the reports: the key it carried and where from, the
/// session it was spawned by, and the readings chosen for its turns.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GroupedBy {
    /// Where its session key was read from (`header x-claude-code-session-id`,
    /// `body /metadata/user_id`, `trace conversation`); `None`: by continuation alone.
    pub key: Option<String>,
    /// The session key of the session that spawned it (a sub-agent's parent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_key: Option<String>,
    /// The turns (from 0) read one way where another was possible.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub readings: Vec<TurnReading>,
    /// Turns that sent the request before them again (retries).
    #[serde(skip_serializing_if = "is_zero")]
    pub retries: usize,
}

fn is_zero(count: &usize) -> bool {
    *count == 0
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TurnReading {
    pub turn: usize,
    pub reading: Reading,
}

impl GroupedBy {
    /// The session's first request's keys.
    pub fn of(carried: &Carried) -> Self {
        Self {
            key: carried.session_source().map(|(source, _)| match source {
                KeySource::Header(name) => format!("header {name}"),
                KeySource::TraceConversation => "trace conversation".to_owned(),
                KeySource::Body(pointer) => format!("body {pointer}"),
            }),
            parent_key: carried.parent_session_key(),
            readings: Vec::new(),
            retries: 0,
        }
    }

    /// Notes how the session's turn `turn` was read.
    pub fn read(&mut self, turn: usize, reading: Reading) {
        self.retries += usize::from(reading == Reading::Retry);
        self.readings.push(TurnReading { turn, reading });
    }

    /// One line for the human output; `None` for a session grouped by continuation alone
    /// with no reading to tell.
    pub fn describe(&self) -> Option<String> {
        if self.key.is_none() && self.readings.is_empty() {
            return None;
        }
        let mut line = match &self.key {
            Some(key) => format!("grouped by its session key ({key}) and continuation"),
            None => "grouped by continuation".to_owned(),
        };
        for kind in [
            Reading::InstructionsChanged,
            Reading::Retry,
            Reading::Rewrite,
            Reading::SeveralSessions,
        ] {
            let turns: Vec<String> = self
                .readings
                .iter()
                .filter(|reading| reading.reading == kind)
                .map(|reading| reading.turn.to_string())
                .collect();
            match turns.as_slice() {
                [] => {}
                [turn] => line.push_str(&format!("; turn {turn} {}", kind.describe())),
                _ => line.push_str(&format!("; turns {} {}", turns.join(", "), kind.describe())),
            }
        }
        Some(line)
    }
}

impl Grouping {
    /// The session `body`, sent to `endpoint` (a path or a URL) with what `carried` holds,
    /// belongs to; `answered`: whether it got an answer (not an error, not cut short), which
    /// tells whether the same body sent again next is its retry.
    pub fn join(
        &mut self,
        endpoint: &str,
        body: &Value,
        carried: &Carried,
        answered: bool,
    ) -> Joined {
        let conversation = conversation(body);
        let key = Key {
            endpoint: crate::endpoint::cache_endpoint(endpoint),
            model: body.get("model").map(Value::to_string).unwrap_or_default(),
            session_key: carried.session_key(),
        };
        let instructions = instructions(body);
        if let Some(session) = self.retried(&key, body) {
            if let Some(last) = &mut self.sessions[session].last {
                last.answered = answered;
            }
            return Joined {
                session,
                started: false,
                reading: Some(Reading::Retry),
            };
        }
        let exchange = opening_exchange(&conversation);
        // Per candidate: (continues whole, items shared, how alike the instructions are), its
        // index.
        let mut ranked: Vec<((bool, usize, Closeness), usize)> = self
            .candidates
            .get(&key)
            .into_iter()
            .flatten()
            .filter_map(|&index| {
                let last = self.sessions[index].last.as_ref()?;
                let shared = crate::common_prefix_len(&last.conversation, &conversation);
                let continues = conversation.len() > last.conversation.len()
                    && (shared == last.conversation.len()
                        || shared + 1 == last.conversation.len()
                            && tail_dropped(&last.conversation[shared], &conversation[shared]));
                let rewrites = !continues
                    && conversation != last.conversation
                    && exchange.is_some()
                    && exchange == opening_exchange(&last.conversation);
                // Only for a candidate it joins: comparing instructions that differ writes
                // both out, and a log without session keys has thousands of candidates.
                (continues || rewrites).then(|| {
                    let closeness = Closeness::of(&last.instructions, &instructions);
                    ((continues, shared, closeness), index)
                })
            })
            .collect();
        // The best first; of equals, the earliest (parallel requests answered in order).
        ranked.sort_by_key(|(rank, index)| (std::cmp::Reverse(*rank), *index));
        let last = Last {
            conversation,
            instructions,
            body: body.clone(),
            answered,
        };
        let Some(&((continues, shared, closeness), session)) = ranked.first() else {
            let session = self.sessions.len();
            self.candidates
                .entry(key.clone())
                .or_default()
                .push(session);
            self.sessions.push(Open {
                key,
                last: Some(last),
            });
            return Joined {
                session,
                started: true,
                reading: None,
            };
        };
        let alike = ranked
            .iter()
            .filter(|((other_continues, other_shared, _), _)| {
                (*other_continues, *other_shared) == (continues, shared)
            })
            .count();
        let reading = if !continues {
            Some(Reading::Rewrite)
        } else if alike > 1 {
            Some(Reading::SeveralSessions)
        } else if closeness != Closeness::Same {
            Some(Reading::InstructionsChanged)
        } else {
            None
        };
        self.sessions[session].last = Some(last);
        Joined {
            session,
            started: false,
            reading,
        }
    }

    /// The latest session under `key` whose last request was `body` and got no answer.
    fn retried(&self, key: &Key, body: &Value) -> Option<usize> {
        self.candidates
            .get(key)?
            .iter()
            .rev()
            .copied()
            .find(|&index| {
                self.sessions[index]
                    .last
                    .as_ref()
                    .is_some_and(|last| !last.answered && last.body == *body)
            })
    }

    /// Forgets a session's last request: no later request joins it (the proxy's bound on
    /// memory).
    pub fn forget(&mut self, session: usize) {
        if let Some(open) = self.sessions.get_mut(session) {
            open.last = None;
            if let Some(candidates) = self.candidates.get_mut(&open.key) {
                candidates.retain(|candidate| *candidate != session);
                if candidates.is_empty() {
                    self.candidates.remove(&open.key);
                }
            }
        }
    }
}

/// How alike two requests' instructions are: a candidate with the same instructions is one
/// agent's; alike but for a small edit (a timestamp, an id) most likely too.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Closeness {
    Other,
    Alike,
    Same,
}

impl Closeness {
    fn of(earlier: &Value, later: &Value) -> Self {
        if earlier == later {
            return Self::Same;
        }
        let (earlier, later) = (earlier.to_string(), later.to_string());
        let (earlier, later) = (earlier.as_bytes(), later.as_bytes());
        let prefix = crate::common_prefix_len(earlier, later);
        let suffix =
            crate::common_prefix_len(earlier[prefix..].iter().rev(), later[prefix..].iter().rev());
        // Four fifths of the longer alike, from both ends.
        if (prefix + suffix) * 5 >= earlier.len().max(later.len()) * 4 {
            Self::Alike
        } else {
            Self::Other
        }
    }
}

/// The conversation a body sends: its `messages`, its Responses `input` or its Gemini
/// `contents` between the leading system and developer messages and the trailing ones (an
/// instruction a supervisor ends every request with, which the next request sends after the
/// new items again: the per-turn tail the rules read it as), without the cache markers a
/// client moves to the newest message each turn, a content of text parts alone read as its
/// text (the marker on the newest message is what makes a client send parts there).
fn conversation(body: &Value) -> Vec<Value> {
    match conversation_items(body) {
        Some(Value::Array(items)) => {
            let leading = items.iter().take_while(|item| is_instruction(item)).count();
            let trailing = items[leading..]
                .iter()
                .rev()
                .take_while(|item| is_instruction(item))
                .count();
            items[leading..items.len() - trailing]
                .iter()
                .map(|item| text_parts_as_text(without_cache_markers(item)))
                .collect()
        }
        Some(input @ Value::String(_)) => vec![input.clone()],
        _ => Vec::new(),
    }
}

fn conversation_items(body: &Value) -> Option<&Value> {
    ["messages", "input", "contents"]
        .iter()
        .find_map(|key| body.get(*key))
}

/// A message whose content is text parts alone (`[{"type": "text", "text": …}]`), with its
/// content as their text.
fn text_parts_as_text(mut item: Value) -> Value {
    let text = item
        .get("content")
        .and_then(Value::as_array)
        .and_then(|parts| {
            parts
                .iter()
                .map(|part| {
                    let part = part.as_object()?;
                    let plain =
                        part.len() == 2 && part.get("type").and_then(Value::as_str) == Some("text");
                    plain.then(|| part.get("text")?.as_str()).flatten()
                })
                .collect::<Option<String>>()
        });
    if let (Some(text), Some(object)) = (text, item.as_object_mut()) {
        object.insert("content".to_owned(), Value::String(text));
    }
    item
}

/// Whether `later` is `earlier` without the text it ended with: the per-turn tail a client
/// adds to the newest message and drops the turn after (the SDK's turn tier, a reminder).
fn tail_dropped(earlier: &Value, later: &Value) -> bool {
    let text = |item: &Value| item.get("content")?.as_str().map(str::to_owned);
    earlier.get("role") == later.get("role")
        && match (text(earlier), text(later)) {
            (Some(earlier), Some(later)) => {
                !later.is_empty() && earlier.len() > later.len() && earlier.starts_with(&later)
            }
            _ => false,
        }
}

/// The first user message and what followed it, when something did.
fn opening_exchange(conversation: &[Value]) -> Option<&[Value]> {
    let user = conversation.iter().position(is_user)?;
    conversation.get(user..user + 2)
}

fn is_user(item: &Value) -> bool {
    item.is_string() || item.get("role").and_then(Value::as_str) == Some("user")
}

fn is_instruction(item: &Value) -> bool {
    matches!(
        item.get("role").and_then(Value::as_str),
        Some("system" | "developer")
    )
}

/// What a body sends before its conversation: the system prompt or instructions (Anthropic's
/// and Bedrock's `system`, Responses' `instructions`, Gemini's `systemInstruction`, leading
/// system and developer messages) and the tools.
fn instructions(body: &Value) -> Value {
    // The leading instructions and the trailing ones (re-sent at the end of every request).
    let leading: Vec<Value> = match conversation_items(body) {
        Some(Value::Array(items)) => {
            let first = items.iter().take_while(|item| is_instruction(item));
            let rest = &items[first.clone().count()..];
            let last = rest.iter().rev().take_while(|item| is_instruction(item));
            first.chain(last).cloned().collect()
        }
        _ => Vec::new(),
    };
    let fields = [
        "system",
        "instructions",
        "systemInstruction",
        "system_instruction",
        "tools",
        "toolConfig",
    ]
    .map(|key| body.get(key).cloned().unwrap_or(Value::Null));
    without_cache_markers(&Value::Array(
        fields.into_iter().chain([Value::Array(leading)]).collect(),
    ))
}

/// A value without `cache_control` and `prompt_cache_breakpoint` keys, at any depth.
fn without_cache_markers(value: &Value) -> Value {
    match value {
        Value::Object(object) => Value::Object(
            object
                .iter()
                .filter(|(key, _)| {
                    !matches!(key.as_str(), "cache_control" | "prompt_cache_breakpoint")
                })
                .map(|(key, value)| (key.clone(), without_cache_markers(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_cache_markers).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn a_changed_system_prompt_or_tool_list_stays_in_its_session() {
        let mut grouping = Grouping::default();
        let first = chat("You are the primary assistant.", &[user("q")]);
        assert_eq!(join(&mut grouping, &first), (0, None));
        // The hand-off: another system prompt and tools on the same history.
        let mut handed_off = chat(
            "You are the flight assistant.",
            &[user("q"), said("a"), user("q2")],
        );
        handed_off["tools"] = json!([{"type": "function", "function": {"name": "f"}}]);
        assert_eq!(
            join(&mut grouping, &handed_off),
            (0, Some(Reading::InstructionsChanged))
        );
        // A side call opening another conversation is a session of its own.
        let title = chat("Make a title.", &[user("Title for: q")]);
        assert_eq!(join(&mut grouping, &title), (1, None));
    }

    #[test]
    fn a_rewrite_keeping_the_opening_exchange_is_read_as_one() {
        let mut grouping = Grouping::default();
        let long = [user("q"), said("a"), user("q2"), said("b"), user("q3")];
        join(&mut grouping, &chat("s", &long));
        // Trimmed in the middle, the opening exchange kept: the same session, a rewrite.
        let trimmed = chat("s", &[user("q"), said("a"), user("q4")]);
        assert_eq!(join(&mut grouping, &trimmed), (0, Some(Reading::Rewrite)));
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
        let bedrock = "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-sonnet-4-5-v1:0";
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
            let elsewhere =
                grouping.join("/v1/chat/completions", &next, &Carried::body(&next), true);
            assert!(elsewhere.started);
        }
    }

    /// A supervisor that ends every request with the same system message and inserts the new
    /// items before it continues its session; an unrelated worker call is not joined to it.
    #[test]
    fn an_instruction_re_sent_at_the_end_of_every_request_is_set_aside() {
        let route = json!({"role": "system", "content": "Given the conversation above, who should act next?"});
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
        // decide, and the report says there was a choice.
        let next = supervisor(&[user("Plot the GDP."), said("researcher: found it")]);
        assert_eq!(
            join(&mut grouping, &next),
            (0, Some(Reading::SeveralSessions))
        );
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
        // A message that is not the newest one's start is another conversation.
        let other = [user("Fix that."), said("a"), user("Time: 10:02")];
        assert_eq!(join(&mut grouping, &chat("s", &other)), (1, None));
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
}

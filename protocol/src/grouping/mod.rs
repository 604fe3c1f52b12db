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
//! Another agent is told from what follows. A request that continues a session under wholly
//! other instructions (a critic handed the writer's essay, a worker handed the supervisor's
//! conversation) starts a session of its own, linked to the one whose history it carries
//! ([`Joined::parent`]), and does not replace that session's last request: the original
//! agent's next request still continues its own. When that agent does come back, the other
//! request was another agent's ([`Grouping::unconfirmed`] no longer lists it); when it never
//! does, it was the same agent under new instructions, and a reader of the whole recording
//! folds it back into its parent as that session's break. A session key (a session header,
//! `prompt_cache_key`, `metadata.user_id`) keeps a request in its key's session whatever its
//! instructions.
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
    /// Live traffic, request by request ([`Grouping::live`]): what follows is not known, so a
    /// request handed a session's history under other instructions stays in that session.
    live: bool,
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
    /// The session whose history its first request carried under other instructions, until
    /// that session's own agent continues (then `None`: another agent's, confirmed).
    branch_of: Option<usize>,
}

#[derive(Clone, Debug)]
struct Last {
    conversation: Vec<Value>,
    instructions: Value,
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
    /// For a session started by a request that carries another session's history under
    /// other instructions: that session.
    pub parent: Option<usize>,
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

    /// How the session came from session `parent` (its number, as the reports give it): a
    /// sub-agent its key names, else another agent handed that session's history.
    pub fn describe_parent(&self, parent: usize) -> String {
        match self.parent_key {
            Some(_) => format!("a sub-agent of session {parent}"),
            None => format!("another agent, handed the history of session {parent}"),
        }
    }

    /// Why turn `turn` of the session is where it is, in words: how the session started
    /// (`parent`, the number of the session it came from), or how the turn was read.
    pub fn explain(&self, turn: usize, parent: Option<usize>) -> String {
        let read: Vec<&str> = self
            .readings
            .iter()
            .filter(|reading| reading.turn == turn)
            .map(|reading| reading.reading.describe())
            .collect();
        match (turn, parent) {
            (0, Some(parent)) => format!("starts the session: {}", self.describe_parent(parent)),
            (0, None) => match &self.key {
                Some(key) => format!("starts the session: a new session key ({key})"),
                None => "starts the session: a conversation no earlier session holds".to_owned(),
            },
            _ if read.is_empty() => "continues the session's conversation".to_owned(),
            _ => read.join("; "),
        }
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
    /// The grouping of live traffic (the proxy's): no request that follows is known, so a
    /// request handed a session's history under other instructions is read as that session's
    /// instructions changing (its break is found at once), not as another agent's session
    /// that only a later request could confirm.
    pub fn live() -> Self {
        Self {
            live: true,
            ..Self::default()
        }
    }

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
        if let Some(session) = self.retried(&key, &conversation, &instructions) {
            if let Some(last) = &mut self.sessions[session].last {
                last.answered = answered;
            }
            return Joined {
                session,
                started: false,
                reading: Some(Reading::Retry),
                parent: None,
            };
        }
        let exchange = opening_exchange(&conversation);
        // Per candidate: (continues whole, the same agent's, items shared, how alike the
        // instructions are), its index.
        let mut ranked: Vec<((bool, bool, usize, Closeness), usize)> = self
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
                    let same_agent = closeness != Closeness::Other;
                    ((continues, same_agent, shared, closeness), index)
                })
            })
            .collect();
        // The best first; of equals, the earliest (parallel requests answered in order).
        ranked.sort_by_key(|(rank, index)| (std::cmp::Reverse(*rank), *index));
        let last = Last {
            conversation,
            instructions,
            answered,
        };
        let best = ranked.first().copied();
        // Another agent handed the session's history: a session of its own, linked.
        let handed = best.filter(|((continues, same_agent, ..), _)| {
            !self.live && *continues && !*same_agent && key.session_key.is_none()
        });
        let Some(((continues, _, shared, closeness), session)) = best.filter(|_| handed.is_none())
        else {
            let session = self.sessions.len();
            self.candidates
                .entry(key.clone())
                .or_default()
                .push(session);
            let parent = handed.map(|(_, parent)| parent);
            self.sessions.push(Open {
                key,
                last: Some(last),
                branch_of: parent,
            });
            return Joined {
                session,
                started: true,
                reading: None,
                parent,
            };
        };
        // The session's own agent continues: the sessions handed its history were others'.
        if closeness != Closeness::Other {
            for open in &mut self.sessions {
                if open.branch_of == Some(session) {
                    open.branch_of = None;
                }
            }
        }
        let alike = ranked
            .iter()
            .filter(|((other_continues, _, other_shared, _), _)| {
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
            parent: None,
        }
    }

    /// The sessions started by a request handed another session's history under other
    /// instructions whose parent's own agent never continued after: (session, parent), in
    /// order. Read with the whole recording, each was the same agent under new instructions.
    pub fn unconfirmed(&self) -> Vec<(usize, usize)> {
        self.sessions
            .iter()
            .enumerate()
            .filter_map(|(session, open)| Some((session, open.branch_of?)))
            .collect()
    }

    /// The latest session under `key` whose last request got no answer and sent the same
    /// conversation under the same instructions (the cache markers aside): the request sent
    /// again.
    fn retried(&self, key: &Key, conversation: &[Value], instructions: &Value) -> Option<usize> {
        self.candidates
            .get(key)?
            .iter()
            .rev()
            .copied()
            .find(|&index| {
                self.sessions[index].last.as_ref().is_some_and(|last| {
                    !last.answered
                        && last.conversation == conversation
                        && last.instructions == *instructions
                })
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
mod tests;

//! A recording's prompts grouped into sessions.
//!
//! A request is a prompt when its body is JSON in a request format kvlint reads and it is not
//! sent to an endpoint that takes no prompt (embeddings, token counts, compaction). Prompts are
//! grouped by [`kvlint_protocol::grouping`], with the keys the recording kept (headers, a
//! trace's conversation id); a sub-agent's session is linked to the session of its parent, and
//! so is a session another agent started with a session's history. Read with the whole
//! recording, such a session whose parent's own agent never came back was that agent under new
//! instructions: it is folded back into its parent, where the rules find the change.

use kvlint_protocol::grouping::{GroupedBy, Grouping, Reading, RequestKind};
use kvlint_protocol::key::Carried;
use serde_json::Value;

use super::{Body, Interaction, Place};
use kvlint_request::request::Request;

/// The sessions of a recording, and the requests passed over.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FoundSessions {
    pub sessions: Vec<Session>,
    /// Interactions that are not prompts, with the reason.
    pub skipped: Vec<(usize, String)>,
}

/// One session: its requests' bodies, in order, and the interactions they came from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Session {
    pub interactions: Vec<usize>,
    pub bodies: Vec<Value>,
    /// The bodies as sent (`None` where the recorder wrote the body out again).
    pub sent: Vec<Option<String>>,
    /// Where each body is in the recording.
    pub at: Vec<Place>,
    /// The response recorded with each request, when there is one.
    pub responses: Vec<Option<Value>>,
    /// When each request was sent (seconds since the Unix epoch), when the recording says.
    pub times: Vec<Option<f64>>,
    /// Whether a body was rebuilt from what the recorder kept of it ([`Body::Reconstructed`]):
    /// its serialization is kvlint's, not the one sent.
    pub reconstructed: bool,
    /// How it was told apart from the recording's other sessions.
    pub grouped_by: GroupedBy,
    /// The session (an index into [`FoundSessions::sessions`]) that spawned it, when its
    /// requests name their parent and the recording holds it.
    pub parent: Option<usize>,
    /// Its session key, when its first request carried one.
    key: Option<String>,
    /// The host each request was sent to, when its URL names one.
    hosts: Vec<Option<String>>,
}

impl Session {
    /// The host every request was sent to, when each URL names the same one.
    pub fn host(&self) -> Option<&str> {
        let first = self.hosts.first()?.as_deref()?;
        self.hosts
            .iter()
            .all(|host| host.as_deref() == Some(first))
            .then_some(first)
    }

    /// The session as a session file: one body per line, as sent when it is one line already,
    /// else written compactly (keys in the order sent); with its recorded response, a
    /// `{"request": …, "response": …}` pair.
    pub fn jsonl(&self) -> String {
        let mut text = String::new();
        for (((body, sent), response), time) in self
            .bodies
            .iter()
            .zip(&self.sent)
            .zip(&self.responses)
            .zip(&self.times)
        {
            let request = match sent {
                Some(sent) if !sent.contains('\n') => sent.trim().to_owned(),
                _ => body.to_string(),
            };
            let time = time.map_or(String::new(), |time| format!(", \"time\": {time}"));
            match response {
                Some(response) => {
                    text.push_str(&format!(
                        "{{\"request\": {request}, \"response\": {response}{time}}}"
                    ));
                }
                None if !time.is_empty() => {
                    text.push_str(&format!("{{\"request\": {request}{time}}}"));
                }
                None => text.push_str(&request),
            }
            text.push('\n');
        }
        text
    }
}

pub(super) fn sessions(interactions: &[Interaction]) -> FoundSessions {
    let mut found = FoundSessions::default();
    let mut grouping = Grouping::default();
    for interaction in interactions {
        let (body, sent) = match prompt(interaction) {
            Ok(prompt) => prompt,
            Err(reason) => {
                found.skipped.push((interaction.index, reason));
                continue;
            }
        };
        let headers: Vec<(&str, &str)> = interaction
            .key_headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .collect();
        let carried = Carried {
            body: Some(&body),
            headers: &headers,
            trace_conversation: interaction.conversation.as_deref(),
        };
        let joined = grouping.join(&interaction.url, &body, &carried, answered(interaction));
        if joined.started {
            found.sessions.push(Session {
                interactions: Vec::new(),
                bodies: Vec::new(),
                sent: Vec::new(),
                at: Vec::new(),
                responses: Vec::new(),
                times: Vec::new(),
                reconstructed: false,
                grouped_by: GroupedBy::of(&carried),
                parent: joined.parent,
                key: carried.session_key(),
                hosts: Vec::new(),
            });
        }
        let session = &mut found.sessions[joined.session];
        if let Some(reading) = joined.reading {
            session.grouped_by.read(session.bodies.len(), reading);
        }
        session.grouped_by.kinds.push(joined.kind);
        session.interactions.push(interaction.index);
        session
            .hosts
            .push(kvlint_protocol::endpoint::host_of(&interaction.url));
        session.bodies.push(body);
        session.sent.push(sent);
        session.at.push(interaction.at);
        session.responses.push(interaction.response.clone());
        session.times.push(interaction.time);
        session.reconstructed |= matches!(interaction.body, Body::Reconstructed(_));
    }
    found.sessions = folded(std::mem::take(&mut found.sessions), &grouping.unconfirmed());
    for session in &mut found.sessions {
        session.grouped_by.went_on();
    }
    // A sub-agent's parent: the first session of the key its requests name.
    let parents: Vec<Option<usize>> = found
        .sessions
        .iter()
        .map(|session| {
            let Some(parent) = session.grouped_by.parent_key.as_ref() else {
                return session.parent;
            };
            found
                .sessions
                .iter()
                .position(|other| other.key.as_ref() == Some(parent))
        })
        .collect();
    for (session, parent) in found.sessions.iter_mut().zip(parents) {
        session.parent = parent;
    }
    found
}

/// `sessions` with each of `folds` (session, parent), in order, folded into its parent (or
/// the session that parent was folded into): its requests among the parent's, in recording
/// order, its first read as the parent's instructions changing. Parents are renumbered.
fn folded(sessions: Vec<Session>, folds: &[(usize, usize)]) -> Vec<Session> {
    let mut into: Vec<usize> = (0..sessions.len()).collect();
    for &(session, parent) in folds {
        into[session] = into[parent];
    }
    let mut kept: Vec<Option<Session>> = sessions.into_iter().map(Some).collect();
    for &(session, _) in folds {
        if let Some(branch) = kept[session].take()
            && let Some(Some(root)) = kept.get_mut(into[session])
        {
            root.absorb(branch);
        }
    }
    let mut renumbered = vec![None; kept.len()];
    let mut next = 0;
    for (old, session) in kept.iter().enumerate() {
        if session.is_some() {
            renumbered[old] = Some(next);
            next += 1;
        }
    }
    kept.into_iter()
        .flatten()
        .map(|mut session| {
            session.parent = session.parent.and_then(|parent| renumbered[into[parent]]);
            session
        })
        .collect()
}

impl Session {
    /// Takes `other`'s requests among its own, in recording order; `other`'s first is read as
    /// this session's instructions changing.
    fn absorb(&mut self, other: Session) {
        let first = other.interactions.first().copied();
        let mut turns: Vec<(usize, Turn, Vec<Reading>)> = Vec::new();
        for (mut session, is_other) in [(std::mem::take(self), false), (other, true)] {
            let readings = std::mem::take(&mut session.grouped_by.readings);
            for (turn, mut entry) in session.take_turns().into_iter().enumerate() {
                let mut read: Vec<Reading> = readings
                    .iter()
                    .filter(|reading| reading.turn == turn)
                    .map(|reading| reading.reading)
                    .collect();
                if is_other && Some(entry.interaction) == first {
                    read.insert(0, Reading::InstructionsChanged);
                    // The agent's own turn, no longer another agent's first.
                    entry.kind = RequestKind::MainTurn;
                }
                turns.push((entry.interaction, entry, read));
            }
            if !is_other {
                *self = session;
            } else {
                self.reconstructed |= session.reconstructed;
            }
        }
        turns.sort_by_key(|(interaction, ..)| *interaction);
        self.grouped_by.retries = 0;
        self.grouped_by.kinds.clear();
        for (turn, (_, entry, read)) in turns.into_iter().enumerate() {
            for reading in read {
                self.grouped_by.read(turn, reading);
            }
            self.push_turn(entry);
        }
    }

    fn take_turns(&mut self) -> Vec<Turn> {
        let interactions = std::mem::take(&mut self.interactions);
        let mut bodies = std::mem::take(&mut self.bodies).into_iter();
        let mut sent = std::mem::take(&mut self.sent).into_iter();
        let mut at = std::mem::take(&mut self.at).into_iter();
        let mut responses = std::mem::take(&mut self.responses).into_iter();
        let mut times = std::mem::take(&mut self.times).into_iter();
        let mut hosts = std::mem::take(&mut self.hosts).into_iter();
        let mut kinds = std::mem::take(&mut self.grouped_by.kinds).into_iter();
        interactions
            .into_iter()
            .map(|interaction| Turn {
                interaction,
                body: bodies.next().unwrap_or_default(),
                sent: sent.next().flatten(),
                at: at.next().unwrap_or_default(),
                response: responses.next().flatten(),
                time: times.next().flatten(),
                host: hosts.next().flatten(),
                kind: kinds.next().unwrap_or(RequestKind::MainTurn),
            })
            .collect()
    }

    fn push_turn(&mut self, turn: Turn) {
        self.interactions.push(turn.interaction);
        self.bodies.push(turn.body);
        self.sent.push(turn.sent);
        self.at.push(turn.at);
        self.responses.push(turn.response);
        self.times.push(turn.time);
        self.hosts.push(turn.host);
        self.grouped_by.kinds.push(turn.kind);
    }
}

/// One request of a session, as [`Session::absorb`] moves it.
struct Turn {
    interaction: usize,
    body: Value,
    sent: Option<String>,
    at: Place,
    response: Option<Value>,
    time: Option<f64>,
    host: Option<String>,
    kind: RequestKind,
}

/// Whether the interaction's request got an answer: a response recorded that is not an
/// error (Anthropic's `{"type": "error", …}`, OpenAI's and Gemini's `{"error": {…}}`). A
/// request sent again after one that got none is its retry.
fn answered(interaction: &Interaction) -> bool {
    interaction.response.as_ref().is_some_and(|response| {
        // The Responses API answers `"error": null` when there is none.
        response.get("error").is_none_or(Value::is_null)
            && response.get("type").and_then(Value::as_str) != Some("error")
    })
}

/// The body of a prompt, and its text as sent; or why the interaction is not one.
fn prompt(interaction: &Interaction) -> Result<(Value, Option<String>), String> {
    if let Some(endpoint) = kvlint_protocol::endpoint::not_a_prompt(&interaction.url) {
        return Err(format!("not a prompt (`{endpoint}` endpoint)"));
    }
    if interaction.method == "GET" {
        return Err("a GET request: no prompt".into());
    }
    let (body, sent) = match &interaction.body {
        Body::Sent(text) if text.trim().is_empty() => return Err("no body".into()),
        Body::Sent(text) => match serde_json::from_str::<Value>(text) {
            Ok(body) => (body, Some(text.clone())),
            Err(_) => return Err("a body that is not JSON".into()),
        },
        Body::Rewritten(body) | Body::Reconstructed(body) => (body.clone(), None),
        Body::None(reason) => return Err(reason.clone()),
    };
    match Request::from_body(&body) {
        Ok(_) => Ok((body, sent)),
        Err(error) => Err(error.message),
    }
}

#[cfg(test)]
mod tests {
    use kvlint_protocol::grouping::TurnReading;
    use serde_json::json;

    use super::*;

    fn interaction(index: usize, url: &str, body: Value) -> Interaction {
        Interaction {
            index,
            method: "POST".into(),
            url: url.into(),
            body: Body::Sent(body.to_string()),
            at: Place::default(),
            response: None,
            conversation: None,
            key_headers: Vec::new(),
            time: None,
        }
    }

    #[test]
    fn downloads_and_empty_bodies_are_no_prompts() {
        let fetch = Interaction {
            method: "GET".into(),
            body: Body::Sent(String::new()),
            ..interaction(0, "https://example.com/image.png", json!({}))
        };
        let empty = Interaction {
            body: Body::Sent("  ".into()),
            ..interaction(1, "https://api.openai.com/v1/chat/completions", json!({}))
        };
        let found = sessions(&[fetch, empty]);
        assert!(found.sessions.is_empty());
        assert_eq!(
            found.skipped,
            [
                (0, "a GET request: no prompt".into()),
                (1, "no body".into())
            ]
        );
    }

    #[test]
    fn the_clients_conversation_key_keeps_alike_conversations_apart() {
        // Two runs of the same agent on the same question, told apart by the SDK's routing
        // header only: what the first asks next extends either.
        let chat = "https://api.openai.com/v1/chat/completions";
        let user = |text: &str| json!({"role": "user", "content": text});
        let said = |text: &str| json!({"role": "assistant", "content": text});
        let keyed = |index, key: &str, messages: Vec<Value>| Interaction {
            key_headers: vec![("X-Kvlint-Routing-Key".into(), key.into())],
            ..interaction(index, chat, json!({"model": "m", "messages": messages}))
        };
        let interactions = [
            keyed(0, "run-a", vec![user("q")]),
            keyed(1, "run-b", vec![user("q")]),
            keyed(2, "run-b", vec![user("q"), said("b"), user("next")]),
            keyed(3, "run-a", vec![user("q"), said("b"), user("next")]),
        ];
        let grouped: Vec<Vec<usize>> = sessions(&interactions)
            .sessions
            .into_iter()
            .map(|session| session.interactions)
            .collect();
        assert_eq!(grouped, [vec![0, 3], vec![1, 2]]);
    }

    #[test]
    fn interleaved_conversations_and_side_calls_get_their_own_sessions() {
        let chat = "https://api.openai.com/v1/chat/completions";
        let user = |text: &str| json!({"role": "user", "content": text});
        let said = |text: &str| json!({"role": "assistant", "content": text});
        let body = |messages: Vec<Value>| json!({"model": "m", "messages": messages});
        let agent = |instructions: &str, messages: Vec<Value>| {
            let mut all = vec![json!({"role": "system", "content": instructions})];
            all.extend(messages);
            json!({"model": "m", "messages": all})
        };
        let interactions = [
            interaction(0, chat, body(vec![user("a")])),
            interaction(1, chat, body(vec![user("b")])),
            interaction(
                2,
                "https://api.openai.com/v1/embeddings",
                json!({"input": "a"}),
            ),
            // A title made from conversation a: another opening.
            interaction(3, chat, body(vec![user("Title for: a")])),
            interaction(4, chat, body(vec![user("b"), said("B"), user("b2")])),
            interaction(5, chat, body(vec![user("a"), said("A"), user("a2")])),
            // Conversation a again, a later message rewritten, its opening exchange kept:
            // still conversation a, read as a rewrite.
            interaction(
                6,
                chat,
                body(vec![
                    user("a"),
                    said("A"),
                    user("a2, edited"),
                    said("x"),
                    user("a3"),
                ]),
            ),
            // The same opening sent again from the start: a session of its own.
            interaction(7, chat, body(vec![user("a")])),
            // Another agent on conversation a (its own instructions), then the same agent
            // again with a timestamp changed in its instructions: one session (it continues
            // this one and the opening sent again; its own instructions decide).
            interaction(
                10,
                chat,
                agent("You are the math agent. Time: 10:00", vec![user("a")]),
            ),
            interaction(
                11,
                chat,
                agent(
                    "You are the math agent. Time: 10:05",
                    vec![user("a"), said("4"), user("a4")],
                ),
            ),
            // An opening with a cache marker, which moves to the newest message.
            interaction(
                8,
                chat,
                body(vec![
                    json!({"role": "user", "content": [{"type": "text", "text": "c", "cache_control": {"type": "ephemeral"}}]}),
                ]),
            ),
            interaction(
                9,
                chat,
                body(vec![
                    json!({"role": "user", "content": [{"type": "text", "text": "c"}]}),
                    said("C"),
                    user("c2"),
                ]),
            ),
        ];
        let found = sessions(&interactions);
        let grouped: Vec<&[usize]> = found
            .sessions
            .iter()
            .map(|session| session.interactions.as_slice())
            .collect();
        assert_eq!(
            grouped,
            [&[0, 5, 6][..], &[1, 4], &[3], &[7], &[10, 11], &[8, 9]]
        );
        assert_eq!(found.skipped.len(), 1);
        assert_eq!(found.skipped[0].0, 2);
        // The rewrite, and the math agent's turn that continued two sessions opened alike.
        let readings: Vec<&[TurnReading]> = found
            .sessions
            .iter()
            .map(|session| session.grouped_by.readings.as_slice())
            .collect();
        assert_eq!(
            readings[0],
            [TurnReading {
                turn: 2,
                reading: Reading::Rewrite
            }]
        );
        // Its own session's instructions alike (the time moved), the other's wholly other:
        // no guess, its instructions changing.
        assert_eq!(
            readings[4],
            [TurnReading {
                turn: 1,
                reading: Reading::InstructionsChanged
            }]
        );
        // Handed the opening alone, linked to the session that sent it.
        assert_eq!(found.sessions[4].parent, Some(3));
    }

    /// An SDK retries after Anthropic's 529 (`overloaded_error`) with the same body: one
    /// session, the retry a turn of it and counted; two chats opened alike and both answered
    /// are two sessions.
    #[test]
    fn a_body_sent_again_after_an_error_is_a_retry_and_after_an_answer_another_chat() {
        let url = "https://api.anthropic.com/v1/messages";
        let body = |messages: Value| json!({"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": messages});
        let first = body(json!([{"role": "user", "content": "Fix the test."}]));
        let second = body(json!([{"role": "user", "content": "Fix the test."},
            {"role": "assistant", "content": "Done."}, {"role": "user", "content": "Thanks."}]));
        let overloaded = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
        let answer = json!({"type": "message", "content": [{"type": "text", "text": "Done."}]});
        let sent = |index, body: &Value, response: &Value| Interaction {
            response: Some(response.clone()),
            ..interaction(index, url, body.clone())
        };
        let found = sessions(&[
            sent(0, &first, &answer),
            sent(1, &second, &overloaded),
            sent(2, &second, &answer),
        ]);
        assert_eq!(found.sessions.len(), 1);
        let session = &found.sessions[0];
        assert_eq!(session.interactions, [0, 1, 2]);
        assert_eq!(session.grouped_by.retries, 1);
        assert_eq!(
            session.grouped_by.readings,
            [TurnReading {
                turn: 2,
                reading: Reading::Retry
            }]
        );
        let parallel = sessions(&[sent(0, &first, &answer), sent(1, &first, &answer)]);
        assert_eq!(parallel.sessions.len(), 2);
    }

    /// A critic handed the writer's essay is another agent when the writer goes on after it
    /// (two sessions, the critic's linked to the writer's); a system prompt replaced for good
    /// is the same agent's change (one session, the change read at its turn).
    #[test]
    fn another_agent_is_told_from_the_original_agent_coming_back() {
        let url = "https://api.openai.com/v1/chat/completions";
        let chat = |system: &str, conversation: Value| {
            let mut messages = vec![json!({"role": "system", "content": system})];
            messages.extend(conversation.as_array().unwrap().iter().cloned());
            json!({"model": "gpt-4o", "messages": messages})
        };
        let essay = json!([{"role": "user", "content": "Write about tides."}]);
        let drafted = json!([{"role": "user", "content": "Write about tides."},
            {"role": "assistant", "content": "Tides follow the moon."}]);
        let revised = json!([{"role": "user", "content": "Write about tides."},
            {"role": "assistant", "content": "Tides follow the moon."},
            {"role": "user", "content": "Critique: too short."}]);
        let writer = "You are a writer. Write short essays.";
        let critic = "You are a harsh critic. List every weakness of the essay you are given.";
        let requests = [
            interaction(0, url, chat(writer, essay.clone())),
            interaction(1, url, chat(critic, drafted.clone())),
            interaction(2, url, chat(writer, revised.clone())),
        ];
        let found = sessions(&requests);
        let shape: Vec<(Vec<usize>, Option<usize>)> = found
            .sessions
            .iter()
            .map(|session| (session.interactions.clone(), session.parent))
            .collect();
        assert_eq!(shape, [(vec![0, 2], None), (vec![1], Some(0))]);
        // The writer never comes back: the critic's prompt was the writer's own new one.
        let found = sessions(&requests[..2]);
        assert_eq!(found.sessions.len(), 1);
        let session = &found.sessions[0];
        assert_eq!(
            (session.interactions.clone(), session.parent),
            (vec![0, 1], None)
        );
        assert_eq!(
            session.grouped_by.readings,
            [TurnReading {
                turn: 1,
                reading: Reading::InstructionsChanged
            }]
        );
    }
}

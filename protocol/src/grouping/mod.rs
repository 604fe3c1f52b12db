//! Which session a request belongs to: the one grouping that `kvlint import`, `kvlint check`
//! on recordings, `kvlint workload` (both through the recordings' reader), the proxy and the
//! guarded clients (request by request, through the SDK's `GuardSessions`) call.
//!
//! Sessions are told apart by endpoint (the streamed and plain variants of one endpoint are
//! one: [`crate::endpoint::cache_endpoint`]), model and session key ([`crate::key`]: the
//! agent's own session id first). A request joins the session of those whose conversation it
//! continues — the items after the system prompt or instructions and before an instruction
//! re-sent at the end of every request (`messages`, a Responses `input`, Gemini's
//! `contents`, without the cache markers a client moves each turn), the
//! session's last one whole (its newest message without the per-turn tail a client drops the
//! turn after is whole too) and more — whatever happened to the system prompt, the tools or
//! the instructions: those changes are the session's breaks, which the rules then find (so is
//! its conversation, an exchange at least, sent again under other instructions: a prompt
//! rebuilt with a new clock). A
//! request that rewrote the history (trimming, an edited answer) joins the session it rewrote
//! when it keeps that session's opening exchange (its first user message and what came after
//! it) under the same key, and is reported as a rewrite. A compacted request, one that starts
//! (after at most one new item) with the end of a session's conversation from one of its last
//! user messages, the rest summarized in its instructions or that new item, joins the session
//! it compacted as a compaction, the history rewrite the rules then report. The same request
//! sent again after it got no answer (a retry after an error, an overload, a timeout) joins
//! the session it repeats, as a turn that appends nothing; sent again after an answer, it is a
//! conversation of its own (two chats opened alike, in parallel). Anything else starts a
//! session: parallel conversations, side calls (a title made from the conversation opens
//! another), a conversation sent again from the start, and sub-agents, whose key is their own
//! ([`crate::key::SUB_AGENT_LINKS`]).
//!
//! Another agent is told from what follows. A request that continues or rewrites a session
//! under wholly other instructions (a critic handed the writer's essay, a worker handed the
//! supervisor's conversation, a summarizer without tools) starts a session of its own, linked
//! to the one whose history it carries ([`Joined::parent`]), and does not replace that
//! session's last request: the original agent's next request still continues its own. When
//! that agent does come back, the other request was another agent's
//! ([`Grouping::unconfirmed`] no longer lists it); when it never does, it was the same agent
//! under new instructions, and a reader of the whole recording folds it back into its parent
//! as that session's break. Live traffic cannot wait for what follows: there a session handed
//! under wholly new instructions stays another agent's. A session key (a session header,
//! `prompt_cache_key`, `metadata.user_id`) keeps a request in its key's session whatever its
//! instructions.
//!
//! Where two readings were possible the choice is kept as a [`Reading`] of the turn: a turn
//! that continued its session with other instructions (not another agent), a rewrite or a
//! compaction (not a new session), a retry, or a turn that continued several sessions alike
//! (the one whose instructions are most like its own, else the earliest, was chosen). Each
//! request's [`RequestKind`] says what it was: a main turn, a tool round trip, a retry, a
//! side call, a sub-agent's first request, a compaction.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use crate::key::Carried;

mod conversation;
mod report;

use conversation::{
    conversation, ending_users, instructions, keeps_end_of, offers_tools, opening_exchange,
    opening_users, returns_tool_results, tail_dropped,
};
pub use report::{GroupedBy, Reading, RequestKind, TurnReading};

/// The sessions seen so far, each with its last request's conversation.
#[derive(Clone, Debug, Default)]
pub struct Grouping {
    sessions: Vec<Open>,
    /// Per key, the sessions not forgotten, in the order first seen: a request is compared
    /// with these alone, however many sessions were seen before.
    candidates: HashMap<Key, Vec<usize>>,
    /// The sessions not forgotten by the user messages their conversation ends with
    /// ([`conversation::ending_users`]): where a compacted conversation finds the session
    /// whose end it kept without comparing it with every session.
    ends: HashMap<u64, BTreeSet<usize>>,
    /// The session the last request joined and the request it replaced as that session's
    /// last (`None`: it started the session), for [`Grouping::retract`].
    replaced: Option<(usize, Option<Last>)>,
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
    /// Its entries in [`Grouping::ends`].
    ends: Vec<u64>,
}

/// What sessions are told apart by before their conversations are compared: the endpoint,
/// the model (as JSON) and the session key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    endpoint: String,
    model: String,
    session_key: Option<String>,
}

/// Where a request went: its session (an index, in the order sessions were first seen), the
/// reading chosen where another was possible, and what the request was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Joined {
    pub session: usize,
    /// Whether the request started the session.
    pub started: bool,
    pub reading: Option<Reading>,
    /// For a session started by a request that carries another session's history under
    /// other instructions: that session.
    pub parent: Option<usize>,
    pub kind: RequestKind,
}

/// How a request's conversation goes on from a session's last one, the closest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Fit {
    /// It starts with the session's end, the rest summarized.
    Compacts,
    /// It keeps the session's opening exchange and changes what came after.
    Rewrites,
    /// It sends the session's conversation again under other instructions.
    Repeats,
    /// It is the session's conversation and more.
    Continues,
}

/// A candidate's rank: how it fits, whether it is the same agent's, the items shared, and how
/// alike the instructions are.
type Rank = (Fit, bool, usize, Closeness);

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
        self.replaced = None;
        if let Some(session) = self.retried(&key, &conversation, &instructions) {
            if let Some(last) = &mut self.sessions[session].last {
                last.answered = answered;
            }
            return Joined {
                session,
                started: false,
                reading: Some(Reading::Retry),
                parent: None,
                kind: RequestKind::Retry,
            };
        }
        let mut ranked = self.continued(&key, &conversation, &instructions);
        if ranked.is_empty() {
            ranked = self.compacted(&key, &conversation, &instructions);
        }
        // The best first; of equals, the earliest (parallel requests answered in order).
        ranked.sort_by_key(|(rank, index)| (std::cmp::Reverse(*rank), *index));
        let best = ranked.first().copied();
        // Another agent handed the session's history: a session of its own, linked.
        let handed = best.filter(|((fit, same_agent, ..), _)| {
            *fit != Fit::Compacts && !*same_agent && key.session_key.is_none()
        });
        let Some(((fit, _, shared, closeness), session)) = best.filter(|_| handed.is_none()) else {
            let parent = handed.map(|(_, parent)| parent);
            // Handed the history with tools, another agent; without, a side call (until its
            // session goes on: [`RequestKind::SideCall`]).
            let kind = match handed {
                Some(_) if offers_tools(body) => RequestKind::SubAgent,
                Some(_) => RequestKind::SideCall,
                None if carried.parent_session_key().is_some() => RequestKind::SubAgent,
                None => RequestKind::MainTurn,
            };
            let session = self.sessions.len();
            self.candidates
                .entry(key.clone())
                .or_default()
                .push(session);
            // Handed a conversation, it may be the same agent's until its parent goes on; handed
            // an opening message alone, it is linked, never folded back.
            let handed_conversation =
                handed.is_some_and(|((fit, ..), _)| fit != Fit::Repeats || conversation.len() > 1);
            self.sessions.push(Open {
                key,
                last: None,
                branch_of: parent.filter(|_| handed_conversation),
            });
            self.keep_last(session, conversation, instructions, answered);
            return Joined {
                session,
                started: true,
                reading: None,
                parent,
                kind,
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
        // A guess only between sessions that could each be this agent's.
        let alike = ranked
            .iter()
            .filter(|((other_fit, same_agent, other_shared, _), _)| {
                *same_agent && (*other_fit, *other_shared) == (fit, shared)
            })
            .count();
        let (reading, kind) = match fit {
            Fit::Compacts => (Some(Reading::Compaction), RequestKind::Compaction),
            Fit::Rewrites => (Some(Reading::Rewrite), RequestKind::Compaction),
            Fit::Repeats => (Some(Reading::InstructionsChanged), RequestKind::MainTurn),
            Fit::Continues => {
                let reading = if alike > 1 {
                    Some(Reading::SeveralSessions)
                } else if closeness != Closeness::Same {
                    Some(Reading::InstructionsChanged)
                } else {
                    None
                };
                let before = self.sessions[session]
                    .last
                    .as_ref()
                    .map_or(0, |last| last.conversation.len());
                let appended = conversation.get(before..).unwrap_or_default();
                let kind = if returns_tool_results(appended) {
                    RequestKind::ToolRoundTrip
                } else {
                    RequestKind::MainTurn
                };
                (reading, kind)
            }
        };
        self.keep_last(session, conversation, instructions, answered);
        Joined {
            session,
            started: false,
            reading,
            parent: None,
            kind,
        }
    }

    /// The sessions under `key` whose last conversation `conversation` continues, or whose
    /// opening exchange it keeps while changing the rest, ranked.
    fn continued(
        &self,
        key: &Key,
        conversation: &[Value],
        instructions: &Value,
    ) -> Vec<(Rank, usize)> {
        let exchange = opening_exchange(conversation);
        self.candidates
            .get(key)
            .into_iter()
            .flatten()
            .filter_map(|&index| {
                let last = self.sessions[index].last.as_ref()?;
                let shared = crate::common_prefix_len(&last.conversation, conversation);
                let continues = conversation.len() > last.conversation.len()
                    && (shared == last.conversation.len()
                        || shared + 1 == last.conversation.len()
                            && tail_dropped(&last.conversation[shared], &conversation[shared]));
                let same = shared == last.conversation.len() && shared == conversation.len();
                let fit = if continues {
                    Fit::Continues
                } else if same && !conversation.is_empty() && last.instructions != *instructions {
                    Fit::Repeats
                } else if !same
                    && exchange.is_some()
                    && exchange == opening_exchange(&last.conversation)
                {
                    Fit::Rewrites
                } else {
                    return None;
                };
                // Only for a candidate it joins: comparing instructions that differ writes
                // both out, and a log without session keys has thousands of candidates.
                let closeness = Closeness::of(&last.instructions, instructions);
                let same_agent = closeness != Closeness::Other;
                // An opening message alone, sent again under instructions alike, is another
                // conversation opened alike; under wholly other ones, another agent handed it.
                if fit == Fit::Repeats && exchange.is_none() && same_agent {
                    return None;
                }
                Some(((fit, same_agent, shared, closeness), index))
            })
            .collect()
    }

    /// The sessions under `key` whose end `conversation` starts with after a summary of the
    /// rest ([`conversation::keeps_end_of`]), the latest first, ranked.
    fn compacted(
        &self,
        key: &Key,
        conversation: &[Value],
        instructions: &Value,
    ) -> Vec<(Rank, usize)> {
        // The latest sessions that end alike: enough for any compaction, few however many
        // sessions end with the same message.
        const LATEST: usize = 64;
        let mut found: Vec<(Rank, usize)> = Vec::new();
        for hash in opening_users(conversation) {
            for &index in self
                .ends
                .get(&hash)
                .into_iter()
                .flatten()
                .rev()
                .take(LATEST)
            {
                let open = &self.sessions[index];
                let Some(last) = open.last.as_ref().filter(|_| open.key == *key) else {
                    continue;
                };
                if found.iter().all(|(_, seen)| *seen != index)
                    && keeps_end_of(&last.conversation, conversation)
                {
                    let closeness = Closeness::of(&last.instructions, instructions);
                    let rank = (Fit::Compacts, closeness != Closeness::Other, 0, closeness);
                    found.push((rank, index));
                }
            }
        }
        found
    }

    /// Keeps `conversation` as session `session`'s last, in the index of how sessions end.
    fn keep_last(
        &mut self,
        session: usize,
        conversation: Vec<Value>,
        instructions: Value,
        answered: bool,
    ) {
        self.drop_ends(session);
        let ends = ending_users(&conversation);
        let last = Last {
            conversation,
            instructions,
            answered,
            ends,
        };
        self.index_ends(session, &last);
        let replaced = self.sessions[session].last.replace(last);
        self.replaced = Some((session, replaced));
    }

    fn index_ends(&mut self, session: usize, last: &Last) {
        for hash in &last.ends {
            self.ends.entry(*hash).or_default().insert(session);
        }
    }

    /// Takes back the request joined last (a guard refused it: it was never sent): its
    /// session's last request is the one before it again, and a session it started is
    /// forgotten.
    pub fn retract(&mut self) {
        let Some((session, replaced)) = self.replaced.take() else {
            return;
        };
        match replaced {
            Some(last) => {
                self.drop_ends(session);
                self.index_ends(session, &last);
                self.sessions[session].last = Some(last);
            }
            None => self.forget(session),
        }
    }

    fn drop_ends(&mut self, session: usize) {
        let Some(last) = self
            .sessions
            .get(session)
            .and_then(|open| open.last.as_ref())
        else {
            return;
        };
        for hash in &last.ends {
            if let Some(sessions) = self.ends.get_mut(hash) {
                sessions.remove(&session);
                if sessions.is_empty() {
                    self.ends.remove(hash);
                }
            }
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
        self.drop_ends(session);
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

#[cfg(test)]
mod tests;

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
//! instructions; a session keeps what each of its agents last sent, so that a worker's request
//! under the supervisor's key never replaces the supervisor's, whose next request continues
//! its own.
//!
//! The grouping reads the whole recording in one pass and stays linear: a request is compared
//! only with the sessions its conversation could join, found by hash (`index.rs`: how a
//! conversation opens, what its one message is without a per-turn tail, the user messages it
//! ends with), however many sessions were seen before.
//!
//! Where two readings were possible the choice is kept as a [`Reading`] of the turn: a turn
//! that continued its session with other instructions (not another agent), a rewrite or a
//! compaction (not a new session), a retry, or a turn that continued several sessions alike
//! (the one whose instructions are most like its own, else the earliest, was chosen). Each
//! request's [`RequestKind`] says what it was: a main turn, a tool round trip, a retry, a
//! side call, a sub-agent's first request, a compaction.

use std::collections::HashMap;

use serde_json::Value;

use crate::key::Carried;

mod conversation;
mod index;
mod report;

use conversation::{
    conversation, instructions, keeps_end_of, offers_tools, opening_exchange, returns_tool_results,
    tail_dropped,
};
use index::{Entries, Index};
pub use report::{GroupedBy, Reading, RequestKind, TurnReading};

/// The sessions seen so far, each with its last request's conversation.
#[derive(Clone, Debug, Default)]
pub struct Grouping {
    sessions: Vec<Open>,
    /// The sessions not forgotten, by how their last conversation opens, by what its one
    /// message would be without a per-turn tail, and by the user messages it ends with
    /// ([`index`]): a request is compared with those it may join alone, however many
    /// sessions were seen before.
    openings: Index,
    tails: Index,
    ends: Index,
    /// Per session, the sessions started by a request handed its history under other
    /// instructions, until its own agent continues (then they were another agent's,
    /// confirmed) or, unconfirmed, a reader of the whole recording folds them back.
    branches: HashMap<usize, Vec<usize>>,
    /// The session the last request joined and how to take it back ([`Grouping::retract`]).
    replaced: Option<(usize, Undo)>,
}

#[derive(Clone, Debug)]
struct Open {
    key: Key,
    /// What each of its agents (its instructions, or instructions alike) last sent, in the
    /// order they first did, [`AGENTS`] at most: one agent's request never replaces another's.
    /// None once forgotten: no later request joins it.
    agents: Vec<Last>,
}

#[derive(Clone, Debug)]
struct Last {
    conversation: Vec<Value>,
    instructions: Value,
    /// Whether it got an answer: a request sent again after one that did not is its retry.
    answered: bool,
    /// Its entries in the indexes.
    entries: Entries,
}

impl Last {
    fn new(key_hash: u64, conversation: Vec<Value>, instructions: Value, answered: bool) -> Self {
        Self {
            entries: Entries::of(key_hash, &conversation),
            conversation,
            instructions,
            answered,
        }
    }
}

/// How a request (its `conversation`, its opening `exchange`, its `instructions`) goes on from
/// what an agent last sent, ranked; `None` when it does not.
fn fit(
    last: &Last,
    conversation: &[Value],
    exchange: Option<&[Value]>,
    instructions: &Value,
) -> Option<Rank> {
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
    } else if !same && exchange.is_some() && exchange == opening_exchange(&last.conversation) {
        Fit::Rewrites
    } else {
        return None;
    };
    // Only for a candidate it joins: comparing instructions that differ writes both out.
    let closeness = Closeness::of(&last.instructions, instructions);
    let same_agent = closeness != Closeness::Other;
    // An opening message alone, sent again under instructions alike, is another conversation
    // opened alike; under wholly other ones, another agent handed it.
    if fit == Fit::Repeats && exchange.is_none() && same_agent {
        return None;
    }
    Some((fit, same_agent, shared, closeness))
}

/// Agents of one session whose last requests are kept (a session key shared by a supervisor
/// and its workers); past this many, the one that sent first is forgotten.
const AGENTS: usize = 4;

/// How a session's agents were before the last request joined it.
#[derive(Clone, Debug)]
enum Undo {
    /// It replaced what agent `at` last sent.
    Replaced { at: usize, previous: Last },
    /// It was another agent's first (the session's, when it started it), the oldest agent
    /// dropped for it.
    Added { dropped: Option<Last> },
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

/// A session a request may join: its rank, the session, and the agent of the session whose
/// last request it was compared with.
type Candidate = (Rank, usize, usize);

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
        let key_hash = index::key_hash(&key);
        self.replaced = None;
        if let Some((session, agent)) = self.retried(&key, key_hash, &conversation, &instructions) {
            if let Some(last) = self.sessions[session].agents.get_mut(agent) {
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
        let mut ranked = self.continued(&key, key_hash, &conversation, &instructions);
        if ranked.is_empty() {
            ranked = self.compacted(&key, key_hash, &conversation, &instructions);
        }
        // The best first; of equals, the earliest (parallel requests answered in order).
        ranked.sort_by_key(|(rank, index, _)| (std::cmp::Reverse(*rank), *index));
        let best = ranked.first().copied();
        // Another agent handed the session's history: a session of its own, linked.
        let handed = best.filter(|((fit, same_agent, ..), ..)| {
            *fit != Fit::Compacts && !*same_agent && key.session_key.is_none()
        });
        let Some(((fit, same_agent, shared, closeness), session, agent)) =
            best.filter(|_| handed.is_none())
        else {
            let parent = handed.map(|(_, parent, _)| parent);
            // Handed the history with tools, another agent; without, a side call (until its
            // session goes on: [`RequestKind::SideCall`]).
            let kind = match handed {
                Some(_) if offers_tools(body) => RequestKind::SubAgent,
                Some(_) => RequestKind::SideCall,
                None if carried.parent_session_key().is_some() => RequestKind::SubAgent,
                None => RequestKind::MainTurn,
            };
            let session = self.sessions.len();
            // Handed a conversation, it may be the same agent's until its parent goes on; handed
            // an opening message alone, it is linked, never folded back.
            let handed_conversation =
                handed.is_some_and(|((fit, ..), ..)| fit != Fit::Repeats || conversation.len() > 1);
            if let Some(parent) = parent.filter(|_| handed_conversation) {
                self.branches.entry(parent).or_default().push(session);
            }
            self.sessions.push(Open {
                key,
                agents: Vec::new(),
            });
            let last = Last::new(key_hash, conversation, instructions, answered);
            self.keep_last(session, None, last);
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
            self.branches.remove(&session);
        }
        // A guess only between sessions that could each be this agent's.
        let alike = ranked
            .iter()
            .filter(|((other_fit, same_agent, other_shared, _), ..)| {
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
                    .agents
                    .get(agent)
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
        // The same agent's request replaces its last; another's (under the session's key) is
        // kept beside it.
        let last = Last::new(key_hash, conversation, instructions, answered);
        self.keep_last(session, same_agent.then_some(agent), last);
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
        key_hash: u64,
        conversation: &[Value],
        instructions: &Value,
    ) -> Vec<Candidate> {
        let exchange = opening_exchange(conversation);
        let ranked = |candidates: &mut Vec<usize>| -> Vec<Candidate> {
            candidates.sort_unstable();
            candidates.dedup();
            candidates
                .iter()
                .filter_map(|&index| {
                    let open = &self.sessions[index];
                    if open.key != *key {
                        return None;
                    }
                    open.agents
                        .iter()
                        .enumerate()
                        .filter_map(|(agent, last)| {
                            let rank = fit(last, conversation, exchange, instructions)?;
                            Some((rank, index, agent))
                        })
                        .max_by_key(|(rank, ..)| *rank)
                })
                .collect()
        };
        // Those that open alike and those that have no conversation yet; else a one-message
        // conversation this one's first message is without its per-turn tail.
        let mut opening: Vec<usize> = self
            .openings
            .get(index::opening(key_hash, conversation))
            .chain(self.openings.get(index::opening(key_hash, &[])))
            .collect();
        let found = ranked(&mut opening);
        if found.is_empty()
            && conversation.len() > 1
            && let Some(kept) = index::kept(key_hash, conversation)
        {
            // The latest: enough for a turn that follows, few however many sessions open alike.
            return ranked(&mut self.tails.get(kept).rev().take(64).collect());
        }
        found
    }

    /// The sessions under `key` whose end `conversation` starts with after a summary of the
    /// rest ([`conversation::keeps_end_of`]), the latest first, ranked.
    fn compacted(
        &self,
        key: &Key,
        key_hash: u64,
        conversation: &[Value],
        instructions: &Value,
    ) -> Vec<Candidate> {
        // The latest sessions that end alike: enough for any compaction, few however many
        // sessions end with the same message.
        const LATEST: usize = 64;
        let mut found: Vec<Candidate> = Vec::new();
        for hash in index::opening_users(key_hash, conversation) {
            for index in self.ends.get(hash).rev().take(LATEST) {
                let open = &self.sessions[index];
                if open.key != *key || found.iter().any(|(_, seen, _)| *seen == index) {
                    continue;
                }
                for (agent, last) in open.agents.iter().enumerate() {
                    if keeps_end_of(&last.conversation, conversation) {
                        let closeness = Closeness::of(&last.instructions, instructions);
                        let rank = (Fit::Compacts, closeness != Closeness::Other, 0, closeness);
                        found.push((rank, index, agent));
                        break;
                    }
                }
            }
        }
        found
    }

    /// Keeps `last` as what agent `agent` of session `session` last sent (`None`: another
    /// agent's first), in the indexes.
    fn keep_last(&mut self, session: usize, agent: Option<usize>, last: Last) {
        let came = last.entries.clone();
        let agents = &mut self.sessions[session].agents;
        let (undo, gone) = match agent.filter(|at| *at < agents.len()) {
            Some(at) => {
                let previous = std::mem::replace(&mut agents[at], last);
                let gone = previous.entries.clone();
                (Undo::Replaced { at, previous }, Some(gone))
            }
            None => {
                agents.push(last);
                let dropped = (agents.len() > AGENTS).then(|| agents.remove(0));
                let gone = dropped.as_ref().map(|dropped| dropped.entries.clone());
                (Undo::Added { dropped }, gone)
            }
        };
        self.reindex(session, gone.as_ref(), Some(&came));
        self.replaced = Some((session, undo));
    }

    /// Takes back the request joined last (a guard refused it: it was never sent): what its
    /// agent sent before is that agent's last again, and a session it started is forgotten.
    pub fn retract(&mut self) {
        let Some((session, undo)) = self.replaced.take() else {
            return;
        };
        let agents = &mut self.sessions[session].agents;
        let (gone, came) = match undo {
            Undo::Replaced { at, previous } => {
                let came = previous.entries.clone();
                let gone = std::mem::replace(&mut agents[at], previous).entries;
                (Some(gone), Some(came))
            }
            Undo::Added { dropped } => {
                let gone = agents.pop().map(|last| last.entries);
                let came = dropped.map(|dropped| {
                    let entries = dropped.entries.clone();
                    agents.insert(0, dropped);
                    entries
                });
                (gone, came)
            }
        };
        self.reindex(session, gone.as_ref(), came.as_ref());
    }

    /// The indexes after one of session `session`'s agents' last requests changed: the hashes
    /// it `gone` had that no agent of the session still has are taken out, those it `came`
    /// with put in (most are the same: a turn opens as the one before).
    fn reindex(&mut self, session: usize, gone: Option<&Entries>, came: Option<&Entries>) {
        let agents = &self.sessions[session].agents;
        let indexes = [&mut self.openings, &mut self.tails, &mut self.ends];
        for (kind, index) in indexes.into_iter().enumerate() {
            let before = gone.map_or(&[][..], |entries| entries.by_index()[kind]);
            let after = came.map_or(&[][..], |entries| entries.by_index()[kind]);
            let left: Vec<u64> = before
                .iter()
                .copied()
                .filter(|hash| {
                    !after.contains(hash)
                        && !agents
                            .iter()
                            .any(|last| last.entries.by_index()[kind].contains(hash))
                })
                .collect();
            index.remove(session, &left);
            let new: Vec<u64> = after
                .iter()
                .copied()
                .filter(|hash| !before.contains(hash))
                .collect();
            index.insert(session, &new);
        }
    }

    /// The sessions started by a request handed another session's history under other
    /// instructions whose parent's own agent never continued after: (session, parent), in
    /// order. Read with the whole recording, each was the same agent under new instructions.
    pub fn unconfirmed(&self) -> Vec<(usize, usize)> {
        let mut unconfirmed: Vec<(usize, usize)> = self
            .branches
            .iter()
            .flat_map(|(parent, branches)| branches.iter().map(|branch| (*branch, *parent)))
            .collect();
        unconfirmed.sort_unstable();
        unconfirmed
    }

    /// The latest session under `key`, and its agent, whose last request got no answer and
    /// sent the same conversation under the same instructions (the cache markers aside): the
    /// request sent again.
    fn retried(
        &self,
        key: &Key,
        key_hash: u64,
        conversation: &[Value],
        instructions: &Value,
    ) -> Option<(usize, usize)> {
        self.openings
            .get(index::opening(key_hash, conversation))
            .rev()
            .find_map(|index| {
                let open = &self.sessions[index];
                let agent = open.agents.iter().position(|last| {
                    !last.answered
                        && last.conversation == conversation
                        && last.instructions == *instructions
                })?;
                (open.key == *key).then_some((index, agent))
            })
    }

    /// Forgets a session's last request: no later request joins it (the proxy's bound on
    /// memory).
    pub fn forget(&mut self, session: usize) {
        if session < self.sessions.len() {
            let agents = std::mem::take(&mut self.sessions[session].agents);
            for last in agents {
                self.reindex(session, Some(&last.entries), None);
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

//! What the grouping tells the reports: the reading chosen for a turn where another was
//! possible, each request's kind, and how a session was told apart.

use serde::Serialize;

use crate::key::{Carried, KeySource};

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
    /// It starts with the end of the session's conversation (its last user message, and
    /// what followed it) after a summary of the rest: read as the session compacted, not as
    /// a session of its own.
    Compaction,
    /// It continued several sessions alike: joined the one whose instructions are most like
    /// its own, else the earliest.
    SeveralSessions,
}

impl Reading {
    const ALL: [Self; 5] = [
        Self::InstructionsChanged,
        Self::Retry,
        Self::Rewrite,
        Self::Compaction,
        Self::SeveralSessions,
    ];

    /// The reading in words, for the human output.
    pub fn describe(self) -> &'static str {
        match self {
            Self::InstructionsChanged => {
                "kept in the session: the conversation goes on under other instructions or tools"
            }
            Self::Rewrite => "read as a rewrite of the history: same key, same opening exchange",
            Self::Compaction => {
                "read as the session compacted: its end kept after a summary of the rest"
            }
            Self::Retry => "the same request sent again: a retry",
            Self::SeveralSessions => {
                "continued more than one session alike: joined the one with the closest instructions, else the earliest"
            }
        }
    }
}

/// What a request was to its application, so that a recording reads as a timeline and each
/// kind's cost can be summed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RequestKind {
    /// A turn of a conversation: its first request, or one that adds a user's message.
    MainTurn,
    /// A turn that sends back the results of the tools the previous answer called.
    ToolRoundTrip,
    /// The previous request sent again after it got no answer.
    Retry,
    /// A call on the side of a conversation: handed its history under other instructions,
    /// without tools, to ask one thing of it (a summary, a title, a classification). Read
    /// with the whole recording, a side session that goes on is another agent's
    /// ([`GroupedBy::went_on`]).
    SideCall,
    /// The first request of an agent another agent started: a sub-agent its key names, or
    /// an agent handed another's history to go on with it (a critic, a worker).
    SubAgent,
    /// The session's history compacted or rewritten (a summary in place of the old turns).
    Compaction,
    /// The first request of a session that read from the cache a prefix no earlier request
    /// of the recording sent (another process, an earlier run warmed it).
    WarmHit,
}

impl RequestKind {
    pub const ALL: [Self; 7] = [
        Self::MainTurn,
        Self::SubAgent,
        Self::SideCall,
        Self::WarmHit,
        Self::ToolRoundTrip,
        Self::Retry,
        Self::Compaction,
    ];

    /// Its name in the reports and the metrics' labels (`tool-round-trip`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MainTurn => "main-turn",
            Self::ToolRoundTrip => "tool-round-trip",
            Self::Retry => "retry",
            Self::SideCall => "side-call",
            Self::SubAgent => "sub-agent",
            Self::Compaction => "compaction",
            Self::WarmHit => "warm-hit",
        }
    }
}

/// How a session was told apart, for the reports: the key it carried and where from, the
/// session it was spawned by, the readings chosen for its turns and each turn's kind.
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
    /// Each turn's kind, in order.
    pub kinds: Vec<RequestKind>,
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
            ..Self::default()
        }
    }

    /// Notes how the session's turn `turn` was read.
    pub fn read(&mut self, turn: usize, reading: Reading) {
        self.retries += usize::from(reading == Reading::Retry);
        self.readings.push(TurnReading { turn, reading });
    }

    /// Reads a session's first request as a sub-agent's once its session went on past it
    /// (an agent handed the history without tools, a critic): a side call asks one thing.
    pub fn went_on(&mut self) {
        if self.kinds.len() > 1 && self.kinds[0] == RequestKind::SideCall {
            self.kinds[0] = RequestKind::SubAgent;
        }
    }

    /// Whether turn `turn` was read as the session compacted.
    pub fn compacted_at(&self, turn: usize) -> bool {
        self.readings
            .iter()
            .any(|read| read.turn == turn && read.reading == Reading::Compaction)
    }

    /// Turn `turn`'s kind (a main turn where none was noted).
    pub fn kind(&self, turn: usize) -> RequestKind {
        self.kinds
            .get(turn)
            .copied()
            .unwrap_or(RequestKind::MainTurn)
    }

    /// How the session came from session `parent` (its number, as the reports give it): a
    /// sub-agent its key names, else another agent handed that session's history.
    pub fn describe_parent(&self, parent: usize) -> String {
        match (&self.parent_key, self.kinds.first()) {
            (Some(_), _) => format!("a sub-agent of session {parent}"),
            (None, Some(RequestKind::SideCall)) => {
                format!("a side call on the history of session {parent}")
            }
            (None, _) => format!("another agent, handed the history of session {parent}"),
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

    /// How many of its requests were of each kind (`3 main-turn, 2 tool-round-trip`), in
    /// [`RequestKind::ALL`]'s order; `None` when every one was a main turn.
    pub fn tally(&self) -> Option<String> {
        if self.kinds.iter().all(|kind| *kind == RequestKind::MainTurn) {
            return None;
        }
        let counts: Vec<String> = RequestKind::ALL
            .iter()
            .filter_map(|kind| {
                let count = self.kinds.iter().filter(|each| *each == kind).count();
                (count > 0).then(|| format!("{count} {}", kind.as_str()))
            })
            .collect();
        Some(format!("requests: {}", counts.join(", ")))
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
        for kind in Reading::ALL {
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

//! Which session a request belongs to (the grouping recordings get too), and the sessions
//! kept: the SDK's [`GuardSessions`], one guard per session, bounded so that memory stays
//! flat however many sessions pass.

use kvlint_sdk::{
    Guard, GuardError, GuardMode, GuardSessions, Observation, Placed, Renderer, SessionGuard,
    SessionLimits,
};
use serde_json::Value;

use super::Analysis;
use super::predict::PreviousTurn;
use super::record::Record;
use crate::proxy::Exchange;

/// Sessions kept to check their next request against; past this many, the least recently
/// used is forgotten (its next request starts over).
pub(super) const LIVE_SESSIONS: usize = 1024;

/// One session seen through the proxy.
pub(super) struct Session {
    /// Its previous accepted request, parsed and rendered: the next is checked against it,
    /// and parsed and rendered only where it is new.
    pub(super) guard: Guard,
    /// What the predictions keep of the previous accepted turn.
    pub(super) previous: PreviousTurn,
    /// Its `--record` file.
    pub(super) record: Record,
    /// What the previous response answered (its content blocks or output items), whose
    /// thinking blocks or reasoning items the next request must send back as they were
    /// ([`super::signed`]).
    pub(super) answer: Vec<Value>,
}

impl SessionGuard for Session {
    type Outcome = Observation;
    type Error = <Guard as SessionGuard>::Error;

    fn observe(&mut self, body: Value) -> Result<Observation, Self::Error> {
        SessionGuard::observe(&mut self.guard, body)
    }

    fn has_breaks(outcome: &Observation) -> bool {
        <Guard as SessionGuard>::has_breaks(outcome)
    }

    fn is_break_expected(&self) -> bool {
        self.guard.is_break_expected()
    }

    fn expected_breaks(&self) -> usize {
        self.guard.counters().expected_breaks
    }

    fn reset(&mut self) {
        self.guard.reset();
        self.previous = PreviousTurn::default();
        self.answer.clear();
    }
}

/// The sessions the proxy keeps: a guard each, in warn mode (the proxy observes, it never
/// refuses), and only the latest body (the proxy reads none of them back).
pub(super) fn kept() -> GuardSessions<Session> {
    let limits = SessionLimits {
        sessions: LIVE_SESSIONS,
        bodies: 1,
    };
    GuardSessions::per_session(
        || {
            Ok::<_, std::sync::Arc<GuardError>>(Session {
                guard: Guard::new(Renderer::provider(), GuardMode::Warn),
                previous: PreviousTurn::default(),
                record: Record::default(),
                answer: Vec::new(),
            })
        },
        limits,
    )
}

impl Analysis {
    /// The session a request belongs to, as a recording's requests are grouped (through the
    /// sessions' [`GuardSessions::place`]): the agent's session id and the other session keys
    /// first ([`kvlint_protocol::key::SESSION_KEY`]), then which session's conversation it
    /// continues.
    pub(super) fn session_for(&mut self, exchange: &Exchange, body: &Value) -> Placed {
        let headers = crate::proxy::forward::header_pairs(&exchange.request_headers);
        // Answered: a 2xx, whole. The same body sent again after anything else is its retry.
        let answered = exchange.complete && (200..300).contains(&exchange.status);
        self.sessions
            .place(&exchange.path, body, &headers, answered)
    }
}

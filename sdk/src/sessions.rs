//! One guard per session, for a client that sends the requests of many sessions: the one
//! multiplexer the language bindings' guarded clients and `kvlint proxy` use, bounded so that a long-running
//! service's memory stays flat.

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde_json::Value;

/// What [`GuardSessions`] needs of a session's guard. [`crate::Guard`] is one; a language
/// binding implements it for its own guard objects, which the application may hold too.
pub trait SessionGuard {
    /// What observing a body returns.
    type Outcome;
    /// A body the guard refused (or could not read); kept to refuse the body's retry alike.
    type Error: Clone;

    /// Checks the session's next body.
    fn observe(&mut self, body: Value) -> Result<Self::Outcome, Self::Error>;
    /// Whether an outcome holds a break (an error finding).
    fn has_breaks(outcome: &Self::Outcome) -> bool;
    /// Whether the application announced that the next body breaks the prefix.
    fn is_break_expected(&self) -> bool;
    /// Announced breaks observed so far.
    fn expected_breaks(&self) -> usize;
    /// Forgets the previous turn: the next body starts a new session.
    fn reset(&mut self);
    /// Shows the guard the API's response to the session's last body; whether it reported
    /// cache usage. Guards that keep no usage ignore it.
    fn observe_response(&mut self, _response: &Value) -> bool {
        false
    }
}

/// How much a [`GuardSessions`] keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionLimits {
    /// Sessions whose guards are kept; past this many, the least recently used is dropped
    /// and its next body starts a new guard, which reads it as a first turn.
    pub sessions: usize,
    /// The latest observed bodies kept, with their session and outcome.
    pub bodies: usize,
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self {
            sessions: 10_000,
            bodies: 1_000,
        }
    }
}

/// A body observed, with its session key and its guard's outcome.
#[derive(Clone, Debug)]
pub struct ObservedBody<O> {
    pub key: String,
    pub body: Value,
    pub outcome: O,
}

/// What [`GuardSessions::observe`] did with a body.
#[derive(Debug)]
pub enum Observed<'a, O> {
    /// Its session's guard checked it. `warn`: it holds a break the application did not
    /// announce ([`SessionGuard::is_break_expected`]): warn where the application sees it.
    Checked {
        body: &'a ObservedBody<O>,
        warn: bool,
    },
    /// A retry of a body its session's guard accepted: not observed again.
    Retry,
}

/// One session kept.
struct Session<G> {
    /// Its own guard (`None` when one guard serves every session, or before its first body).
    guard: Option<G>,
    /// When it was last used, on [`GuardSessions::clock`].
    used: u64,
}

/// Where a session's guard comes from.
enum Guards<G: SessionGuard> {
    /// One guard for every request: an application that runs one session per client.
    Single(G),
    /// A new guard for each session key.
    PerSession(Box<dyn FnMut() -> Result<G, G::Error> + Send + Sync>),
}

/// One [`SessionGuard`] per session key ([`kvlint_protocol::key::session_key_of`]: a per-user
/// or per-session id the body carries, else its prefix key), bounded by [`SessionLimits`].
///
/// For each body: a retry (the client's attempt number above 0) of a body the session's
/// guard refused is refused again, and of any other body is not observed again; a body that
/// opens a conversation (one user message, no answer) resets its session's guard unless a
/// break was announced (a compaction down to one message is that break); the outcome says
/// whether to warn, and the body is kept among the latest.
///
/// ```
/// use kvlint_sdk::{Guard, GuardMode, GuardSessions, Observed, Renderer, SessionLimits};
/// use serde_json::json;
///
/// let mut sessions = GuardSessions::per_session(
///     || Ok(Guard::new(Renderer::provider(), GuardMode::Warn)),
///     SessionLimits::default(),
/// );
/// let turn = |user: &str, time: &str, later: bool| {
///     let mut messages = vec![
///         json!({"role": "system", "content": format!("Now: {time}")}),
///         json!({"role": "user", "content": "Hi"}),
///     ];
///     if later {
///         messages.push(json!({"role": "assistant", "content": "Hello"}));
///         messages.push(json!({"role": "user", "content": "Go on"}));
///     }
///     json!({"model": "m", "user": user, "messages": messages})
/// };
/// sessions.observe(turn("ada", "10:00", false), &[], 0).unwrap();
/// // Another session: its own guard, nothing to compare with.
/// sessions.observe(turn("bob", "10:01", false), &[], 0).unwrap();
/// // Ada's next turn, its system prompt dated anew: a break to warn about.
/// let observed = sessions.observe(turn("ada", "10:02", true), &[], 0).unwrap();
/// assert!(matches!(observed, Observed::Checked { body, warn: true } if body.key == "ada"));
/// assert_eq!(sessions.len(), 2);
/// ```
pub struct GuardSessions<G: SessionGuard> {
    guards: Guards<G>,
    limits: SessionLimits,
    sessions: HashMap<String, Session<G>>,
    /// Per session kept, the last body its guard refused, and why: a retry of it is refused
    /// again.
    refused: HashMap<String, (Value, G::Error)>,
    /// Session keys by when they were last used, least recently first.
    recency: BTreeMap<u64, String>,
    clock: u64,
    observed: VecDeque<ObservedBody<G::Outcome>>,
}

impl<G: SessionGuard> GuardSessions<G> {
    /// One guard for every session's requests (the retry rule and the kept bodies are still
    /// per session).
    pub fn single(guard: G, limits: SessionLimits) -> Self {
        Self::with(Guards::Single(guard), limits)
    }

    /// A guard from `factory` for each session key.
    pub fn per_session(
        factory: impl FnMut() -> Result<G, G::Error> + Send + Sync + 'static,
        limits: SessionLimits,
    ) -> Self {
        Self::with(Guards::PerSession(Box::new(factory)), limits)
    }

    fn with(guards: Guards<G>, limits: SessionLimits) -> Self {
        Self {
            guards,
            limits: SessionLimits {
                sessions: limits.sessions.max(1),
                bodies: limits.bodies.max(1),
            },
            sessions: HashMap::new(),
            refused: HashMap::new(),
            recency: BTreeMap::new(),
            clock: 0,
            observed: VecDeque::new(),
        }
    }

    /// Observes `body`, sent with `headers` (name, value) as the client's attempt `retry`
    /// (0 the first), with its session's guard. A refusal is the guard's error.
    pub fn observe(
        &mut self,
        body: Value,
        headers: &[(String, String)],
        retry: u32,
    ) -> Result<Observed<'_, G::Outcome>, G::Error> {
        let key = kvlint_protocol::key::session_key_of(&body, headers);
        self.observe_as(key, body, retry)
    }

    /// [`GuardSessions::observe`] with the session key given.
    pub fn observe_as(
        &mut self,
        key: String,
        body: Value,
        retry: u32,
    ) -> Result<Observed<'_, G::Outcome>, G::Error> {
        if retry > 0 {
            return match self.refused.get(&key) {
                Some((refused, error)) if *refused == body => Err(error.clone()),
                _ => Ok(Observed::Retry),
            };
        }
        let opens = kvlint_protocol::key::opens_conversation(&body);
        let guard = self.guard_for(&key)?;
        if opens && !guard.is_break_expected() {
            guard.reset();
        }
        let expected_before = guard.expected_breaks();
        // The guard reads a copy: the body is kept for the retry rule and among the latest.
        let outcome = match guard.observe(body.clone()) {
            Ok(outcome) => outcome,
            Err(error) => {
                self.refused.insert(key, (body, error.clone()));
                return Err(error);
            }
        };
        let warn = G::has_breaks(&outcome) && guard.expected_breaks() == expected_before;
        self.refused.remove(&key);
        self.observed.push_back(ObservedBody { key, body, outcome });
        while self.observed.len() > self.limits.bodies {
            self.observed.pop_front();
        }
        // At least one body is kept: the one just observed is the last.
        let body = &self.observed[self.observed.len() - 1];
        Ok(Observed::Checked { body, warn })
    }

    /// Shows the guard of the session `body` (sent with `headers`) belongs to the API's
    /// `response` to it ([`SessionGuard::observe_response`]); `false` when the session is not
    /// kept or the response reported no cache usage.
    pub fn observe_response(
        &mut self,
        body: &Value,
        headers: &[(String, String)],
        response: &Value,
    ) -> bool {
        let key = kvlint_protocol::key::session_key_of(body, headers);
        self.guard_mut(&key)
            .is_some_and(|guard| guard.observe_response(response))
    }

    /// The guard of session `key`, made the most recently used; a new session (with a guard
    /// from the factory) when it is not kept, the least recently used dropped to make room.
    pub fn guard_for(&mut self, key: &str) -> Result<&mut G, G::Error> {
        if !self.sessions.contains_key(key) {
            while self.sessions.len() >= self.limits.sessions {
                let Some((_, oldest)) = self.recency.pop_first() else {
                    break;
                };
                self.sessions.remove(&oldest);
                self.refused.remove(&oldest);
            }
        }
        self.clock += 1;
        let session = self.sessions.entry(key.to_owned()).or_insert(Session {
            guard: None,
            used: 0,
        });
        self.recency.remove(&session.used);
        session.used = self.clock;
        self.recency.insert(self.clock, key.to_owned());
        match &mut self.guards {
            Guards::Single(single) => Ok(single),
            Guards::PerSession(factory) => match &mut session.guard {
                Some(own) => Ok(own),
                none => Ok(none.insert(factory()?)),
            },
        }
    }

    /// The guard kept for session `key` (the single guard, when one serves every session).
    pub fn guard(&self, key: &str) -> Option<&G> {
        match &self.guards {
            Guards::Single(single) => Some(single),
            Guards::PerSession(_) => self.sessions.get(key)?.guard.as_ref(),
        }
    }

    /// [`GuardSessions::guard`], to announce a break ([`crate::Guard::expect_break`]).
    pub fn guard_mut(&mut self, key: &str) -> Option<&mut G> {
        match &mut self.guards {
            Guards::Single(single) => Some(single),
            Guards::PerSession(_) => self.sessions.get_mut(key)?.guard.as_mut(),
        }
    }

    /// The sessions kept, least recently used first, with their guards.
    pub fn guards(&self) -> impl Iterator<Item = (&str, &G)> {
        self.recency.values().filter_map(|key| {
            let guard = self.guard(key)?;
            Some((key.as_str(), guard))
        })
    }

    /// Whether session `key` is kept.
    pub fn contains(&self, key: &str) -> bool {
        self.sessions.contains_key(key)
    }

    /// The session kept that was used least recently: the one a new session drops when
    /// [`SessionLimits::sessions`] are kept.
    pub fn least_recently_used(&self) -> Option<&str> {
        self.recency.values().next().map(String::as_str)
    }

    /// Sessions kept.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// The latest bodies observed ([`SessionLimits::bodies`] of them), oldest first.
    pub fn observed(&self) -> impl ExactSizeIterator<Item = &ObservedBody<G::Outcome>> {
        self.observed.iter()
    }

    pub fn limits(&self) -> SessionLimits {
        self.limits
    }
}

#[cfg(feature = "guard")]
impl SessionGuard for crate::Guard {
    type Outcome = crate::Observation;
    type Error = std::sync::Arc<crate::GuardError>;

    fn observe(&mut self, body: Value) -> Result<Self::Outcome, Self::Error> {
        self.observe_body(body).map_err(std::sync::Arc::new)
    }

    fn has_breaks(outcome: &Self::Outcome) -> bool {
        outcome.errors().next().is_some()
    }

    fn is_break_expected(&self) -> bool {
        crate::Guard::is_break_expected(self)
    }

    fn expected_breaks(&self) -> usize {
        self.counters().expected_breaks
    }

    fn reset(&mut self) {
        crate::Guard::reset(self);
    }

    fn observe_response(&mut self, response: &Value) -> bool {
        crate::Guard::observe_response(self, response)
    }
}

#[cfg(all(test, feature = "guard"))]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::{Guard, GuardMode, Renderer};

    fn sessions(mode: GuardMode, limits: SessionLimits) -> GuardSessions<Guard> {
        GuardSessions::per_session(move || Ok(Guard::new(Renderer::provider(), mode)), limits)
    }

    /// A turn of `user`'s session: a system prompt holding `stamp`, then `turns` exchanges.
    fn turn(user: &str, stamp: &str, turns: usize) -> Value {
        let mut messages = vec![json!({"role": "system", "content": format!("Run {stamp}.")})];
        for index in 0..turns {
            if index > 0 {
                messages.push(json!({"role": "assistant", "content": format!("Answer {index}")}));
            }
            messages.push(json!({"role": "user", "content": format!("Question {index}")}));
        }
        json!({"model": "m", "user": user, "messages": messages})
    }

    fn warned(observed: Result<Observed<'_, crate::Observation>, Arc<crate::GuardError>>) -> bool {
        matches!(observed, Ok(Observed::Checked { warn: true, .. }))
    }

    #[test]
    fn the_least_recently_used_session_is_dropped_and_starts_over() {
        let limits = SessionLimits {
            sessions: 2,
            bodies: 3,
        };
        let mut sessions = sessions(GuardMode::Warn, limits);
        for user in ["a", "b"] {
            sessions.observe(turn(user, "1", 2), &[], 0).unwrap();
        }
        // `a` is used again, so `b` is the least recently used when `c` comes.
        assert!(!warned(sessions.observe(turn("a", "1", 3), &[], 0)));
        sessions.observe(turn("c", "1", 2), &[], 0).unwrap();
        assert_eq!(sessions.len(), 2);
        assert!(sessions.guard("b").is_none());
        assert!(!sessions.contains("b") && sessions.contains("c"));
        assert_eq!(sessions.least_recently_used(), Some("a"));
        let kept: Vec<&str> = sessions.guards().map(|(key, _)| key).collect();
        assert_eq!(kept, ["a", "c"]);
        // `b`'s next body has nothing to be compared with: no break, though its stamp moved.
        assert!(!warned(sessions.observe(turn("b", "2", 3), &[], 0)));
        // `a`, kept, is compared: its stamp moved.
        assert!(sessions.guard("a").is_none());
        sessions.observe(turn("a", "1", 3), &[], 0).unwrap();
        assert!(warned(sessions.observe(turn("a", "2", 4), &[], 0)));
        // The latest bodies only.
        let observed: Vec<&str> = sessions.observed().map(|body| body.key.as_str()).collect();
        assert_eq!(observed, ["b", "a", "a"]);
    }

    #[test]
    fn a_retry_of_a_refused_body_is_refused_again_and_of_an_accepted_one_not_observed() {
        let mut sessions = sessions(GuardMode::Error, SessionLimits::default());
        sessions.observe(turn("a", "1", 2), &[], 0).unwrap();
        let refused = turn("a", "2", 3);
        let first = sessions.observe(refused.clone(), &[], 0).unwrap_err();
        let again = sessions.observe(refused.clone(), &[], 1).unwrap_err();
        assert!(Arc::ptr_eq(&first, &again));
        let counters = sessions.guard("a").unwrap().counters().clone();
        assert_eq!((counters.turns, counters.refused_turns), (2, 1));
        // Another body on a retry: not observed.
        let other = sessions.observe(turn("a", "1", 3), &[], 2).unwrap();
        assert!(matches!(other, Observed::Retry));
        assert_eq!(sessions.guard("a").unwrap().counters().turns, 2);
        // Accepted after the refusal: a retry of the refused body is no longer refused.
        sessions.observe(turn("a", "1", 3), &[], 0).unwrap();
        assert!(matches!(
            sessions.observe(refused, &[], 1).unwrap(),
            Observed::Retry
        ));
    }

    #[test]
    fn a_body_that_opens_a_conversation_starts_over_unless_a_break_was_announced() {
        let mut sessions = sessions(GuardMode::Warn, SessionLimits::default());
        sessions.observe(turn("a", "1", 3), &[], 0).unwrap();
        // A new conversation under the same key: not a rewrite of the last.
        assert!(!warned(sessions.observe(turn("a", "2", 1), &[], 0)));
        assert_eq!(sessions.guard("a").unwrap().counters().expected_breaks, 0);
        // Announced (a compaction down to one message): the same session's break, no warning.
        sessions.observe(turn("a", "2", 3), &[], 0).unwrap();
        sessions.guard_mut("a").unwrap().expect_break();
        assert!(!warned(sessions.observe(turn("a", "3", 1), &[], 0)));
        assert_eq!(sessions.guard("a").unwrap().counters().expected_breaks, 1);
    }

    #[test]
    fn one_guard_serves_every_session_and_the_bounds_hold() {
        let guard = Guard::new(Renderer::provider(), GuardMode::Warn);
        let limits = SessionLimits {
            sessions: 1,
            bodies: 1,
        };
        let mut sessions = GuardSessions::single(guard, limits);
        sessions.observe(turn("a", "1", 2), &[], 0).unwrap();
        sessions.observe(turn("b", "1", 3), &[], 0).unwrap();
        assert_eq!(sessions.len(), 1);
        assert_eq!(sessions.observed().len(), 1);
        assert_eq!(sessions.guard("anyone").unwrap().counters().turns, 2);
    }
}

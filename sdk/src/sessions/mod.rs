//! One guard per session, for a client that sends the requests of many sessions: the one
//! multiplexer the language bindings' guarded clients and `kvlint proxy` use, bounded so that a long-running
//! service's memory stays flat.

use std::collections::{BTreeMap, HashMap, VecDeque};

use kvlint_protocol::grouping::{Grouping, Joined};
use kvlint_protocol::key::Carried;
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

/// Where [`GuardSessions::place`] put a body: the key its session's guard is kept under, and
/// the grouping's reading of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    pub key: String,
    pub joined: Joined,
}

/// Where a session's guard comes from.
enum Guards<G: SessionGuard> {
    /// One guard for every request: an application that runs one session per client.
    Single(G),
    /// A new guard for each session key.
    PerSession(Box<dyn FnMut() -> Result<G, G::Error> + Send + Sync>),
}

/// One [`SessionGuard`] per session, bounded by [`SessionLimits`]. A body's session is found
/// as a recording's requests are grouped ([`kvlint_protocol::grouping`]): by the session key
/// it carries ([`kvlint_protocol::key::session_key_of`]: a per-user or per-session id, else its
/// prefix key), then by the conversation it continues, so that two users of one agent whose
/// bodies carry no id (or only the prefix key every session shares) are two sessions. A
/// session is kept under its key; a second conversation under one key under the key and its
/// number in the grouping (`key#3`); a session without a key under that number alone (`#3`).
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
    /// Which session a body belongs to.
    grouping: Grouping,
    /// The grouping's sessions named so far, by name, and the names by session.
    named: HashMap<String, usize>,
    names: HashMap<usize, String>,
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
            grouping: Grouping::default(),
            named: HashMap::new(),
            names: HashMap::new(),
        }
    }

    /// Observes `body`, sent with `headers` (name, value) as the client's attempt `retry`
    /// (0 the first), with its session's guard ([`GuardSessions::place`]). A refusal is the
    /// guard's error.
    pub fn observe(
        &mut self,
        body: Value,
        headers: &[(String, String)],
        retry: u32,
    ) -> Result<Observed<'_, G::Outcome>, G::Error> {
        if retry > 0 {
            // Sent again by the client: refused again when its session's guard refused it.
            return match self.refused.values().find(|(refused, _)| *refused == body) {
                Some((_, error)) => Err(error.clone()),
                None => Ok(Observed::Retry),
            };
        }
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .collect();
        let placed = self.place("", &body, &headers, true);
        match self.check(placed.key.clone(), body) {
            Ok(warn) => Ok(self.last_observed(warn)),
            Err(refused) => {
                self.retract(&placed);
                Err(refused)
            }
        }
    }

    /// Takes back the body placed last ([`GuardSessions::place`]), refused: it was never
    /// sent, so its session's last request is the one before it again.
    pub fn retract(&mut self, placed: &Placed) {
        self.grouping.retract();
        if placed.joined.started {
            self.forget_name(&placed.key);
        }
    }

    /// The session `body`, sent to `endpoint` (a path or a URL; `""` when the bodies alone are
    /// seen) with `headers`, belongs to, through the one grouping; `answered`: whether it got
    /// an answer (the same body sent again after none is its retry).
    pub fn place(
        &mut self,
        endpoint: &str,
        body: &Value,
        headers: &[(&str, &str)],
        answered: bool,
    ) -> Placed {
        let carried = Carried {
            body: Some(body),
            headers,
            trace_conversation: None,
        };
        let joined = self.grouping.join(endpoint, body, &carried, answered);
        let key = match self.names.get(&joined.session) {
            Some(name) => name.clone(),
            None => {
                let session_key = carried.session_key();
                // A conversation that starts under a key whose session announced a break (a
                // compaction down to one message) is that session's break: its guard reads it.
                if let Some(key) = &session_key
                    && joined.started
                    && self.guard(key).is_some_and(G::is_break_expected)
                {
                    self.forget_name(key);
                }
                let name = match session_key {
                    Some(key) if !self.named.contains_key(&key) => key,
                    key => format!("{}#{}", key.unwrap_or_default(), joined.session),
                };
                self.forget_unkept();
                self.named.insert(name.clone(), joined.session);
                self.names.insert(joined.session, name.clone());
                name
            }
        };
        Placed { key, joined }
    }

    /// Past twice as many names as sessions kept, forgets the grouping's sessions that have
    /// no guard kept (placed, never observed): memory stays flat.
    fn forget_unkept(&mut self) {
        if self.names.len() < self.limits.sessions.saturating_mul(2) {
            return;
        }
        let unkept: Vec<String> = self
            .named
            .keys()
            .filter(|name| !self.sessions.contains_key(*name))
            .cloned()
            .collect();
        for name in unkept {
            self.forget_name(&name);
        }
    }

    /// Forgets the grouping's session named `name`: its next body starts a new session.
    fn forget_name(&mut self, name: &str) {
        if let Some(session) = self.named.remove(name) {
            self.names.remove(&session);
            self.grouping.forget(session);
        }
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
        let warn = self.check(key, body)?;
        Ok(self.last_observed(warn))
    }

    /// Checks `body` with session `key`'s guard and keeps it among the latest: whether to
    /// warn.
    fn check(&mut self, key: String, body: Value) -> Result<bool, G::Error> {
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
        Ok(warn)
    }

    /// The body just observed (at least one is kept: it is the last).
    fn last_observed(&self, warn: bool) -> Observed<'_, G::Outcome> {
        let body = &self.observed[self.observed.len() - 1];
        Observed::Checked { body, warn }
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
        // The session that observed the body last; a body it never observed, by its key.
        let key = self
            .observed
            .iter()
            .rev()
            .find(|observed| observed.body == *body)
            .map_or_else(
                || kvlint_protocol::key::session_key_of(body, headers),
                |observed| observed.key.clone(),
            );
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
                self.forget_name(&oldest);
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
mod tests;

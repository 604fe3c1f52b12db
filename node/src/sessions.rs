//! One guard per session for the guarded `fetch` and the AI SDK middleware
//! (`GuardSessions` in `node/lib/fetch.ts`): the SDK's multiplexer
//! ([`kvlint_sdk::GuardSessions`]) over the guards the application made, so that the session
//! key, the first-turn reset, the announced breaks, the retry rule and the bounds on sessions
//! and kept bodies are the SDK's, not restated in TypeScript.
//!
//! The guards are the application's `Guard` objects (a factory makes one per session): a new
//! session answers `NeedsGuard`, the TypeScript layer calls the factory and hands the guard
//! over ([`NativeGuardSessions::adopt`]), then asks again. Sessions the bounds drop are
//! listed by [`NativeGuardSessions::take_dropped`], so that the TypeScript layer forgets their
//! guards too.

use std::sync::{Arc, Mutex};

use kvlint_sdk::{Observed, SessionGuard, SessionLimits};
#[cfg(not(wasm))]
use napi_derive::napi;
use serde_json::{Value, json};
#[cfg(wasm)]
use wasm_bindgen::prelude::wasm_bindgen;

use crate::guard::{GuardState, locked};
use crate::{Failure, NativeGuard, answer, parse, parse_utf8};

/// An application's guard, as the multiplexer holds it (the application holds it too).
struct SharedGuard(Arc<Mutex<GuardState>>);

impl SessionGuard for SharedGuard {
    /// The turn's findings, as the TypeScript layer reads them.
    type Outcome = Vec<Value>;
    type Error = Failure;

    fn observe(&mut self, body: Value) -> Result<Vec<Value>, Failure> {
        locked(&self.0).observe(body)
    }

    fn has_breaks(findings: &Vec<Value>) -> bool {
        findings
            .iter()
            .any(|finding| finding["severity"] == "error")
    }

    fn is_break_expected(&self) -> bool {
        locked(&self.0).inner.is_break_expected()
    }

    fn expected_breaks(&self) -> usize {
        locked(&self.0).inner.counters().expected_breaks
    }

    fn reset(&mut self) {
        locked(&self.0).inner.reset();
    }

    fn observe_response(&mut self, response: &Value) -> bool {
        locked(&self.0).inner.observe_response(response)
    }
}

/// The guard handed over for the next new session ([`NativeGuardSessions::adopt`]).
type Adopted = Arc<Mutex<Option<SharedGuard>>>;

/// The failure that asks the TypeScript layer for session `key`'s guard.
fn needs_guard(key: &str) -> Failure {
    Failure {
        kind: "NeedsGuard",
        message: key.to_owned(),
        findings: Vec::new(),
    }
}

/// One guard per session key, bounded ([`kvlint_sdk::GuardSessions`]).
#[cfg_attr(not(wasm), napi)]
#[cfg_attr(wasm, wasm_bindgen)]
pub struct NativeGuardSessions {
    inner: kvlint_sdk::GuardSessions<SharedGuard>,
    adopted: Adopted,
    /// Sessions dropped by the bounds since [`Self::take_dropped`] was last called.
    dropped: Vec<String>,
    /// The body that asked for a guard (`NeedsGuard`), and where it was placed.
    pending: Option<(Value, kvlint_sdk::Placed)>,
}

/// `count` as a bound: `Infinity` (or any count past `usize`) is no bound.
fn bound(count: f64) -> usize {
    if count.is_finite() {
        count as usize
    } else {
        usize::MAX
    }
}

#[cfg_attr(not(wasm), napi)]
#[cfg_attr(wasm, wasm_bindgen)]
impl NativeGuardSessions {
    /// A guard per session, each handed over by [`Self::adopt`] when its session is new;
    /// `max_sessions` guards and the latest `keep_bodies` bodies kept (`Infinity`: all).
    #[cfg_attr(not(wasm), napi(constructor))]
    #[cfg_attr(wasm, wasm_bindgen(constructor))]
    pub fn new(max_sessions: f64, keep_bodies: f64) -> Self {
        let adopted: Adopted = Arc::default();
        let handed = Arc::clone(&adopted);
        let inner = kvlint_sdk::GuardSessions::per_session(
            move || {
                handed
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .take()
                    .ok_or_else(|| needs_guard(""))
            },
            limits(max_sessions, keep_bodies),
        );
        Self {
            inner,
            adopted,
            dropped: Vec::new(),
            pending: None,
        }
    }

    /// One guard for every session's requests.
    #[cfg_attr(not(wasm), napi(factory))]
    #[cfg_attr(wasm, wasm_bindgen)]
    pub fn single(guard: &NativeGuard, max_sessions: f64, keep_bodies: f64) -> Self {
        Self {
            inner: kvlint_sdk::GuardSessions::single(
                SharedGuard(Arc::clone(&guard.state)),
                limits(max_sessions, keep_bodies),
            ),
            adopted: Arc::default(),
            dropped: Vec::new(),
            pending: None,
        }
    }

    /// Shows the guard of the session `body` (sent with `headers`, `[[name, value], …]`)
    /// belongs to the API's `response` to it (its JSON text): whether the session is kept and
    /// the response reported cache usage.
    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen(js_name = observeResponse))]
    pub fn observe_response(&mut self, body: &[u8], headers: String, response: &[u8]) -> bool {
        let (Ok(body), Ok(response)) = (parse_utf8(body, "body"), parse_utf8(response, "response"))
        else {
            return false;
        };
        let Ok(headers) = parse(&headers, "headers").and_then(|headers| {
            serde_json::from_value::<Vec<(String, String)>>(headers).map_err(|_| needs_pairs())
        }) else {
            return false;
        };
        self.inner.observe_response(&body, &headers, &response)
    }

    /// Hands over the guard of the session the last answer's `NeedsGuard` named.
    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen)]
    pub fn adopt(&mut self, guard: &NativeGuard) {
        *self
            .adopted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some(SharedGuard(Arc::clone(&guard.state)));
    }

    /// Observes a body (the UTF-8 bytes of its JSON text, as sent) with `headers` (`[[name,
    /// value], …]`) as the client's attempt `retry`: `{key, findings, warn}`; `null` for a body
    /// that is not a JSON object (no prompt to guard) and for a retry not observed again. A
    /// refusal, or a retry of the body refused, answers the guard's `GuardError`; a new
    /// session answers `NeedsGuard` with its key.
    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen)]
    pub fn observe(&mut self, body: &[u8], headers: String, retry: u32) -> String {
        let Ok(body) = parse_utf8(body, "body") else {
            return answer(Ok((Value::Null, Vec::new())));
        };
        if !body.is_object() {
            return answer(Ok((Value::Null, Vec::new())));
        }
        let headers: Vec<(String, String)> = match parse(&headers, "headers")
            .and_then(|headers| serde_json::from_value(headers).map_err(|_| needs_pairs()))
        {
            Ok(headers) => headers,
            Err(failure) => return answer(Err(failure)),
        };
        let oldest = self.oldest();
        let observed = if retry > 0 {
            self.inner.observe(body, &headers, retry)
        } else {
            // The session of a body asked again after its guard was handed over is the one
            // it was placed in.
            let placed = match self.pending.take() {
                Some((pending, placed)) if pending == body => placed,
                _ => {
                    let pairs: Vec<(&str, &str)> = headers
                        .iter()
                        .map(|(name, value)| (name.as_str(), value.as_str()))
                        .collect();
                    self.inner.place("", &body, &pairs, true)
                }
            };
            match self.inner.observe_as(placed.key.clone(), body.clone(), 0) {
                Err(failure) if failure.kind == "NeedsGuard" => {
                    let asked = needs_guard(&placed.key);
                    self.pending = Some((body, placed));
                    Err(asked)
                }
                Err(failure) => {
                    self.inner.retract(&placed);
                    Err(failure)
                }
                observed => observed,
            }
        };
        let observed = match observed {
            Ok(Observed::Checked { body, warn }) => Ok((
                json!({"key": body.key, "findings": body.outcome, "warn": warn}),
                Vec::new(),
            )),
            Ok(Observed::Retry) => Ok((Value::Null, Vec::new())),
            Err(failure) => Err(failure),
        };
        self.note_dropped(oldest);
        answer(observed)
    }

    /// Makes session `key` the most recently used (a new one answers `NeedsGuard`).
    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen(js_name = guardFor))]
    pub fn guard_for(&mut self, key: String) -> String {
        let oldest = self.oldest();
        let made = match self.inner.guard_for(&key) {
            Ok(_) => Ok((Value::Null, Vec::new())),
            Err(_) => Err(needs_guard(&key)),
        };
        self.note_dropped(oldest);
        answer(made)
    }

    /// The sessions the bounds dropped since the last call (`[key, …]`).
    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen(js_name = takeDropped))]
    pub fn take_dropped(&mut self) -> String {
        Value::from(std::mem::take(&mut self.dropped)).to_string()
    }

    /// The sessions kept, least recently used first (`[key, …]`).
    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen)]
    pub fn keys(&self) -> String {
        let keys: Vec<&str> = self.inner.guards().map(|(key, _)| key).collect();
        Value::from(keys).to_string()
    }

    /// The latest bodies observed, oldest first: `[{key, body, findings}]`, each body its
    /// JSON text.
    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen)]
    pub fn observed(&self) -> String {
        let observed: Vec<Value> = self
            .inner
            .observed()
            .map(|entry| {
                json!({
                    "key": entry.key,
                    "body": entry.body.to_string(),
                    "findings": entry.outcome,
                })
            })
            .collect();
        Value::from(observed).to_string()
    }
}

impl NativeGuardSessions {
    /// The least recently used session: the one a call may drop.
    fn oldest(&self) -> Option<String> {
        self.inner.least_recently_used().map(str::to_owned)
    }

    /// Notes `oldest` as dropped when the call made before left it out: read from what the
    /// sessions keep, not foretold from their bounds.
    fn note_dropped(&mut self, oldest: Option<String>) {
        if let Some(oldest) = oldest.filter(|oldest| !self.inner.contains(oldest)) {
            self.dropped.push(oldest);
        }
    }
}

fn limits(max_sessions: f64, keep_bodies: f64) -> SessionLimits {
    SessionLimits {
        sessions: bound(max_sessions),
        bodies: bound(keep_bodies),
    }
}

fn needs_pairs() -> Failure {
    Failure {
        kind: "TypeError",
        message: "headers: expected [name, value] pairs".into(),
        findings: Vec::new(),
    }
}

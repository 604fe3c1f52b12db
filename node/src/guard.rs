//! The npm package's `Guard`: [`kvlint_sdk::Guard`] behind JSON text.

use std::sync::{Arc, Mutex, MutexGuard};

#[cfg(not(wasm))]
use napi_derive::napi;
use serde_json::Value;
#[cfg(wasm)]
use wasm_bindgen::prelude::wasm_bindgen;

use kvlint_render::render::Renderer;
use kvlint_sdk::GuardMode;

use crate::{Failure, answer, findings, parse_utf8, to_value};

/// `kvlint check` on each pair of turns of one session, as the requests are sent
/// ([`kvlint_sdk::Guard`]).
#[cfg_attr(not(wasm), napi)]
#[cfg_attr(wasm, wasm_bindgen)]
pub struct NativeGuard {
    /// Shared with the sessions that observe through it ([`crate::NativeGuardSessions`]).
    pub(crate) state: Arc<Mutex<GuardState>>,
}

/// A guard and what it has seen.
pub(crate) struct GuardState {
    pub(crate) inner: kvlint_sdk::Guard,
    /// Every finding of the accepted and refused turns, in order.
    seen: Vec<Value>,
}

impl GuardState {
    /// The turn's findings, or its refusal (`GuardError`, with them).
    pub(crate) fn observe(&mut self, body: Value) -> Result<Vec<Value>, Failure> {
        match self.inner.observe_body(body) {
            Ok(observed) => {
                let findings = findings(&observed);
                self.seen.extend(findings.iter().cloned());
                Ok(findings)
            }
            Err(kvlint_sdk::GuardError::Breaks { diagnostics, turn }) => {
                let refused = findings(&diagnostics);
                self.seen.extend(refused.iter().cloned());
                let first = diagnostics
                    .first()
                    .map_or("", |diagnostic| diagnostic.message.as_str());
                Err(Failure {
                    kind: "GuardError",
                    message: format!(
                        "turn {turn}: {} cache break(s) recompute cached tokens; first: {first}",
                        refused.len()
                    ),
                    findings: refused,
                })
            }
            Err(error) => Err(Failure::conversation(error)),
        }
    }
}

/// The state behind a lock a panic cannot leave unusable (a guard holds no invariant a
/// half-done observation breaks: the next body is checked against the last one kept).
pub(crate) fn locked(state: &Mutex<GuardState>) -> MutexGuard<'_, GuardState> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg_attr(not(wasm), napi)]
#[cfg_attr(wasm, wasm_bindgen)]
impl NativeGuard {
    /// `refuse`: error mode (a turn that recomputes cached content is refused), else warn.
    #[cfg_attr(not(wasm), napi(constructor))]
    #[cfg_attr(wasm, wasm_bindgen(constructor))]
    pub fn new(refuse: bool) -> Self {
        let mode = if refuse {
            GuardMode::Error
        } else {
            GuardMode::Warn
        };
        Self {
            state: Arc::new(Mutex::new(GuardState {
                inner: kvlint_sdk::Guard::new(Renderer::provider(), mode),
                seen: Vec::new(),
            })),
        }
    }

    /// Answers the turn's findings, or refuses it (`GuardError`, with them).
    ///
    /// `body`: the UTF-8 bytes of its JSON text, read where they are (JavaScript encodes a
    /// string into them several times faster than Node-API copies one out).
    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen)]
    pub fn observe(&mut self, body: &[u8]) -> String {
        let body = match parse_utf8(body, "body") {
            Ok(body) => body,
            Err(failure) => return answer(Err(failure)),
        };
        let outcome = locked(&self.state)
            .observe(body)
            .map(|findings| (Value::Array(findings), Vec::new()));
        answer(outcome)
    }

    /// Every finding so far, in order (refused turns included).
    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen)]
    pub fn findings(&self) -> String {
        Value::Array(locked(&self.state).seen.clone()).to_string()
    }

    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen(js_name = expectBreak))]
    pub fn expect_break(&mut self) {
        locked(&self.state).inner.expect_break();
    }

    #[cfg_attr(not(wasm), napi(getter))]
    #[cfg_attr(wasm, wasm_bindgen(getter = isBreakExpected))]
    pub fn is_break_expected(&self) -> bool {
        locked(&self.state).inner.is_break_expected()
    }

    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen)]
    pub fn reset(&mut self) {
        locked(&self.state).inner.reset();
    }

    /// The guard's counters, with `costs_by_rule` beside them.
    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen)]
    pub fn counters(&self) -> String {
        let state = locked(&self.state);
        let mut counters = to_value(state.inner.counters());
        counters["costs_by_rule"] = to_value(state.inner.costs_by_rule());
        counters.to_string()
    }

    /// Shows the guard the API's response (its JSON text, as UTF-8 bytes) to the last
    /// request: whether it reported cache usage, which is summed.
    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen(js_name = observeResponse))]
    pub fn observe_response(&mut self, response: &[u8]) -> bool {
        parse_utf8(response, "response")
            .is_ok_and(|response| locked(&self.state).inner.observe_response(&response))
    }

    /// The cache usage reported for the responses shown, summed, with the same under
    /// OpenTelemetry's GenAI names (`otel`).
    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen(js_name = reportedUsage))]
    pub fn reported_usage(&self) -> String {
        let usage = locked(&self.state).inner.reported_usage();
        let mut reported = to_value(&usage);
        reported["otel"] = usage
            .otel_attributes()
            .into_iter()
            .map(|(name, tokens)| (name.to_owned(), Value::from(tokens)))
            .collect::<serde_json::Map<_, _>>()
            .into();
        reported.to_string()
    }
}

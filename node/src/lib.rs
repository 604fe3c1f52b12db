//! `kvlint-cache`'s native module for Node (Node-API, through napi-rs): the npm package's
//! engine. Compiled to `wasm32-unknown-unknown`, the same bindings are wasm-bindgen's
//! (`cfg(wasm)`, set by the build script; each item carries both attributes), the
//! `kvlint-cache-wasm32` package (`scripts/build-wasm.sh`).
//!
//! A thin binding, like the Python module (`python/src/lib.rs`): each class and function wraps
//! the Rust one it names ([`kvlint_sdk`]'s `Conversation` and `Guard`,
//! [`kvlint_rules::check_session`]). Values cross as JSON text both ways. The package's
//! TypeScript layer (`node/lib/sdk.ts`) serializes what the caller passed as
//! `JSON.stringify` does, in the object's key order, after refusing what JSON cannot carry and
//! naming where it is; serde_json's `preserve_order` keeps that order here. A call that can
//! fail or warn answers an [`Answer`] (its value, the warnings to issue at the caller's line,
//! or the error to throw, of a kind the TypeScript layer turns into its class), so nothing
//! unwinds across the boundary and every mistake is reported at the call that made it.

use std::fmt::Display;
use std::sync::Arc;

use kvlint_core::session::SessionFile;
use kvlint_request::diagnostic::Diagnostic;
use kvlint_sdk::{CacheBreak, Change, Effect, Part, ToolCall};
#[cfg(not(wasm))]
use napi_derive::napi;
use serde::Serialize;
use serde_json::{Value, json};
#[cfg(wasm)]
use wasm_bindgen::prelude::wasm_bindgen;

/// The module's Rust allocations (not Node's) go to mimalloc: a guarded turn builds and frees a
/// whole request, and on glibc's allocator that took a quarter more time (`bench/observe.mjs`).
mod conversation;
mod guard;
mod sessions;

pub use conversation::NativeConversation;
pub use guard::NativeGuard;
pub use sessions::NativeGuardSessions;

#[cfg(not(wasm))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// What a call answers, as JSON text: `{"value"}`, with `"warnings"` when it warned, or
/// `{"error": {"kind", "message", "findings"?}}`.
#[derive(Default, Serialize)]
struct Answer {
    value: Value,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<Failure>,
}

/// An error the TypeScript layer throws as the class `kind` names.
#[derive(Clone, Serialize)]
struct Failure {
    /// `ConversationError` (an input the provider would reject, or a change a strict
    /// conversation refuses), `GuardError` (a guard in error mode refusing a turn) or
    /// `TypeError` (not the JSON the call takes).
    kind: &'static str,
    message: String,
    /// The refused turn's findings (`GuardError`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    findings: Vec<Value>,
}

impl Failure {
    fn conversation(error: impl Display) -> Self {
        Self {
            kind: "ConversationError",
            message: error.to_string(),
            findings: Vec::new(),
        }
    }
}

/// A value and the warnings the call issued, or its failure.
type Outcome = Result<(Value, Vec<String>), Failure>;

fn answer(outcome: Outcome) -> String {
    let answer = match outcome {
        Ok((value, warnings)) => Answer {
            value,
            warnings,
            error: None,
        },
        Err(failure) => Answer {
            error: Some(failure),
            ..Answer::default()
        },
    };
    serde_json::to_string(&answer).unwrap_or_else(|error| {
        json!({"error": {"kind": "TypeError", "message": error.to_string()}}).to_string()
    })
}

/// The JSON text the TypeScript layer passed for the argument `name`.
fn parse(text: &str, name: &str) -> Result<Value, Failure> {
    parse_utf8(text.as_bytes(), name)
}

/// [`parse`] on the UTF-8 bytes of the text.
fn parse_utf8(text: &[u8], name: &str) -> Result<Value, Failure> {
    serde_json::from_slice(text).map_err(|error| Failure {
        kind: "TypeError",
        message: format!("{name}: not JSON ({error})"),
        findings: Vec::new(),
    })
}

fn to_value(value: &impl Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// A finding as the package gives it: the Python module's fields, in JavaScript's case.
fn finding(diagnostic: &Diagnostic) -> Value {
    let part = diagnostic.part.to_string();
    json!({
        "rule": diagnostic.rule,
        "code": diagnostic.code,
        "severity": diagnostic.severity.as_str(),
        "message": diagnostic.message,
        "help": diagnostic.help,
        "turn": diagnostic.turn,
        "tokensLost": diagnostic.tokens_lost,
        "part": (!part.is_empty()).then_some(part),
    })
}

fn findings(diagnostics: &[Diagnostic]) -> Vec<Value> {
    diagnostics.iter().map(finding).collect()
}

/// A change refused fails; a deferred one or a volatile value warns at the call. Answers what
/// an `add*` call did: `{applied, deferred, costBlocks, volatile}`.
fn tier_change(change: Change<'_>) -> Outcome {
    let report = change.into_result().map_err(Failure::conversation)?;
    let mut warnings = Vec::new();
    let (deferred, cost_blocks) = match &report.effect {
        Effect::Deferred {
            change,
            lost_blocks,
        } => {
            warnings.push(format!(
                "{change} after the first request: {}, which recomputes {lost_blocks} cached block(s) (strict: true refuses it)",
                change.until_compaction()
            ));
            (true, *lost_blocks)
        }
        Effect::Applied | Effect::Unchanged => (false, 0),
    };
    warnings.extend(report.volatile.iter().map(|found| {
        format!(
            "{} tier: {} `{}` changes from request to request and breaks the cache after it ({}); put it in addTurnContext",
            found.tier, found.class, found.value, found.rule
        )
    }));
    let value = json!({
        "applied": !deferred,
        "deferred": deferred,
        "costBlocks": cost_blocks,
        "volatile": to_value(&report.volatile),
    });
    Ok((value, warnings))
}

/// A message appended: only its warnings and errors matter.
fn pushed(change: Change<'_>) -> Outcome {
    tier_change(change).map(|(_, warnings)| (Value::Null, warnings))
}

/// A compaction's cost, warning when it kept more than asked.
fn compacted(cache_break: &CacheBreak) -> (Value, Vec<String>) {
    let warnings = match cache_break.kept_beyond_asked {
        0 => Vec::new(),
        extra => vec![format!(
            "compaction kept {extra} message(s) more than asked: no user message follows the cut, and a history that starts with the assistant is rejected (Anthropic, Bedrock)"
        )],
    };
    (to_value(cache_break), warnings)
}

fn parts(content: &Value) -> Result<Vec<Part>, Failure> {
    Part::from_content(content).map_err(Failure::conversation)
}

fn tool_call(call: &Value) -> Result<ToolCall, Failure> {
    ToolCall::from_json(call).map_err(Failure::conversation)
}

/// Checks one session, the request bodies an agent sent (a JSON array), in provider mode (the
/// order hosted APIs cache in, tokenized with `o200k_base`). Answers
/// `{findings, promptTokens, reusedTokens}`.
#[cfg_attr(not(wasm), napi)]
#[cfg_attr(wasm, wasm_bindgen)]
pub fn check(bodies: String) -> String {
    answer(check_bodies(&bodies))
}

fn check_bodies(bodies: &str) -> Outcome {
    let Value::Array(bodies) = parse(bodies, "bodies")? else {
        return Err(Failure::conversation(
            "bodies: expected an array of request bodies",
        ));
    };
    if bodies.is_empty() {
        let nothing = json!({"findings": [], "promptTokens": 0, "reusedTokens": 0});
        return Ok((nothing, Vec::new()));
    }
    let lines: String = bodies.iter().map(|body| format!("{body}\n")).collect();
    let session =
        SessionFile::parse("bodies".into(), Arc::from(lines)).map_err(Failure::conversation)?;
    let checked = kvlint_rules::check_sent_session(&session).map_err(Failure::conversation)?;
    let value = json!({
        "findings": findings(&checked.findings),
        "promptTokens": checked.prompt_tokens(),
        "reusedTokens": checked.reused_tokens(),
    });
    Ok((value, Vec::new()))
}

/// Which session a request body (its JSON text, as sent) belongs to, with its headers
/// (`[[name, value], …]`), read once: `{key, opens}`, its session key (the first of
/// [`kvlint_protocol::key::SESSION_KEY`] it carries, `""` when none) and whether it opens a
/// conversation (one user message, no answer yet:
/// [`kvlint_protocol::key::opens_conversation`]). A body that is not a JSON object is a
/// `TypeError`: not a prompt.
#[cfg_attr(not(wasm), napi)]
#[cfg_attr(wasm, wasm_bindgen(js_name = sessionOf))]
pub fn session_of(body: String, headers: String) -> String {
    let session = || -> Result<Value, Failure> {
        let body = parse(&body, "body")?;
        if !body.is_object() {
            return Err(Failure {
                kind: "TypeError",
                message: "body: not a JSON object".into(),
                findings: Vec::new(),
            });
        }
        let headers: Vec<(String, String)> = serde_json::from_value(parse(&headers, "headers")?)
            .map_err(|error| Failure {
                kind: "TypeError",
                message: format!("headers: expected [name, value] pairs ({error})"),
                findings: Vec::new(),
            })?;
        Ok(json!({
            "key": kvlint_protocol::key::session_key_of(&body, &headers),
            "opens": kvlint_protocol::key::opens_conversation(&body),
        }))
    };
    answer(session().map(|session| (session, Vec::new())))
}

/// Whether a request to `url` (a path or a whole URL) carries a prompt kvlint reads
/// ([`kvlint_protocol::endpoint::is_prompt_path`]).
#[cfg_attr(not(wasm), napi)]
#[cfg_attr(wasm, wasm_bindgen(js_name = isPromptPath))]
pub fn is_prompt_path(url: String) -> bool {
    kvlint_protocol::endpoint::is_prompt_path(&url)
}

/// The header a self-hosted router reads a session's routing key from. A function, not a
/// constant: WebAssembly exports only functions.
#[cfg_attr(not(wasm), napi)]
#[cfg_attr(wasm, wasm_bindgen(js_name = routingKeyHeader))]
pub fn routing_key_header() -> String {
    kvlint_sdk::ROUTING_KEY_HEADER.to_owned()
}

/// The `max_tokens` an Anthropic body gets when none is asked for.
#[cfg_attr(not(wasm), napi)]
#[cfg_attr(wasm, wasm_bindgen(js_name = anthropicDefaultMaxTokens))]
pub fn anthropic_default_max_tokens() -> u32 {
    kvlint_sdk::ANTHROPIC_DEFAULT_MAX_TOKENS as u32
}

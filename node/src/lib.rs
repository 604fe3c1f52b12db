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
use kvlint_render::render::Renderer;
use kvlint_request::diagnostic::Diagnostic;
use kvlint_sdk::{CacheBreak, Change, Effect, GuardMode, Part, Tool, ToolCall};
#[cfg(not(wasm))]
use napi_derive::napi;
use serde::Serialize;
use serde_json::{Value, json};
#[cfg(wasm)]
use wasm_bindgen::prelude::wasm_bindgen;

/// The module's Rust allocations (not Node's) go to mimalloc: a guarded turn builds and frees a
/// whole request, and on glibc's allocator that took a quarter more time (`bench/observe.mjs`).
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
#[derive(Serialize)]
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
                "{change} after the first request: it waits for compaction, which recomputes {lost_blocks} cached block(s) (strict: true refuses it)"
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

/// One agent session in stability tiers, with an append-only history
/// ([`kvlint_sdk::Conversation`]).
#[cfg_attr(not(wasm), napi)]
#[cfg_attr(wasm, wasm_bindgen)]
pub struct NativeConversation {
    inner: kvlint_sdk::Conversation,
}

#[cfg_attr(not(wasm), napi)]
#[cfg_attr(wasm, wasm_bindgen)]
impl NativeConversation {
    #[cfg_attr(not(wasm), napi(constructor))]
    #[cfg_attr(wasm, wasm_bindgen(constructor))]
    pub fn new(strict: bool) -> Self {
        let inner = if strict {
            kvlint_sdk::Conversation::strict()
        } else {
            kvlint_sdk::Conversation::new()
        };
        Self { inner }
    }

    #[cfg_attr(not(wasm), napi(getter))]
    #[cfg_attr(wasm, wasm_bindgen(getter = isStrict))]
    pub fn is_strict(&self) -> bool {
        self.inner.is_strict()
    }

    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen(js_name = addStatic))]
    pub fn add_static(&mut self, text: String) -> String {
        answer(tier_change(self.inner.add_static(text)))
    }

    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen(js_name = addSession))]
    pub fn add_session(&mut self, key: String, text: String) -> String {
        answer(tier_change(self.inner.add_session(&key, text)))
    }

    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen(js_name = addTool))]
    pub fn add_tool(&mut self, definition: String) -> String {
        let tool = parse(&definition, "definition").and_then(|definition| {
            Tool::from_definition(&definition).map_err(Failure::conversation)
        });
        answer(tool.and_then(|tool| tier_change(self.inner.add_tool(tool))))
    }

    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen(js_name = addTurnContext))]
    pub fn add_turn_context(&mut self, text: String) {
        self.inner.add_turn_context(text);
    }

    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen(js_name = clearTurnContext))]
    pub fn clear_turn_context(&mut self) {
        self.inner.clear_turn_context();
    }

    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen(js_name = pushUser))]
    pub fn push_user(&mut self, content: String) -> String {
        let parts = parse(&content, "content").and_then(|content| parts(&content));
        answer(parts.and_then(|parts| pushed(self.inner.push_user_parts(parts))))
    }

    /// `toolCalls` and `thinking`: JSON arrays, or `null`.
    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen(js_name = pushAssistant))]
    pub fn push_assistant(&mut self, text: String, tool_calls: String, thinking: String) -> String {
        let answer_parts = || -> Result<(Vec<Part>, Vec<ToolCall>), Failure> {
            let calls = match parse(&tool_calls, "toolCalls")? {
                Value::Null => Vec::new(),
                Value::Array(calls) => calls.iter().map(tool_call).collect::<Result<_, _>>()?,
                _ => return Err(Failure::conversation("toolCalls: expected an array")),
            };
            let mut parts = match parse(&thinking, "thinking")? {
                Value::Null => Vec::new(),
                blocks => parts(&blocks)?,
            };
            if !text.is_empty() {
                parts.push(Part::text(&text));
            }
            Ok((parts, calls))
        };
        answer(
            answer_parts()
                .and_then(|(parts, calls)| pushed(self.inner.push_assistant_parts(parts, calls))),
        )
    }

    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen(js_name = pushToolResult))]
    pub fn push_tool_result(&mut self, call_id: String, content: String) -> String {
        let parts = parse(&content, "content").and_then(|content| parts(&content));
        answer(parts.and_then(|parts| pushed(self.inner.push_tool_result_parts(&call_id, parts))))
    }

    #[cfg_attr(not(wasm), napi(js_name = "pushOpenAIResponse"))]
    #[cfg_attr(wasm, wasm_bindgen(js_name = pushOpenAIResponse))]
    pub fn push_openai_response(&mut self, response: String) -> String {
        answer(
            parse(&response, "response")
                .and_then(|response| pushed(self.inner.push_openai_response(&response))),
        )
    }

    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen(js_name = pushResponsesOutput))]
    pub fn push_responses_output(&mut self, response: String) -> String {
        answer(
            parse(&response, "response")
                .and_then(|response| pushed(self.inner.push_responses_output(&response))),
        )
    }

    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen(js_name = pushAnthropicResponse))]
    pub fn push_anthropic_response(&mut self, response: String) -> String {
        answer(
            parse(&response, "response")
                .and_then(|response| pushed(self.inner.push_anthropic_response(&response))),
        )
    }

    /// Becomes the conversation a request body holds (`Conversation.fromBody`).
    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen(js_name = loadBody))]
    pub fn load_body(&mut self, body: String) -> String {
        let loaded = parse(&body, "body").and_then(|body| {
            kvlint_sdk::Conversation::from_body(&body).map_err(Failure::conversation)
        });
        answer(loaded.map(|inner| {
            self.inner = inner;
            (Value::Null, Vec::new())
        }))
    }

    /// Becomes the conversation `toJSON` saved (`Conversation.fromJSON`).
    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen)]
    pub fn restore(&mut self, saved: String) -> String {
        let restored = serde_json::from_str(&saved)
            .map_err(|error| Failure::conversation(format!("not a saved conversation: {error}")));
        answer(restored.map(|inner| {
            self.inner = inner;
            (Value::Null, Vec::new())
        }))
    }

    #[cfg_attr(not(wasm), napi(js_name = "toOpenAIChat"))]
    #[cfg_attr(wasm, wasm_bindgen(js_name = toOpenAIChat))]
    pub fn to_openai_chat(&self, model: String) -> String {
        self.inner.to_openai_chat(&model).to_string()
    }

    #[cfg_attr(not(wasm), napi(js_name = "toOpenAIResponses"))]
    #[cfg_attr(wasm, wasm_bindgen(js_name = toOpenAIResponses))]
    pub fn to_openai_responses(&self, model: String) -> String {
        self.inner.to_openai_responses(&model).to_string()
    }

    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen(js_name = toAnthropic))]
    pub fn to_anthropic(&self, model: String, max_tokens: u32) -> String {
        let mut body = self.inner.to_anthropic(&model);
        body["max_tokens"] = Value::from(max_tokens);
        body.to_string()
    }

    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen)]
    pub fn preview(&self) -> NativeConversation {
        NativeConversation {
            inner: self.inner.preview(),
        }
    }

    /// `summary`: `null` or the summary's text.
    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen)]
    pub fn compact(&mut self, keep_last: u32, summary: Option<String>) -> String {
        let cache_break = match summary {
            Some(summary) => self.inner.compact_with_summary(keep_last as usize, summary),
            None => self.inner.compact(keep_last as usize),
        };
        answer(Ok(compacted(&cache_break)))
    }

    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen(js_name = enforceWindow))]
    pub fn enforce_window(&mut self, max_messages: u32, keep_messages: u32) -> String {
        let window = kvlint_sdk::HistoryWindow::new(max_messages as usize, keep_messages as usize);
        let enforced = self.inner.enforce_window(&window);
        answer(Ok(enforced
            .map_or((Value::Null, Vec::new()), |cache_break| {
                compacted(&cache_break)
            })))
    }

    #[cfg_attr(not(wasm), napi(getter))]
    #[cfg_attr(wasm, wasm_bindgen(getter = routingKey))]
    pub fn routing_key(&self) -> String {
        self.inner.routing_key()
    }

    /// `{name: value}`.
    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen(js_name = routingHeaders))]
    pub fn routing_headers(&self) -> String {
        let headers: serde_json::Map<String, Value> = self
            .inner
            .routing_headers()
            .into_iter()
            .map(|(name, value)| (name.to_string(), Value::String(value.to_string())))
            .collect();
        Value::Object(headers).to_string()
    }

    #[cfg_attr(not(wasm), napi(getter))]
    #[cfg_attr(wasm, wasm_bindgen(getter = isCommitted))]
    pub fn is_committed(&self) -> bool {
        self.inner.is_committed()
    }

    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen)]
    pub fn history(&self) -> String {
        to_value(&self.inner.history()).to_string()
    }

    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen(js_name = pendingChanges))]
    pub fn pending_changes(&self) -> String {
        to_value(&self.inner.pending_changes()).to_string()
    }

    /// The conversation saved, for `restore` in this process or another.
    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen)]
    pub fn save(&self) -> String {
        to_value(&self.inner).to_string()
    }
}

/// `kvlint check` on each pair of turns of one session, as the requests are sent
/// ([`kvlint_sdk::Guard`]).
#[cfg_attr(not(wasm), napi)]
#[cfg_attr(wasm, wasm_bindgen)]
pub struct NativeGuard {
    inner: kvlint_sdk::Guard,
    /// Every finding of the accepted and refused turns, in order.
    seen: Vec<Value>,
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
            inner: kvlint_sdk::Guard::new(Renderer::provider(), mode),
            seen: Vec::new(),
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
        let outcome = match self.inner.observe_body(body) {
            Ok(observed) => {
                let findings = findings(&observed);
                self.seen.extend(findings.iter().cloned());
                Ok((Value::Array(findings), Vec::new()))
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
        };
        answer(outcome)
    }

    /// Every finding so far, in order (refused turns included).
    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen)]
    pub fn findings(&self) -> String {
        Value::Array(self.seen.clone()).to_string()
    }

    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen(js_name = expectBreak))]
    pub fn expect_break(&mut self) {
        self.inner.expect_break();
    }

    #[cfg_attr(not(wasm), napi(getter))]
    #[cfg_attr(wasm, wasm_bindgen(getter = isBreakExpected))]
    pub fn is_break_expected(&self) -> bool {
        self.inner.is_break_expected()
    }

    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen)]
    pub fn reset(&mut self) {
        self.inner.reset();
    }

    /// The guard's counters, with `costs_by_rule` beside them.
    #[cfg_attr(not(wasm), napi)]
    #[cfg_attr(wasm, wasm_bindgen)]
    pub fn counters(&self) -> String {
        let mut counters = to_value(self.inner.counters());
        counters["costs_by_rule"] = to_value(self.inner.costs_by_rule());
        counters.to_string()
    }
}

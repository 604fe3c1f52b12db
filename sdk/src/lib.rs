//! # kvlint-sdk
//!
//! Assemble agent prompts that keep their cached prefix, and guard them at run time.
//!
//! Engines and APIs reuse the KV cache only for an **exact token prefix** of a prompt they
//! already processed. An agent resends its whole prompt every turn; this crate assembles each
//! turn so that it is a strict extension of the previous one, and checks that with the same
//! analysis `kvlint check` runs ([`kvlint_core`] and [`kvlint_rules`], not a copy).
//!
//! - [`Conversation`]: content in stability tiers, an append-only history, explicit compaction.
//!   Every call that changes it returns a [`Change`]: refused, applied, or deferred with its
//!   cost.
//! - [`Part`], [`Source`]: images, documents, thinking blocks, reasoning items, server tools.
//! - Answers into history as the provider returned them
//!   ([`Conversation::push_openai_response`], [`Conversation::push_responses_output`],
//!   [`Conversation::push_anthropic_response`]), and conversations other code built
//!   ([`Conversation::from_body`]).
//! - [`Tool`], [`ToolCall`], [`canonical`]: one serialization for equal content.
//! - Output adapters: [`Conversation::to_openai_chat`], [`Conversation::to_openai_responses`],
//!   [`Conversation::to_anthropic`] (with `cache_control` breakpoints) and
//!   [`Conversation::render`] (text and tokens through a chat template, for self-hosted engines).
//! - [`PrefixFingerprint`]: a hash chain over the prefix and a routing key, sent as OpenAI's
//!   `prompt_cache_key` and in the [`ROUTING_KEY_HEADER`] and [`SGLANG_ROUTING_KEY_HEADER`]
//!   headers.
//! - [`Guard`]: `kvlint check` on each pair of turns as they are sent, with counters to export
//!   (the `guard` feature, on by default).
//!
//! ## Stable prompts in six rules
//!
//! Each rule is what this crate does for you, and the kvlint rule that catches its violation
//! in a recorded session (`kvlint rule NAME` explains each).
//!
//! 1. **Volatile content goes last, in the newest message.** Times, request ids, counters and
//!    budgets change every turn; anywhere before the end they invalidate everything after
//!    them. Use [`Conversation::add_turn_context`]. Caught by `volatile-timestamp` (KV101),
//!    `volatile-id` (KV102), `volatile-counter` (KV103).
//! 2. **Tools are fixed and ordered.** Send the same tools, sorted by name, for the whole
//!    session; a tool change is a compaction. [`Conversation::add_tool`] sorts, and holds a
//!    mid-session change for [`Conversation::compact`]. Caught by `tool-order` (KV201) and
//!    `tool-set-change` (KV202).
//! 3. **JSON is serialized once.** Schemas canonical, tool-call arguments frozen when the
//!    call is appended, never re-serialized with other spacing or key order. [`Tool`],
//!    [`ToolCall`], [`canonical`]. Caught by `json-reserialized` (KV203).
//! 4. **History is append-only.** Never edit, drop or truncate a sent message; compact
//!    explicitly, rarely, in large steps. [`Conversation::compact`], [`HistoryWindow`].
//!    Caught by `history-rewrite` (KV301).
//! 5. **The prefix is frozen for the session.** Instructions and session facts do not change
//!    mid-session; an update is appended, not edited in. [`Conversation::add_session`] after
//!    commit. Caught by `prefix-edit` (KV401).
//! 6. **Thinking blocks and reasoning items go back exactly as returned.** On the models
//!    that check them (Claude Fable 5.x and Mythos 5.x, Opus, Sonnet and Haiku 5.5), a
//!    thinking block sent back after `system`, a tool or an earlier message changed, or left
//!    out, moved or altered, gets the request refused with a 400; GPT-6.2 and later drop
//!    reasoning items after such an edit. [`Conversation::push_anthropic_response`] and
//!    [`Conversation::push_responses_output`] keep every block and field as returned, and
//!    rules 1 to 5 keep their prefix. The [`Guard`] reports a failing body as
//!    `thinking-prefix-check` (KV303) and, in [`GuardMode::Error`], refuses it before it is
//!    sent ([`Guard::on_anthropic_account`] says which account). On GPT-6.2 and later,
//!    [`Conversation::to_openai_responses`] sends the static blocks as the first developer
//!    message, since `instructions` come after the input and are never cached
//!    (`instructions-uncached`, KV506).
//!
//! ## Concepts
//!
//! **Tiers.** Everything you add goes into one of four tiers, and every output renders them in
//! this order, whatever order you added them in:
//!
//! | Tier | Add with | Holds | Stable for |
//! |---|---|---|---|
//! | static | [`Conversation::add_static`], [`Conversation::add_tool`] | instructions, tool schemas | every session |
//! | session | [`Conversation::add_session`] | user profile, repository facts, memory | one session |
//! | history | [`Conversation::push_user`], [`Conversation::push_assistant`], [`Conversation::push_tool_result`] | the conversation | grows, append-only |
//! | turn | [`Conversation::add_turn_context`] | time, cwd, git status, budgets, retrieved snippets | one request |
//!
//! Tools render sorted by name; static blocks in the order added; session blocks sorted by key.
//!
//! **The turn tier goes last, in the newest message**: appended as a text block to the newest
//! message when it is the user's (for Anthropic, tool results are user messages), else as a
//! user message of its own at the end. The next turn does not send it again, so a cache only
//! ever loses the turn tier itself; `kvlint check` reports that as *info* with its cost, never
//! as an error. It is cleared after the turn: when the model's answer is appended, or, once a
//! body was built with it, by the next context added or message appended.
//!
//! **Commit.** The first body you build (any `to_*` adapter, or [`Conversation::render`])
//! commits the prefix; build from [`Conversation::preview`] for a body you do not send. After
//! that, a new tool waits for the next compaction ([`Conversation::pending_changes`]), and a new
//! static block or session value does not edit the prefix: it is shown in the turn tier, then
//! frozen into the next message you append as a note (`Instructions update: …`,
//! `Session context update (memory): …`), where the providers say an instruction update goes,
//! until the next compaction folds it in. The call says so: its [`Change`] is
//! [`Effect::Deferred`] with the blocks the compaction will recompute, and in strict mode
//! ([`Conversation::strict`]) it is refused instead. Adding what is already there changes
//! nothing ([`Effect::Unchanged`]), so an application may re-add its tools and memory every
//! turn.
//!
//! **Mistakes are loud.** [`Change`] is `#[must_use]`: a call that changes the conversation
//! either did what it says or tells why not, at the call. Refused, with a
//! [`ConversationError`] that gives the reason: what the provider would reject (an empty
//! message, tool-call arguments that are not a JSON object, a tool result for a call no
//! assistant message made, an assistant message first in history), and in strict mode a change
//! to a committed tier or a volatile value in a cached tier. Reported
//! ([`Change::volatile`]): a timestamp or an id given to `add_static` or `add_session`, found by
//! the same detectors `kvlint check` names breaks with. `.into_result()?` turns a refusal into
//! your error; calls still chain through a `Change`.
//!
//! ```
//! use kvlint_sdk::{Conversation, ConversationError};
//!
//! let mut conversation = Conversation::new();
//! let change = conversation.add_static("You are an agent. Today is 2025-03-04.");
//! assert_eq!(change.volatile()[0].rule, "volatile-timestamp");
//! assert_eq!(conversation.push_user("").into_result(), Err(ConversationError::Empty { role: "user" }));
//! ```
//!
//! **History is append-only.** A message is frozen when appended: its text is normalized
//! (NFC) once, tool-call arguments are serialized once ([`ToolCall`]), and bodies are a pure
//! function of that frozen content. The only way to drop messages is
//! [`Conversation::compact`], which returns a [`CacheBreak`] saying what is lost; a
//! [`HistoryWindow`] compacts in large steps, not one message per turn.
//!
//! ## A loop, end to end
//!
//! ```
//! use kvlint_sdk::{Conversation, ConversationError, Guard, GuardMode, HistoryWindow, Renderer, Tool};
//! use serde_json::{Value, json};
//!
//! # fn model(_body: &Value, turn: usize) -> Value {
//! #     if turn == 0 {
//! #         json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
//! #             {"id": "call_1", "type": "function", "function": {"name": "run_tests", "arguments": "{}"}}]}}]})
//! #     } else {
//! #         json!({"choices": [{"message": {"role": "assistant", "content": "Fixed."}}]})
//! #     }
//! # }
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut conversation = Conversation::new();
//! // Any order: bodies render tools and static, then session, then history, then the turn tier.
//! conversation.add_session("memory", "The user prefers small commits.").into_result()?;
//! let tool = Tool::new("run_tests", "Run the tests.", json!({"type": "object"}));
//! conversation.add_tool(tool).into_result()?;
//! conversation.add_static("You are a coding agent.").into_result()?;
//! conversation.push_user("Fix the failing test.").into_result()?;
//!
//! let mut guard = Guard::new(Renderer::provider(), GuardMode::Error);
//! let window = HistoryWindow::new(64, 16);
//! for turn in 0..2 {
//!     conversation.add_turn_context(format!("Current time: 2025-03-04T10:22:{:02}Z", 31 + turn));
//!     let body = conversation.to_openai_chat("gpt-4.1");
//!     let observed = guard.observe(&body)?; // refuses a request that breaks the cache
//!     assert!(observed.is_clean()); // the previous turn's clock is a cost, not a break
//!     let answer = model(&body, turn); // … send `body` …
//!     conversation.push_openai_response(&answer).into_result()?;
//!     if let Some(call) = conversation.history().last().and_then(|m| m.tool_calls().first()) {
//!         let id = call.id().to_owned();
//!         conversation.push_tool_result(id, "1 failed").into_result()?;
//!     }
//!     if conversation.enforce_window(&window).is_some() {
//!         guard.expect_break();
//!     }
//! }
//! assert_eq!(guard.counters().recomputed_tokens, 0);
//! # Ok(())
//! # }
//! ```
//!
//! ## Conversation
//!
//! [`Conversation`] holds the tiers and the history. Two conversations built from the same
//! content in different orders give the same bodies:
//!
//! ```
//! use kvlint_sdk::{Conversation, Tool};
//! use serde_json::json;
//!
//! let read = Tool::new("read", "Read a file.", json!({"type": "object"}));
//! let write = Tool::new("write", "Write a file.", json!({"type": "object"}));
//! let mut a = Conversation::new();
//! a.add_tool(write.clone()).add_session("b", "2").add_static("Be terse.").add_session("a", "1");
//! a.add_tool(read.clone()).push_user("hi");
//! let mut b = Conversation::new();
//! b.push_user("hi").add_session("a", "1").add_tool(read).add_static("Be terse.");
//! b.add_session("b", "2").add_tool(write);
//! assert_eq!(a.to_anthropic("claude-sonnet-4-5"), b.to_anthropic("claude-sonnet-4-5"));
//! ```
//!
//! ## Tools and canonical JSON
//!
//! [`Tool::new`] (or [`Tool::from_definition`], which reads any of the three APIs' shapes)
//! canonicalizes the schema: object keys sorted recursively, `required` sorted, arrays whose
//! order carries meaning (`enum`, `oneOf`, `anyOf`, `allOf`, `prefixItems`, `examples`,
//! tuple `items`) kept, text in NFC. See [`canonical`]. Fields beside the name, description
//! and schema (OpenAI's `"strict": true`) are kept and sent after the schema in key order
//! ([`Tool::with_extra_field`]).
//!
//! ```
//! use kvlint_sdk::Tool;
//! use serde_json::json;
//!
//! let openai = json!({"type": "function", "function": {"name": "search", "description": "Search.",
//!     "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}});
//! let anthropic = json!({"name": "search", "description": "Search.",
//!     "input_schema": {"required": ["q"], "properties": {"q": {"type": "string"}}, "type": "object"}});
//! assert_eq!(Tool::from_definition(&openai).unwrap(), Tool::from_definition(&anthropic).unwrap());
//! ```
//!
//! ## History and compaction
//!
//! [`Conversation::compact`] drops all but the last messages (moving the cut to a user
//! message so that no tool result loses its call), applies the tier changes that were waiting,
//! and returns a [`CacheBreak`]. [`Conversation::enforce_window`] compacts only when history
//! outgrows a [`HistoryWindow`], and then by a large step. Tell the guard with
//! [`Guard::expect_break`]. [`Conversation::compact_with_summary`] folds a summary of what is
//! dropped into the prefix in the same break (the session block [`SUMMARY_SESSION_KEY`]):
//! the one prefix change after the first request that strict mode allows.
//!
//! ```
//! use kvlint_sdk::{Conversation, HistoryWindow};
//!
//! let mut conversation = Conversation::new();
//! conversation.add_static("Be terse.");
//! let window = HistoryWindow::new(8, 2);
//! let mut compactions = 0;
//! for turn in 0..10 {
//!     conversation.push_user(format!("question {turn}")).push_assistant(format!("answer {turn}"), []);
//!     if let Some(cache_break) = conversation.enforce_window(&window) {
//!         assert_eq!(cache_break.reused_blocks, 1); // the static block is still cached
//!         compactions += 1;
//!     }
//! }
//! assert_eq!(compactions, 2); // 20 messages, cut from 10 to 2 twice: not once per turn
//! ```
//!
//! ## Checkpoint and resume
//!
//! A [`Conversation`] saves and restores with serde, all of it (tiers, history, changes waiting
//! for compaction, whether the prefix is committed): a loop that stops between turns and
//! resumes from the saved JSON sends the same bytes as one that never stopped. A restored
//! [`Tool`] is canonical again; a [`ToolCall`] keeps its arguments' bytes.
//!
//! ```
//! use kvlint_sdk::Conversation;
//!
//! let mut conversation = Conversation::new();
//! conversation.add_static("Be terse.").push_user("hi");
//! let sent = conversation.to_openai_chat("gpt-4.1");
//! let saved = serde_json::to_string(&conversation).unwrap();
//! let mut resumed: Conversation = serde_json::from_str(&saved).unwrap();
//! assert!(resumed.is_committed());
//! conversation.push_user("again");
//! resumed.push_user("again");
//! assert_eq!(resumed.to_openai_chat("gpt-4.1"), conversation.to_openai_chat("gpt-4.1"));
//! # let _ = sent;
//! ```
//!
//! ## Content: images, documents, reasoning
//!
//! A message is a list of [`Part`]s. Text, images and documents ([`Source`]: a URL, base64
//! bytes, or a file id) render in each API's shape (`image_url` and `file` parts for Chat
//! Completions, `input_image` and `input_file` for Responses, `image` and `document` blocks
//! for Anthropic). The provider's own content is kept as returned and sent back only to that
//! provider: Anthropic `thinking` and `redacted_thinking` blocks with their signatures (first in
//! their message, as the API requires, and never carrying a breakpoint), Anthropic server tool
//! blocks, Responses reasoning items with their encrypted content.
//!
//! ## Answers into history, conversations in
//!
//! Push the provider's answer as it came back: [`Conversation::push_openai_response`] (tool
//! call arguments kept byte for byte), [`Conversation::push_responses_output`] and
//! [`Conversation::push_anthropic_response`] (the output items, or content blocks, sent back
//! to that API exactly as returned, ids and signatures included; the other APIs get the text
//! and calls). [`Conversation::from_body`] reads a body another framework built, in any of the
//! three formats, and continues from it.
//!
//! ```
//! use kvlint_sdk::Conversation;
//! use serde_json::json;
//!
//! let mut conversation = Conversation::new();
//! conversation.push_user("Read main.rs").into_result().unwrap();
//! let answer = json!({"content": [
//!     {"type": "thinking", "thinking": "Read it.", "signature": "EqQBCgIYAh"},
//!     {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "main.rs"}}]});
//! conversation.push_anthropic_response(&answer).into_result().unwrap();
//! conversation.push_tool_result("toolu_1", "fn main() {}").into_result().unwrap();
//! let body = conversation.to_anthropic("claude-sonnet-4-5");
//! assert_eq!(body["messages"][1]["content"][0], answer["content"][0]);
//! ```
//!
//! ## Output adapters
//!
//! The three body adapters return a `serde_json::Value` to send as is. Anthropic bodies carry
//! `cache_control` on the last static block (the last tool when there is no static text) and
//! on the newest message's last block before the turn tier, plus one where the previous turn
//! had its own when the newest turn appended 20 blocks or more (Anthropic's lookback); never
//! more than 4. They carry `max_tokens` = [`ANTHROPIC_DEFAULT_MAX_TOKENS`]; overwrite it as
//! needed.
//!
//! For self-hosted engines, [`Conversation::render`] renders the turn with kvlint's renderer:
//! [`Renderer::Engine`] parses the request as the engine does ([`EngineRequest`]: vLLM's
//! parsing with [`VllmServer`]), runs the model's chat template ([`ChatTemplate`]) as
//! transformers does and tokenizes like the engine; the result is what the engine prefills,
//! and what `kvlint check --chat-template` diffs.
//!
//! ```
//! use kvlint_sdk::{ChatTemplate, Conversation, EngineRequest, Renderer, Tokenizer, VllmServer};
//!
//! let path = std::env::temp_dir().join(format!("kvlint-sdk-doc-{}.jinja", std::process::id()));
//! std::fs::write(&path, "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>\n{% endfor %}").unwrap();
//! let now = chrono::NaiveDate::from_ymd_opt(2025, 3, 4).unwrap().and_hms_opt(0, 0, 0).unwrap();
//! let template = ChatTemplate::from_file(&path, now).unwrap();
//! let renderer = Renderer::Engine {
//!     request: EngineRequest::Vllm(Box::new(VllmServer::for_template(&template))),
//!     template: Box::new(template),
//!     tokenizer: Tokenizer::o200k_base(),
//!     add_generation_prompt: false,
//! };
//! let mut conversation = Conversation::new();
//! conversation.add_static("Be terse.").push_user("hi");
//! let rendered = conversation.render(&renderer).unwrap();
//! assert_eq!(rendered.text, "<|system|>Be terse.<|end|>\n<|user|>hi<|end|>\n");
//! assert!(rendered.tokens.len() > 5);
//! # std::fs::remove_file(&path).ok();
//! ```
//!
//! ## Prefix identity and routing
//!
//! [`Conversation::fingerprint`] chains a blake3 hash over each block of the prefix (tools,
//! static, session, history; not the turn tier), so a router can match partial prefixes by
//! comparing hashes from the start. Its `key` ([`Conversation::routing_key`]) is the chain
//! after the tools and the static tier: what every compaction keeps, so the session stays on
//! the replica that holds it across compactions (sessions of one application share it and
//! meet on one replica, where their common prefix is cached). It is sent:
//!
//! - as `prompt_cache_key` in both OpenAI bodies;
//! - in the header `x-kvlint-routing-key` ([`ROUTING_KEY_HEADER`]): configure a gateway's
//!   sticky (consistent-hash) routing on it;
//! - in the header `X-SMG-Routing-Key` ([`SGLANG_ROUTING_KEY_HEADER`]), read by the SGLang
//!   Model Gateway's `consistent_hashing` policy.
//!
//! ```
//! use kvlint_sdk::{Conversation, ROUTING_KEY_HEADER};
//!
//! let mut conversation = Conversation::new();
//! conversation.add_static("Be terse.").push_user("hi");
//! let headers = conversation.routing_headers();
//! assert_eq!(headers[0], (ROUTING_KEY_HEADER, conversation.routing_key()));
//! assert_eq!(headers[1].0, "X-SMG-Routing-Key");
//! ```
//!
//! ## Runtime guard
//!
//! [`Guard::observe`] takes each request body of a session (built by this crate or not) and
//! returns the diagnostics `kvlint check` reports for the same pair of turns: it parses the
//! body with [`kvlint_core::request::Request`], renders it with the [`Renderer`] you give, and
//! runs [`kvlint_rules::check_pair`], the same step `kvlint check` runs on every pair. [`GuardMode::Warn`] returns the findings;
//! [`GuardMode::Error`] refuses a request that recomputes cached content
//! ([`GuardError::Breaks`]). Each turn's [`Observation`] reads as the list of findings and says
//! [`Observation::is_clean`] (no error, no warning), [`Observation::errors`] and
//! [`Observation::costs`]: the previous turn's per-turn tail, dropped by design, with its
//! tokens. [`Guard::counters`] sums tokens reused, recomputed and dropped, and breaks by rule,
//! for your metrics.
//!
//! ```
//! use kvlint_sdk::{Guard, GuardError, GuardMode, Renderer};
//! use serde_json::json;
//!
//! let mut guard = Guard::new(Renderer::provider(), GuardMode::Error);
//! let turn = |id: &str| json!({"messages": [
//!     {"role": "system", "content": format!("Request {id}. You are terse.")},
//!     {"role": "user", "content": "hi"}]});
//! guard.observe(&turn("7f3a9c2e41d04b8a")).unwrap();
//! let Err(GuardError::Breaks { diagnostics, .. }) = guard.observe(&turn("0b91d5e6c3a24f17")) else {
//!     panic!("a request id in the system prompt must be refused");
//! };
//! assert_eq!(diagnostics[0].rule, "volatile-id");
//! assert_eq!(guard.counters().refused_turns, 1);
//! ```
//!
//! A client that sends the requests of many sessions (a service, an HTTP client shared by
//! agents) keeps one guard per session with [`GuardSessions`]: the session key each body
//! carries picks its guard, a body that opens a conversation starts its session over unless a
//! break was announced, a client's retry of a refused body is refused again and of an accepted
//! one is not observed twice, and [`SessionLimits`] bounds the sessions and bodies it keeps, so
//! that a long-running service's memory stays flat. It is generic over [`SessionGuard`], which
//! [`Guard`] implements; the Python package's guarded clients run on it.
//!
//! ## Feature flags
//!
//! - `guard` (default): [`Guard`], [`Conversation::render`] and the volatile-value scan of the
//!   static and session tiers: the analysis `kvlint check` runs (`kvlint-core`, `kvlint-rules`:
//!   tokenizers, minijinja, regex, rayon): 108 crates in the build, this one and proc macros
//!   included (`cargo tree -p kvlint-sdk -e normal`); recordings and their decompression
//!   (`kvlint-recordings`) are not among them.
//! - without it (`default-features = false`): prompt assembly, the three adapters, imports,
//!   responses, fingerprints and routing keys, with `serde`, `serde_json`, `blake3`,
//!   `unicode-normalization`, `thiserror`, `miette` and `kvlint-protocol`: 30 crates. Tiers are
//!   not scanned for volatile values ([`Change::volatile`] is empty).
//!
//! The crate does no I/O and makes no network calls.
//!
//! ## Not covered
//!
//! Per-API options (`tool_choice`, `response_format`, temperature) are not modelled: add them
//! to the returned body, and keep them the same every turn. Audio parts are refused.

mod adapters;
pub mod canonical;
mod change;
mod content;
mod conversation;
mod error;
mod fingerprint;
#[cfg(feature = "guard")]
mod guard;
mod import;
#[cfg(feature = "guard")]
mod render;
mod sessions;
mod tool;
#[cfg(feature = "guard")]
mod usage;

pub use adapters::ANTHROPIC_DEFAULT_MAX_TOKENS;
pub use change::{Change, ChangeReport, Effect, VolatileValue};
pub use content::{Part, Source};
pub use conversation::{
    CacheBreak, Conversation, HistoryWindow, Message, PrefixChange, Role, SUMMARY_SESSION_KEY,
};
pub use error::ConversationError;
pub use fingerprint::{PrefixFingerprint, ROUTING_KEY_HEADER, SGLANG_ROUTING_KEY_HEADER};
#[cfg(feature = "guard")]
pub use guard::{Guard, GuardCounters, GuardError, GuardMode, Observation};
#[cfg(feature = "guard")]
pub use kvlint_rules::thinking::Account as AnthropicAccount;
#[cfg(feature = "guard")]
pub use render::RenderError;
pub use sessions::{GuardSessions, Observed, ObservedBody, Placed, SessionGuard, SessionLimits};
pub use tool::{Tool, ToolCall, ToolDefinitionError};
#[cfg(feature = "guard")]
pub use usage::{
    OTEL_CACHE_CREATION_INPUT_TOKENS, OTEL_CACHE_READ_INPUT_TOKENS, OTEL_INPUT_TOKENS,
    ReportedUsage,
};

// What users of the SDK need from the analysis, so that depending on `kvlint-sdk` alone is
// enough: the renderer and what it is built from, and the findings.
#[cfg(feature = "guard")]
pub use kvlint_core::{
    ChatTemplate, Diagnostic, EngineRequest, InputError, PartPath, RenderedRequest, Renderer,
    Severity, Span, Tokenizer, VllmServer,
};

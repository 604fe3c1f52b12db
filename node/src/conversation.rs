//! The npm package's `Conversation`: [`kvlint_sdk::Conversation`] behind JSON text.

#[cfg(not(wasm))]
use napi_derive::napi;
use serde_json::Value;
#[cfg(wasm)]
use wasm_bindgen::prelude::wasm_bindgen;

use kvlint_sdk::{Part, Tool, ToolCall};

use crate::{Failure, answer, compacted, parse, parts, pushed, tier_change, to_value, tool_call};

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

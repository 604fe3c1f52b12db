//! Output adapters: the conversation as an API request body, or as the text and tokens a
//! self-hosted engine prefills.
//!
//! Every adapter renders the tiers in the same order: tools, static, session, history, and
//! the turn tier last, in the newest message: appended as a text block when the newest
//! message is the user's (for Anthropic, tool results are user messages too), else as a user
//! message of its own at the end. Bodies are a pure function of the conversation's frozen
//! content: building the same turn twice gives the same bytes.

use kvlint_protocol::ANTHROPIC_LOOKBACK_BLOCKS;
use serde_json::{Map, Value, json};

use crate::content::{Api, Part};
use crate::conversation::{Conversation, Message, Role};

/// `max_tokens` of an Anthropic body (the API requires one); set `body["max_tokens"]` to change it.
pub const ANTHROPIC_DEFAULT_MAX_TOKENS: u64 = 4096;

/// Between the static (or session) blocks joined into one system message.
const BLOCK_SEPARATOR: &str = "\n\n";

impl Conversation {
    /// An OpenAI Chat Completions body: `model`, `messages` (static blocks as one system
    /// message, session blocks as a second, then history), `tools`, and the routing key as
    /// `prompt_cache_key`.
    ///
    /// ```
    /// use kvlint_sdk::Conversation;
    ///
    /// let mut conversation = Conversation::new();
    /// conversation.add_turn_context("Time: 10:00:01").push_user("hi").add_static("Be terse.");
    /// let body = conversation.to_openai_chat("gpt-4.1");
    /// assert_eq!(body["messages"][0], serde_json::json!({"role": "system", "content": "Be terse."}));
    /// // The turn tier is the last block of the newest user message.
    /// assert_eq!(body["messages"][1]["content"][1]["text"], "Time: 10:00:01");
    /// assert_eq!(body["prompt_cache_key"], conversation.routing_key().as_str());
    /// ```
    pub fn to_openai_chat(&self, model: &str) -> Value {
        self.commit();
        let mut body = self.chat_body();
        body.insert("prompt_cache_key".into(), Value::String(self.routing_key()));
        with_model(model, body)
    }

    /// An OpenAI Responses body: `model`, `instructions` (the static blocks), `input` (the
    /// session blocks as a developer message, then history as items), `tools`, and
    /// `prompt_cache_key`. From GPT-6.2 on, whose API appends `instructions` after `input`
    /// where they are never cached, the static blocks lead `input` as a developer message
    /// instead ([`kvlint_protocol::openai::instructions_after_input`]).
    pub fn to_openai_responses(&self, model: &str) -> Value {
        self.commit();
        let mut body = Map::new();
        let mut input = Vec::new();
        if let Some(instructions) = joined(self.static_blocks.iter()) {
            if kvlint_protocol::openai::instructions_after_input(model) {
                input.push(json!({"role": "developer", "content": instructions}));
            } else {
                body.insert("instructions".into(), Value::String(instructions));
            }
        }
        if let Some(session) = joined(self.session_blocks.values()) {
            input.push(json!({"role": "developer", "content": session}));
        }
        for message in &self.history {
            responses_items(message, &mut input);
        }
        if let Some(tier) = self.turn_tier() {
            append_tier(&mut input, tier, "input_text");
        }
        body.insert("input".into(), Value::Array(input));
        if !self.tools.is_empty() {
            let tools = self.tools.values().map(|tool| tool.openai_responses());
            body.insert("tools".into(), Value::Array(tools.collect()));
        }
        body.insert("prompt_cache_key".into(), Value::String(self.routing_key()));
        with_model(model, body)
    }

    /// An Anthropic Messages body: `model`, `max_tokens`, `system` (static then session text
    /// blocks), `tools`, `messages`, with `cache_control` breakpoints on the last static block
    /// (the last tool when there is no static text) and on the last block of the newest
    /// message before the turn tier. When the newest turn appended 20 blocks or more, one more
    /// sits where the previous turn's last breakpoint was, so that Anthropic's 20-block
    /// lookback still finds it. Never more than 4.
    ///
    /// Consecutive user and tool-result messages are one Anthropic user message, tool results
    /// first.
    ///
    /// ```
    /// use kvlint_sdk::Conversation;
    ///
    /// let mut conversation = Conversation::new();
    /// conversation.add_static("Be terse.").push_user("hi").add_turn_context("Time: 10:00:01");
    /// let body = conversation.to_anthropic("claude-sonnet-4-5");
    /// assert!(body["system"][0]["cache_control"].is_object());
    /// let newest = &body["messages"][0]["content"];
    /// assert!(newest[0]["cache_control"].is_object()); // "hi": kept by the next turn
    /// assert_eq!(newest[1]["text"], "Time: 10:00:01"); // the turn tier, after the breakpoint
    /// ```
    pub fn to_anthropic(&self, model: &str) -> Value {
        self.commit();
        let mut tools: Vec<Value> = self.tools.values().map(|tool| tool.anthropic()).collect();
        let mut system: Vec<Value> = self
            .static_blocks
            .iter()
            .chain(self.session_blocks.values())
            .map(|text| json!({"type": "text", "text": text}))
            .collect();
        let static_end = self.static_blocks.len().checked_sub(1);
        if let Some(last_static) = static_end.and_then(|index| system.get_mut(index)) {
            mark_breakpoint(last_static);
        } else if let Some(last_tool) = tools.last_mut() {
            mark_breakpoint(last_tool);
        }
        let mut messages = anthropic_messages(&self.history);
        let blocks_before_messages = tools.len() + system.len();
        mark_history_breakpoints(&mut messages, blocks_before_messages);
        if let Some(tier) = self.turn_tier() {
            append_tier(&mut messages, tier, "text");
        }
        let mut body = Map::new();
        body.insert("max_tokens".into(), json!(ANTHROPIC_DEFAULT_MAX_TOKENS));
        if !system.is_empty() {
            body.insert("system".into(), Value::Array(system));
        }
        if !tools.is_empty() {
            body.insert("tools".into(), Value::Array(tools));
        }
        body.insert("messages".into(), Value::Array(messages));
        with_model(model, body)
    }

    /// `messages` and `tools` in Chat Completions form.
    pub(crate) fn chat_body(&self) -> Map<String, Value> {
        let mut messages = Vec::new();
        if let Some(instructions) = joined(self.static_blocks.iter()) {
            messages.push(json!({"role": "system", "content": instructions}));
        }
        if let Some(session) = joined(self.session_blocks.values()) {
            messages.push(json!({"role": "system", "content": session}));
        }
        messages.extend(self.history.iter().map(chat_message));
        if let Some(tier) = self.turn_tier() {
            append_tier(&mut messages, tier, "text");
        }
        let mut body = Map::new();
        body.insert("messages".into(), Value::Array(messages));
        if !self.tools.is_empty() {
            let tools = self.tools.values().map(|tool| tool.openai_chat());
            body.insert("tools".into(), Value::Array(tools.collect()));
        }
        body
    }
}

fn with_model(model: &str, fields: Map<String, Value>) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), Value::String(model.to_owned()));
    body.extend(fields);
    Value::Object(body)
}

fn joined<'a>(blocks: impl Iterator<Item = &'a String>) -> Option<String> {
    let blocks: Vec<&str> = blocks.map(String::as_str).collect();
    (!blocks.is_empty()).then(|| blocks.join(BLOCK_SEPARATOR))
}

/// A message's content in `api`'s shape: its parts, then its notes as text blocks. A single
/// text part with no notes is a plain string, as most clients send it.
fn content(message: &Message, api: Api) -> Value {
    let assistant = message.role() == Role::Assistant;
    // Each part's block built once (an image's base64 data is not copied more than that).
    let sent: Vec<(&Part, Value)> = message
        .parts()
        .iter()
        .filter_map(|part| Some((part, part.block(api, assistant)?)))
        .collect();
    if let ([(Part::Text { text }, _)], []) = (sent.as_slice(), message.notes()) {
        return Value::String(text.clone());
    }
    let notes = message
        .notes()
        .iter()
        .filter_map(|note| Part::text(note).block(api, assistant));
    Value::Array(
        sent.into_iter()
            .map(|(_, block)| block)
            .chain(notes)
            .collect(),
    )
}

fn chat_message(message: &Message) -> Value {
    match message.role() {
        Role::User => json!({"role": "user", "content": content(message, Api::OpenAiChat)}),
        Role::Tool => json!({
            "role": "tool",
            "tool_call_id": message.tool_call_id().unwrap_or_default(),
            "content": content(message, Api::OpenAiChat),
        }),
        Role::Assistant => {
            let calls = message.tool_calls();
            let mut content = content(message, Api::OpenAiChat);
            if content.as_array().is_some_and(Vec::is_empty) {
                // Only reasoning, which Chat Completions does not take back.
                content = if calls.is_empty() {
                    Value::String(String::new())
                } else {
                    Value::Null
                };
            }
            let mut fields = Map::new();
            fields.insert("role".into(), Value::String("assistant".into()));
            fields.insert("content".into(), content);
            if !calls.is_empty() {
                let calls = calls.iter().map(|call| {
                    json!({
                        "id": call.id(),
                        "type": "function",
                        "function": {"name": call.name(), "arguments": call.arguments()},
                    })
                });
                fields.insert("tool_calls".into(), Value::Array(calls.collect()));
            }
            Value::Object(fields)
        }
    }
}

fn responses_items(message: &Message, items: &mut Vec<Value>) {
    if let Some(returned) = message.returned_by(Api::OpenAiResponses) {
        items.extend(returned.iter().cloned());
        return;
    }
    match message.role() {
        Role::User => {
            items.push(json!({"role": "user", "content": content(message, Api::OpenAiResponses)}))
        }
        Role::Tool => items.push(json!({
            "type": "function_call_output",
            "call_id": message.tool_call_id().unwrap_or_default(),
            "output": content(message, Api::OpenAiResponses),
        })),
        Role::Assistant => {
            // Items in the order the model returned them: reasoning, then each run of text as
            // one assistant message, then the calls. An assistant message is an output item:
            // `"type": "message"` with `output_text` parts, as the API returns it; llama-server
            // takes nothing else (`server-common.cpp`, `convert_responses_to_chatcmpl`: a
            // string content becomes `input_text`, refused for the assistant with 400).
            let mut texts: Vec<&str> = Vec::new();
            let flush = |texts: &mut Vec<&str>, items: &mut Vec<Value>| {
                if texts.is_empty() {
                    return;
                }
                let content: Vec<Value> = std::mem::take(texts)
                    .into_iter()
                    .filter_map(|text| Part::text(text).block(Api::OpenAiResponses, true))
                    .collect();
                items.push(json!({"type": "message", "role": "assistant", "content": content}));
            };
            for part in message.parts() {
                match part {
                    Part::Text { text } => texts.push(text),
                    Part::ResponsesItem { item } => {
                        flush(&mut texts, items);
                        items.push(item.clone());
                    }
                    _ => {}
                }
            }
            flush(&mut texts, items);
            items.extend(message.tool_calls().iter().map(|call| {
                json!({
                    "type": "function_call",
                    "call_id": call.id(),
                    "name": call.name(),
                    "arguments": call.arguments(),
                })
            }));
        }
    }
}

/// Puts the turn tier last: a text block appended to the newest message when it is a user
/// message, else a user message of its own.
fn append_tier(messages: &mut Vec<Value>, tier: String, block_type: &str) {
    let newest_is_user = messages
        .last()
        .is_some_and(|message| message.get("role").and_then(Value::as_str) == Some("user"));
    let tier_block = json!({"type": block_type, "text": tier});
    let newest_content = messages
        .last_mut()
        .filter(|_| newest_is_user)
        .and_then(|message| message.get_mut("content"));
    match newest_content {
        Some(Value::Array(blocks)) => blocks.push(tier_block),
        Some(content) => {
            let text = content.take();
            *content = json!([{"type": block_type, "text": text}, tier_block]);
        }
        None => messages.push(json!({"role": "user", "content": tier})),
    }
}

/// Anthropic messages: each assistant message on its own, consecutive user and tool-result
/// messages as one user message with the tool results first (the API requires them first).
fn anthropic_messages(history: &[Message]) -> Vec<Value> {
    let mut messages = Vec::new();
    let mut results: Vec<Value> = Vec::new();
    let mut blocks: Vec<Value> = Vec::new();
    let close_user_group =
        |messages: &mut Vec<Value>, results: &mut Vec<Value>, blocks: &mut Vec<Value>| {
            if results.is_empty() && blocks.is_empty() {
                return;
            }
            let mut content = std::mem::take(results);
            content.append(blocks);
            messages.push(json!({"role": "user", "content": content}));
        };
    for message in history {
        let notes = message
            .notes()
            .iter()
            .map(|note| json!({"type": "text", "text": note}));
        match message.role() {
            Role::User => {
                let parts = message.parts().iter();
                blocks.extend(parts.filter_map(|part| part.block(Api::Anthropic, false)));
                blocks.extend(notes);
            }
            Role::Tool => {
                let output = match message.parts() {
                    [Part::Text { text }] => Value::String(text.clone()),
                    parts => Value::Array(
                        parts
                            .iter()
                            .filter_map(|part| part.block(Api::Anthropic, false))
                            .collect(),
                    ),
                };
                results.push(json!({
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id().unwrap_or_default(),
                    "content": output,
                }));
                blocks.extend(notes);
            }
            Role::Assistant => {
                close_user_group(&mut messages, &mut results, &mut blocks);
                let content: Vec<Value> = match message.returned_by(Api::Anthropic) {
                    Some(returned) => returned.to_vec(),
                    None => {
                        let parts = message.parts().iter();
                        let calls = message.tool_calls().iter().map(|call| {
                            json!({"type": "tool_use", "id": call.id(), "name": call.name(), "input": call.input()})
                        });
                        parts
                            .filter_map(|part| part.block(Api::Anthropic, true))
                            .chain(calls)
                            .collect()
                    }
                };
                messages.push(json!({"role": "assistant", "content": content}));
            }
        }
    }
    close_user_group(&mut messages, &mut results, &mut blocks);
    messages
}

/// The history breakpoint on the newest message's last block and, when the newest turn
/// appended at least the lookback's 20 blocks, one where the previous turn had its own
/// (the last block before the newest assistant message).
fn mark_history_breakpoints(messages: &mut [Value], blocks_before_messages: usize) {
    let block_counts: Vec<usize> = messages.iter().map(content_blocks).collect();
    let last_block_of = |message: usize| -> usize {
        blocks_before_messages + block_counts[..=message].iter().sum::<usize>()
    };
    let Some(newest) = messages.len().checked_sub(1) else {
        return;
    };
    let newest_assistant = messages
        .iter()
        .rposition(|message| message.get("role").and_then(Value::as_str) == Some("assistant"));
    if let Some(previous_turn_end) = newest_assistant.and_then(|index| index.checked_sub(1))
        && last_block_of(newest) - last_block_of(previous_turn_end) >= ANTHROPIC_LOOKBACK_BLOCKS
        && let Some(message) = messages.get_mut(previous_turn_end)
    {
        mark_last_block(message);
    }
    if let Some(message) = messages.get_mut(newest) {
        mark_last_block(message);
    }
}

fn content_blocks(message: &Value) -> usize {
    message
        .get("content")
        .and_then(Value::as_array)
        .map_or(1, Vec::len)
}

/// Marks the message's last block that can carry a breakpoint (thinking blocks cannot).
fn mark_last_block(message: &mut Value) {
    let thinking = |block: &Value| {
        matches!(
            block.get("type").and_then(Value::as_str),
            Some("thinking" | "redacted_thinking")
        )
    };
    if let Some(block) = message
        .get_mut("content")
        .and_then(Value::as_array_mut)
        .and_then(|blocks| blocks.iter_mut().rev().find(|block| !thinking(block)))
    {
        mark_breakpoint(block);
    }
}

fn mark_breakpoint(block: &mut Value) {
    if let Some(block) = block.as_object_mut() {
        block.insert("cache_control".into(), json!({"type": "ephemeral"}));
    }
}

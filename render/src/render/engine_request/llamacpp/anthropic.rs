//! llama-server's `/v1/messages`: an Anthropic Messages body converted to a chat completion
//! body before the chat parsing (`tools/server/server-common.cpp`, `convert_anthropic_to_oai`).
//!
//! The system prompt becomes a system message (its text blocks concatenated); a message's
//! text blocks stay text parts, images become `image_url` parts, `tool_use` blocks become
//! tool calls (the input dumped as the arguments string), each `tool_result` a tool message
//! after it (its text blocks concatenated); other blocks (thinking, documents) are dropped,
//! and an assistant message without content is skipped. Tools become function tools.

use serde_json::{Map, Value, json};

/// The chat messages and tools llama-server makes of an Anthropic Messages body.
pub(super) fn chat_body(body: &Map<String, Value>) -> (Vec<Value>, Option<Vec<Value>>) {
    let mut messages = Vec::new();
    match body.get("system") {
        None | Some(Value::Null) => {}
        Some(system) => messages.push(json!({"role": "system", "content": text_of(system)})),
    }
    for message in body
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let role = message
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(Value::Array(blocks)) = message.get("content") else {
            if message.get("content").is_some() || role != "assistant" {
                messages.push(message.clone());
            }
            continue;
        };
        let mut content = Vec::new();
        let mut tool_calls = Vec::new();
        let mut tool_results = Vec::new();
        for block in blocks {
            let string = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default();
            match string("type") {
                "text" => content.push(block.clone()),
                "image" => {
                    let source = block.get("source").cloned().unwrap_or_else(|| json!({}));
                    let field =
                        |key: &str| source.get(key).and_then(Value::as_str).unwrap_or_default();
                    let url = match field("type") {
                        "base64" => {
                            let media_type = source
                                .get("media_type")
                                .and_then(Value::as_str)
                                .unwrap_or("image/jpeg");
                            Some(format!("data:{media_type};base64,{}", field("data")))
                        }
                        "url" => Some(field("url").to_owned()),
                        _ => None,
                    };
                    content.extend(
                        url.map(|url| json!({"type": "image_url", "image_url": {"url": url}})),
                    );
                }
                "tool_use" => tool_calls.push(json!({
                    "id": string("id"),
                    "type": "function",
                    "function": {
                        "name": string("name"),
                        "arguments": block.get("input").cloned().unwrap_or_else(|| json!({})).to_string(),
                    },
                })),
                "tool_result" => tool_results.push(json!({
                    "role": "tool",
                    "tool_call_id": string("tool_use_id"),
                    "content": block.get("content").map(text_of).unwrap_or_default(),
                })),
                _ => {}
            }
        }
        if !content.is_empty() || !tool_calls.is_empty() {
            let mut converted = json!({"role": role});
            converted["content"] = if content.is_empty() {
                json!("")
            } else {
                Value::Array(content)
            };
            if !tool_calls.is_empty() {
                converted["tool_calls"] = Value::Array(tool_calls);
            }
            messages.push(converted);
        }
        messages.extend(tool_results);
    }
    let tools = body.get("tools").and_then(Value::as_array).map(|tools| {
        tools
            .iter()
            .map(|tool| {
                let string = |key: &str| tool.get(key).and_then(Value::as_str).unwrap_or_default();
                json!({
                    "type": "function",
                    "function": {
                        "name": string("name"),
                        "description": string("description"),
                        "parameters": tool.get("input_schema").cloned().unwrap_or_else(|| json!({})),
                    },
                })
            })
            .collect()
    });
    (messages, tools)
}

/// A string, or the text blocks of an array concatenated (no separator).
fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|block| block.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

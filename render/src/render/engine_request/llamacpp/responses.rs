//! llama-server's `/v1/responses`: a Responses body converted to a chat completion body
//! before the chat parsing (`tools/server/server-common.cpp`, `convert_responses_to_chatcmpl`).
//!
//! `instructions` become a system message and a string `input` a user message. Of the input
//! items, messages keep their role (developer included) with their text as text parts;
//! assistant output messages, function calls and reasoning merge into the assistant message
//! before them; function call outputs become tool messages. An item llama-server cannot
//! place, a file, or a `previous_response_id` is refused. Tools become function tools.

use serde_json::{Map, Value, json};

/// The chat messages and tools llama-server makes of a Responses body, or its refusal.
pub(super) fn chat_body(
    body: &Map<String, Value>,
) -> Result<(Vec<Value>, Option<Vec<Value>>), String> {
    let Some(input) = body.get("input") else {
        return Err("'input' is required".into());
    };
    if body
        .get("previous_response_id")
        .and_then(Value::as_str)
        .is_some_and(|id| !id.is_empty())
    {
        return Err("llama.cpp does not support 'previous_response_id'.".into());
    }
    let mut messages: Vec<Value> = Vec::new();
    if let Some(instructions) = body.get("instructions") {
        let text = instructions.as_str().unwrap_or_default();
        messages.push(json!({"role": "system", "content": text}));
    }
    match input {
        Value::String(text) => messages.push(json!({"role": "user", "content": text})),
        Value::Array(items) => {
            for item in items {
                add_item(&mut messages, item.as_object().cloned().unwrap_or_default())?;
            }
        }
        _ => return Err("'input' must be a string or array of objects".into()),
    }
    let tools = match body.get("tools") {
        None => None,
        Some(Value::Array(tools)) => Some(
            tools
                .iter()
                .map(|tool| {
                    let mut function = tool.as_object().cloned().unwrap_or_default();
                    if function.get("type").and_then(Value::as_str) != Some("function") {
                        return Err("'type' of tool must be 'function'".to_owned());
                    }
                    function.remove("type");
                    function.entry("strict").or_insert(Value::Bool(true));
                    Ok(json!({"type": "function", "function": function}))
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(_) => return Err("'tools' must be an array of objects".into()),
    };
    Ok((messages, tools))
}

fn is_string(item: &Map<String, Value>, key: &str) -> bool {
    item.get(key).is_some_and(Value::is_string)
}

fn is_array(item: &Map<String, Value>, key: &str) -> bool {
    item.get(key).is_some_and(Value::is_array)
}

/// One input item, converted and appended (or merged into the assistant message before it).
fn add_item(messages: &mut Vec<Value>, mut item: Map<String, Value>) -> Result<(), String> {
    let merge_into_previous = messages
        .last()
        .is_some_and(|last| last.get("role").and_then(Value::as_str) == Some("assistant"));
    if let Some(Value::String(text)) = item.get("content") {
        let parts = json!([{"text": text, "type": "input_text"}]);
        item.insert("content".into(), parts);
    }
    let role = item.get("role").and_then(Value::as_str).unwrap_or_default();
    let kind = item.get("type").and_then(Value::as_str).unwrap_or_default();
    if is_array(&item, "content") && matches!(role, "user" | "system" | "developer") {
        let mut content = Vec::new();
        for part in item
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            match part.get("type").and_then(Value::as_str).unwrap_or_default() {
                "input_text" => {
                    let text = part.get("text").ok_or("'Input text' requires 'text'")?;
                    content.push(json!({"text": text, "type": "text"}));
                }
                "input_image" => {
                    let url = part.get("image_url").ok_or("'image_url' is required")?;
                    content.push(json!({"image_url": {"url": url}, "type": "image_url"}));
                }
                "input_file" => {
                    return Err("'input_file' is not supported by llamacpp at this moment".into());
                }
                _ => {
                    return Err(
                        "'type' must be one of 'input_text', 'input_image', or 'input_file'".into(),
                    );
                }
            }
        }
        item.remove("type");
        item.remove("status");
        item.insert("content".into(), Value::Array(content));
        messages.push(Value::Object(item));
    } else if is_array(&item, "content") && role == "assistant" && kind == "message" {
        let mut content = Vec::new();
        for part in item
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if part.get("type").and_then(Value::as_str) != Some("output_text") {
                return Err("'type' must be 'output_text'".into());
            }
            let text = part
                .get("text")
                .filter(|text| text.is_string())
                .ok_or("'Output text' requires 'text'")?;
            content.push(json!({"text": text, "type": "text"}));
        }
        match messages.last_mut().filter(|_| merge_into_previous) {
            Some(previous) => append(previous, "content", content),
            None => {
                item.remove("status");
                item.remove("type");
                item.insert("content".into(), Value::Array(content));
                messages.push(Value::Object(item));
            }
        }
    } else if ["arguments", "call_id", "name", "type"]
        .iter()
        .all(|key| is_string(&item, key))
        && kind == "function_call"
    {
        let call = json!({
            "function": {"arguments": item["arguments"], "name": item["name"]},
            "id": item["call_id"],
            "type": "function",
        });
        match messages.last_mut().filter(|_| merge_into_previous) {
            Some(previous) => append(previous, "tool_calls", vec![call]),
            None => messages.push(json!({"role": "assistant", "tool_calls": [call]})),
        }
    } else if is_string(&item, "call_id")
        && (is_string(&item, "output") || is_array(&item, "output"))
        && kind == "function_call_output"
    {
        let output = match &item["output"] {
            Value::Array(outputs) => {
                let mut converted = outputs.clone();
                for output in &mut converted {
                    if output.get("type").and_then(Value::as_str) != Some("input_text") {
                        return Err("Output of tool call should be 'Input text'".into());
                    }
                    output["type"] = json!("text");
                }
                Value::Array(converted)
            }
            text => text.clone(),
        };
        messages.push(json!({"content": output, "role": "tool", "tool_call_id": item["call_id"]}));
    } else if is_array(&item, "summary") && kind == "reasoning" {
        let Some(Value::Array(content)) = item.get("content") else {
            return Err("item['content'] is not an array".into());
        };
        let Some(first) = content.first() else {
            return Err("item['content'] is empty".into());
        };
        let Some(text) = first.get("text").filter(|text| text.is_string()) else {
            return Err("item['content']['text'] is not a string".into());
        };
        match messages.last_mut().filter(|_| merge_into_previous) {
            Some(previous) => previous["reasoning_content"] = text.clone(),
            None => messages
                .push(json!({"role": "assistant", "content": [], "reasoning_content": text})),
        }
    } else {
        return Err("Cannot determine type of 'item'".into());
    }
    Ok(())
}

/// Appends to the array `key` of the assistant message before (made an array if it is not).
fn append(previous: &mut Value, key: &str, items: Vec<Value>) {
    if !previous.get(key).is_some_and(Value::is_array) {
        previous[key] = json!([]);
    }
    if let Some(array) = previous[key].as_array_mut() {
        array.extend(items);
    }
}

//! vLLM's `/v1/messages`: an Anthropic Messages body validated as `AnthropicMessagesRequest`
//! (`vllm/entrypoints/anthropic/protocol.py`) and converted to a chat completions request by
//! `AnthropicServingMessages.to_chat_completion_request` (`vllm/entrypoints/anthropic/serving.py`),
//! which then takes vLLM's chat path:
//!
//! - the system blocks' texts concatenated into one system message, Claude Code's billing
//!   header block dropped (`_convert_system_message`); when the chat template fails on a
//!   system message after the first (`_detect_merge_inline_system`), the texts of the
//!   conversation's own system messages are merged into that leading one;
//! - each message's blocks (`_convert_message_content`, `_convert_block`): texts as parts (one
//!   text part as a string), thinking as `reasoning`, `tool_use` as a tool call with the input
//!   dumped as arguments, a user's `tool_result` as a tool message before it (its texts joined
//!   with newlines, images as a following user message); a user message left empty is dropped;
//! - tools as functions (`input_schema` as parameters, `"type": "object"` added when missing),
//!   `tool_choice` mapped (`any` is `required`), `output_config.effort` and a disabled
//!   `thinking` as `reasoning_effort`.

use serde_json::{Map, Value, json};

use super::super::{AnthropicRequest, invalid};
use super::content::BILLING_HEADER;
use crate::template::PythonJson;

/// The block types `AnthropicContentBlock` takes.
const BLOCK_TYPES: [&str; 9] = [
    "text",
    "image",
    "tool_use",
    "tool_result",
    "tool_reference",
    "thinking",
    "redacted_thinking",
    "tool_addition",
    "tool_removal",
];

/// The efforts `output_config.effort` takes (`AnthropicEffort`).
const EFFORTS: [&str; 5] = ["low", "medium", "high", "xhigh", "max"];

/// The chat completions body vLLM makes of an Anthropic Messages body, or the reason it
/// refuses it. `merges_inline_system` says whether the chat template needs system messages
/// merged into the first.
pub(super) fn to_chat_body(
    body: &Value,
    merges_inline_system: bool,
) -> Result<Map<String, Value>, String> {
    let whole = body;
    let AnthropicRequest {
        body,
        model,
        max_tokens,
        messages,
    } = AnthropicRequest::of(body, check_content)?;
    let merge = merges_inline_system;

    let mut converted: Vec<Value> = Vec::new();
    let mut system_texts: Vec<String> = match body.get("system") {
        Some(Value::String(text)) if !text.is_empty() => vec![text.clone()],
        Some(Value::Array(blocks)) => system_block_texts(blocks),
        _ => Vec::new(),
    };
    if merge {
        system_texts.extend(
            messages
                .iter()
                .filter(|message| message["role"] == "system")
                .filter_map(system_text),
        );
    }
    if !system_texts.is_empty() {
        converted.push(json!({"role": "system", "content": system_texts.concat()}));
    }
    for message in messages {
        let role = message["role"].as_str().unwrap_or_default();
        if role == "system" {
            if !merge && let Some(text) = system_text(message) {
                converted.push(json!({"role": "system", "content": text}));
            }
            continue;
        }
        let mut out = Map::new();
        out.insert("role".into(), Value::String(role.to_owned()));
        match &message["content"] {
            Value::String(text) => {
                out.insert("content".into(), Value::String(text.clone()));
            }
            Value::Array(blocks) => convert_blocks(blocks, role, &mut out, &mut converted),
            _ => {}
        }
        if role != "user" || out.contains_key("content") {
            converted.push(Value::Object(out));
        }
    }

    let mut chat = Map::new();
    chat.insert("model".into(), model.clone());
    chat.insert("messages".into(), Value::Array(converted));
    chat.insert("max_tokens".into(), max_tokens.clone());
    if let Some(kwargs) = body.get("chat_template_kwargs") {
        chat.insert("chat_template_kwargs".into(), kwargs.clone());
    }
    if let Some(effort) = whole
        .pointer("/output_config/effort")
        .filter(|effort| !effort.is_null())
    {
        if !effort
            .as_str()
            .is_some_and(|effort| EFFORTS.contains(&effort))
        {
            return Err(invalid("Input should be an effort", "output_config.effort"));
        }
        chat.insert("reasoning_effort".into(), effort.clone());
    }
    match whole.pointer("/thinking/type").and_then(Value::as_str) {
        // The effort vLLM probes for a disabled thinking: "none", unless the template renders
        // it as it renders some effort (then "low"; not modelled).
        Some("disabled") => {
            chat.insert("reasoning_effort".into(), Value::String("none".into()));
        }
        Some("enabled" | "adaptive") | None => {}
        Some(_) => {
            return Err(invalid(
                "Input tag does not match the expected tags",
                "thinking",
            ));
        }
    }
    let tool_choice = convert_tool_choice(body.get("tool_choice"))?;
    if let Some(tool_choice) = tool_choice.clone() {
        chat.insert("tool_choice".into(), tool_choice);
    }
    match body.get("tools") {
        None | Some(Value::Null) => {}
        Some(Value::Array(tools)) => {
            let functions = tools
                .iter()
                .enumerate()
                .map(|(index, tool)| convert_tool(tool, &format!("tools.{index}")))
                .collect::<Result<Vec<_>, _>>()?;
            if tool_choice.is_none() {
                chat.insert("tool_choice".into(), Value::String("auto".into()));
            }
            chat.insert("tools".into(), Value::Array(functions));
        }
        Some(_) => return Err(invalid("Input should be a valid list", "tools")),
    }
    Ok(chat)
}

/// A string, or a list of `AnthropicContentBlock`s with their fields' types.
fn check_content(content: &Value, place: &str) -> Result<(), String> {
    let blocks = match content {
        Value::String(_) => return Ok(()),
        Value::Array(blocks) => blocks,
        _ => return Err(invalid("Input should be a valid string", place)),
    };
    for (index, block) in blocks.iter().enumerate() {
        let place = format!("{place}.{index}");
        let Value::Object(block) = block else {
            return Err(invalid("Input should be a valid dictionary", &place));
        };
        if !block
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|kind| BLOCK_TYPES.contains(&kind))
        {
            return Err(invalid(
                "Input should be a block type",
                &format!("{place}.type"),
            ));
        }
        let typed = |key: &str, valid: fn(&Value) -> bool, kind: &str| match block.get(key) {
            None | Some(Value::Null) => Ok(()),
            Some(value) if valid(value) => Ok(()),
            Some(_) => Err(invalid(
                &format!("Input should be a valid {kind}"),
                &format!("{place}.{key}"),
            )),
        };
        for key in [
            "text",
            "id",
            "tool_use_id",
            "name",
            "tool_name",
            "thinking",
            "signature",
            "data",
        ] {
            typed(key, Value::is_string, "string")?;
        }
        typed("source", Value::is_object, "dictionary")?;
        typed("input", Value::is_object, "dictionary")?;
        typed(
            "content",
            |value| {
                value.is_string()
                    || value
                        .as_array()
                        .is_some_and(|items| items.iter().all(Value::is_object))
            },
            "string",
        )?;
    }
    Ok(())
}

/// The texts of system blocks, without Claude Code's billing header.
fn system_block_texts(blocks: &[Value]) -> Vec<String> {
    blocks
        .iter()
        .filter(|block| block["type"] == "text")
        .filter_map(|block| block["text"].as_str())
        .filter(|text| !text.is_empty() && !text.starts_with(BILLING_HEADER))
        .map(str::to_owned)
        .collect()
}

/// `_extract_system_text`: a system message's text, without the billing header.
fn system_text(message: &Value) -> Option<String> {
    match &message["content"] {
        Value::String(text) => (!text.starts_with(BILLING_HEADER)).then(|| text.clone()),
        Value::Array(blocks) => {
            let texts = system_block_texts(blocks);
            (!texts.is_empty()).then(|| texts.concat())
        }
        _ => None,
    }
}

/// `_convert_message_content`: a message's blocks into `out`, tool results of a user's
/// message as messages of their own, before it.
fn convert_blocks(
    blocks: &[Value],
    role: &str,
    out: &mut Map<String, Value>,
    converted: &mut Vec<Value>,
) {
    let mut parts: Vec<Value> = Vec::new();
    let mut tool_calls: Vec<Value> = Vec::new();
    let mut reasoning: Vec<&str> = Vec::new();
    for block in blocks {
        match block["type"].as_str().unwrap_or_default() {
            "text" => {
                if let Some(text) = block["text"].as_str().filter(|text| !text.is_empty()) {
                    parts.push(json!({"type": "text", "text": text}));
                }
            }
            "image" => {
                if let Some(source) = block.get("source").filter(|source| source.is_object()) {
                    parts.push(
                        json!({"type": "image_url", "image_url": {"url": image_url(source)}}),
                    );
                }
            }
            "thinking" => {
                if let Some(thinking) = block["thinking"].as_str() {
                    reasoning.push(thinking);
                }
            }
            "tool_use" => {
                let input = block
                    .get("input")
                    .filter(|input| !input.is_null())
                    .cloned()
                    .unwrap_or_else(|| json!({}));
                tool_calls.push(json!({
                    "id": block["id"].as_str().unwrap_or("call_0"),
                    "type": "function",
                    "function": {
                        "name": block["name"].as_str().unwrap_or_default(),
                        // `json.dumps(block.input or {})`.
                        "arguments": PythonJson::python_default().dumps(&input),
                    },
                }));
            }
            "tool_result" if role == "user" => user_tool_result(block, converted),
            "tool_result" => {
                // `str(block.content)`: only a string reads the same in Python and here.
                let text = match &block["content"] {
                    Value::String(text) => text.clone(),
                    Value::Null => String::new(),
                    other => other.to_string(),
                };
                parts.push(json!({"type": "text", "text": format!("Tool result: {text}")}));
            }
            _ => {}
        }
    }
    if !reasoning.is_empty() {
        out.insert("reasoning".into(), Value::String(reasoning.concat()));
    }
    if !tool_calls.is_empty() {
        out.insert("tool_calls".into(), Value::Array(tool_calls));
    }
    match parts.as_slice() {
        [] => {}
        [only] if only["type"] == "text" => {
            out.insert("content".into(), only["text"].clone());
        }
        _ => {
            out.insert("content".into(), Value::Array(parts));
        }
    }
}

/// `_convert_user_tool_result`: the result as a tool message, its images as a user message.
fn user_tool_result(block: &Value, converted: &mut Vec<Value>) {
    let mut texts: Vec<&str> = Vec::new();
    let mut images: Vec<Value> = Vec::new();
    let mut references: Vec<Value> = Vec::new();
    let text = match &block["content"] {
        Value::String(text) => text.clone(),
        Value::Array(items) => {
            for item in items {
                match item["type"].as_str() {
                    Some("text") => texts.push(item["text"].as_str().unwrap_or_default()),
                    Some("image") => {
                        let url = image_url(item.get("source").unwrap_or(&Value::Null));
                        if !url.is_empty() {
                            images.push(json!({"type": "image_url", "image_url": {"url": url}}));
                        }
                    }
                    Some("tool_reference") => {
                        if let Some(name) = item["tool_name"]
                            .as_str()
                            .or_else(|| item["name"].as_str())
                            .filter(|name| !name.is_empty())
                        {
                            references.push(json!({"type": "tool_reference", "name": name}));
                        }
                    }
                    _ => {}
                }
            }
            texts.join("\n")
        }
        _ => String::new(),
    };
    let call_id = block["tool_use_id"].as_str().unwrap_or_default();
    converted.push(json!({"role": "tool", "tool_call_id": call_id, "content": text}));
    if !images.is_empty() {
        converted.push(json!({"role": "user", "content": images}));
    }
    if !references.is_empty() {
        converted.push(json!({"role": "tool", "tool_call_id": call_id, "content": references}));
    }
}

/// `_convert_image_source_to_url`.
fn image_url(source: &Value) -> String {
    if source["type"] == "url" {
        return source["url"].as_str().unwrap_or_default().to_owned();
    }
    format!(
        "data:{};base64,{}",
        source["media_type"].as_str().unwrap_or("image/jpeg"),
        source["data"].as_str().unwrap_or_default()
    )
}

/// `_convert_tool_choice`.
fn convert_tool_choice(choice: Option<&Value>) -> Result<Option<Value>, String> {
    let choice = match choice {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(choice)) => choice,
        Some(_) => return Err(invalid("Input should be a valid dictionary", "tool_choice")),
    };
    Ok(Some(match choice.get("type").and_then(Value::as_str) {
        Some("auto") => json!("auto"),
        Some("any") => json!("required"),
        Some("none") => json!("none"),
        Some("tool") => match choice.get("name").and_then(Value::as_str) {
            Some(name) if !name.is_empty() => {
                json!({"type": "function", "function": {"name": name}})
            }
            _ => {
                return Err("Value error, tool_choice.name is required when type is 'tool'".into());
            }
        },
        _ => {
            return Err(invalid(
                "Input should be 'auto', 'any', 'tool' or 'none'",
                "tool_choice.type",
            ));
        }
    }))
}

/// `_convert_tools`: an `AnthropicTool` as a chat completions function.
fn convert_tool(tool: &Value, place: &str) -> Result<Value, String> {
    let Value::Object(tool) = tool else {
        return Err(invalid("Input should be a valid dictionary", place));
    };
    let Some(Value::String(name)) = tool.get("name") else {
        return Err(invalid("Field required", &format!("{place}.name")));
    };
    let mut schema = match tool.get("input_schema") {
        Some(Value::Object(schema)) => schema.clone(),
        Some(_) => {
            return Err(invalid(
                "Input should be a valid dictionary",
                &format!("{place}.input_schema"),
            ));
        }
        None => return Err(invalid("Field required", &format!("{place}.input_schema"))),
    };
    schema
        .entry("type")
        .or_insert_with(|| Value::String("object".into()));
    let field = |key: &str| tool.get(key).cloned().unwrap_or(Value::Null);
    Ok(json!({
        "type": "function",
        "function": {
            "name": name,
            "description": field("description"),
            "parameters": schema,
            "strict": field("strict"),
            "defer_loading": field("defer_loading"),
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_become_vllms_chat_messages() {
        let body = json!({"model": "m", "max_tokens": 8,
            "system": [{"type": "text", "text": "x-anthropic-billing-header: cch=1"}, {"type": "text", "text": "Be terse."}],
            "tools": [{"name": "read", "input_schema": {"properties": {}}}],
            "messages": [
                {"role": "user", "content": "Read a."},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}, {"type": "tool_use", "id": "c1", "name": "read", "input": {"path": "a"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": [{"type": "text", "text": "1"}, {"type": "text", "text": "2"}]}, {"type": "text", "text": "Now?"}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c2", "content": "only"}]}]});
        let chat = to_chat_body(&body, true).unwrap();
        assert_eq!(
            chat["messages"],
            json!([
                {"role": "system", "content": "Be terse."},
                {"role": "user", "content": "Read a."},
                {"role": "assistant", "reasoning": "t", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{\"path\": \"a\"}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "1\n2"},
                {"role": "user", "content": "Now?"},
                {"role": "tool", "tool_call_id": "c2", "content": "only"}])
        );
        assert_eq!(chat["tool_choice"], "auto");
        assert_eq!(
            chat["tools"][0]["function"]["parameters"],
            json!({"properties": {}, "type": "object"})
        );
    }

    #[test]
    fn system_messages_are_merged_when_the_template_needs_it() {
        let body = json!({"model": "m", "max_tokens": 8, "system": "A.", "messages": [
            {"role": "user", "content": "hi"}, {"role": "system", "content": "B."}]});
        let merged = to_chat_body(&body, true).unwrap();
        assert_eq!(
            merged["messages"],
            json!([{"role": "system", "content": "A.B."}, {"role": "user", "content": "hi"}])
        );
        let inline = to_chat_body(&body, false).unwrap();
        assert_eq!(
            inline["messages"][2],
            json!({"role": "system", "content": "B."})
        );
        assert!(
            to_chat_body(&json!({"model": "m", "messages": []}), false).is_err(),
            "max_tokens is required"
        );
    }
}

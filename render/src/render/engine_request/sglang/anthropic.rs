//! SGLang's `/v1/messages`: an Anthropic Messages body validated as `AnthropicMessagesRequest`
//! (`sglang/srt/entrypoints/anthropic/protocol.py`) and converted to a chat completions
//! request by `AnthropicServing._convert_to_chat_completion_request`
//! (`sglang/srt/entrypoints/anthropic/serving.py`), which then takes SGLang's chat path:
//!
//! - the system blocks' texts joined with newlines into one system message; when the chat
//!   template does not render a system message after the first (`detect_inline_system_support`,
//!   parser/template_detection.py), the conversation's own system messages are merged into it;
//! - each message's blocks: texts (empty ones too) as parts, one text part as a string;
//!   `tool_use` as a tool call with the input dumped as arguments; a user's `tool_result` as
//!   tool messages, after the user's parts before it; search results as text; an assistant's
//!   thinking dropped (no reasoning parser rewraps it), `redacted_thinking` refused; an
//!   assistant message left empty gets `""`;
//! - custom tools as functions (`description` `""` when missing, `strict` false when missing),
//!   server tools (web search, computer, bash, text editor) left out; `tool_choice` mapped;
//!   `output_config.effort` as `reasoning_effort` (`xhigh` as `max`), set after the request is
//!   validated, so without the thinking variables it would set.
//!
//! The server modelled has no `--reasoning-parser`: thinking enabled is refused.

use serde_json::{Map, Value, json};

use super::super::{AnthropicRequest, invalid};

/// The block types of `AnthropicContentBlock`.
const BLOCK_TYPES: [&str; 8] = [
    "text",
    "image",
    "tool_use",
    "tool_result",
    "tool_reference",
    "search_result",
    "thinking",
    "redacted_thinking",
];

/// The tool type prefixes of Anthropic's server tools (`is_server_tool`).
const SERVER_TOOLS: [&str; 4] = ["web_search_", "computer_", "bash_", "text_editor_"];

/// The chat completions body SGLang makes of an Anthropic Messages body, or the reason it
/// refuses it. `renders_inline_system` says whether the chat template renders a system message
/// after the first.
pub(super) fn to_chat_body(
    body: &Value,
    renders_inline_system: bool,
) -> Result<Map<String, Value>, String> {
    let AnthropicRequest {
        body: request,
        model,
        max_tokens,
        messages,
    } = AnthropicRequest::of(body, check_content)?;
    let thinking = check_thinking(request.get("thinking"))?;

    let merge = !renders_inline_system;
    let mut system_parts: Vec<String> = match request.get("system") {
        Some(Value::String(text)) if !text.trim().is_empty() => vec![text.clone()],
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter(|block| block["type"] == "text")
            .filter_map(|block| block["text"].as_str())
            .filter(|text| !text.is_empty())
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    };
    if merge {
        system_parts.extend(
            messages
                .iter()
                .filter(|message| message["role"] == "system")
                .filter_map(|message| inline_system_text(&message["content"])),
        );
    }
    let mut converted: Vec<Value> = Vec::new();
    if !system_parts.is_empty() {
        converted.push(json!({"role": "system", "content": system_parts.join("\n")}));
    }
    for message in messages {
        let role = message["role"].as_str().unwrap_or_default();
        if role == "system" && merge {
            continue;
        }
        match &message["content"] {
            Value::Array(blocks) => convert_blocks(blocks, role, &mut converted)?,
            content => converted.push(json!({"role": role, "content": content})),
        }
    }

    let mut chat = Map::new();
    chat.insert("messages".into(), Value::Array(converted));
    chat.insert("model".into(), model.clone());
    chat.insert("max_tokens".into(), max_tokens.clone());
    if let Some("enabled" | "adaptive") = thinking {
        return Err(
            "Anthropic thinking is not supported for models without a reasoning parser".into(),
        );
    }
    let effort = match request
        .get("output_config")
        .and_then(|config| config.get("effort"))
    {
        None | Some(Value::Null) => None,
        Some(Value::String(effort))
            if ["minimal", "low", "medium", "high", "xhigh", "max"].contains(&effort.as_str()) =>
        {
            Some(if effort == "xhigh" {
                "max"
            } else {
                effort.as_str()
            })
        }
        Some(_) => return Err(invalid("Input should be an effort", "output_config.effort")),
    };
    if let Some(effort) = effort {
        // Set on the validated request: the template gets `reasoning_effort` alone, as a
        // variable moved out of `chat_template_kwargs` would reach it.
        chat.insert(
            "chat_template_kwargs".into(),
            json!({"reasoning_effort": effort}),
        );
    }
    let tools = match request.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(tools)) => tools
            .iter()
            .enumerate()
            .filter_map(|(index, tool)| convert_tool(tool, &format!("tools.{index}")).transpose())
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err(invalid("Input should be a valid list", "tools")),
    };
    let tool_choice = match request.get("tool_choice") {
        None | Some(Value::Null) => None,
        Some(Value::Object(choice)) => Some(choice),
        Some(_) => return Err(invalid("Input should be a valid dictionary", "tool_choice")),
    };
    let choice = match tool_choice
        .map(|choice| (choice.get("type").and_then(Value::as_str), choice))
    {
        None if tools.is_empty() => json!("none"),
        None => json!("auto"),
        Some((Some("none"), _)) => json!("none"),
        Some((Some("auto" | "any" | "tool"), _)) if tools.is_empty() => match tool_choice
            .and_then(|choice| choice.get("type"))
            .and_then(Value::as_str)
        {
            Some("auto") => json!("none"),
            _ => {
                return Err(
                    "tool_choice requires at least one custom tool; all supplied tools \
                            were server-side Anthropic built-ins"
                        .into(),
                );
            }
        },
        Some((Some("auto"), _)) => json!("auto"),
        Some((Some("any"), _)) => json!("required"),
        Some((Some("tool"), choice)) => {
            let name = choice.get("name").cloned().unwrap_or(Value::Null);
            if !tools.iter().any(|tool| tool["function"]["name"] == name) {
                return Err(format!(
                    "tool_choice references tool {name} but it is not in the forwarded tools list"
                ));
            }
            json!({"type": "function", "function": {"name": name}})
        }
        Some(_) => {
            return Err(invalid(
                "Input should be 'auto', 'any', 'tool' or 'none'",
                "tool_choice.type",
            ));
        }
    };
    chat.insert("tool_choice".into(), choice);
    if !tools.is_empty() {
        chat.insert("tools".into(), Value::Array(tools));
    }
    Ok(chat)
}

/// A string, or a list of typed blocks with their required fields.
fn check_content(content: &Value, place: &str) -> Result<(), String> {
    let blocks = match content {
        Value::String(_) => return Ok(()),
        Value::Array(blocks) => blocks,
        _ => return Err(invalid("Input should be a valid string", place)),
    };
    for (index, block) in blocks.iter().enumerate() {
        let place = format!("{place}.{index}");
        let kind = block
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !BLOCK_TYPES.contains(&kind) {
            return Err(invalid(
                "Input tag does not match any of the expected tags",
                &place,
            ));
        }
        let required_string = |key: &str| match block.get(key) {
            Some(Value::String(_)) => Ok(()),
            Some(_) => Err(invalid(
                "Input should be a valid string",
                &format!("{place}.{key}"),
            )),
            None => Err(invalid("Field required", &format!("{place}.{key}"))),
        };
        match kind {
            "text" => required_string("text")?,
            "thinking" => required_string("thinking")?,
            "tool_use" => {
                required_string("id")?;
                required_string("name")?;
                if block.get("input").is_some_and(|input| !input.is_object()) {
                    return Err(invalid(
                        "Input should be a valid dictionary",
                        &format!("{place}.input"),
                    ));
                }
            }
            "tool_result" => match block.get("content") {
                None | Some(Value::Null | Value::String(_)) => {}
                Some(nested @ Value::Array(_)) => {
                    check_content(nested, &format!("{place}.content"))?
                }
                Some(_) => {
                    return Err(invalid(
                        "Input should be a valid string",
                        &format!("{place}.content"),
                    ));
                }
            },
            _ => {}
        }
    }
    Ok(())
}

/// `AnthropicThinkingParam`: its type, checked as the SDK's variants are.
fn check_thinking(thinking: Option<&Value>) -> Result<Option<&str>, String> {
    let thinking = match thinking {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(thinking)) => thinking,
        Some(_) => return Err(invalid("Input should be a valid dictionary", "thinking")),
    };
    let budget = thinking
        .get("budget_tokens")
        .filter(|budget| !budget.is_null());
    match thinking.get("type").and_then(Value::as_str) {
        Some("enabled") => match budget.and_then(Value::as_i64) {
            None => {
                Err("thinking.budget_tokens is required when thinking.type is 'enabled'".into())
            }
            Some(budget) if budget < 1024 => Err(format!(
                "thinking.budget_tokens must be >= 1024 (got {budget})"
            )),
            Some(_) => Ok(Some("enabled")),
        },
        Some("disabled") if budget.is_some() => {
            Err("thinking.budget_tokens is not allowed when thinking.type is 'disabled'".into())
        }
        Some("adaptive") if budget.is_some() => {
            Err("thinking.budget_tokens is not allowed when thinking.type is 'adaptive'".into())
        }
        Some(kind @ ("disabled" | "adaptive")) => Ok(Some(kind)),
        _ => Err(invalid(
            "Input should be 'enabled', 'disabled' or 'adaptive'",
            "thinking.type",
        )),
    }
}

/// `_extract_system_text`: a system message's texts, trimmed, joined with newlines.
fn inline_system_text(content: &Value) -> Option<String> {
    match content {
        Value::String(text) => Some(text.trim().to_owned()).filter(|text| !text.is_empty()),
        Value::Array(blocks) => {
            let texts: Vec<&str> = blocks
                .iter()
                .filter(|block| block["type"] == "text")
                .filter_map(|block| block["text"].as_str())
                .map(str::trim)
                .filter(|text| !text.is_empty())
                .collect();
            (!texts.is_empty()).then(|| texts.join("\n"))
        }
        _ => None,
    }
}

/// A message of blocks, as one or more chat messages.
fn convert_blocks(blocks: &[Value], role: &str, converted: &mut Vec<Value>) -> Result<(), String> {
    if role == "assistant"
        && blocks
            .iter()
            .any(|block| block["type"] == "redacted_thinking")
    {
        return Err("Anthropic redacted_thinking history is not supported".into());
    }
    let mut parts: Vec<Value> = Vec::new();
    let mut tool_calls: Vec<Value> = Vec::new();
    for block in blocks {
        match block["type"].as_str().unwrap_or_default() {
            "text" => parts.push(json!({"type": "text", "text": block["text"]})),
            "image" => parts.extend(image_part(&block["source"])),
            "search_result" => {
                let text = search_result_text(block);
                if !text.is_empty() {
                    parts.push(json!({"type": "text", "text": text}));
                }
            }
            "tool_use" => {
                let input = block
                    .get("input")
                    .filter(|input| !input.is_null())
                    .cloned()
                    .unwrap_or_else(|| json!({}));
                tool_calls.push(json!({
                    "id": block["id"],
                    "type": "function",
                    "function": {"name": block["name"], "arguments": input.to_string()},
                }));
            }
            "tool_result" => {
                let (contents, text) = tool_result_contents(&block["content"]);
                let call_id = block["tool_use_id"]
                    .as_str()
                    .filter(|id| !id.is_empty())
                    .or_else(|| block["id"].as_str().filter(|id| !id.is_empty()))
                    .unwrap_or_default();
                if role == "user" {
                    if !parts.is_empty() {
                        converted.push(json!({"role": "user", "content": as_content(std::mem::take(&mut parts))}));
                    }
                    for content in contents {
                        converted.push(
                            json!({"role": "tool", "tool_call_id": call_id, "content": content}),
                        );
                    }
                } else {
                    parts.push(json!({"type": "text", "text": format!("Tool result: {text}")}));
                }
            }
            _ => {}
        }
    }
    let mut message = Map::new();
    message.insert("role".into(), Value::String(role.to_owned()));
    if !tool_calls.is_empty() {
        message.insert("tool_calls".into(), Value::Array(tool_calls));
    }
    if !parts.is_empty() {
        message.insert("content".into(), as_content(parts));
    } else if !message.contains_key("tool_calls") {
        if role == "user" {
            return Ok(());
        }
        message.insert("content".into(), Value::String(String::new()));
    }
    converted.push(Value::Object(message));
    Ok(())
}

/// One text part as its text, other parts as a list.
fn as_content(parts: Vec<Value>) -> Value {
    match parts.as_slice() {
        [only] if only["type"] == "text" => only["text"].clone(),
        _ => Value::Array(parts),
    }
}

/// `_convert_anthropic_image_source_to_openai_part`.
fn image_part(source: &Value) -> Option<Value> {
    let url = if source["type"] == "base64" {
        let data = source["data"].as_str().filter(|data| !data.is_empty())?;
        format!(
            "data:{};base64,{data}",
            source["media_type"].as_str().unwrap_or("image/png")
        )
    } else {
        source["url"]
            .as_str()
            .filter(|url| !url.is_empty())?
            .to_owned()
    };
    Some(json!({"type": "image_url", "image_url": {"url": url}}))
}

/// `_text_from_search_result`.
fn search_result_text(item: &Value) -> String {
    let mut lines = Vec::new();
    if let Some(title) = item["title"].as_str().filter(|title| !title.is_empty()) {
        lines.push(format!("Title: {title}"));
    }
    let source = match &item["source"] {
        Value::Object(source) => source
            .get("url")
            .and_then(Value::as_str)
            .filter(|url| !url.is_empty())
            .or_else(|| source.get("text").and_then(Value::as_str))
            .map(str::to_owned),
        Value::String(source) if !source.is_empty() => Some(source.clone()),
        _ => None,
    };
    if let Some(source) = source.filter(|source| !source.is_empty()) {
        lines.push(format!("Source: {source}"));
    }
    let texts: Vec<&str> = item["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|part| part["type"] == "text")
        .filter_map(|part| part["text"].as_str())
        .filter(|text| !text.is_empty())
        .collect();
    if !texts.is_empty() {
        lines.push(format!("Content: {}", texts.join("\n")));
    }
    lines.join("\n")
}

/// `_convert_tool_result_content`: the tool messages' contents (runs of tool references apart
/// from the rest; a lone text as a string) and the result's text.
fn tool_result_contents(content: &Value) -> (Vec<Value>, String) {
    let Value::Array(items) = content else {
        let text = match content {
            Value::String(text) => text.clone(),
            _ => String::new(),
        };
        return (vec![Value::String(text.clone())], text);
    };
    let mut parts: Vec<Value> = Vec::new();
    let mut texts: Vec<String> = Vec::new();
    for item in items {
        match item["type"].as_str() {
            Some("text") => {
                if let Some(text) = item["text"].as_str().filter(|text| !text.is_empty()) {
                    texts.push(text.to_owned());
                    parts.push(json!({"type": "text", "text": text}));
                }
            }
            Some("image") => parts.extend(image_part(&item["source"])),
            Some("tool_reference") => {
                if let Some(name) = item["tool_name"]
                    .as_str()
                    .or_else(|| item["name"].as_str())
                    .filter(|name| !name.is_empty())
                {
                    parts.push(json!({"type": "tool_reference", "name": name}));
                }
            }
            Some("search_result") => {
                let text = search_result_text(item);
                if !text.is_empty() {
                    parts.push(json!({"type": "text", "text": text}));
                    texts.push(text);
                }
            }
            _ => {}
        }
    }
    let mut groups: Vec<Vec<Value>> = Vec::new();
    for part in parts {
        let is_reference = part["type"] == "tool_reference";
        match groups.last_mut() {
            Some(group) if (group[0]["type"] == "tool_reference") == is_reference => {
                group.push(part)
            }
            _ => groups.push(vec![part]),
        }
    }
    let mut contents: Vec<Value> = groups.into_iter().map(as_content).collect();
    if contents.is_empty() {
        contents.push(Value::String(String::new()));
    }
    (contents, texts.join("\n"))
}

/// A custom tool as a chat completions function; `None` for a server tool.
fn convert_tool(tool: &Value, place: &str) -> Result<Option<Value>, String> {
    let Value::Object(tool) = tool else {
        return Err(invalid("Input should be a valid dictionary", place));
    };
    let kind = tool.get("type").and_then(Value::as_str).unwrap_or_default();
    if SERVER_TOOLS.iter().any(|prefix| kind.starts_with(prefix)) {
        return Ok(None);
    }
    let Some(Value::String(name)) = tool.get("name") else {
        return Err(invalid("Field required", &format!("{place}.name")));
    };
    let Some(schema @ Value::Object(_)) = tool.get("input_schema") else {
        return Err(invalid("Field required", &format!("{place}.input_schema")));
    };
    let description = tool
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let strict = tool
        .get("strict")
        .filter(|strict| !strict.is_null())
        .cloned()
        .unwrap_or(Value::Bool(false));
    let defer = tool.get("defer_loading").cloned().unwrap_or(Value::Null);
    Ok(Some(json!({
        "type": "function",
        "function": {"name": name, "description": description, "parameters": schema, "strict": strict},
        "defer_loading": defer,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_results_follow_the_text_before_them() {
        let body = json!({"model": "m", "max_tokens": 8, "system": [{"type": "text", "text": "A."}, {"type": "text", "text": "B."}],
            "tools": [{"name": "read", "input_schema": {"type": "object"}}, {"type": "web_search_20250305", "name": "web_search"}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "before"}, {"type": "tool_result", "tool_use_id": "c1", "content": [{"type": "text", "text": "1"}, {"type": "text", "text": "2"}]}, {"type": "text", "text": "after"}]},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}]}]});
        let chat = to_chat_body(&body, true).unwrap();
        assert_eq!(
            chat["messages"],
            json!([
                {"role": "system", "content": "A.\nB."},
                {"role": "user", "content": "before"},
                {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "1"}, {"type": "text", "text": "2"}]},
                {"role": "user", "content": "after"},
                {"role": "assistant", "content": ""}])
        );
        assert_eq!(chat["tool_choice"], "auto");
        assert_eq!(
            chat["tools"],
            json!([{"type": "function", "function": {"name": "read", "description": "", "parameters": {"type": "object"}, "strict": false}, "defer_loading": null}])
        );
    }

    #[test]
    fn thinking_needs_a_reasoning_parser() {
        let body = json!({"model": "m", "max_tokens": 8, "thinking": {"type": "enabled", "budget_tokens": 2048}, "messages": [{"role": "user", "content": "x"}]});
        assert!(to_chat_body(&body, true).is_err());
    }
}

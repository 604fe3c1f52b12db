//! SGLang's `/v1/responses` for a model without Harmony: `OpenAIServingResponses._make_request`
//! (`sglang/srt/entrypoints/openai/serving_responses.py`) builds a chat completions request
//! from the instructions and input items (`_construct_input_messages`) and the function tools
//! (`_response_tools_to_chat_tools`), then takes SGLang's chat path:
//!
//! - the instructions become a system message, a string input a user message;
//! - each item is read by `_normalize_response_message_for_chat`: a developer message becomes
//!   a system message whose text starts with "Developer instructions:"
//!   (`label_developer_content`); a function call an assistant tool call (arguments that are
//!   not a JSON object become `{}`); its output a tool message (text parts concatenated); a
//!   reasoning item an assistant message's `reasoning_content` (summary texts, else content
//!   texts, joined with newlines; dropped when it has none SGLang can read); a message keeps
//!   its keys but `id`, `status` and `type`, its text parts as `text` parts;
//! - consecutive assistant messages are merged into one (`_merge_consecutive_assistant_messages`);
//! - when the template does not render a system message after the first, every system message
//!   is merged into one leading message, joined with blank lines;
//! - function tools become chat tools with `strict` (false when not sent); `reasoning.effort`
//!   is the chat request's `reasoning_effort`.
//!
//! The request is taken as sent to the served model (SGLang refuses other model names, and
//! fails on a body without one).

use serde_json::{Map, Value, json};

use super::request::invalid;

/// `DEVELOPER_BLOCK_LABEL`.
const DEVELOPER_LABEL: &str = "Developer instructions:";

/// The tool types `ResponseTool` takes (`RESPONSE_TOOL_TYPES`).
const TOOL_TYPES: [&str; 13] = [
    "function",
    "web_search",
    "web_search_preview",
    "code_interpreter",
    "file_search",
    "image_generation",
    "computer_use_preview",
    "local_shell",
    "shell",
    "mcp",
    "custom",
    "namespace",
    "apply_patch",
];

/// The chat completions body SGLang makes of a Responses body: `Ok(Err(what))` for what
/// kvlint does not model, `Err(reason)` where SGLang refuses.
pub(super) fn to_chat_body(
    body: &Value,
    renders_inline_system: bool,
) -> Result<Result<Map<String, Value>, String>, String> {
    let Value::Object(request) = body else {
        return Err("Input should be a valid dictionary".into());
    };
    let mut messages: Vec<Value> = Vec::new();
    match request.get("instructions") {
        None | Some(Value::Null) => {}
        Some(Value::String(instructions)) => {
            if !instructions.is_empty() {
                messages.push(json!({"role": "system", "content": instructions}));
            }
        }
        Some(_) => return Err(invalid("Input should be a valid string", "instructions")),
    }
    match request.get("input") {
        Some(Value::String(text)) => messages.push(json!({"role": "user", "content": text})),
        Some(Value::Array(items)) => {
            for (index, item) in items.iter().enumerate() {
                let Value::Object(item) = item else {
                    return Err(invalid(
                        "Input should be a valid dictionary",
                        &format!("input.{index}"),
                    ));
                };
                if let Some(kind @ ("custom_tool_call" | "custom_tool_call_output")) =
                    item.get("type").and_then(Value::as_str)
                {
                    return Ok(Err(format!("`{kind}` items of a Responses body")));
                }
                messages.extend(chat_message(item)?);
            }
        }
        Some(_) => return Err(invalid("Input should be a valid string", "input")),
        None => return Err(invalid("Field required", "input")),
    }
    let mut messages = merge_consecutive_assistants(messages);
    if !renders_inline_system {
        messages = coalesce_system_messages(messages);
    }

    let mut tools = Vec::new();
    match request.get("tools") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for (index, tool) in items.iter().enumerate() {
                let kind = tool.get("type").and_then(Value::as_str).unwrap_or_default();
                if !TOOL_TYPES.contains(&kind) {
                    return Err(invalid(
                        "Input should be a tool type",
                        &format!("tools.{index}.type"),
                    ));
                }
                match kind {
                    "function" => tools.push(function_tool(tool)),
                    "custom" | "namespace" => {
                        return Ok(Err("custom and namespace tools of a Responses body".into()));
                    }
                    "shell" => return Err("Shell tools are not supported by this model".into()),
                    _ => {}
                }
            }
        }
        Some(_) => return Err(invalid("Input should be a valid list", "tools")),
    }
    let tool_choice = effective_tool_choice(request.get("tool_choice"))?;
    if tool_choice == "required" && tools.is_empty() {
        return Err(
            "tool_choice=\"required\" requires at least one tool with type=\"function\" \
                    or type=\"custom\"; other built-in tool types cannot be forced."
                .into(),
        );
    }
    if let Some(name) = tool_choice.get("name")
        && !tools.iter().any(|tool| &tool["function"]["name"] == name)
    {
        return Err(format!("Tool {name} is not declared in tools"));
    }

    let mut chat = Map::new();
    chat.insert("model".into(), Value::String("served".into()));
    chat.insert("messages".into(), Value::Array(messages));
    if tools.is_empty() {
        chat.insert("tool_choice".into(), json!("none"));
    } else {
        let choice = match tool_choice.get("name") {
            Some(name) => json!({"type": "function", "function": {"name": name}}),
            None => tool_choice,
        };
        chat.insert("tool_choice".into(), choice);
        chat.insert("tools".into(), Value::Array(tools));
    }
    // `normalize_reasoning_to_thinking` turns thinking off for "none" as the chat request's
    // own validator does with the effort, the request's values first.
    if let Some(effort) = request
        .get("reasoning")
        .and_then(|reasoning| reasoning.get("effort"))
        .filter(|effort| !effort.is_null())
    {
        chat.insert("reasoning_effort".into(), effort.clone());
    }
    if let Some(kwargs) = request.get("chat_template_kwargs") {
        chat.insert("chat_template_kwargs".into(), kwargs.clone());
    }
    Ok(Ok(chat))
}

/// `_normalize_response_message_for_chat`.
fn chat_message(item: &Map<String, Value>) -> Result<Option<Value>, String> {
    let mut item = item.clone();
    if item.get("role").is_some_and(|role| role == "developer") {
        item.insert("role".into(), json!("system"));
        let labelled = label_developer_content(item.get("content").cloned().unwrap_or(Value::Null));
        item.insert("content".into(), labelled);
    }
    let string = |key: &str| item.get(key).and_then(Value::as_str);
    match string("type") {
        Some("function_call") => {
            let arguments = match item.get("arguments") {
                Some(Value::String(raw)) => match serde_json::from_str::<Value>(raw) {
                    Ok(Value::Object(_)) if !raw.is_empty() => raw.clone(),
                    _ => "{}".to_owned(),
                },
                Some(object @ Value::Object(_)) => object.to_string(),
                _ => "{}".to_owned(),
            };
            let id = item
                .get("call_id")
                .filter(|id| !id.is_null() && *id != "")
                .or_else(|| item.get("id"))
                .cloned()
                .unwrap_or(Value::Null);
            Ok(Some(json!({
                "role": "assistant",
                "tool_calls": [{"id": id, "type": "function", "function": {"name": item.get("name").cloned().unwrap_or(Value::Null), "arguments": arguments}}],
            })))
        }
        Some("function_call_output") => {
            let content = match item.get("output") {
                Some(Value::Array(parts)) => Value::String(
                    parts
                        .iter()
                        .filter_map(|part| part.as_object())
                        .map(|part| part.get("text").and_then(Value::as_str).unwrap_or_default())
                        .collect(),
                ),
                Some(output) => output.clone(),
                None => Value::String(String::new()),
            };
            Ok(Some(json!({
                "role": "tool",
                "tool_call_id": item.get("call_id").cloned().unwrap_or(Value::Null),
                "content": content,
            })))
        }
        Some("reasoning") => {
            let texts = |key: &str| -> Vec<String> {
                item.get(key)
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|entry| entry.get("text").and_then(Value::as_str))
                    .filter(|text| !text.is_empty())
                    .map(str::to_owned)
                    .collect()
            };
            let mut parts = texts("summary");
            if parts.is_empty() {
                parts = texts("content");
            }
            // An encrypted state SGLang wrote itself would be read back; another's is not.
            if parts.is_empty() {
                return Ok(None);
            }
            Ok(Some(
                json!({"role": "assistant", "reasoning_content": parts.join("\n")}),
            ))
        }
        None | Some("message") => {
            if let Some(Value::Array(parts)) = item.get_mut("content") {
                for part in parts.iter_mut() {
                    if matches!(
                        part.get("type").and_then(Value::as_str),
                        Some("input_text" | "output_text")
                    ) {
                        let text = part.get("text").cloned().unwrap_or_else(|| json!(""));
                        *part = json!({"type": "text", "text": text});
                    }
                }
            }
            item.retain(|key, value| {
                !value.is_null() && !["id", "status", "type"].contains(&key.as_str())
            });
            Ok(Some(Value::Object(item)))
        }
        Some(other) => Err(format!(
            "Unsupported Responses API input item type: '{other}'"
        )),
    }
}

/// `label_developer_content`.
fn label_developer_content(content: Value) -> Value {
    match content {
        Value::String(text) => Value::String(format!("{DEVELOPER_LABEL}\n{text}")),
        Value::Array(mut parts) => {
            if let Some(part) = parts
                .iter_mut()
                .find(|part| part.get("text").is_some_and(Value::is_string))
            {
                let text = part["text"].as_str().unwrap_or_default();
                part["text"] = Value::String(format!("{DEVELOPER_LABEL}\n{text}"));
                return Value::Array(parts);
            }
            parts.insert(0, json!({"type": "input_text", "text": DEVELOPER_LABEL}));
            Value::Array(parts)
        }
        other => other,
    }
}

/// `_merge_consecutive_assistant_messages`.
fn merge_consecutive_assistants(messages: Vec<Value>) -> Vec<Value> {
    let mut merged: Vec<Value> = Vec::with_capacity(messages.len());
    for message in messages {
        let mergeable = message["role"] == "assistant"
            && merged.last().is_some_and(|previous| {
                previous["role"] == "assistant"
                    && (previous.get("phase") == message.get("phase")
                        || previous.as_object().is_some_and(|map| {
                            map.len() == 2 && map.contains_key("reasoning_content")
                        }))
            });
        let (Some(Value::Object(previous)), true) = (merged.last_mut(), mergeable) else {
            merged.push(message);
            continue;
        };
        if let Some(phase) = message.get("phase").filter(|phase| !phase.is_null()) {
            previous.insert("phase".into(), phase.clone());
        }
        match message.get("content") {
            None | Some(Value::Null) => {}
            Some(Value::String(text)) if text.is_empty() => {}
            Some(content) => {
                let joined = match previous.get("content") {
                    None | Some(Value::Null) => content.clone(),
                    Some(Value::String(before)) if before.is_empty() => content.clone(),
                    Some(Value::String(before)) if content.is_string() => Value::String(format!(
                        "{before}\n\n{}",
                        content.as_str().unwrap_or_default()
                    )),
                    Some(before) => Value::Array([as_parts(before), as_parts(content)].concat()),
                };
                previous.insert("content".into(), joined);
            }
        }
        if let Some(Value::Array(calls)) = message
            .get("tool_calls")
            .filter(|calls| calls.as_array().is_some_and(|calls| !calls.is_empty()))
        {
            let mut all = previous
                .get("tool_calls")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            all.extend(calls.iter().cloned());
            previous.insert("tool_calls".into(), Value::Array(all));
        }
        if let Some(reasoning) = message
            .get("reasoning_content")
            .and_then(Value::as_str)
            .filter(|text| !text.is_empty())
        {
            let joined = match previous
                .get("reasoning_content")
                .and_then(Value::as_str)
                .filter(|text| !text.is_empty())
            {
                Some(before) => format!("{before}\n{reasoning}"),
                None => reasoning.to_owned(),
            };
            previous.insert("reasoning_content".into(), Value::String(joined));
        }
    }
    merged
}

fn as_parts(content: &Value) -> Vec<Value> {
    match content {
        Value::Array(parts) => parts.clone(),
        Value::String(text) if !text.is_empty() => vec![json!({"type": "text", "text": text})],
        _ => Vec::new(),
    }
}

/// All system messages' texts, joined with blank lines, as one leading system message.
fn coalesce_system_messages(messages: Vec<Value>) -> Vec<Value> {
    let (systems, others): (Vec<Value>, Vec<Value>) = messages
        .into_iter()
        .partition(|message| message["role"] == "system");
    let mut chunks: Vec<String> = Vec::new();
    for system in &systems {
        match &system["content"] {
            Value::String(text) => chunks.push(text.clone()),
            Value::Array(parts) => chunks.extend(
                parts
                    .iter()
                    .filter_map(|part| part.get("text").and_then(Value::as_str))
                    .map(str::to_owned),
            ),
            _ => {}
        }
    }
    if chunks.is_empty() {
        return others;
    }
    std::iter::once(json!({"role": "system", "content": chunks.join("\n\n")}))
        .chain(others)
        .collect()
}

/// A function tool as `_response_tools_to_chat_tools` builds it.
fn function_tool(tool: &Value) -> Value {
    let field = |key: &str| tool.get(key).cloned().unwrap_or(Value::Null);
    let strict = tool
        .get("strict")
        .filter(|strict| !strict.is_null())
        .cloned()
        .unwrap_or(Value::Bool(false));
    json!({
        "type": "function",
        "function": {"name": field("name"), "description": field("description"), "parameters": field("parameters"), "strict": strict},
    })
}

/// `ResponsesRequest.effective_tool_choice`: a string, or `{"type", "name"}` for a named
/// function or custom tool ("auto" for other objects).
fn effective_tool_choice(choice: Option<&Value>) -> Result<Value, String> {
    match choice {
        None | Some(Value::Null) => Ok(json!("auto")),
        Some(Value::String(choice)) if ["auto", "required", "none"].contains(&choice.as_str()) => {
            Ok(json!(choice))
        }
        Some(Value::Object(choice)) => {
            let name = choice
                .get("name")
                .filter(|name| name.as_str().is_some_and(|name| !name.is_empty()))
                .or_else(|| {
                    choice
                        .get("function")
                        .and_then(|function| function.get("name"))
                });
            match (choice.get("type").and_then(Value::as_str), name) {
                (Some(kind @ ("function" | "custom")), Some(name))
                    if name.as_str().is_some_and(|name| !name.is_empty()) =>
                {
                    Ok(json!({"type": kind, "name": name}))
                }
                _ => Ok(json!("auto")),
            }
        }
        Some(_) => Err(invalid(
            "Input should be 'auto', 'required' or 'none'",
            "tool_choice",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_become_sglangs_chat_messages() {
        let body = json!({"instructions": "Be brief.",
            "input": [
                {"role": "developer", "content": "Use tools."},
                {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "r"}]},
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "[1]"},
                {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "4"}, {"type": "input_text", "text": "2"}]}]});
        let chat = to_chat_body(&body, false).unwrap().unwrap();
        assert_eq!(
            chat["messages"],
            json!([
                {"role": "system", "content": "Be brief.\n\nDeveloper instructions:\nUse tools."},
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                {"role": "assistant", "reasoning_content": "r", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "42"}])
        );
        assert_eq!(chat["tool_choice"], "none");
    }
}

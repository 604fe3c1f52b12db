//! The chat-format view of a request: `messages` and `tools` as chat templates expect them,
//! whichever API the request was written for.

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use crate::request::{BodyFormat, Request};

/// A request as the messages and tools of an OpenAI chat body, as a gateway forwards it to an
/// OpenAI-compatible engine: the chat view, with tool-call arguments as the JSON strings the
/// API takes.
pub fn openai_chat_body(request: &Request) -> (Vec<Value>, Option<Vec<Value>>) {
    let (messages, tools) = chat_view(request);
    let mut messages: Vec<Value> = messages.into_iter().map(Cow::into_owned).collect();
    for call in messages
        .iter_mut()
        .filter_map(|message| message.get_mut("tool_calls"))
        .filter_map(Value::as_array_mut)
        .flatten()
    {
        if let Some(arguments) = arguments_mut(call).filter(|arguments| !arguments.is_string()) {
            *arguments = Value::String(arguments.to_string());
        }
    }
    let tools = tools.map(|tools| tools.into_iter().map(Cow::into_owned).collect());
    (messages, tools)
}

/// The request as chat-format `messages` and `tools`, the shape chat templates expect and
/// engines pass them: tool-call arguments as objects, text blocks joined.
pub fn chat_view(request: &Request) -> (Vec<Cow<'_, Value>>, Option<Vec<Cow<'_, Value>>>) {
    let Some(body) = request.body.as_object() else {
        return (Vec::new(), None);
    };
    let owned = |(messages, tools): (Vec<Value>, Option<Vec<Value>>)| {
        (
            messages.into_iter().map(Cow::Owned).collect(),
            tools.map(|tools| tools.into_iter().map(Cow::Owned).collect()),
        )
    };
    let (messages, tools): (Vec<Cow<'_, Value>>, Option<Vec<Cow<'_, Value>>>) = match request.format
    {
        BodyFormat::OpenAiChat => (
            (0..request.messages.len())
                .filter_map(|index| request.message_value(index))
                .map(openai_chat_message)
                .collect(),
            body.get("tools")
                .and_then(Value::as_array)
                .map(|tools| tools.iter().map(Cow::Borrowed).collect()),
        ),
        BodyFormat::AnthropicMessages => owned(anthropic_chat_view(body)),
        BodyFormat::OpenAiResponses => owned(responses_chat_view(body)),
        // No engine takes them: refused before a template is rendered (`unserved`).
        BodyFormat::GeminiGenerateContent | BodyFormat::BedrockConverse => (Vec::new(), None),
    };
    (messages, tools.filter(|tools| !tools.is_empty()))
}

/// An OpenAI chat message as engines hand it to templates: text blocks joined, tool-call
/// arguments parsed. Borrowed when there is nothing to change.
fn openai_chat_message(original: &Value) -> Cow<'_, Value> {
    let has_blocks = original.get("content").is_some_and(Value::is_array);
    let has_string_arguments = original
        .get("tool_calls")
        .and_then(Value::as_array)
        .is_some_and(|calls| {
            calls
                .iter()
                .any(|call| arguments(call).is_some_and(Value::is_string))
        });
    if !has_blocks && !has_string_arguments {
        return Cow::Borrowed(original);
    }
    let mut message = original.as_object().cloned().unwrap_or_default();
    if let Some(Value::Array(blocks)) = message.get("content")
        && let Some(text) = joined_text(blocks)
    {
        message.insert("content".into(), Value::String(text));
    }
    if let Some(Value::Array(calls)) = message.get_mut("tool_calls") {
        for call in calls {
            if let Some(arguments) = arguments_mut(call)
                && let Some(parsed) = arguments
                    .as_str()
                    .and_then(|text| serde_json::from_str::<Value>(text).ok())
            {
                *arguments = parsed;
            }
        }
    }
    Cow::Owned(Value::Object(message))
}

/// A tool call's `function.arguments`, found without `pointer`, which builds each step's key
/// anew: this runs for every message of every turn.
fn arguments(call: &Value) -> Option<&Value> {
    call.get("function")?.get("arguments")
}

fn arguments_mut(call: &mut Value) -> Option<&mut Value> {
    call.get_mut("function")?.get_mut("arguments")
}

/// The text of content blocks that are all text, joined by newlines; `None` otherwise.
fn joined_text(blocks: &[Value]) -> Option<String> {
    let texts: Option<Vec<&str>> = blocks
        .iter()
        .map(|block| match block {
            Value::String(text) => Some(text.as_str()),
            block
                if matches!(
                    block.get("type").and_then(Value::as_str),
                    Some("text" | "input_text" | "output_text")
                ) =>
            {
                block.get("text").and_then(Value::as_str)
            }
            _ => None,
        })
        .collect();
    texts.map(|texts| texts.join("\n"))
}

/// A body's flat tool definitions (Anthropic, Responses) as chat-completions function tools;
/// `schema_key` names the field that holds the parameters' schema.
fn function_tools(body: &Map<String, Value>, schema_key: &str) -> Option<Vec<Value>> {
    body.get("tools").and_then(Value::as_array).map(|tools| {
        tools
            .iter()
            .map(|tool| {
                function_tool(
                    tool.get("name"),
                    tool.get("description"),
                    tool.get(schema_key),
                )
            })
            .collect()
    })
}

fn function_tool(
    name: Option<&Value>,
    description: Option<&Value>,
    parameters: Option<&Value>,
) -> Value {
    let mut function = Map::new();
    function.insert("name".into(), name.cloned().unwrap_or(Value::Null));
    if let Some(description) = description {
        function.insert("description".into(), description.clone());
    }
    function.insert(
        "parameters".into(),
        parameters.cloned().unwrap_or_else(|| json!({})),
    );
    json!({"type": "function", "function": function})
}

fn anthropic_chat_view(body: &Map<String, Value>) -> (Vec<Value>, Option<Vec<Value>>) {
    let mut messages = Vec::new();
    match body.get("system") {
        Some(Value::String(text)) => messages.push(json!({"role": "system", "content": text})),
        Some(Value::Array(blocks)) => {
            if let Some(text) = joined_text(blocks) {
                messages.push(json!({"role": "system", "content": text}));
            }
        }
        _ => {}
    }
    for message in body
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let role = message.get("role").cloned().unwrap_or(Value::Null);
        let blocks = match message.get("content") {
            Some(Value::Array(blocks)) => blocks.clone(),
            Some(other) => vec![json!({"type": "text", "text": other})],
            None => Vec::new(),
        };
        let mut texts = Vec::new();
        let mut reasoning = Vec::new();
        let mut tool_calls = Vec::new();
        for block in &blocks {
            match block.get("type").and_then(Value::as_str) {
                Some("tool_use") => tool_calls.push(json!({
                    "id": block.get("id"),
                    "type": "function",
                    "function": {"name": block.get("name"), "arguments": block.get("input")},
                })),
                Some("tool_result") => {
                    let content = match block.get("content") {
                        Some(Value::Array(inner)) => {
                            joined_text(inner).map(Value::String).unwrap_or(Value::Null)
                        }
                        Some(other) => other.clone(),
                        None => Value::String(String::new()),
                    };
                    messages.push(json!({"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": content}));
                }
                Some("thinking") => reasoning.extend(block.get("thinking").and_then(Value::as_str)),
                _ => texts.extend(block.get("text").and_then(Value::as_str)),
            }
        }
        if texts.is_empty() && tool_calls.is_empty() && reasoning.is_empty() {
            continue;
        }
        let mut converted = Map::new();
        converted.insert("role".into(), role);
        converted.insert("content".into(), Value::String(texts.join("\n")));
        if !reasoning.is_empty() {
            converted.insert(
                "reasoning_content".into(),
                Value::String(reasoning.join("\n")),
            );
        }
        if !tool_calls.is_empty() {
            converted.insert("tool_calls".into(), Value::Array(tool_calls));
        }
        messages.push(Value::Object(converted));
    }
    let tools = function_tools(body, "input_schema");
    (messages, tools)
}

fn responses_chat_view(body: &Map<String, Value>) -> (Vec<Value>, Option<Vec<Value>>) {
    let mut messages: Vec<Value> = Vec::new();
    if let Some(Value::String(instructions)) = body.get("instructions") {
        messages.push(json!({"role": "system", "content": instructions}));
    }
    let items = match body.get("input") {
        Some(Value::String(text)) => vec![json!({"role": "user", "content": text})],
        Some(Value::Array(items)) => items.clone(),
        _ => Vec::new(),
    };
    for item in items {
        match item.get("type").and_then(Value::as_str) {
            Some("function_call") => {
                let arguments = item
                    .get("arguments")
                    .and_then(Value::as_str)
                    .unwrap_or("{}");
                let arguments = serde_json::from_str(arguments)
                    .unwrap_or_else(|_| Value::String(arguments.to_owned()));
                let call = json!({
                    "id": item.get("call_id"),
                    "type": "function",
                    "function": {"name": item.get("name"), "arguments": arguments},
                });
                let previous_is_call = messages
                    .last()
                    .is_some_and(|last| last.get("tool_calls").is_some());
                match messages
                    .last_mut()
                    .and_then(|last| last.get_mut("tool_calls"))
                {
                    Some(Value::Array(calls)) if previous_is_call => calls.push(call),
                    _ => messages
                        .push(json!({"role": "assistant", "content": "", "tool_calls": [call]})),
                }
            }
            Some("function_call_output") => messages.push(json!({
                "role": "tool",
                "tool_call_id": item.get("call_id"),
                "content": item.get("output"),
            })),
            Some("reasoning") => {}
            _ => {
                let content = match item.get("content") {
                    Some(Value::Array(blocks)) => joined_text(blocks)
                        .map(Value::String)
                        .unwrap_or(Value::Null),
                    Some(other) => other.clone(),
                    None => Value::Null,
                };
                let role = match item.get("role").and_then(Value::as_str) {
                    Some("developer") => "system",
                    Some(role) => role,
                    None => "user",
                };
                messages.push(json!({"role": role, "content": content}));
            }
        }
    }
    let tools = function_tools(body, "parameters");
    (messages, tools)
}

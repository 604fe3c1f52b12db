//! What the grouping compares of a body: its conversation and its instructions, read alike
//! in every request format kvlint reads.

use serde_json::Value;

/// The conversation a body sends: its `messages`, its Responses `input` or its Gemini
/// `contents` between the leading system and developer messages and the trailing ones (an
/// instruction a supervisor ends every request with, which the next request sends after the
/// new items again: the per-turn tail the rules read it as), without the cache markers a
/// client moves to the newest message each turn, a content of text parts alone read as its
/// text (the marker on the newest message is what makes a client send parts there).
pub(super) fn conversation(body: &Value) -> Vec<Value> {
    match conversation_items(body) {
        Some(Value::Array(items)) => {
            let leading = items.iter().take_while(|item| is_instruction(item)).count();
            let trailing = items[leading..]
                .iter()
                .rev()
                .take_while(|item| is_instruction(item))
                .count();
            items[leading..items.len() - trailing]
                .iter()
                .map(|item| text_parts_as_text(without_cache_markers(item)))
                .collect()
        }
        Some(input @ Value::String(_)) => vec![input.clone()],
        _ => Vec::new(),
    }
}

fn conversation_items(body: &Value) -> Option<&Value> {
    ["messages", "input", "contents"]
        .iter()
        .find_map(|key| body.get(*key))
}

/// A message whose content is text parts alone (`[{"type": "text", "text": …}]`, a Responses
/// `input_text`), with its content as their text.
fn text_parts_as_text(mut item: Value) -> Value {
    let text = item
        .get("content")
        .and_then(Value::as_array)
        .and_then(|parts| {
            parts
                .iter()
                .map(|part| {
                    let part = part.as_object()?;
                    let plain = part.len() == 2
                        && matches!(
                            part.get("type").and_then(Value::as_str),
                            Some("text" | "input_text")
                        );
                    plain.then(|| part.get("text")?.as_str()).flatten()
                })
                .collect::<Option<String>>()
        });
    if let (Some(text), Some(object)) = (text, item.as_object_mut()) {
        object.insert("content".to_owned(), Value::String(text));
    }
    item
}

/// Whether `later` is `earlier` without the text it ended with: the per-turn tail a client
/// adds to the newest message and drops the turn after (the SDK's turn tier, a reminder).
pub(super) fn tail_dropped(earlier: &Value, later: &Value) -> bool {
    let text = |item: &Value| item.get("content")?.as_str().map(str::to_owned);
    earlier.get("role") == later.get("role")
        && match (text(earlier), text(later)) {
            (Some(earlier), Some(later)) => {
                !later.is_empty() && earlier.len() > later.len() && earlier.starts_with(&later)
            }
            _ => false,
        }
}

/// The first user message and what followed it, when something did.
pub(super) fn opening_exchange(conversation: &[Value]) -> Option<&[Value]> {
    let user = conversation.iter().position(is_user)?;
    conversation.get(user..user + 2)
}

pub(super) fn is_user(item: &Value) -> bool {
    item.is_string() || item.get("role").and_then(Value::as_str) == Some("user")
}

fn is_instruction(item: &Value) -> bool {
    matches!(
        item.get("role").and_then(Value::as_str),
        Some("system" | "developer")
    )
}

/// What a body sends before its conversation: the system prompt or instructions (Anthropic's
/// and Bedrock's `system`, Responses' `instructions`, Gemini's `systemInstruction`, leading
/// system and developer messages) and the tools.
pub(super) fn instructions(body: &Value) -> Value {
    // The leading instructions and the trailing ones (re-sent at the end of every request).
    let leading: Vec<Value> = match conversation_items(body) {
        Some(Value::Array(items)) => {
            let first = items.iter().take_while(|item| is_instruction(item));
            let rest = &items[first.clone().count()..];
            let last = rest.iter().rev().take_while(|item| is_instruction(item));
            first.chain(last).cloned().collect()
        }
        _ => Vec::new(),
    };
    let fields = [
        "system",
        "instructions",
        "systemInstruction",
        "system_instruction",
        "tools",
        "toolConfig",
    ]
    .map(|key| body.get(key).cloned().unwrap_or(Value::Null));
    without_cache_markers(&Value::Array(
        fields.into_iter().chain([Value::Array(leading)]).collect(),
    ))
}

/// A value without `cache_control` and `prompt_cache_breakpoint` keys, at any depth.
fn without_cache_markers(value: &Value) -> Value {
    match value {
        Value::Object(object) => Value::Object(
            object
                .iter()
                .filter(|(key, _)| {
                    !matches!(key.as_str(), "cache_control" | "prompt_cache_breakpoint")
                })
                .map(|(key, value)| (key.clone(), without_cache_markers(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_cache_markers).collect()),
        other => other.clone(),
    }
}

/// Whether `conversation` starts (after at most one new item: a summary sent as a message)
/// with the end `earlier` kept through a compaction: from one of its user messages to its
/// end, or to its end but for a last user message (a summarizer's request).
pub(super) fn keeps_end_of(earlier: &[Value], conversation: &[Value]) -> bool {
    (0..=1).any(|skip| {
        let Some(rest) = conversation.get(skip..) else {
            return false;
        };
        let Some(first) = rest.first().filter(|first| is_user(first)) else {
            return false;
        };
        (1..earlier.len()).any(|at| {
            let kept = &earlier[at..];
            if kept[0] != *first {
                return false;
            }
            let whole = rest.len() > kept.len() && rest.starts_with(kept);
            let but_last = kept.len() >= 2
                && kept.last().is_some_and(is_user)
                && rest.starts_with(&kept[..kept.len() - 1]);
            whole || but_last
        })
    })
}

/// Whether the items a turn appends send back tool results and no message of a user's.
pub(super) fn returns_tool_results(appended: &[Value]) -> bool {
    appended.iter().any(is_tool_result)
        && !appended
            .iter()
            .any(|item| is_user(item) && !is_tool_result(item))
}

/// A tool's result in any format: a `tool` message, a Responses `function_call_output`,
/// content parts of Anthropic's `tool_result`, Bedrock's `toolResult` or Gemini's
/// `functionResponse`.
fn is_tool_result(item: &Value) -> bool {
    let role = item.get("role").and_then(Value::as_str);
    let kind = item.get("type").and_then(Value::as_str);
    let part_is_result = |part: &Value| {
        part.get("type").and_then(Value::as_str) == Some("tool_result")
            || part.get("toolResult").is_some()
            || part.get("functionResponse").is_some()
    };
    matches!(role, Some("tool" | "function"))
        || matches!(
            kind,
            Some("function_call_output" | "custom_tool_call_output")
        )
        || ["content", "parts"].iter().any(|key| {
            item.get(*key)
                .and_then(Value::as_array)
                .is_some_and(|parts| parts.iter().any(part_is_result))
        })
}

/// Whether a body offers tools (`tools`, Bedrock's `toolConfig.tools`), any at all.
pub(super) fn offers_tools(body: &Value) -> bool {
    let listed = |tools: Option<&Value>| {
        tools
            .and_then(Value::as_array)
            .is_some_and(|t| !t.is_empty())
    };
    listed(body.get("tools")) || listed(body.pointer("/toolConfig/tools"))
}

//! vLLM's message parsing, from request messages to the conversation the template gets:
//! `_parse_chat_message_content` and `_postprocess_messages`
//! (`vllm/renderers/chat_utils.py`; content parts in `content`), then the developer-to-system
//! conversion of `safe_apply_chat_template` (`vllm/renderers/hf.py`).
//!
//! Every message is rebuilt with the keys vLLM copies (role, content, then per role tool
//! calls, reasoning, tool call id; name, task); anything else the client sent is dropped.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::Failure;
use super::content::{BILLING_HEADER, parse_content, python_type};
use super::template_facts::{ContentFormat, TemplateFacts};

/// The conversation the template gets for `messages`, checked already by `check_message`.
pub(super) fn parse_messages<'m>(
    messages: &'m [Value],
    facts: &TemplateFacts,
) -> Result<Vec<Cow<'m, Value>>, Failure> {
    let mut conversation = messages
        .iter()
        .enumerate()
        .map(|(index, message)| {
            parse_message(message, facts.content_format).map_err(|failure| failure.at(index))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let has_developer = conversation
        .iter()
        .any(|message| message.get("role").is_some_and(|role| role == "developer"));
    if has_developer && !facts.has_developer_role {
        conversation = developer_as_system(conversation)?;
    }
    Ok(conversation)
}

/// A message whose parsed form is itself: role and string content only.
fn is_unchanged_by_parsing(message: &Map<String, Value>, format: ContentFormat) -> bool {
    let mut keys = message.keys();
    let (Some(Value::String(role)), Some(Value::String(content))) =
        (message.get("role"), message.get("content"))
    else {
        return false;
    };
    format == ContentFormat::String
        && keys.next().is_some_and(|key| key == "role")
        && keys.next().is_some_and(|key| key == "content")
        && keys.next().is_none()
        && role != "developer"
        && !(role == "system" && content.starts_with(BILLING_HEADER))
}

/// `_parse_chat_message_content` and, for an assistant's tool calls, `_postprocess_messages`.
fn parse_message(message: &Value, format: ContentFormat) -> Result<Cow<'_, Value>, Failure> {
    let Value::Object(object) = message else {
        return Err(Failure::Refused(
            "Input should be a valid dictionary".into(),
        ));
    };
    if is_unchanged_by_parsing(object, format) {
        return Ok(Cow::Borrowed(message));
    }
    let role = object
        .get("role")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut content = parse_content(role, object.get("content"), format)?;
    if role == "tool"
        && let Value::Array(parts) = &content
        && parts
            .iter()
            .all(|part| part.get("type").is_some_and(|kind| kind == "text"))
    {
        // Text parts joined: "most chat templates only handle string content for tool
        // messages".
        let texts: Vec<&str> = parts
            .iter()
            .map(|part| part.get("text").and_then(Value::as_str).unwrap_or_default())
            .collect();
        content = Value::String(texts.join("\n"));
    }
    let mut parsed = Map::new();
    parsed.insert("role".into(), Value::String(role.to_owned()));
    parsed.insert("content".into(), content);
    match role {
        "assistant" => {
            if let Some(calls) = object.get("tool_calls").and_then(Value::as_array) {
                // An empty list is dropped "to keep templates on the normal assistant path".
                if !calls.is_empty() {
                    let calls = calls
                        .iter()
                        .map(parsed_tool_call)
                        .collect::<Result<_, _>>()?;
                    parsed.insert("tool_calls".into(), Value::Array(calls));
                }
            }
            // `_normalize_messages_before` renamed `reasoning_content` to `reasoning`.
            let present = |key: &str| object.get(key).filter(|value| !value.is_null());
            if let Some(reasoning) = present("reasoning").or_else(|| present("reasoning_content")) {
                parsed.insert("reasoning".into(), reasoning.clone());
                parsed.insert("reasoning_content".into(), reasoning.clone());
            }
        }
        "tool" => {
            if let Some(id) = object.get("tool_call_id") {
                parsed.insert("tool_call_id".into(), id.clone());
            }
        }
        _ => {}
    }
    for key in ["name", "task"] {
        if let Some(value @ Value::String(_)) = object.get(key) {
            parsed.insert(key.into(), value.clone());
        }
    }
    if role == "developer" {
        let tools = object.get("tools").cloned().unwrap_or(Value::Null);
        parsed.insert("tools".into(), tools);
    }
    Ok(Cow::Owned(Value::Object(parsed)))
}

/// A tool call as validated (`id`, `function` with `arguments` then `name`, `type`, then the
/// keys the type does not declare) with its arguments parsed (`_postprocess_messages`).
fn parsed_tool_call(call: &Value) -> Result<Value, Failure> {
    let Value::Object(call) = call else {
        return Err(Failure::Refused(
            "assistant tool_calls entries must be objects.".into(),
        ));
    };
    let function = call.get("function").and_then(Value::as_object);
    let (Some(function), Some("function")) = (function, call.get("type").and_then(Value::as_str))
    else {
        return Err(Failure::Refused(
            "chat completions only support assistant tool_calls of type 'function'.".into(),
        ));
    };
    let mut parsed_function = Map::new();
    parsed_function.insert(
        "arguments".into(),
        parsed_arguments(function.get("arguments")),
    );
    parsed_function.insert(
        "name".into(),
        function.get("name").cloned().unwrap_or(Value::Null),
    );
    for (key, value) in function {
        parsed_function
            .entry(key.clone())
            .or_insert_with(|| value.clone());
    }
    let mut parsed = Map::new();
    parsed.insert("id".into(), call.get("id").cloned().unwrap_or(Value::Null));
    parsed.insert("function".into(), Value::Object(parsed_function));
    parsed.insert("type".into(), Value::String("function".into()));
    for (key, value) in call {
        parsed.entry(key.clone()).or_insert_with(|| value.clone());
    }
    Ok(Value::Object(parsed))
}

/// Arguments as an object: parsed from their JSON string; empty, malformed or not an object,
/// `{}` (vLLM keeps the conversation going rather than failing every later turn).
fn parsed_arguments(arguments: Option<&Value>) -> Value {
    let empty = || Value::Object(Map::new());
    match arguments {
        Some(Value::Object(arguments)) if !arguments.is_empty() => Value::Object(arguments.clone()),
        Some(Value::String(text)) if !text.is_empty() => {
            match serde_json::from_str::<Value>(text) {
                Ok(parsed @ Value::Object(_)) => parsed,
                _ => empty(),
            }
        }
        _ => empty(),
    }
}

/// `_convert_developer_to_system` then `_consolidate_system_messages`: developer messages
/// become system messages, and when a system message is not first or not alone, all system
/// texts are merged (blank line between) into one first message.
fn developer_as_system(conversation: Vec<Cow<'_, Value>>) -> Result<Vec<Cow<'_, Value>>, Failure> {
    let conversation: Vec<Cow<'_, Value>> = conversation
        .into_iter()
        .map(|message| {
            if message.get("role").is_none_or(|role| role != "developer") {
                return message;
            }
            let mut converted = message.into_owned();
            if let Value::Object(object) = &mut converted {
                object.insert("role".into(), Value::String("system".into()));
                object.shift_remove("tools");
            }
            Cow::Owned(converted)
        })
        .collect();
    let is_system = |message: &Value| message.get("role").is_some_and(|role| role == "system");
    let system_count = conversation
        .iter()
        .filter(|message| is_system(message))
        .count();
    let first_is_system = conversation
        .first()
        .is_some_and(|message| is_system(message));
    if system_count == 0 || (system_count == 1 && first_is_system) {
        return Ok(conversation);
    }
    let mut texts = Vec::new();
    let mut others = Vec::with_capacity(conversation.len());
    for message in conversation {
        if !is_system(&message) {
            others.push(message);
            continue;
        }
        let text = match message.get("content") {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Array(parts)) => {
                // Parts with a text, and plain strings; Python's join takes strings only.
                let mut texts = Vec::new();
                for part in parts {
                    let text = match part {
                        Value::Object(object) => match object.get("text") {
                            Some(text) => text,
                            None => continue,
                        },
                        text @ Value::String(_) => text,
                        _ => continue,
                    };
                    let Value::String(text) = text else {
                        return Err(Failure::Refused(format!(
                            "sequence item {}: expected str instance, {} found",
                            texts.len(),
                            python_type(text)
                        )));
                    };
                    texts.push(text.as_str());
                }
                texts.join("\n")
            }
            _ => String::new(),
        };
        if !text.is_empty() {
            texts.push(text);
        }
    }
    let mut merged = Map::new();
    merged.insert("role".into(), Value::String("system".into()));
    merged.insert("content".into(), Value::String(texts.join("\n\n")));
    let mut consolidated = vec![Cow::Owned(Value::Object(merged))];
    consolidated.extend(others);
    Ok(consolidated)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn facts(format: ContentFormat, has_developer_role: bool) -> TemplateFacts {
        TemplateFacts {
            content_format: format,
            has_developer_role,
            variables: Default::default(),
        }
    }

    fn parsed(messages: Value, facts: &TemplateFacts) -> Value {
        let messages = messages.as_array().unwrap().clone();
        let conversation = parse_messages(&messages, facts).unwrap();
        Value::Array(conversation.into_iter().map(Cow::into_owned).collect())
    }

    #[test]
    fn assistant_messages_get_content_and_parsed_arguments() {
        let conversation = parsed(
            json!([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                   {"tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}, "id": "c"},
                                   {"id": "d", "type": "function", "function": {"name": "g", "arguments": "[1]"}}],
                    "role": "assistant", "content": null, "reasoning_content": "hmm", "extra": 1}]),
            &facts(ContentFormat::String, false),
        );
        assert_eq!(
            conversation,
            json!([{"role": "user", "content": "a\nb"},
                   {"role": "assistant", "content": "", "tool_calls": [
                       {"id": "c", "function": {"arguments": {"x": 1}, "name": "f"}, "type": "function"},
                       {"id": "d", "function": {"arguments": {}, "name": "g"}, "type": "function"}],
                    "reasoning": "hmm", "reasoning_content": "hmm"}])
        );
        let keys: Vec<&String> = conversation[1].as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "role",
                "content",
                "tool_calls",
                "reasoning",
                "reasoning_content"
            ]
        );
    }

    #[test]
    fn the_openai_format_keeps_parts_and_their_unknown_keys() {
        let conversation = parsed(
            json!([{"role": "user", "content": "hi"},
                   {"role": "user", "content": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}]},
                   {"role": "tool", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "tool_call_id": "c"}]),
            &facts(ContentFormat::OpenAi, false),
        );
        assert_eq!(
            conversation,
            json!([{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                   {"role": "user", "content": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}]},
                   {"role": "tool", "content": "a\nb", "tool_call_id": "c"}])
        );
    }

    #[test]
    fn developer_messages_become_one_system_message() {
        let conversation = parsed(
            json!([{"role": "system", "content": "x-anthropic-billing-header: cch=1\nBe terse."},
                   {"role": "user", "content": "hi"},
                   {"role": "developer", "content": "Use tools."}]),
            &facts(ContentFormat::String, false),
        );
        assert_eq!(
            conversation,
            json!([{"role": "system", "content": "Be terse.\n\nUse tools."}, {"role": "user", "content": "hi"}])
        );
    }

    #[test]
    fn unknown_parts_are_refused_and_media_not_modelled() {
        let facts = facts(ContentFormat::String, false);
        let unknown = [json!({"role": "user", "content": [{"type": "foo"}]})];
        let refused = parse_messages(&unknown, &facts);
        assert!(matches!(refused, Err(Failure::Refused(reason)) if reason.contains("'foo'")));
        let image = [
            json!({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}),
        ];
        let media = parse_messages(&image, &facts);
        assert!(matches!(media, Err(Failure::NotModelled(_))));
    }
}

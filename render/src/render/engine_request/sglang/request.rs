//! What SGLang's pydantic request model (`sglang/srt/entrypoints/openai/protocol.py`,
//! `ChatCompletionRequest`) takes, and how its `model_dump()` hands messages and tools on.
//!
//! A message is `ChatCompletionMessageUserParam` (role `user`: role and content) or
//! `ChatCompletionMessageGenericParam` (any other role, matched case-insensitively): role,
//! content, tool_call_id, name, phase, reasoning_content, tool_calls, tools, prefix, in that
//! order; every other key is dropped. A content part is one of the typed parts (text, thinking,
//! image, video, audio, tool reference) with only its declared keys. A tool is `Tool`: type,
//! function (its keys in the order sent, `Function._serialize`), defer_loading.

use serde_json::{Map, Value};

/// The roles `ChatCompletionMessageGenericParam` takes (`_GenericMessageRole`).
const GENERIC_ROLES: [&str; 7] = [
    "system",
    "assistant",
    "tool",
    "function",
    "developer",
    "latest_reminder",
    "root",
];

/// The part types a text-only model refuses (`_MEDIA_CONTENT_PART_TYPES`; inline audio is
/// turned into `audio_url` as it validates).
pub(super) const MEDIA_PART_TYPES: [&str; 4] =
    ["image_url", "video_url", "audio_url", "input_audio"];

pub(super) use super::super::invalid;

fn optional_string(map: &Map<String, Value>, key: &str, place: &str) -> Result<Value, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(Value::Null),
        Some(Value::String(text)) => Ok(Value::String(text.clone())),
        Some(_) => Err(invalid(
            "Input should be a valid string",
            &format!("{place}.{key}"),
        )),
    }
}

/// A `bool` field in pydantic's lax mode.
fn optional_bool(map: &Map<String, Value>, key: &str, place: &str) -> Result<Value, String> {
    let flag = match map.get(key) {
        None | Some(Value::Null) => return Ok(Value::Null),
        Some(Value::Bool(flag)) => Some(*flag),
        Some(Value::Number(number)) => match number.as_f64() {
            Some(0.0) => Some(false),
            Some(1.0) => Some(true),
            _ => None,
        },
        Some(Value::String(text)) => match text.to_ascii_lowercase().as_str() {
            "0" | "off" | "f" | "false" | "n" | "no" => Some(false),
            "1" | "on" | "t" | "true" | "y" | "yes" => Some(true),
            _ => None,
        },
        Some(_) => None,
    };
    flag.map(Value::Bool)
        .ok_or_else(|| invalid("Input should be a valid boolean", &format!("{place}.{key}")))
}

/// A message as `model_dump()` gives it: every declared field, null where not sent.
pub(super) fn dumped_message(message: &Value, place: &str) -> Result<Map<String, Value>, String> {
    let Value::Object(message) = message else {
        return Err(invalid("Input should be a valid dictionary", place));
    };
    let role = match message.get("role") {
        Some(Value::String(role)) => role,
        Some(_) => return Err(invalid("'role' must be a string", place)),
        None => return Err(invalid("Field required", &format!("{place}.role"))),
    };
    let mut dumped = Map::new();
    if role == "user" {
        let content = match message.get("content") {
            Some(Value::String(text)) => Value::String(text.clone()),
            Some(Value::Array(parts)) => dumped_parts(parts, false, place)?,
            Some(_) => {
                return Err(invalid(
                    "Input should be a valid string",
                    &format!("{place}.content"),
                ));
            }
            None => return Err(invalid("Field required", &format!("{place}.content"))),
        };
        dumped.insert("role".into(), Value::String("user".into()));
        dumped.insert("content".into(), content);
        return Ok(dumped);
    }
    let role = role.to_lowercase();
    if !GENERIC_ROLES.contains(&role.as_str()) {
        return Err(invalid(
            "'role' must be one of the roles SGLang takes",
            &format!("{place}.role"),
        ));
    }
    let content = match message.get("content") {
        None | Some(Value::Null) => Value::Null,
        Some(Value::String(text)) => Value::String(text.clone()),
        Some(Value::Array(parts)) => dumped_parts(parts, role == "assistant", place)?,
        Some(_) => {
            return Err(invalid(
                "Input should be a valid string",
                &format!("{place}.content"),
            ));
        }
    };
    let phase = match message.get("phase") {
        None | Some(Value::Null) => Value::Null,
        Some(phase) if phase == "commentary" || phase == "final_answer" => phase.clone(),
        Some(_) => {
            return Err(invalid(
                "Input should be 'commentary' or 'final_answer'",
                &format!("{place}.phase"),
            ));
        }
    };
    let tool_calls = match message.get("tool_calls") {
        None | Some(Value::Null) => Value::Null,
        Some(Value::Array(calls)) => Value::Array(
            calls
                .iter()
                .enumerate()
                .map(|(index, call)| dumped_tool_call(call, &format!("{place}.tool_calls.{index}")))
                .collect::<Result<_, _>>()?,
        ),
        Some(_) => {
            return Err(invalid(
                "Input should be a valid list",
                &format!("{place}.tool_calls"),
            ));
        }
    };
    let tools = dumped_tools(message.get("tools"), &format!("{place}.tools"))?
        .map_or(Value::Null, Value::Array);
    dumped.insert("role".into(), Value::String(role));
    dumped.insert("content".into(), content);
    dumped.insert(
        "tool_call_id".into(),
        optional_string(message, "tool_call_id", place)?,
    );
    dumped.insert("name".into(), optional_string(message, "name", place)?);
    dumped.insert("phase".into(), phase);
    dumped.insert(
        "reasoning_content".into(),
        optional_string(message, "reasoning_content", place)?,
    );
    dumped.insert("tool_calls".into(), tool_calls);
    dumped.insert("tools".into(), tools);
    dumped.insert("prefix".into(), optional_bool(message, "prefix", place)?);
    Ok(dumped)
}

/// Content parts, each as its part type dumps it; thinking parts only from assistants
/// (`validate_thinking_parts_role`).
fn dumped_parts(parts: &[Value], from_assistant: bool, place: &str) -> Result<Value, String> {
    let mut dumped = Vec::with_capacity(parts.len());
    for (index, part) in parts.iter().enumerate() {
        let place = format!("{place}.content.{index}");
        let Value::Object(part) = part else {
            return Err(invalid("Input should be a valid dictionary", &place));
        };
        let kind = part.get("type").and_then(Value::as_str).unwrap_or_default();
        let mut out = Map::new();
        out.insert("type".into(), Value::String(kind.to_owned()));
        match kind {
            "text" => {
                let Some(Value::String(text)) = part.get("text") else {
                    return Err(invalid(
                        "Input should be a valid string",
                        &format!("{place}.text"),
                    ));
                };
                out.insert("text".into(), Value::String(text.clone()));
            }
            "thinking" | "reasoning" => {
                if !from_assistant {
                    return Err(invalid(
                        "thinking content parts are only valid in assistant messages",
                        &place,
                    ));
                }
                let thinking = optional_string(part, "thinking", &place)?;
                let text = optional_string(part, "text", &place)?;
                if thinking.is_null() == text.is_null() {
                    return Err(invalid(
                        "thinking parts require exactly one of 'thinking' or 'text'",
                        &place,
                    ));
                }
                out.insert("thinking".into(), thinking);
                out.insert("text".into(), text);
            }
            "tool_reference" => {
                let Some(Value::String(name)) = part.get("name") else {
                    return Err(invalid(
                        "Input should be a valid string",
                        &format!("{place}.name"),
                    ));
                };
                out.insert("name".into(), Value::String(name.clone()));
            }
            // Refused on a text-only model before anything reads them.
            kind if MEDIA_PART_TYPES.contains(&kind) => {
                if part.get(kind).is_none_or(Value::is_null) {
                    return Err(invalid("Field required", &format!("{place}.{kind}")));
                }
            }
            _ => {
                return Err(invalid(
                    "Input tag does not match any of the expected tags",
                    &place,
                ));
            }
        }
        dumped.push(Value::Object(out));
    }
    Ok(Value::Array(dumped))
}

/// `ToolCall`: id, index, type ("function"), function (name, arguments: a string or an
/// object); the nulls stay in the dump.
fn dumped_tool_call(call: &Value, place: &str) -> Result<Value, String> {
    let Value::Object(call) = call else {
        return Err(invalid("Input should be a valid dictionary", place));
    };
    let index = match call.get("index") {
        None | Some(Value::Null) => Value::Null,
        Some(index) if index.is_i64() || index.is_u64() => index.clone(),
        Some(_) => {
            return Err(invalid(
                "Input should be a valid integer",
                &format!("{place}.index"),
            ));
        }
    };
    if call.get("type").is_some_and(|kind| kind != "function") {
        return Err(invalid(
            "Input should be 'function'",
            &format!("{place}.type"),
        ));
    }
    let Some(function) = call.get("function") else {
        return Err(invalid("Field required", &format!("{place}.function")));
    };
    let Value::Object(function) = function else {
        return Err(invalid(
            "Input should be a valid dictionary",
            &format!("{place}.function"),
        ));
    };
    let arguments = match function.get("arguments") {
        None | Some(Value::Null) => Value::Null,
        Some(arguments @ (Value::String(_) | Value::Object(_))) => arguments.clone(),
        Some(_) => {
            return Err(invalid(
                "Input should be a valid string",
                &format!("{place}.function.arguments"),
            ));
        }
    };
    let mut dumped_function = Map::new();
    dumped_function.insert("name".into(), optional_string(function, "name", place)?);
    dumped_function.insert("arguments".into(), arguments);
    let mut dumped = Map::new();
    dumped.insert("id".into(), optional_string(call, "id", place)?);
    dumped.insert("index".into(), index);
    dumped.insert("type".into(), Value::String("function".into()));
    dumped.insert("function".into(), Value::Object(dumped_function));
    Ok(Value::Object(dumped))
}

/// A list of tools as `Tool.model_dump()` gives them, `None` for none.
pub(super) fn dumped_tools(
    tools: Option<&Value>,
    place: &str,
) -> Result<Option<Vec<Value>>, String> {
    match tools {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(tools)) => tools
            .iter()
            .enumerate()
            .map(|(index, tool)| dumped_tool(tool, &format!("{place}.{index}")))
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(invalid("Input should be a valid list", place)),
    }
}

/// `Tool`: its type (any string, "function" when not sent), its function and its
/// `defer_loading` (null when not sent). The function's keys come in the order sent
/// (`Function._capture_key_order`), then the declared ones not sent (description and
/// parameters as null); unknown keys are dropped, and so are `strict` and `defer_loading`
/// when null. A tool's `defer_loading` fills its function's (`_propagate_defer_loading`).
fn dumped_tool(tool: &Value, place: &str) -> Result<Value, String> {
    let Value::Object(tool) = tool else {
        return Err(invalid("Input should be a valid dictionary", place));
    };
    let kind = match tool.get("type") {
        None => Value::String("function".into()),
        Some(Value::String(kind)) => Value::String(kind.clone()),
        Some(_) => {
            return Err(invalid(
                "Input should be a valid string",
                &format!("{place}.type"),
            ));
        }
    };
    let function_place = format!("{place}.function");
    let function = match tool.get("function") {
        Some(Value::Object(function)) => function,
        Some(_) => {
            return Err(invalid(
                "Input should be a valid dictionary",
                &function_place,
            ));
        }
        None => return Err(invalid("Field required", &function_place)),
    };
    let tool_defer = optional_bool(tool, "defer_loading", place)?;
    let name = match function.get("name") {
        Some(Value::String(name)) => Value::String(name.clone()),
        Some(_) => {
            return Err(invalid(
                "Input should be a valid string",
                &format!("{function_place}.name"),
            ));
        }
        None => return Err(invalid("Field required", &format!("{function_place}.name"))),
    };
    let mut defer = optional_bool(function, "defer_loading", &function_place)?;
    if defer.is_null() {
        defer = tool_defer.clone();
    }
    let mut fields = Map::new();
    fields.insert(
        "description".into(),
        optional_string(function, "description", &function_place)?,
    );
    fields.insert("name".into(), name);
    fields.insert(
        "parameters".into(),
        function.get("parameters").cloned().unwrap_or(Value::Null),
    );
    fields.insert(
        "strict".into(),
        optional_bool(function, "strict", &function_place)?,
    );
    fields.insert("defer_loading".into(), defer);
    for optional in ["strict", "defer_loading"] {
        if fields[optional].is_null() {
            fields.shift_remove(optional);
        }
    }
    let mut ordered = Map::new();
    for key in function.keys() {
        if let Some(value) = fields.shift_remove(key) {
            ordered.insert(key.clone(), value);
        }
    }
    ordered.extend(fields);
    let mut dumped = Map::new();
    dumped.insert("type".into(), kind);
    dumped.insert("function".into(), Value::Object(ordered));
    dumped.insert("defer_loading".into(), tool_defer);
    Ok(Value::Object(dumped))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_function_keeps_the_order_sent_and_gets_its_missing_fields_last() {
        let tools = json!([{"function": {"parameters": {"b": 1}, "zz": 1, "name": "f"}}]);
        let dumped = dumped_tools(Some(&tools), "tools").unwrap().unwrap();
        assert_eq!(
            serde_json::to_string(&dumped[0]).unwrap(),
            r#"{"type":"function","function":{"parameters":{"b":1},"name":"f","description":null},"defer_loading":null}"#
        );
    }

    #[test]
    fn messages_are_dumped_with_their_declared_fields_only() {
        let message = json!({"reasoning": "r", "content": null, "role": "Assistant",
            "tool_calls": [{"function": {"arguments": "{}", "name": "f"}, "id": "c"}]});
        let dumped = dumped_message(&message, "messages.0").unwrap();
        assert_eq!(
            dumped.keys().collect::<Vec<_>>(),
            [
                "role",
                "content",
                "tool_call_id",
                "name",
                "phase",
                "reasoning_content",
                "tool_calls",
                "tools",
                "prefix"
            ]
        );
        assert_eq!(dumped["role"], "assistant");
        assert_eq!(
            dumped["tool_calls"],
            json!([{"id": "c", "index": null, "type": "function", "function": {"name": "f", "arguments": "{}"}}])
        );
        let user = json!({"role": "user", "name": "n", "content": [{"type": "text", "text": "a", "cache_control": {}}]});
        assert_eq!(
            Value::Object(dumped_message(&user, "messages.0").unwrap()),
            json!({"role": "user", "content": [{"type": "text", "text": "a"}]})
        );
        for refused in [
            json!({"role": "User", "content": "x"}),
            json!({"role": "user", "content": [{"type": "input_text", "text": "x"}]}),
            json!({"role": "user", "content": [{"type": "thinking", "thinking": "x"}]}),
            json!({"role": "tool", "tool_call_id": 1, "content": "x"}),
        ] {
            assert!(dumped_message(&refused, "messages.0").is_err(), "{refused}");
        }
    }
}

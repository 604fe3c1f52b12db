//! What vLLM's pydantic `ChatCompletionRequest`
//! (`vllm/entrypoints/openai/chat_completion/protocol.py`) refuses or rewrites before any
//! message is parsed: its model validators (`check_tool_usage`, `check_generation_prompt`,
//! `_normalize_messages_before`), the field types of the messages and tools, and the tools
//! re-dumped with `tool.model_dump()` (`OnlineRenderer.render_chat`).
//!
//! Messages are validated against a union of typed dicts: OpenAI's message types, one per
//! role, which keep unknown keys, and vLLM's `CustomChatCompletionMessageParam`, which takes
//! any role. A message is refused when no member takes it.

use serde_json::{Map, Value};

/// The roles of OpenAI's message types; any other role has only vLLM's custom type.
const OPENAI_ROLES: [&str; 6] = [
    "developer",
    "system",
    "user",
    "assistant",
    "tool",
    "function",
];

/// The values `reasoning_effort` takes.
const REASONING_EFFORTS: [&str; 7] = ["none", "minimal", "low", "medium", "high", "xhigh", "max"];

/// The request fields that become template variables (`build_chat_params`), as vLLM merges
/// them: the request's `chat_template_kwargs`, overridden by the named fields.
#[derive(Debug, Default)]
pub(super) struct RequestVariables {
    pub add_generation_prompt: Option<bool>,
    /// transformers then renders the last message open-ended.
    pub continue_final_message: bool,
    /// The other variables the request sets: `documents`, `reasoning_effort`,
    /// `enable_thinking` and its `chat_template_kwargs`.
    pub others: Map<String, Value>,
}

/// Python's truth value of a JSON value, as the model validators test raw fields.
pub(super) fn truthy(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => false,
        Some(Value::Bool(flag)) => *flag,
        Some(Value::Number(number)) => number.as_f64().is_some_and(|number| number != 0.0),
        Some(Value::String(text)) => !text.is_empty(),
        Some(Value::Array(items)) => !items.is_empty(),
        Some(Value::Object(map)) => !map.is_empty(),
    }
}

/// A `bool` field in pydantic's lax mode: true and false, 0 and 1, and the usual words.
fn lax_bool(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(flag) => Some(*flag),
        Value::Number(number) => match number.as_f64() {
            Some(0.0) => Some(false),
            Some(1.0) => Some(true),
            _ => None,
        },
        Value::String(text) => match text.to_ascii_lowercase().as_str() {
            "0" | "off" | "f" | "false" | "n" | "no" => Some(false),
            "1" | "on" | "t" | "true" | "y" | "yes" => Some(true),
            _ => None,
        },
        _ => None,
    }
}

fn optional_bool(body: &Map<String, Value>, key: &str) -> Result<Option<bool>, String> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => lax_bool(value)
            .map(Some)
            .ok_or_else(|| format!("Input should be a valid boolean at {key}")),
    }
}

/// The request-level checks, in the order vLLM's validators run, and the template variables
/// the request sets.
pub(super) fn check_request(body: &Map<String, Value>) -> Result<RequestVariables, String> {
    check_tool_usage(body)?;
    if truthy(body.get("continue_final_message")) && truthy(body.get("add_generation_prompt")) {
        return Err(
            "Cannot set both `continue_final_message` and `add_generation_prompt` to True.".into(),
        );
    }
    let kwargs = match body.get("chat_template_kwargs") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(kwargs)) => kwargs.clone(),
        Some(_) => return Err("Input should be a valid dictionary at chat_template_kwargs".into()),
    };
    // The named fields always win over `chat_template_kwargs`: `add_generation_prompt` and
    // `continue_final_message` have non-null defaults, the others only when set
    // (`merge_kwargs` skips None and "auto").
    let add_generation_prompt = optional_bool(body, "add_generation_prompt")?;
    let continue_final_message = optional_bool(body, "continue_final_message")?.unwrap_or(false);
    let mut others = kwargs;
    others.remove("add_generation_prompt");
    others.remove("continue_final_message");
    let mut set = |key: &str, value: Option<&Value>| {
        if let Some(value) = value.filter(|value| !value.is_null() && *value != "auto") {
            others.insert(key.to_owned(), value.clone());
        }
    };
    set("documents", body.get("documents"));
    let reasoning_effort = body
        .get("reasoning_effort")
        .filter(|value| !value.is_null());
    if reasoning_effort
        .is_some_and(|effort| !REASONING_EFFORTS.contains(&effort.as_str().unwrap_or_default()))
    {
        return Err(format!(
            "Input should be {} at reasoning_effort",
            REASONING_EFFORTS
                .map(|effort| format!("'{effort}'"))
                .join(", ")
        ));
    }
    set("reasoning_effort", reasoning_effort);
    if let Some(effort) = reasoning_effort
        && !others.contains_key("enable_thinking")
    {
        others.insert("enable_thinking".into(), Value::Bool(effort != "none"));
    }
    Ok(RequestVariables {
        add_generation_prompt,
        continue_final_message,
        others,
    })
}

/// `check_tool_usage` and the type of `tool_choice`.
fn check_tool_usage(body: &Map<String, Value>) -> Result<(), String> {
    if body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty)
    {
        return Err(
            "`tools` must not be an empty array. Either provide at least one tool or \
                    omit the field entirely."
                .into(),
        );
    }
    let choice = match body.get("tool_choice") {
        None | Some(Value::Null) => return Ok(()),
        Some(choice) if choice == "none" => return Ok(()),
        Some(choice) => choice,
    };
    let tools = match body.get("tools") {
        None | Some(Value::Null) => {
            return Err("When using `tool_choice`, `tools` must be set.".into());
        }
        Some(tools) => tools,
    };
    let Value::Object(named) = choice else {
        if choice == "auto" || choice == "required" {
            return Ok(());
        }
        let shown = choice
            .as_str()
            .map_or_else(|| choice.to_string(), str::to_owned);
        return Err(format!(
            "Invalid value for `tool_choice`: {shown}! Only named tools, \"none\", \"auto\" or \
             \"required\" are supported."
        ));
    };
    let usage =
        "Correct usage: `{\"type\": \"function\", \"function\": {\"name\": \"my_function\"}}`";
    let Some(Value::Object(function)) = named.get("function") else {
        return Err(format!(
            "Invalid value for `function` in `tool_choice`! {usage}"
        ));
    };
    let name = match function.get("name") {
        None => {
            return Err(format!(
                "Expected field `name` in `function` in `tool_choice`! {usage}"
            ));
        }
        Some(Value::String(name)) if !name.is_empty() => name,
        Some(_) => {
            return Err(format!(
                "Invalid `name` in `function` in `tool_choice`! {usage}"
            ));
        }
    };
    let matches_a_tool = tools
        .as_array()
        .into_iter()
        .flatten()
        .any(|tool| tool.pointer("/function/name").and_then(Value::as_str) == Some(name));
    if !matches_a_tool {
        return Err(
            "The tool specified in `tool_choice` does not match any of the specified `tools`"
                .into(),
        );
    }
    if named.get("type").is_some_and(|kind| kind != "function") {
        return Err("Input should be 'function' at tool_choice.type".into());
    }
    Ok(())
}

/// The tools as the template gets them: each validated as `ChatCompletionToolsParam` and
/// dumped with `model_dump()` (`FunctionDefinition`'s own serializer): `type`, then the
/// function's `name`, `description` and `parameters` (null when not sent), `strict` and
/// `defer_loading` when set; unknown keys dropped.
/// `OnlineRenderer.validate_chat_template`, for a server without
/// `--trust-request-chat-template`: a request may not bring its own template.
pub(super) fn check_template_trust(body: &Map<String, Value>) -> Result<(), String> {
    let has_template = |value: Option<&Value>| value.is_some_and(|value| !value.is_null());
    let kwargs_template = body
        .get("chat_template_kwargs")
        .and_then(|kwargs| kwargs.get("chat_template"));
    if has_template(body.get("chat_template")) || has_template(kwargs_template) {
        return Err(
            "Chat template is passed with request, but --trust-request-chat-template \
                    is not set. Refused request with untrusted chat template."
                .into(),
        );
    }
    Ok(())
}

pub(super) fn dumped_tools(tools: Option<&Value>) -> Result<Option<Vec<Value>>, String> {
    let tools = match tools {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(tools)) => tools,
        Some(_) => return Err("Input should be a valid list at tools".into()),
    };
    tools
        .iter()
        .enumerate()
        .map(|(index, tool)| {
            dumped_tool(tool).map_err(|reason| format!("{reason} at tools.{index}"))
        })
        .collect::<Result<Vec<Value>, String>>()
        .map(Some)
}

fn dumped_tool(tool: &Value) -> Result<Value, String> {
    let Value::Object(tool) = tool else {
        return Err("Input should be a valid dictionary".into());
    };
    if tool.get("type").is_some_and(|kind| kind != "function") {
        return Err("Input should be 'function'".into());
    }
    let Some(function) = tool.get("function") else {
        return Err("Field required".into());
    };
    let Value::Object(function) = function else {
        return Err("Input should be a valid dictionary".into());
    };
    let nullable = |key: &str, valid: fn(&Value) -> bool, kind: &str| match function.get(key) {
        None | Some(Value::Null) => Ok(Value::Null),
        Some(value) if valid(value) => Ok(value.clone()),
        Some(_) => Err(format!("Input should be a valid {kind}")),
    };
    let name = match function.get("name") {
        Some(Value::String(name)) => name.clone(),
        Some(_) => return Err("Input should be a valid string".into()),
        None => return Err("Field required".into()),
    };
    let description = nullable("description", Value::is_string, "string")?;
    let parameters = nullable("parameters", Value::is_object, "dictionary")?;
    let flag = |map: &Map<String, Value>, key: &str| match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => lax_bool(value)
            .map(Some)
            .ok_or_else(|| "Input should be a valid boolean".to_owned()),
    };
    let strict = flag(function, "strict")?;
    let tool_defer = flag(tool, "defer_loading")?;
    // `_propagate_defer_loading`: the tool's flag fills the function's.
    let function_defer = flag(function, "defer_loading")?.or(tool_defer);
    let mut dumped = Map::new();
    dumped.insert("name".into(), Value::String(name));
    dumped.insert("description".into(), description);
    dumped.insert("parameters".into(), parameters);
    if let Some(strict) = strict {
        dumped.insert("strict".into(), Value::Bool(strict));
    }
    if let Some(defer) = function_defer {
        dumped.insert("defer_loading".into(), Value::Bool(defer));
    }
    let mut out = Map::new();
    out.insert("type".into(), Value::String("function".into()));
    out.insert("function".into(), Value::Object(dumped));
    if let Some(defer) = tool_defer {
        out.insert("defer_loading".into(), Value::Bool(defer));
    }
    Ok(Value::Object(out))
}

/// The message's type check: `Err` with pydantic's reason when no member of the message
/// union takes it. Content parts are checked where they are parsed.
pub(super) fn check_message(message: &Value) -> Result<(), String> {
    let Value::Object(message) = message else {
        return Err("Input should be a valid dictionary".into());
    };
    let role = match message.get("role") {
        Some(Value::String(role)) => role.as_str(),
        Some(_) => return Err("Input should be a valid string at role".into()),
        None => return Err("Field required at role".into()),
    };
    let is_string = |key: &str| message.get(key).is_some_and(Value::is_string);
    let absent_or = |key: &str, valid: fn(&Value) -> bool| message.get(key).is_none_or(valid);
    // Only vLLM's custom type declares these for any role; OpenAI's types keep them as
    // unknown keys, and vLLM reads each for one role only.
    let custom_only = !OPENAI_ROLES.contains(&role);
    match message.get("content") {
        None | Some(Value::String(_) | Value::Array(_)) => {}
        // OpenAI's assistant and function messages take null content; nothing else does.
        Some(Value::Null) if role == "assistant" || (role == "function" && is_string("name")) => {}
        Some(_) => return Err("Input should be a valid string at content".into()),
    }
    if let Some(Value::Array(parts)) = message.get("content")
        && OPENAI_ROLES.contains(&role)
        && role != "function"
        && !parts.is_empty()
        && !parts.iter().any(is_typed_part)
    {
        // pydantic prefers OpenAI's type for the role, whose content parts are typed objects
        // only, unless vLLM's own type fills more fields with some typed part.
        return Err("Input should be a valid dictionary at content.0".into());
    }
    // The tool type takes any `name` as an unknown key when its own fields are valid.
    let tool_type_fits = role == "tool" && is_string("tool_call_id");
    if !absent_or("name", Value::is_string) && !tool_type_fits {
        return Err("Input should be a valid string at name".into());
    }
    let string_or_null = |value: &Value| value.is_string() || value.is_null();
    if (custom_only || role == "tool") && !absent_or("tool_call_id", string_or_null) {
        return Err("Input should be a valid string at tool_call_id".into());
    }
    if custom_only {
        for key in ["reasoning", "task"] {
            if !absent_or(key, string_or_null) {
                return Err(format!("Input should be a valid string at {key}"));
            }
        }
    }
    if role == "assistant" || custom_only {
        check_tool_calls(message, role)?;
    }
    Ok(())
}

/// A content part that fills a field of a part type: an object with a string `type` and a
/// value for what that type carries.
fn is_typed_part(part: &Value) -> bool {
    let Some(kind) = part.get("type").and_then(Value::as_str) else {
        return false;
    };
    let carried = match kind {
        "text" | "input_text" | "output_text" => "text",
        other => other,
    };
    part.get(carried).is_some_and(|value| !value.is_null())
}

/// An assistant's `tool_calls`: a list of function calls (`id`, `type` "function",
/// `function` with string `name` and `arguments`). OpenAI's assistant type also takes
/// custom tool calls, which vLLM refuses later.
fn check_tool_calls(message: &Map<String, Value>, role: &str) -> Result<(), String> {
    let calls = match message.get("tool_calls") {
        None => return Ok(()),
        // Only vLLM's custom type takes null, and it takes no null content.
        Some(Value::Null) if message.get("content").is_some_and(Value::is_null) => {
            return Err("Input should be a valid list at tool_calls".into());
        }
        Some(Value::Null) => return Ok(()),
        Some(Value::Array(calls)) => calls,
        Some(_) => return Err("Input should be a valid list at tool_calls".into()),
    };
    for (index, call) in calls.iter().enumerate() {
        let place = format!("tool_calls.{index}");
        let Value::Object(call) = call else {
            return Err(format!("Input should be a valid dictionary at {place}"));
        };
        let string = |map: &Map<String, Value>, key: &str| match map.get(key) {
            Some(Value::String(_)) => Ok(()),
            Some(_) => Err(format!("Input should be a valid string at {place}.{key}")),
            None => Err(format!("Field required at {place}.{key}")),
        };
        string(call, "id")?;
        let (kind, payload, fields): (&str, &str, [&str; 2]) =
            match call.get("type").and_then(Value::as_str) {
                Some("custom") if role == "assistant" => ("custom", "custom", ["input", "name"]),
                Some("function") => ("function", "function", ["arguments", "name"]),
                Some(_) => return Err(format!("Input should be 'function' at {place}.type")),
                None => return Err(format!("Field required at {place}.type")),
            };
        let Some(Value::Object(payload)) = call.get(payload) else {
            return Err(format!("Field required at {place}.{kind}"));
        };
        for field in fields {
            string(payload, field)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tools_are_dumped_in_the_request_model_order() {
        let tools = json!([{"function": {"parameters": {"b": 1}, "zz": 1, "name": "f"}, "defer_loading": true}]);
        let dumped = dumped_tools(Some(&tools)).unwrap().unwrap();
        assert_eq!(
            serde_json::to_string(&dumped[0]).unwrap(),
            r#"{"type":"function","function":{"name":"f","description":null,"parameters":{"b":1},"defer_loading":true},"defer_loading":true}"#
        );
        assert!(dumped_tools(Some(&json!([{"type": "x", "function": {"name": "f"}}]))).is_err());
    }

    #[test]
    fn null_content_is_refused_except_for_assistants() {
        assert!(check_message(&json!({"role": "assistant", "content": null})).is_ok());
        assert!(check_message(&json!({"role": "system", "content": null})).is_err());
        assert!(check_message(&json!({"role": "bogus", "content": "x"})).is_ok());
        assert!(check_message(&json!({"content": "x"})).is_err());
    }

    #[test]
    fn reasoning_effort_sets_enable_thinking() {
        let body = json!({"reasoning_effort": "none", "messages": []});
        let variables = check_request(body.as_object().unwrap()).unwrap();
        assert_eq!(variables.others["enable_thinking"], json!(false));
        let body = json!({"tools": [], "messages": []});
        assert!(check_request(body.as_object().unwrap()).is_err());
    }
}

//! vLLM's `/v1/responses` for a model without Harmony: `OnlineRenderer.render_responses`
//! (`vllm/renderers/online_renderer.py`) builds chat messages from the instructions and input
//! items (`construct_input_messages`, `vllm/entrypoints/openai/responses/utils.py`), function
//! tools as chat tools (`construct_tool_dicts`) and template variables from the request
//! (`ResponsesRequest.build_chat_params`), then parses the messages as its chat path does.
//!
//! - The instructions become a system message; a string input a user message.
//! - Items are read as `ResponsesRequest.input_item_parsing` types them: a `function_call` is
//!   a tool call, a `reasoning` item the `reasoning` of an assistant message (its first
//!   content text, else its first summary text; encrypted content is refused), an assistant
//!   message its first text; each merges into the assistant message before it while that one
//!   lacks what it brings. A `function_call_output` is a tool message; an item with a role is
//!   passed on as it is; any other item is refused.
//! - `reasoning.effort` is the `reasoning_effort` variable, and sets `enable_thinking` unless
//!   the request's `chat_template_kwargs` do.
//! - A last assistant message or reasoning item still in progress is continued
//!   (`should_continue_final_message`): no generation prompt, transformers'
//!   `continue_final_message`.

use serde_json::{Map, Value, json};

use super::Failure;

/// What vLLM's Responses path hands its chat path.
pub(super) struct Converted {
    pub messages: Vec<Value>,
    pub tools: Option<Value>,
    pub variables: Map<String, Value>,
    /// The last item is an assistant message or reasoning still in progress: it is continued.
    pub continue_final: bool,
}

fn refused(reason: impl Into<String>) -> Failure {
    Failure::Refused(reason.into())
}

pub(super) fn convert(body: &Value) -> Result<Converted, Failure> {
    let Value::Object(body) = body else {
        return Err(refused("Input should be a valid dictionary"));
    };
    let mut messages: Vec<Value> = Vec::new();
    match body.get("instructions") {
        None | Some(Value::Null) => {}
        Some(Value::String(instructions)) => {
            if !instructions.is_empty() {
                messages.push(json!({"role": "system", "content": instructions}));
            }
        }
        Some(_) => return Err(refused("Input should be a valid string at instructions")),
    }
    match body.get("input") {
        Some(Value::String(text)) => messages.push(json!({"role": "user", "content": text})),
        Some(Value::Array(items)) => {
            for (index, item) in items.iter().enumerate() {
                add_item(item, &mut messages).map_err(|failure| match failure {
                    Failure::Refused(reason) => {
                        Failure::Refused(format!("{reason} (input.{index})"))
                    }
                    not_modelled => not_modelled,
                })?;
            }
        }
        Some(_) => return Err(refused("Input should be a valid string at input")),
        None => return Err(refused("Field required at input")),
    }
    let tools = match body.get("tools") {
        None | Some(Value::Null) => None,
        Some(Value::Array(tools)) if tools.is_empty() => None,
        Some(Value::Array(tools)) => {
            let mut functions = Vec::new();
            for tool in tools {
                match tool.get("type").and_then(Value::as_str) {
                    Some("function") => functions.push(function_tool(tool)),
                    Some("namespace" | "custom") => {
                        return Err(Failure::NotModelled(
                            "namespace and custom tools in a Responses body".into(),
                        ));
                    }
                    // Built-in tools (web search, MCP, …) are not rendered for the template.
                    _ => {}
                }
            }
            Some(Value::Array(functions))
        }
        Some(_) => return Err(refused("Input should be a valid list at tools")),
    };
    let mut variables = match body.get("chat_template_kwargs") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(kwargs)) => kwargs.clone(),
        Some(_) => {
            return Err(refused(
                "Input should be a valid dictionary at chat_template_kwargs",
            ));
        }
    };
    if variables
        .get("chat_template")
        .is_some_and(|template| !template.is_null())
    {
        return Err(refused(
            "Chat template is passed with request, but --trust-request-chat-template is not \
             set. Refused request with untrusted chat template.",
        ));
    }
    if let Some(effort) = body
        .get("reasoning")
        .and_then(|reasoning| reasoning.get("effort"))
        .filter(|effort| !effort.is_null())
    {
        if !variables.contains_key("enable_thinking") {
            variables.insert("enable_thinking".into(), Value::Bool(effort != "none"));
        }
        variables.insert("reasoning_effort".into(), effort.clone());
    }
    let continue_final = matches!(
        body.get("input"),
        Some(Value::Array(items)) if continues_final_message(items)
    );
    Ok(Converted {
        messages,
        tools,
        variables,
        continue_final,
    })
}

/// `should_continue_final_message`: the last item is an assistant message or reasoning item
/// still in progress.
fn continues_final_message(items: &[Value]) -> bool {
    items.last().is_some_and(|last| {
        let kind = last
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message");
        (kind == "message" || kind == "reasoning")
            && matches!(
                last.get("status").and_then(Value::as_str),
                Some("in_progress" | "incomplete")
            )
    })
}

/// `FunctionTool` dumped and read back as a chat completions tool.
fn function_tool(tool: &Value) -> Value {
    let field = |key: &str| tool.get(key).cloned().unwrap_or(Value::Null);
    json!({
        "type": "function",
        "function": {
            "name": field("name"),
            "description": field("description"),
            "parameters": field("parameters"),
            "strict": field("strict"),
        },
    })
}

/// `_construct_message_from_response_item`: the item as a new message, or merged into the
/// assistant message before it.
fn add_item(item: &Value, messages: &mut Vec<Value>) -> Result<(), Failure> {
    let Value::Object(item) = item else {
        return Err(refused("Input should be a valid dictionary"));
    };
    let string = |key: &str| item.get(key).and_then(Value::as_str);
    let previous_assistant = messages
        .last_mut()
        .filter(|message| message["role"] == "assistant");
    match string("type") {
        Some("function_call") => {
            let (Some(call_id), Some(name), Some(arguments)) =
                (string("call_id"), string("name"), string("arguments"))
            else {
                return Err(refused("Input should be a valid function call"));
            };
            if item
                .get("namespace")
                .is_some_and(|namespace| !namespace.is_null())
            {
                return Err(Failure::NotModelled("namespaced function calls".into()));
            }
            let call = json!({"id": call_id, "function": {"name": name, "arguments": arguments}, "type": "function"});
            match previous_assistant {
                Some(Value::Object(previous)) => match previous.get_mut("tool_calls") {
                    Some(Value::Array(calls)) => calls.push(call),
                    _ => {
                        previous.insert("tool_calls".into(), Value::Array(vec![call]));
                    }
                },
                _ => messages.push(json!({"role": "assistant", "tool_calls": [call]})),
            }
        }
        Some("reasoning") => {
            if item
                .get("encrypted_content")
                .is_some_and(|content| !content.is_null() && content != "")
            {
                return Err(refused("Encrypted content is not supported."));
            }
            let Some(Value::Array(summary)) = item.get("summary") else {
                return Err(refused("Field required at summary"));
            };
            let first_text = |parts: Option<&Vec<Value>>| {
                parts
                    .and_then(|parts| parts.first())
                    .and_then(|part| part.get("text"))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            };
            let content = item
                .get("content")
                .and_then(Value::as_array)
                .filter(|content| !content.is_empty());
            let reasoning = first_text(content)
                .or_else(|| first_text(Some(summary)))
                .unwrap_or_default();
            match previous_assistant {
                Some(Value::Object(previous)) if previous.get("reasoning").is_none() => {
                    previous.insert("reasoning".into(), Value::String(reasoning));
                }
                _ => messages.push(json!({"role": "assistant", "reasoning": reasoning})),
            }
        }
        Some("function_call_output") => {
            messages.push(json!({
                "role": "tool",
                "content": item.get("output").cloned().unwrap_or(Value::Null),
                "tool_call_id": item.get("call_id").cloned().unwrap_or(Value::Null),
            }));
        }
        Some("custom_tool_call" | "custom_tool_call_output") => {
            return Err(Failure::NotModelled(
                "custom tool calls in a Responses body".into(),
            ));
        }
        _ if string("role") == Some("assistant") => {
            let text = match item.get("content") {
                Some(Value::String(text)) => Some(text.clone()),
                Some(Value::Array(parts)) => match parts.first() {
                    Some(first) if first["type"] == "output_text" => {
                        first["text"].as_str().map(str::to_owned)
                    }
                    // A refusal part, or no part: vLLM fails on it.
                    _ => return Err(refused("an assistant message without a first output text")),
                },
                _ => None,
            };
            match (text, previous_assistant) {
                (Some(text), Some(Value::Object(previous)))
                    if previous.get("content").is_none() =>
                {
                    previous.insert("content".into(), Value::String(text));
                }
                (Some(text), _) => messages.push(json!({"role": "assistant", "content": text})),
                (None, _) => messages.push(Value::Object(item.clone())),
            }
        }
        _ if item.contains_key("role") => messages.push(Value::Object(item.clone())),
        kind => {
            return Err(refused(format!(
                "Unsupported input item type: {}",
                kind.unwrap_or("None")
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_become_vllms_chat_messages() {
        let body = json!({"instructions": "Be brief.", "reasoning": {"effort": "low"},
            "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}, {"type": "web_search"}],
            "input": [
                {"role": "user", "content": "hi"},
                {"type": "reasoning", "summary": [{"type": "summary_text", "text": "s"}], "content": [{"type": "reasoning_text", "text": "r"}]},
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "42"},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}]});
        let converted = convert(&body).ok().unwrap();
        assert_eq!(
            converted.messages,
            vec![
                json!({"role": "system", "content": "Be brief."}),
                json!({"role": "user", "content": "hi"}),
                json!({"role": "assistant", "reasoning": "r", "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": "{}"}, "type": "function"}]}),
                json!({"role": "tool", "content": "42", "tool_call_id": "c1"}),
                json!({"role": "assistant", "content": "done"}),
            ]
        );
        assert_eq!(
            converted.tools.unwrap().as_array().unwrap().len(),
            1,
            "built-in tools are not rendered"
        );
        assert_eq!(converted.variables["enable_thinking"], json!(true));
        let encrypted =
            json!({"input": [{"type": "reasoning", "summary": [], "encrypted_content": "gAAA"}]});
        assert!(matches!(convert(&encrypted), Err(Failure::Refused(_))));
    }
}

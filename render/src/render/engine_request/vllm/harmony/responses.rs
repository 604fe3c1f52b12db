//! A `/v1/responses` body in Harmony: its input items and tools as vLLM turns them into
//! Harmony messages for gpt-oss.

use serde_json::Value;

use super::super::Failure;
use super::{
    HarmonyPrompt, content_texts_of, flatten_text, for_completion, message_of, not_text, preamble,
    reasoning_effort, role_of, tool_description,
};
use crate::render::harmony::{Content, DeveloperContent, Message, Role, ToolDescription};

/// The built-in tools `get_developer_message` leaves out (vLLM describes them only with a tool
/// server, which kvlint does not model).
const BUILT_IN_TOOLS: [&str; 3] = ["web_search_preview", "code_interpreter", "container"];

/// A `/v1/responses` body, rendered as vLLM renders it for gpt-oss
/// (`OnlineRenderer._render_responses_with_harmony`, `response_input_to_harmony` of
/// `vllm/entrypoints/openai/responses/harmony.py`), for a server without a tool server and a
/// request without `previous_response_id`.
pub(in super::super) fn responses_prompt(
    body: &Value,
    start_date: &str,
) -> Result<HarmonyPrompt, Failure> {
    let Value::Object(body) = body else {
        return Err(Failure::Refused(
            "Input should be a valid dictionary".into(),
        ));
    };
    if body
        .get("previous_response_id")
        .is_some_and(|id| !id.is_null())
        || body
            .get("previous_input_messages")
            .is_some_and(|messages| !messages.is_null())
    {
        return Err(Failure::NotModelled(
            "a Responses request continuing a stored response".into(),
        ));
    }
    let mut instructions = match body.get("instructions") {
        None | Some(Value::Null) => None,
        Some(Value::String(instructions)) => Some(instructions.clone()),
        Some(_) => {
            return Err(Failure::Refused(
                "Input should be a valid string at instructions".into(),
            ));
        }
    };
    let mut items: &[Value] = match body.get("input") {
        Some(Value::Array(items)) => items,
        Some(Value::String(_)) => &[],
        Some(_) => {
            return Err(Failure::Refused(
                "Input should be a valid list at input".into(),
            ));
        }
        None => return Err(Failure::Refused("Field required at input".into())),
    };
    // `extract_instructions_from_messages`, when the request has no `instructions`.
    if instructions.is_none()
        && let Some(first) = items.first()
        && matches!(role_of(first), "system" | "developer")
    {
        instructions = flatten_text(first.get("content")).map_err(|failure| failure.at(0))?;
        items = &items[1..];
    }
    let tools = responses_tools(body.get("tools"))?;
    let effort = reasoning_effort(
        body.get("reasoning")
            .and_then(|reasoning| reasoning.get("effort")),
    )?;
    let tool_declarations = tools.iter().map(ToolDescription::declaration).collect();
    let mut conversation = preamble(instructions, tools, effort, start_date);
    if let Some(Value::String(input)) = body.get("input") {
        conversation.push(Message::text(Role::User, input.clone()));
    }
    let offset = body
        .get("input")
        .and_then(Value::as_array)
        .map_or(0, |all| all.len() - items.len());
    let mut calls: Vec<(&str, &str)> = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let place = |failure: Failure| match failure {
            Failure::Refused(reason) => {
                Failure::Refused(format!("{reason} (input.{})", offset + index))
            }
            not_modelled => not_modelled,
        };
        if let Some(message) = responses_item(item, &calls).map_err(place)? {
            conversation.push(message);
        }
        if item.get("type").is_some_and(|kind| kind == "function_call") {
            let field = |key: &str| item.get(key).and_then(Value::as_str).unwrap_or_default();
            calls.push((field("call_id"), field("name")));
        }
    }
    Ok(HarmonyPrompt {
        pieces: for_completion(conversation),
        tool_declarations,
    })
}

/// The Responses tools Harmony declares: with a tool other than the built-in ones, every
/// function tool (`has_custom_tools`); a tool type Harmony has no place for is refused.
fn responses_tools(tools: Option<&Value>) -> Result<Vec<ToolDescription>, Failure> {
    let tools = match tools {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(tools)) => tools,
        Some(_) => {
            return Err(Failure::Refused(
                "Input should be a valid list at tools".into(),
            ));
        }
    };
    let kind = |tool: &Value| {
        tool.get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    // An MCP tool counts by its server label, which vLLM's default allowlist does not hold.
    if tools
        .iter()
        .all(|tool| kind(tool) == "mcp" || BUILT_IN_TOOLS.contains(&kind(tool).as_str()))
    {
        return Ok(Vec::new());
    }
    let mut functions = Vec::new();
    for tool in tools {
        match kind(tool).as_str() {
            "function" => functions.push(tool_description(Some(tool))),
            built_in if BUILT_IN_TOOLS.contains(&built_in) => {}
            other => {
                return Err(Failure::Refused(format!(
                    "tool type '{other}' is not supported."
                )));
            }
        }
    }
    Ok(functions)
}

/// `response_input_to_harmony`: one input item as a Harmony message, or none (a reasoning item
/// without content, an instructions message without text).
fn responses_item(item: &Value, calls: &[(&str, &str)]) -> Result<Option<Message>, Failure> {
    let Value::Object(fields) = item else {
        return Err(Failure::Refused(
            "Input should be a valid dictionary".into(),
        ));
    };
    let text_field = |key: &str| fields.get(key).and_then(Value::as_str);
    match text_field("type") {
        None | Some("message") => {
            let role = match text_field("role") {
                Some(role @ ("user" | "assistant" | "system" | "developer")) => role,
                _ => return Err(Failure::Refused("Input should be a valid message".into())),
            };
            let content = fields.get("content");
            if matches!(role, "system" | "developer") {
                return Ok(flatten_text(content)?.filter(|text| !text.is_empty()).map(
                    |instructions| {
                        Message::new(
                            Role::Developer,
                            Content::Developer(DeveloperContent {
                                instructions: Some(instructions),
                                function_tools: Vec::new(),
                            }),
                        )
                    },
                ));
            }
            let harmony_role = if role == "user" {
                Role::User
            } else {
                Role::Assistant
            };
            let message = match content {
                Some(Value::String(text)) => Message::text(harmony_role, text.clone()),
                Some(Value::Array(parts)) => message_of(harmony_role, content_texts_of(parts)?),
                _ => {
                    return Err(Failure::Refused(
                        "Input should be a valid list at content".into(),
                    ));
                }
            };
            Ok(Some(if role == "assistant" {
                message.on_channel("final")
            } else {
                message
            }))
        }
        Some("function_call_output") => {
            let call_id = text_field("call_id").unwrap_or_default();
            let Some((_, name)) = calls.iter().rev().find(|(id, _)| *id == call_id) else {
                return Err(Failure::Refused(format!(
                    "No call message found for {call_id}"
                )));
            };
            let Some(output) = text_field("output") else {
                return Err(Failure::Refused(
                    "a function call output that is not text".into(),
                ));
            };
            Ok(Some(Message {
                name: Some(format!("functions.{name}")),
                ..Message::text(Role::Tool, output)
                    .on_channel("commentary")
                    .to("assistant".into())
            }))
        }
        Some("reasoning") => match fields.get("content") {
            Some(Value::Array(parts)) if !parts.is_empty() => {
                let mut texts = Vec::with_capacity(parts.len());
                for part in parts {
                    let Some(text) = part.get("text").and_then(Value::as_str) else {
                        return Err(not_text());
                    };
                    texts.push(text);
                }
                Ok(Some(
                    Message::text(Role::Assistant, texts.join("\n")).on_channel("analysis"),
                ))
            }
            _ => Ok(None),
        },
        Some("function_call") => {
            let name = text_field("name").unwrap_or_default();
            let call = Message::text(Role::Assistant, text_field("arguments").unwrap_or_default())
                .on_channel("commentary")
                .to(format!("functions.{name}"));
            Ok(Some(Message {
                content_type: Some("json".into()),
                ..call
            }))
        }
        Some(other) => Err(Failure::Refused(format!("Unknown input type: {other}"))),
    }
}

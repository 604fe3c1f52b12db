//! vLLM's chat completions for gpt-oss, which it renders through Harmony instead of a chat
//! template (`OnlineRenderer.render_chat` → `_make_request_with_harmony`, for a model whose
//! config says `model_type: gpt_oss`; the functions of
//! `vllm/entrypoints/openai/parser/harmony_utils.py`):
//!
//! 1. the body is validated as a `ChatCompletionRequest`, as for any model (`request`);
//! 2. a leading system or developer message becomes the instructions
//!    (`extract_instructions_from_messages`); `build_harmony_preamble` writes the system
//!    message (Harmony's defaults, the reasoning effort and the start date) and, with
//!    instructions or tools, a developer message holding them;
//! 3. each message becomes Harmony messages (`parse_chat_input_to_harmony_message`): tool
//!    calls to `functions.{name}` on the commentary channel, their results from
//!    `functions.{name}`, reasoning on the analysis channel, assistant text on the final
//!    channel, later system and developer messages as developer instructions;
//! 4. `render_for_completion`: the analysis messages before the last final answer are
//!    dropped, the conversation rendered for the assistant's next message, and each tool
//!    call's header put back in the order gpt-oss was trained on
//!    (`_use_legacy_tool_call_headers`).
//!
//! The chat template, `chat_template_kwargs`, `add_generation_prompt` and
//! `continue_final_message` play no part. The system message carries the day the request
//! came in (`get_system_message`: `datetime.now()`, unless the server sets
//! `VLLM_SYSTEM_START_DATE`): kvlint writes the date of `--now`.

use std::collections::HashMap;

use serde_json::Value;

mod responses;

pub(super) use responses::responses_prompt;

use super::{Failure, content, request};
use crate::render::harmony::{
    Content, DeveloperContent, Message, Piece, ReasoningEffort, Role, SystemContent, Token,
    ToolDescription, render_for_completion, text_of,
};

/// What vLLM prefills for a gpt-oss chat request.
#[derive(Debug)]
pub(in crate::render) struct HarmonyPrompt {
    pub pieces: Vec<Piece>,
    /// Each of the request's tools as the prompt declares it, in request order.
    pub tool_declarations: Vec<String>,
}

/// A `/v1/chat/completions` body, rendered as vLLM renders it for gpt-oss.
pub(super) fn chat_prompt(body: &Value, start_date: &str) -> Result<HarmonyPrompt, Failure> {
    let Value::Object(body) = body else {
        return Err(Failure::Refused(
            "Input should be a valid dictionary".into(),
        ));
    };
    request::check_request(body).map_err(Failure::Refused)?;
    let Some(Value::Array(messages)) = body.get("messages") else {
        let reason = match body.get("messages") {
            None => "Field required at messages",
            Some(_) => "Input should be a valid list at messages",
        };
        return Err(Failure::Refused(reason.into()));
    };
    for (index, message) in messages.iter().enumerate() {
        request::check_message(message).map_err(|reason| Failure::Refused(reason).at(index))?;
        check_text_parts(message).map_err(|failure| failure.at(index))?;
    }
    let tools = request::dumped_tools(body.get("tools")).map_err(Failure::Refused)?;
    let (instructions, rest) = match messages.first() {
        Some(first) if matches!(role_of(first), "system" | "developer") => (
            flatten_text(first.get("content")).map_err(|failure| failure.at(0))?,
            &messages[1..],
        ),
        _ => (None, &messages[..]),
    };
    let effort = reasoning_effort(body.get("reasoning_effort"))?;
    let tools: Vec<ToolDescription> = tools
        .iter()
        .flatten()
        .map(|tool| tool_description(tool.get("function")))
        .collect();
    let tool_declarations = tools.iter().map(ToolDescription::declaration).collect();
    let mut conversation = preamble(instructions, tools, effort, start_date);
    let offset = messages.len() - rest.len();
    let tool_names = tool_call_names(messages)?;
    for (index, message) in rest.iter().enumerate() {
        conversation.extend(
            harmony_messages(message, &tool_names).map_err(|failure| failure.at(offset + index))?,
        );
    }
    Ok(HarmonyPrompt {
        pieces: for_completion(conversation),
        tool_declarations,
    })
}

/// `build_harmony_preamble`: the system message and, with instructions or tools, a developer
/// message holding them.
fn preamble(
    instructions: Option<String>,
    tools: Vec<ToolDescription>,
    effort: ReasoningEffort,
    start_date: &str,
) -> Vec<Message> {
    let mut preamble = vec![Message::new(
        Role::System,
        Content::System(SystemContent {
            reasoning_effort: effort,
            conversation_start_date: Some(start_date.to_owned()),
            ..SystemContent::new()
        }),
    )];
    if instructions.as_deref().is_some_and(|text| !text.is_empty()) || !tools.is_empty() {
        preamble.push(Message::new(
            Role::Developer,
            Content::Developer(DeveloperContent {
                instructions,
                function_tools: tools,
            }),
        ));
    }
    preamble
}

/// `render_for_completion`: the analysis messages before the last final answer dropped, the
/// conversation rendered for the assistant's next message, tool calls' headers in the legacy
/// order.
fn for_completion(conversation: Vec<Message>) -> Vec<Piece> {
    with_legacy_tool_call_headers(render_for_completion(&drop_analysis(conversation)))
}

/// The request model's check of text parts (their `prompt_cache_breakpoint`), which the
/// template path makes where it parses content.
fn check_text_parts(message: &Value) -> Result<(), Failure> {
    let Some(Value::Array(parts)) = message.get("content") else {
        return Ok(());
    };
    parts
        .iter()
        .filter(|part| part.get("type").is_some_and(|kind| kind == "text"))
        .try_for_each(|part| content::check_cache_breakpoint(part.get("prompt_cache_breakpoint")))
}

fn role_of(message: &Value) -> &str {
    message.get("role").and_then(Value::as_str).unwrap_or("")
}

/// `get_system_message`'s effort: none by default (Harmony's medium), low, medium or high.
fn reasoning_effort(effort: Option<&Value>) -> Result<ReasoningEffort, Failure> {
    match effort.and_then(Value::as_str) {
        None | Some("medium") => Ok(ReasoningEffort::Medium),
        Some("low") => Ok(ReasoningEffort::Low),
        Some("high") => Ok(ReasoningEffort::High),
        Some("none") => Err(Failure::Refused(
            "Harmony does not support reasoning_effort='none'".into(),
        )),
        Some(other) => Err(Failure::Refused(format!(
            "reasoning_effort='{other}' is not supported by Harmony. Supported values are: \
             high, medium, low."
        ))),
    }
}

/// `create_tool_definition`: a function's name, description (`""` when none) and
/// parameters, from a chat tool's `function` or a Responses tool.
fn tool_description(function: Option<&Value>) -> ToolDescription {
    let field = |key: &str| {
        function
            .and_then(|function| function.get(key))
            .filter(|value| !value.is_null())
    };
    let text = |key: &str| {
        field(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    ToolDescription {
        name: text("name"),
        description: text("description"),
        parameters: field("parameters").cloned(),
    }
}

/// `flatten_input_text_content`: a string as it is; the texts of a list of parts joined, or
/// `None` when it has none; `None` for anything else.
fn flatten_text(content: Option<&Value>) -> Result<Option<String>, Failure> {
    match content {
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::new();
            for part in parts {
                match part {
                    Value::String(text) => texts.push(text.as_str()),
                    Value::Object(part) => match part.get("text") {
                        None | Some(Value::Null) => {}
                        Some(Value::String(text)) => texts.push(text),
                        Some(_) => return Err(not_text()),
                    },
                    _ => {}
                }
            }
            Ok((!texts.is_empty()).then(|| texts.concat()))
        }
        _ => Ok(None),
    }
}

/// Python's `str.join` (or Harmony's `TextContent`) on a part whose text is not a string.
fn not_text() -> Failure {
    Failure::Refused("a content part's text is not a string".into())
}

/// An assistant message's tool calls: vLLM makes them a list (`maybe_serialize_tool_calls`:
/// none is an empty one); other messages keep theirs as sent, and a null one fails.
fn tool_calls(message: &Value) -> Result<&[Value], Failure> {
    match message.get("tool_calls") {
        None => Ok(&[]),
        Some(Value::Null) if role_of(message) == "assistant" => Ok(&[]),
        Some(Value::Array(calls)) => Ok(calls),
        Some(_) => Err(Failure::Refused("'tool_calls' is not a list".into())),
    }
}

/// `parse_chat_inputs_to_harmony_messages`' map from tool-call ids to function names, over
/// the whole conversation (the last call with an id wins).
fn tool_call_names(messages: &[Value]) -> Result<HashMap<String, String>, Failure> {
    let mut names = HashMap::new();
    for (index, message) in messages.iter().enumerate() {
        for call in tool_calls(message).map_err(|failure| failure.at(index))? {
            let Value::Object(call) = call else {
                return Err(Failure::Refused("a tool call is not an object".into()).at(index));
            };
            let id = call.get("id").and_then(Value::as_str).unwrap_or("None");
            let name = match call.get("function") {
                None => "None".to_owned(),
                Some(Value::Object(function)) => python_str(function.get("name")),
                Some(_) => {
                    return Err(
                        Failure::Refused("a tool call's function is not an object".into())
                            .at(index),
                    );
                }
            };
            names.insert(id.to_owned(), name);
        }
    }
    Ok(names)
}

/// A value as Python's f-string writes it, for the names vLLM formats into recipients.
fn python_str(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "None".to_owned(),
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
    }
}

/// `parse_chat_input_to_harmony_message`.
fn harmony_messages(
    message: &Value,
    tool_names: &HashMap<String, String>,
) -> Result<Vec<Message>, Failure> {
    let role = role_of(message);
    let calls = tool_calls(message)?;
    let mut out = Vec::new();
    // `_normalize_messages_before` renames `reasoning_content` to `reasoning`.
    let reasoning = match message
        .get("reasoning")
        .filter(|reasoning| !reasoning.is_null())
        .or_else(|| message.get("reasoning_content"))
    {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.as_str()).filter(|text| !text.is_empty()),
        Some(_) => return Err(Failure::Refused("reasoning is not a string".into())),
    };
    let analysis = |text: &str| Message::text(Role::Assistant, text).on_channel("analysis");
    if role == "assistant" && !calls.is_empty() {
        if let Some(text) = flatten_text(message.get("content"))?.filter(|text| !text.is_empty()) {
            out.push(Message::text(Role::Assistant, text).on_channel("commentary"));
        }
        out.extend(reasoning.map(analysis));
        for call in calls {
            let function = call.get("function").and_then(Value::as_object);
            let field = |key: &str| function.and_then(|function| function.get(key));
            let name = match field("name") {
                None => String::new(),
                name => python_str(name),
            };
            let arguments = match field("arguments") {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(arguments)) => arguments.clone(),
                Some(_) => return Err(Failure::Refused("arguments are not a string".into())),
            };
            let call = Message::text(Role::Assistant, arguments)
                .on_channel("commentary")
                .to(format!("functions.{name}"));
            out.push(Message {
                content_type: Some("json".into()),
                ..call
            });
        }
        return Ok(out);
    }
    if role == "tool" {
        let id = python_str(
            message
                .get("tool_call_id")
                .or(Some(&Value::String(String::new()))),
        );
        let name = tool_names.get(&id).map_or("", String::as_str);
        let text = flatten_text(message.get("content"))?.unwrap_or_default();
        return Ok(vec![Message {
            name: Some(format!("functions.{name}")),
            ..Message::text(Role::Tool, text)
                .on_channel("commentary")
                .to("assistant".into())
        }]);
    }
    if role == "assistant" {
        out.extend(reasoning.map(analysis));
    }
    let texts = content_texts(message.get("content"))?;
    match role {
        "assistant" => {
            if texts.first().is_some_and(|text| !text.is_empty()) {
                out.push(message_of(Role::Assistant, texts).on_channel("final"));
            }
        }
        "system" | "developer" => {
            if let Some(instructions) = flatten_text(message.get("content"))? {
                out.push(Message::new(
                    Role::Developer,
                    Content::Developer(DeveloperContent {
                        instructions: Some(instructions),
                        function_tools: Vec::new(),
                    }),
                ));
            }
        }
        "user" => out.push(message_of(Role::User, texts)),
        other => {
            return Err(Failure::Refused(format!(
                "'{other}' is not a valid Role (Harmony has user, assistant, system, developer \
                 and tool)"
            )));
        }
    }
    Ok(out)
}

/// The texts a message's content becomes, one `TextContent` each: a string, or each part's
/// `text` (empty without one).
fn content_texts(content: Option<&Value>) -> Result<Vec<String>, Failure> {
    match content {
        Some(Value::Array(parts)) if !parts.is_empty() => content_texts_of(parts),
        Some(Value::String(text)) => Ok(vec![text.clone()]),
        // `content or ""`: none, null, an empty list or an empty string.
        _ => Ok(vec![String::new()]),
    }
}

/// Each part's `text` (empty without one): `TextContent(text=c.get("text", ""))`.
fn content_texts_of(parts: &[Value]) -> Result<Vec<String>, Failure> {
    parts
        .iter()
        .map(|part| match part {
            Value::Object(part) => match part.get("text") {
                None => Ok(String::new()),
                Some(Value::String(text)) => Ok(text.clone()),
                Some(_) => Err(not_text()),
            },
            _ => Err(Failure::Refused("a content part is not an object".into())),
        })
        .collect()
}

fn message_of(role: Role, texts: Vec<String>) -> Message {
    Message {
        content: texts.into_iter().map(Content::Text).collect(),
        ..Message::text(role, "")
    }
}

/// `auto_drop_analysis_messages`: the analysis messages before the last final answer go.
fn drop_analysis(messages: Vec<Message>) -> Vec<Message> {
    let last_final = messages.iter().rposition(|message| {
        message.role == Role::Assistant && message.channel.as_deref() == Some("final")
    });
    let Some(last_final) = last_final else {
        return messages;
    };
    messages
        .into_iter()
        .enumerate()
        .filter(|(index, message)| {
            *index >= last_final || message.channel.as_deref() != Some("analysis")
        })
        .map(|(_, message)| message)
        .collect()
}

/// `_use_legacy_tool_call_headers`: an assistant header
/// `assistant<|channel|>{channel} to={recipient} <|constrain|>{type}` becomes
/// `assistant to={recipient}<|channel|>{channel} {type}`, each text encoded whole.
fn with_legacy_tool_call_headers(pieces: Vec<Piece>) -> Vec<Piece> {
    let mut out = Vec::with_capacity(pieces.len());
    let mut rest = &pieces[..];
    while let Some(start) = rest
        .iter()
        .position(|piece| *piece == Piece::Token(Token::Start))
    {
        out.extend_from_slice(&rest[..=start]);
        rest = &rest[start + 1..];
        if let Some((legacy, header_len)) = legacy_header(rest) {
            out.extend(legacy);
            rest = &rest[header_len..];
        }
    }
    out.extend_from_slice(rest);
    out
}

/// The legacy form of the header `pieces` start with (after its `<|start|>`), and how many
/// pieces it replaces (through `<|message|>`).
fn legacy_header(pieces: &[Piece]) -> Option<([Piece; 4], usize)> {
    let at = |token: Token, within: &[Piece]| {
        within
            .iter()
            .position(|piece| *piece == Piece::Token(token))
    };
    let header_end = at(Token::Message, pieces)?;
    let header = &pieces[..header_end];
    let channel_at = at(Token::Channel, header)?;
    let constrain_at = channel_at + 1 + at(Token::Constrain, &header[channel_at + 1..])?;
    let author = text_of(&header[..channel_at]);
    let channel_and_recipient = text_of(&header[channel_at + 1..constrain_at]);
    let content_type = text_of(&header[constrain_at + 1..]);
    let (channel, recipient) = channel_and_recipient
        .strip_suffix(' ')?
        .split_once(" to=")?;
    if author != "assistant"
        || channel.is_empty()
        || recipient.is_empty()
        || content_type.is_empty()
    {
        return None;
    }
    Some((
        [
            Piece::Text(format!("assistant to={recipient}")),
            Piece::Token(Token::Channel),
            Piece::Text(format!("{channel} {content_type}")),
            Piece::Token(Token::Message),
        ],
        header_end + 1,
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn text(prompt: &HarmonyPrompt) -> String {
        text_of(&prompt.pieces)
    }

    #[test]
    fn tool_calls_get_the_legacy_header_and_earlier_reasoning_is_dropped() {
        let body = json!({
            "messages": [
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "reasoning": "look it up", "content": null,
                 "tool_calls": [{"id": "c1", "type": "function",
                                 "function": {"name": "get", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
                {"role": "assistant", "reasoning": "say it", "content": "Sunny."},
                {"role": "user", "content": "thanks"}
            ]
        });
        let prompt = chat_prompt(&body, "2026-11-30").unwrap();
        let text = text(&prompt);
        assert!(text.contains("Current date: 2026-11-30"), "{text}");
        assert!(
            text.contains(
                "<|start|>assistant to=functions.get<|channel|>commentary json<|message|>{}<|call|>\
                 <|start|>functions.get<|channel|>commentary to=assistant<|message|>sunny<|end|>"
            ),
            "{text}"
        );
        // Both turns' reasoning comes before the last final answer.
        assert!(
            !text.contains("look it up") && !text.contains("say it"),
            "{text}"
        );
        assert!(text.ends_with("<|start|>user<|message|>thanks<|end|><|start|>assistant"));
    }

    #[test]
    fn reasoning_efforts_harmony_lacks_are_refused() {
        for effort in ["none", "minimal", "max"] {
            let body = json!({"messages": [{"role": "user", "content": "hi"}],
                              "reasoning_effort": effort});
            assert!(
                matches!(chat_prompt(&body, "2026-11-30"), Err(Failure::Refused(_))),
                "{effort}"
            );
        }
    }
}

//! Responses into history, and conversations other code built into a [`Conversation`].

use kvlint_protocol::BodyFormat;
use serde_json::Value;

use crate::change::Change;
use crate::content::{Api, Part};
use crate::conversation::{Conversation, Returned};
use crate::error::ConversationError;
use crate::tool::{Tool, ToolCall};

impl Conversation {
    /// Appends an OpenAI Chat Completions answer: `choices[0].message` of a response (or the
    /// message itself), its text and its tool calls, the arguments kept byte for byte.
    ///
    /// ```
    /// use kvlint_sdk::Conversation;
    /// use serde_json::json;
    ///
    /// let mut conversation = Conversation::new();
    /// conversation.push_user("Read main.rs").into_result().unwrap();
    /// let response = json!({"choices": [{"message": {"role": "assistant", "content": null,
    ///     "tool_calls": [{"id": "call_1", "type": "function",
    ///                     "function": {"name": "read", "arguments": "{\"path\": \"main.rs\"}"}}]}}]});
    /// conversation.push_openai_response(&response).into_result().unwrap();
    /// let body = conversation.to_openai_chat("gpt-4.1");
    /// assert_eq!(body["messages"][1]["tool_calls"][0]["function"]["arguments"], "{\"path\": \"main.rs\"}");
    /// ```
    pub fn push_openai_response(&mut self, response: &Value) -> Change<'_> {
        let message = response.pointer("/choices/0/message").unwrap_or(response);
        let outcome = chat_answer(message, "choices[0].message")
            .and_then(|(parts, calls)| self.push_answer(parts, calls, None));
        Change::new(self, outcome)
    }

    /// Appends an OpenAI Responses answer: the `output` items of a response (or the items
    /// themselves). They are sent back to the Responses API exactly as returned (reasoning
    /// items with their encrypted content, messages and calls with their ids); the other
    /// APIs get their text and calls.
    pub fn push_responses_output(&mut self, response: &Value) -> Change<'_> {
        let items = response.get("output").unwrap_or(response);
        let outcome = match items.as_array() {
            Some(items) => responses_answer(items, "output").and_then(|(parts, calls)| {
                self.push_answer(
                    parts,
                    calls,
                    Some(Returned {
                        api: Api::OpenAiResponses,
                        items: items.clone(),
                    }),
                )
            }),
            None => Err(ConversationError::body(
                "output",
                "not an array of output items",
            )),
        };
        Change::new(self, outcome)
    }

    /// Appends an Anthropic Messages answer: the `content` blocks of a response (or the
    /// blocks themselves). They are sent back to Anthropic exactly as returned (thinking
    /// blocks with their signatures, server tool blocks, `tool_use` inputs); the other APIs get
    /// their text and calls.
    pub fn push_anthropic_response(&mut self, response: &Value) -> Change<'_> {
        let blocks = response.get("content").unwrap_or(response);
        let outcome = match blocks.as_array() {
            Some(blocks) => anthropic_answer(blocks, "content").and_then(|(parts, calls)| {
                self.push_answer(
                    parts,
                    calls,
                    Some(Returned {
                        api: Api::Anthropic,
                        items: blocks.iter().map(without_cache_control).collect(),
                    }),
                )
            }),
            None => Err(ConversationError::body(
                "content",
                "not an array of content blocks",
            )),
        };
        Change::new(self, outcome)
    }

    /// A conversation from a request body another framework built, in any of the three
    /// formats (recognised as `kvlint check` does: `input` or `instructions` is Responses,
    /// `system` or Anthropic blocks is Anthropic, else Chat Completions).
    ///
    /// Leading system (or developer) messages become the static tier (the first) and the
    /// session tier (the rest, keyed by position); tools, history and responses as they are.
    /// The next body extends the imported one when it was assembled the way this crate
    /// assembles (tools sorted and canonical, one system message); otherwise the first body
    /// differs where the import was not canonical, and every later one extends it.
    ///
    /// ```
    /// use kvlint_sdk::Conversation;
    /// use serde_json::json;
    ///
    /// let body = json!({"model": "gpt-4.1", "messages": [
    ///     {"role": "system", "content": "Be terse."},
    ///     {"role": "user", "content": "hi"},
    ///     {"role": "assistant", "content": "hello"},
    ///     {"role": "user", "content": "bye"}]});
    /// let conversation = Conversation::from_body(&body).unwrap();
    /// assert_eq!(conversation.history().len(), 3);
    /// assert_eq!(conversation.to_openai_chat("gpt-4.1")["messages"], body["messages"]);
    /// ```
    pub fn from_body(body: &Value) -> Result<Self, ConversationError> {
        let mut conversation = Self::new();
        for (index, tool) in body
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let tool = Tool::from_definition(tool).map_err(|error| {
                ConversationError::body(format!("tools[{index}]"), error.reason)
            })?;
            conversation.add_tool(tool).into_result()?;
        }
        // The format as every part of kvlint detects it; a body in none is read as a chat
        // body, whose `messages` the error then names.
        match body.as_object().and_then(BodyFormat::detect) {
            Some(BodyFormat::OpenAiResponses) => import_responses(&mut conversation, body)?,
            Some(BodyFormat::AnthropicMessages) => import_anthropic(&mut conversation, body)?,
            Some(BodyFormat::OpenAiChat) | None => import_chat(&mut conversation, body)?,
            Some(other @ (BodyFormat::GeminiGenerateContent | BodyFormat::BedrockConverse)) => {
                let path = match other {
                    BodyFormat::GeminiGenerateContent => "contents",
                    _ => "messages",
                };
                return Err(ConversationError::body(
                    path,
                    format!(
                        "a {} body: the SDK imports OpenAI Chat Completions, Responses and Anthropic Messages bodies",
                        other.name()
                    ),
                ));
            }
        }
        Ok(conversation)
    }

    /// A leading system text: the first is static, the rest are session blocks by position.
    fn import_instructions(
        &mut self,
        text: &str,
        position: &mut usize,
    ) -> Result<(), ConversationError> {
        if *position == 0 {
            self.add_static(text).into_result()?;
        } else {
            self.add_session(format!("{position:03}"), text)
                .into_result()?;
        }
        *position += 1;
        Ok(())
    }
}

fn string<'a>(value: &'a Value, key: &str, path: &str) -> Result<&'a str, ConversationError> {
    value
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| ConversationError::body(format!("{path}.{key}"), "not a string"))
}

/// Parts of a content value: a string, or blocks in any API's shape.
fn parts_of(content: &Value, path: &str) -> Result<Vec<Part>, ConversationError> {
    match content {
        Value::String(text) => Ok(vec![Part::text(text)]),
        Value::Null => Ok(Vec::new()),
        Value::Array(blocks) => blocks
            .iter()
            .enumerate()
            .map(|(index, block)| {
                Part::parse(&without_cache_control(block), &format!("{path}[{index}]"))
            })
            .collect(),
        _ => Err(ConversationError::body(
            path,
            "content is neither text nor blocks",
        )),
    }
}

/// A block without the breakpoint another framework placed: the conversation places its own.
fn without_cache_control(block: &Value) -> Value {
    let mut block = block.clone();
    if let Some(fields) = block.as_object_mut() {
        fields.remove("cache_control");
    }
    block
}

fn chat_answer(
    message: &Value,
    path: &str,
) -> Result<(Vec<Part>, Vec<ToolCall>), ConversationError> {
    let parts = parts_of(
        message.get("content").unwrap_or(&Value::Null),
        &format!("{path}.content"),
    )?;
    let mut calls = Vec::new();
    for (index, call) in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let call_path = format!("{path}.tool_calls[{index}]");
        let function = call.get("function").unwrap_or(&Value::Null);
        let arguments = match function.get("arguments") {
            Some(Value::String(arguments)) => arguments.clone(),
            Some(other) => other.to_string(),
            None => String::from("{}"),
        };
        calls.push(ToolCall::verbatim(
            string(call, "id", &call_path)?,
            string(function, "name", &format!("{call_path}.function"))?,
            arguments,
        ));
    }
    Ok((parts, calls))
}

fn responses_answer(
    items: &[Value],
    path: &str,
) -> Result<(Vec<Part>, Vec<ToolCall>), ConversationError> {
    let mut parts = Vec::new();
    let mut calls = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let item_path = format!("{path}[{index}]");
        match item.get("type").and_then(Value::as_str) {
            Some("function_call") => calls.push(ToolCall::verbatim(
                string(item, "call_id", &item_path)?,
                string(item, "name", &item_path)?,
                string(item, "arguments", &item_path)?,
            )),
            Some("message") | None if item.get("role").is_some() => {
                if let Some(content) = item.get("content") {
                    parts.extend(parts_of(content, &format!("{item_path}.content"))?);
                }
            }
            _ => parts.push(Part::ResponsesItem { item: item.clone() }),
        }
    }
    Ok((parts, calls))
}

fn anthropic_answer(
    blocks: &[Value],
    path: &str,
) -> Result<(Vec<Part>, Vec<ToolCall>), ConversationError> {
    let mut parts = Vec::new();
    let mut calls = Vec::new();
    for (index, block) in blocks.iter().enumerate() {
        let block_path = format!("{path}[{index}]");
        if block.get("type").and_then(Value::as_str) == Some("tool_use") {
            let input = block.get("input").cloned().unwrap_or(Value::Null);
            calls.push(ToolCall::verbatim(
                string(block, "id", &block_path)?,
                string(block, "name", &block_path)?,
                input.to_string(),
            ));
        } else if let Some(part) = Part::parse_known(&without_cache_control(block), &block_path)? {
            parts.push(part);
        }
        // A block of a type this crate does not know (a newer API's) is sent back to Anthropic
        // as returned, with the answer's other blocks; the other APIs have no such content.
    }
    Ok((parts, calls))
}

fn messages<'a>(body: &'a Value, key: &str) -> Result<&'a [Value], ConversationError> {
    body.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .ok_or_else(|| ConversationError::body(key, "not an array"))
}

fn import_chat(conversation: &mut Conversation, body: &Value) -> Result<(), ConversationError> {
    let mut instructions = 0;
    for (index, message) in messages(body, "messages")?.iter().enumerate() {
        let path = format!("messages[{index}]");
        let content = message.get("content").unwrap_or(&Value::Null);
        match message.get("role").and_then(Value::as_str) {
            Some("system" | "developer") if conversation.history().is_empty() => {
                let text: String = parts_of(content, &path)?
                    .iter()
                    .filter_map(Part::as_text)
                    .collect();
                conversation.import_instructions(&text, &mut instructions)?;
            }
            Some("user") => {
                conversation
                    .push_user_parts(parts_of(content, &path)?)
                    .into_result()?;
            }
            Some("assistant") => {
                let (parts, calls) = chat_answer(message, &path)?;
                conversation.push_answer(parts, calls, None)?;
            }
            Some("tool") => {
                let call_id = string(message, "tool_call_id", &path)?;
                conversation
                    .push_tool_result_parts(call_id, parts_of(content, &path)?)
                    .into_result()?;
            }
            other => return Err(unsupported_role(&path, other)),
        }
    }
    Ok(())
}

fn import_responses(
    conversation: &mut Conversation,
    body: &Value,
) -> Result<(), ConversationError> {
    let mut instructions = 0;
    if let Some(text) = body.get("instructions").and_then(Value::as_str) {
        conversation.import_instructions(text, &mut instructions)?;
    }
    let items: Vec<Value> = match body.get("input") {
        Some(Value::String(text)) => vec![serde_json::json!({"role": "user", "content": text})],
        Some(Value::Array(items)) => items.clone(),
        _ => {
            return Err(ConversationError::body(
                "input",
                "neither text nor an array of items",
            ));
        }
    };
    // The model's items between two inputs are one answer.
    let mut answer: Vec<Value> = Vec::new();
    let flush = |conversation: &mut Conversation,
                 answer: &mut Vec<Value>|
     -> Result<(), ConversationError> {
        if answer.is_empty() {
            return Ok(());
        }
        let items = std::mem::take(answer);
        let (parts, calls) = responses_answer(&items, "input")?;
        let returned = Returned {
            api: Api::OpenAiResponses,
            items,
        };
        conversation
            .push_answer(parts, calls, Some(returned))
            .map(|_| ())
    };
    for (index, item) in items.iter().enumerate() {
        let path = format!("input[{index}]");
        let role = item.get("role").and_then(Value::as_str);
        let kind = item.get("type").and_then(Value::as_str);
        match (role, kind) {
            (Some("system" | "developer"), _) if conversation.history().is_empty() => {
                let content = item.get("content").unwrap_or(&Value::Null);
                let text: String = parts_of(content, &path)?
                    .iter()
                    .filter_map(Part::as_text)
                    .collect();
                conversation.import_instructions(&text, &mut instructions)?;
            }
            (Some("user"), _) => {
                flush(conversation, &mut answer)?;
                let content = item.get("content").unwrap_or(&Value::Null);
                conversation
                    .push_user_parts(parts_of(content, &path)?)
                    .into_result()?;
            }
            (_, Some("function_call_output")) => {
                flush(conversation, &mut answer)?;
                let output = item.get("output").unwrap_or(&Value::Null);
                conversation
                    .push_tool_result_parts(
                        string(item, "call_id", &path)?,
                        parts_of(output, &path)?,
                    )
                    .into_result()?;
            }
            (Some("assistant"), _) | (None, Some(_)) => answer.push(item.clone()),
            (other, _) => return Err(unsupported_role(&path, other)),
        }
    }
    flush(conversation, &mut answer)
}

fn import_anthropic(
    conversation: &mut Conversation,
    body: &Value,
) -> Result<(), ConversationError> {
    let mut instructions = 0;
    match body.get("system") {
        Some(Value::String(text)) => conversation.import_instructions(text, &mut instructions)?,
        Some(Value::Array(blocks)) => {
            for (index, block) in blocks.iter().enumerate() {
                let text = string(block, "text", &format!("system[{index}]"))?;
                conversation.import_instructions(text, &mut instructions)?;
            }
        }
        _ => {}
    }
    for (index, message) in messages(body, "messages")?.iter().enumerate() {
        let path = format!("messages[{index}]");
        let content = message.get("content").unwrap_or(&Value::Null);
        match message.get("role").and_then(Value::as_str) {
            Some("user") => {
                let blocks = match content {
                    Value::Array(blocks) => blocks.clone(),
                    other => vec![
                        serde_json::json!({"type": "text", "text": other.as_str().unwrap_or_default()}),
                    ],
                };
                let mut user_parts = Vec::new();
                for (block_index, block) in blocks.iter().enumerate() {
                    let block_path = format!("{path}.content[{block_index}]");
                    if block.get("type").and_then(Value::as_str) == Some("tool_result") {
                        let output = block.get("content").unwrap_or(&Value::Null);
                        conversation
                            .push_tool_result_parts(
                                string(block, "tool_use_id", &block_path)?,
                                parts_of(output, &block_path)?,
                            )
                            .into_result()?;
                    } else {
                        user_parts.push(Part::parse(&without_cache_control(block), &block_path)?);
                    }
                }
                if !user_parts.is_empty() {
                    conversation.push_user_parts(user_parts).into_result()?;
                }
            }
            Some("assistant") => {
                let blocks = match content {
                    Value::Array(blocks) => blocks.clone(),
                    other => vec![
                        serde_json::json!({"type": "text", "text": other.as_str().unwrap_or_default()}),
                    ],
                };
                let (parts, calls) = anthropic_answer(&blocks, &format!("{path}.content"))?;
                let items = blocks.iter().map(without_cache_control).collect();
                conversation.push_answer(
                    parts,
                    calls,
                    Some(Returned {
                        api: Api::Anthropic,
                        items,
                    }),
                )?;
            }
            other => return Err(unsupported_role(&path, other)),
        }
    }
    Ok(())
}

fn unsupported_role(path: &str, role: Option<&str>) -> ConversationError {
    let message = match role {
        Some("system" | "developer") => {
            "a system message inside history is not modelled: instructions go first (static tier), per-turn notes in `add_turn_context`".to_owned()
        }
        Some(role) => format!("unsupported role `{role}`"),
        None => "a message without a `role`".to_owned(),
    };
    ConversationError::body(format!("{path}.role"), message)
}

//! llama.cpp's `llama-server --jinja`, from a `/v1/chat/completions` body to the input of
//! its chat template (checked turn by turn against llama-server's `/apply-template` by
//! `lint/tests/it/live_llamacpp.rs`):
//!
//! 1. `tools/server/server-common.cpp` `oaicompat_chat_params_parse`: every message but an
//!    assistant's must have `content`, an assistant's `content` or `tool_calls`; content is a
//!    string, null or parts, and a part other than `text` is refused on a text-only model;
//! 2. `common/chat.cpp` `common_chat_msgs_parse_oaicompat` reads each message into role,
//!    content (or text parts), reasoning, name, tool-call id and tool calls (each of type
//!    `function`, with a name and `arguments`, kept as the string sent or dumped compact),
//!    and `common_chat_tools_parse_oaicompat` each tool into name, description and parameters
//!    (a tool needs `type: function`); both are written back for the template by
//!    `common_chat_msg::to_json_oaicompat` and `common_chat_tools_to_json_oaicompat`, in their
//!    own key order, dropping every other key;
//! 3. a last assistant message is a prefill: it is taken off, the rest rendered with the
//!    generation prompt, and its text appended after it (two assistant messages at the end
//!    are refused).
//!
//! `enable_thinking` is passed to every template that reads it: on, off for a prefill.
//!
//! Not reproduced: media parts on a multimodal model (refused, as on a text-only one); `bos_token`/`eos_token`, which llama-server takes from the model's
//! vocabulary (kvlint from `--special-tokens` or the tokenizer config).
//!
//! An Anthropic Messages body is taken as llama-server's `/v1/messages` converts it
//! (`anthropic`), a Responses body as its `/v1/responses` does (`responses`).

mod anthropic;
mod responses;

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use super::TemplateInput;
use crate::error::RenderError;
use crate::render::openai_chat_body;
use crate::request::{BodyFormat, Request};
use crate::template::ChatTemplate;

/// The name in `engine:llamacpp:…` and `--engine llamacpp`.
pub(super) const ENGINE: &str = "llamacpp";
/// The name in messages.
pub(super) const DISPLAY_NAME: &str = "llama.cpp";

/// llama-server with `--jinja`, a text-only model, and what it read from its chat template.
#[derive(Debug)]
pub struct LlamaCppServer {
    /// The template renders message content given as a list of parts (else parts are joined).
    typed_content: bool,
    /// The template reads `enable_thinking`, which llama-server sets: on, off for a prefill.
    reads_thinking: bool,
}

/// The variable llama-server passes every template.
const ENABLE_THINKING: &str = "enable_thinking";

fn refused(reason: impl Into<String>) -> RenderError {
    RenderError::Refused {
        engine: DISPLAY_NAME,
        reason: reason.into(),
    }
}

impl LlamaCppServer {
    /// A server with this chat template, whose variables are set as llama-server sets them:
    /// `enable_thinking` on, unless the configuration (`--chat-template-kwargs`) says
    /// otherwise.
    pub fn serving(template: &mut ChatTemplate) -> Self {
        let source = template.default_source();
        let server = Self {
            typed_content: super::vllm::iterates_content(source),
            reads_thinking: source.contains(ENABLE_THINKING),
        };
        if server.reads_thinking {
            template
                .kwargs
                .entry(ENABLE_THINKING)
                .or_insert(Value::Bool(true));
        }
        server
    }

    pub(super) fn template_input<'a>(
        &self,
        request: &'a Request,
        template: &ChatTemplate,
        add_generation_prompt: bool,
    ) -> Result<TemplateInput<'a>, RenderError> {
        // A chat body is read where it is; other APIs are converted first.
        let converted = match (&request.format, &request.body) {
            (BodyFormat::OpenAiChat, Value::Object(_)) => None,
            (BodyFormat::AnthropicMessages, Value::Object(body)) => {
                Some(anthropic::chat_body(body))
            }
            (BodyFormat::OpenAiResponses, Value::Object(body)) => {
                Some(responses::chat_body(body).map_err(refused)?)
            }
            _ => Some(openai_chat_body(request)),
        };
        let (messages, tools): (&[Value], Option<&[Value]>) = match &converted {
            Some((messages, tools)) => (messages, tools.as_deref()),
            None => (
                request
                    .body
                    .get("messages")
                    .and_then(Value::as_array)
                    .map_or(&[], Vec::as_slice),
                request
                    .body
                    .get("tools")
                    .and_then(Value::as_array)
                    .map(Vec::as_slice),
            ),
        };
        let mut parsed = Vec::with_capacity(messages.len());
        for (index, message) in messages.iter().enumerate() {
            parsed.push(
                parse_message(message)
                    .map_err(|reason| refused(format!("{reason} (messages.{index})")))?,
            );
        }
        let tools = parse_tools(tools.unwrap_or_default())
            .map_err(|reason| refused(format!("Failed to parse tools: {reason}")))?;
        let mut add_generation_prompt = add_generation_prompt;
        let mut prefill = String::new();
        let mut thinking_off = None;
        if parsed
            .last()
            .is_some_and(|message| message.role == "assistant")
        {
            let last = parsed.pop().unwrap_or_default();
            if parsed
                .last()
                .is_some_and(|message| message.role == "assistant")
            {
                return Err(refused(
                    "Cannot have 2 or more assistant messages at the end of the list.",
                ));
            }
            // llama-server renders a prefill with thinking off.
            if self.reads_thinking
                && template.kwargs.get(ENABLE_THINKING) != Some(&Value::Bool(false))
            {
                let mut without_thinking = template.clone();
                without_thinking
                    .kwargs
                    .insert(ENABLE_THINKING.into(), Value::Bool(false));
                thinking_off = Some(Box::new(without_thinking));
            }
            add_generation_prompt = true;
            prefill = match last.content {
                Content::Parts(parts) => parts.into_iter().map(|(_, text)| text).collect(),
                Content::Text(text) => text,
            };
        }
        Ok(TemplateInput {
            messages: parsed
                .into_iter()
                .map(|message| Cow::Owned(message.to_json(self.typed_content)))
                .collect(),
            tools: (!tools.is_empty()).then(|| tools.into_iter().map(Cow::Owned).collect()),
            add_generation_prompt,
            template: thinking_off,
            prefill,
            add_special_tokens: false,
            continue_final_message: None,
        })
    }
}

/// A message as `common_chat_msg` holds it.
#[derive(Default)]
struct Message {
    role: String,
    content: Content,
    reasoning_content: String,
    name: String,
    tool_call_id: String,
    /// Name, arguments (a JSON string) and id of each call.
    tool_calls: Vec<(String, String, String)>,
}

enum Content {
    Text(String),
    /// (type, text) of each part: `text`, or `media_marker` for media a multimodal model reads.
    Parts(Vec<(String, String)>),
}

impl Default for Content {
    fn default() -> Self {
        Self::Text(String::new())
    }
}

/// A string field, as nlohmann's conversion to `std::string` requires it.
fn string_at(object: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match object.get(key) {
        None => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(other) => Err(format!(
            "[json.exception.type_error.302] type must be string, but is {}",
            json_type_name(other)
        )),
    }
}

fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `oaicompat_chat_params_parse`'s checks of one message, then
/// `common_chat_msgs_parse_oaicompat`'s reading of it.
fn parse_message(value: &Value) -> Result<Message, String> {
    let Value::Object(object) = value else {
        return Err(format!("Expected 'message' to be an object, got {value}"));
    };
    let role_sent = object
        .get("role")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let has_content = object.contains_key("content");
    let has_tool_calls = object.contains_key("tool_calls");
    if role_sent != "assistant" && !has_content {
        return Err("All non-assistant messages must contain 'content'".into());
    }
    if role_sent == "assistant" && !has_content && !has_tool_calls {
        return Err("Assistant message must contain either 'content' or 'tool_calls'!".into());
    }
    let mut message = Message {
        role: string_at(object, "role")?
            .ok_or_else(|| format!("Missing 'role' in message: {value}"))?,
        ..Message::default()
    };
    match object.get("content") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => message.content = Content::Text(text.clone()),
        Some(Value::Array(parts)) => {
            let mut read = Vec::with_capacity(parts.len());
            for part in parts {
                let kind = part.get("type").and_then(Value::as_str).unwrap_or_default();
                match kind {
                    "text" => {}
                    "image_url" => {
                        return Err("image input is not supported - hint: if this is unexpected, you may need to provide the mmproj".into());
                    }
                    "input_audio" => {
                        return Err("audio input is not supported - hint: if this is unexpected, you may need to provide the mmproj".into());
                    }
                    _ => return Err("unsupported content[].type".into()),
                }
                let text = part
                    .as_object()
                    .map(|part| string_at(part, "text"))
                    .transpose()?
                    .flatten()
                    .ok_or_else(|| {
                        "[json.exception.out_of_range.403] key 'text' not found".to_owned()
                    })?;
                read.push((kind.to_owned(), text));
            }
            message.content = Content::Parts(read);
        }
        Some(_) => return Err("Expected 'content' to be a string or an array".into()),
    }
    if let Some(calls) = object.get("tool_calls") {
        for call in calls.as_array().map(Vec::as_slice).unwrap_or_default() {
            let call_object = call.as_object().cloned().unwrap_or_default();
            let kind = call_object.get("type");
            if kind.is_none() {
                return Err(format!("Missing tool call type: {call}"));
            }
            if kind.and_then(Value::as_str) != Some("function") {
                return Err(format!("Unsupported tool call type: {call}"));
            }
            let Some(Value::Object(function)) = call_object.get("function") else {
                return Err(format!("Missing tool call function: {call}"));
            };
            let name = string_at(function, "name")?
                .ok_or_else(|| format!("Missing tool call name: {call}"))?;
            let arguments = match function.get("arguments") {
                Some(Value::String(arguments)) => arguments.clone(),
                Some(other) => other.to_string(),
                None => {
                    return Err(
                        "[json.exception.out_of_range.403] key 'arguments' not found".into(),
                    );
                }
            };
            let id = string_at(&call_object, "id")?.unwrap_or_default();
            message.tool_calls.push((name, arguments, id));
        }
    }
    message.reasoning_content = string_at(object, "reasoning_content")?.unwrap_or_default();
    message.name = string_at(object, "name")?.unwrap_or_default();
    message.tool_call_id = string_at(object, "tool_call_id")?.unwrap_or_default();
    Ok(message)
}

impl Message {
    /// `common_chat_msg::to_json_oaicompat` as `render_message_to_json` calls it: text parts
    /// joined with newlines for a template that takes only strings, kept as parts otherwise.
    fn to_json(&self, typed_content: bool) -> Value {
        let mut object = Map::new();
        object.insert("role".into(), json!(self.role));
        let content = match &self.content {
            Content::Text(text) => json!(text),
            Content::Parts(parts) if !typed_content => {
                let mut text = String::new();
                let mut after_media = false;
                for (kind, piece) in parts {
                    let is_text = kind == "text";
                    if is_text && !after_media && !text.is_empty() {
                        text.push('\n');
                    }
                    after_media = !is_text;
                    text.push_str(piece);
                }
                json!(text)
            }
            // No text and no parts reads as empty content.
            Content::Parts(parts) if parts.is_empty() => json!(""),
            Content::Parts(parts) => Value::Array(
                parts
                    .iter()
                    .map(|(kind, text)| json!({"type": kind, "text": text}))
                    .collect(),
            ),
        };
        object.insert("content".into(), content);
        for (key, value) in [
            ("reasoning_content", &self.reasoning_content),
            ("name", &self.name),
            ("tool_call_id", &self.tool_call_id),
        ] {
            if !value.is_empty() {
                object.insert(key.into(), json!(value));
            }
        }
        if !self.tool_calls.is_empty() {
            let calls = self
                .tool_calls
                .iter()
                .map(|(name, arguments, id)| {
                    // Templates get the arguments as an object when they parse as JSON.
                    let arguments = serde_json::from_str::<Value>(arguments)
                        .unwrap_or_else(|_| json!(arguments));
                    let mut call = json!({
                        "type": "function",
                        "function": {"name": name, "arguments": arguments},
                    });
                    if !id.is_empty() {
                        call["id"] = json!(id);
                    }
                    call
                })
                .collect();
            object.insert("tool_calls".into(), Value::Array(calls));
        }
        Value::Object(object)
    }
}

/// `common_chat_tools_parse_oaicompat`, then `common_chat_tools_to_json_oaicompat`.
fn parse_tools(tools: &[Value]) -> Result<Vec<Value>, String> {
    let mut parsed = Vec::with_capacity(tools.len());
    for tool in tools {
        let object = tool.as_object().cloned().unwrap_or_default();
        let Some(kind) = object.get("type") else {
            return Err(format!("Missing tool type: {tool}"));
        };
        if kind.as_str() != Some("function") {
            return Err(format!("Unsupported tool type: {tool}"));
        }
        let Some(function) = object.get("function") else {
            return Err(format!("Missing tool function: {tool}"));
        };
        let function = function.as_object().cloned().unwrap_or_default();
        let name = string_at(&function, "name")?
            .ok_or_else(|| "[json.exception.out_of_range.403] key 'name' not found".to_owned())?;
        let description = string_at(&function, "description")?.unwrap_or_default();
        let parameters = function.get("parameters").cloned().unwrap_or(json!({}));
        parsed.push(json!({
            "type": "function",
            "function": {"name": name, "description": description, "parameters": parameters},
        }));
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests;

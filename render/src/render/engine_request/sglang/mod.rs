//! SGLang's OpenAI-compatible server, from a `/v1/chat/completions` body to the input of its
//! chat template, as SGLang 0.5.23 does it for a Jinja template (checked turn by turn against
//! SGLang itself by `scripts/sglang_render.py` and `lint/tests/it/render_engines.rs`):
//!
//! 1. the body is validated as a `ChatCompletionRequest` (`request`; protocol.py), whose
//!    validators set `tool_choice` (`set_tool_choice_default`) and turn `reasoning` /
//!    `reasoning_effort` into `thinking` and `enable_thinking` template variables
//!    (`normalize_reasoning_inputs`);
//! 2. `OpenAIServingChat._validate_request` (serving_chat.py) refuses empty conversations,
//!    media on a text-only model, unknown named tools and tool schemas that are not JSON
//!    Schema 2020-12, after rewriting their database-style `type` names in place
//!    (`normalize_json_schema_types`, function_call/utils.py) — the rewritten schema is what
//!    the template shows;
//! 3. `_apply_jinja_template`: messages dumped (`model_dump()`), tool-call arguments parsed to
//!    objects (`normalize_assistant_tool_call_arguments`, strict: not a JSON object is
//!    refused), null content made "", content processed for the template's content format
//!    (`process_content_for_template_format`, parser/jinja_template_utils.py: text parts
//!    joined with a space, or kept as parts), null fields dropped, a tool message's text
//!    parts joined (`normalize_tool_content`), a last assistant message with text turned into
//!    a user message (`_handle_last_assistant_message`), tools dumped unless `tool_choice` is
//!    "none", and the template rendered with `reasoning_effort` and the request's
//!    `chat_template_kwargs`.
//!
//! The server modelled: `--chat-template FILE.jinja`, or the tokenizer's own template (the
//! first of named ones, `_select_named_template`), a text-only model without a Python chat
//! template or model-specific encoder (DeepSeek-V3.2/V4, Kimi-K3, GLM-5.3).
//!
//! `continue_final_message` takes a last assistant message with text off and puts its text
//! after the generation prompt; SGLang encodes that text apart and appends its tokens, kvlint
//! encodes the prompt whole (the same tokens where the generation prompt ends with a newline
//! or a special token, as in the templates of the parity test).
//!
//! When the template fails on the request, SGLang renders it once more with each tool's
//! `function` alone, the form some templates expect (`EngineRequest::tools_to_retry_with`).
//! For gpt-oss (`SglangServer::serving_gpt_oss`) a `none` effort is refused and Responses
//! requests, which SGLang renders through Harmony, are not modelled.
//!
//! Not reproduced: the `"\\n"` → newline rewrite SGLang applies to a `.jinja` file's text
//! (`TemplateManager._load_jinja_template`, no effect on a template whose `\n` are inside
//! string literals); the schema check covers types, `required`, `properties`, `items` and the
//! schema combinators, not every keyword of the 2020-12 meta-schema.
//!
//! An Anthropic Messages body is taken as SGLang's
//! own `/v1/messages` converts it (`anthropic`), a Responses body as its own `/v1/responses`
//! does (`responses`).

mod anthropic;
mod request;
mod responses;
mod schema;
mod variables;

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::{TemplateInput, with_variables};
use crate::error::RenderError;
use crate::request::{BodyFormat, Request};
use crate::template::ChatTemplate;
use request::{MEDIA_PART_TYPES, dumped_message, dumped_tools, invalid};
use variables::template_variables;

/// The name in `engine:sglang:…` and `--engine sglang`.
pub(super) const ENGINE: &str = "sglang";
/// The name in messages.
pub(super) const DISPLAY_NAME: &str = "SGLang";

/// An SGLang server and what it read from its chat template.
#[derive(Debug)]
pub struct SglangServer {
    /// The template gets content as a list of parts (SGLang's "openai" content format).
    content_as_parts: bool,
    /// The template renders a system message after the first (`supports_inline_system`,
    /// decided once when the server starts); else `/v1/messages` and `/v1/responses` merge
    /// system messages into the first.
    renders_inline_system: bool,
    /// A gpt-oss model (`model_type: gpt_oss`): its Responses requests go through Harmony.
    gpt_oss: bool,
}

fn refused(reason: impl Into<String>) -> RenderError {
    RenderError::Refused {
        engine: DISPLAY_NAME,
        reason: reason.into(),
    }
}

impl SglangServer {
    /// A server with this chat template: `--chat-template FILE.jinja`, or its tokenizer
    /// config's (SGLang renders the first of named templates for every request).
    pub fn serving(template: &mut ChatTemplate) -> Self {
        template.render_default_only();
        Self {
            content_as_parts: takes_content_as_parts(template.default_source()),
            renders_inline_system: super::inline_system_probe(template)
                .is_some_and(|text| text.contains(super::INLINE_SYSTEM_SENTINEL)),
            gpt_oss: false,
        }
    }

    /// The same server running gpt-oss: chat requests still go through the template, but a
    /// `none` reasoning effort is refused (`OpenAIServingChat._convert_to_internal_request`),
    /// and Responses requests go through Harmony (`OpenAIServingResponses`, `use_harmony`),
    /// which kvlint does not model for SGLang.
    pub fn serving_gpt_oss(self) -> Self {
        Self {
            gpt_oss: true,
            ..self
        }
    }

    pub(super) fn template_input<'a>(
        &self,
        request: &'a Request,
        template: &ChatTemplate,
        add_generation_prompt: bool,
    ) -> Result<TemplateInput<'a>, RenderError> {
        let not_modelled = |what| RenderError::NotModelled {
            engine: DISPLAY_NAME,
            what,
        };
        let converted_body;
        let (body, endpoint) = match (&request.format, &request.body) {
            (BodyFormat::OpenAiChat, Value::Object(body)) => (body, Endpoint::ChatCompletions),
            (BodyFormat::OpenAiChat, _) => {
                return Err(refused("Input should be a valid dictionary"));
            }
            (BodyFormat::AnthropicMessages, body) => {
                converted_body =
                    anthropic::to_chat_body(body, self.renders_inline_system).map_err(refused)?;
                (&converted_body, Endpoint::ChatCompletions)
            }
            (BodyFormat::OpenAiResponses, _) if self.gpt_oss => {
                return Err(not_modelled(
                    "a Responses request to gpt-oss (SGLang renders it through Harmony)".into(),
                ));
            }
            (format @ (BodyFormat::GeminiGenerateContent | BodyFormat::BedrockConverse), _) => {
                return Err(refused(crate::render::unserved(*format)));
            }
            (BodyFormat::OpenAiResponses, body) => {
                converted_body = responses::to_chat_body(body, self.renders_inline_system)
                    .map_err(refused)?
                    .map_err(not_modelled)?;
                (&converted_body, Endpoint::Responses)
            }
        };
        let Prepared {
            messages,
            tools,
            variables,
            prefill,
        } = self.prepare(body, endpoint).map_err(refused)?;
        let template = with_variables(template, variables.iter());
        Ok(TemplateInput {
            messages: messages.into_iter().map(Cow::Owned).collect(),
            tools: tools.map(|tools| tools.into_iter().map(Cow::Owned).collect()),
            add_generation_prompt,
            template,
            prefill,
            add_special_tokens: false,
            continue_final_message: None,
        })
    }

    /// The template's input, or SGLang's reason to refuse the request.
    fn prepare(&self, body: &Map<String, Value>, endpoint: Endpoint) -> Result<Prepared, String> {
        if body.get("model").is_some_and(|model| !model.is_string()) {
            return Err(invalid("Input should be a valid string", "model"));
        }
        let messages = match body.get("messages") {
            Some(Value::Array(messages)) => messages,
            Some(_) => return Err(invalid("Input should be a valid list", "messages")),
            None => return Err(invalid("Field required", "messages")),
        };
        let mut dumped = messages
            .iter()
            .enumerate()
            .map(|(index, message)| dumped_message(message, &format!("messages.{index}")))
            .collect::<Result<Vec<_>, _>>()?;
        let mut tools = dumped_tools(body.get("tools"), "tools")?;
        let tool_choice = tool_choice(body, &dumped)?;
        let variables = template_variables(body)?;
        if self.gpt_oss
            && variables
                .get("reasoning_effort")
                .is_some_and(|effort| effort == "none")
        {
            return Err("Harmony does not support reasoning effort none".into());
        }
        let continue_final_message = body
            .get("continue_final_message")
            .is_some_and(|flag| flag == &Value::Bool(true));
        if endpoint == Endpoint::ChatCompletions {
            validate_request(&mut dumped, &mut tools, &tool_choice, &variables)?;
        }
        // `_validate_media_content`, on both endpoints.
        if let Some(kind) = dumped.iter().find_map(media_part) {
            return Err(format!(
                "Model only supports text input; received unsupported content type '{kind}'."
            ));
        }
        let has_tools =
            tools.iter().flatten().next().is_some() || dumped.iter().any(declares_tools);
        // `_apply_jinja_template`.
        let mut conversation = Vec::with_capacity(dumped.len());
        for (index, mut message) in dumped.into_iter().enumerate() {
            parse_tool_call_arguments(&mut message)
                .map_err(|reason| format!("{reason} (messages.{index})"))?;
            conversation.push(self.for_template(message));
        }
        // `_handle_last_assistant_message`: a last assistant message with text is continued
        // (taken off, its text after the generation prompt) or turned into a user message.
        let mut prefill = String::new();
        if let Some(last) = conversation.last_mut()
            && last.get("role").is_some_and(|role| role == "assistant")
            && let Some(Value::String(content)) = last.get("content")
        {
            if continue_final_message {
                prefill = content.clone();
                conversation.pop();
            } else {
                let mut user = Map::new();
                user.insert("role".into(), Value::String("user".into()));
                user.insert("content".into(), Value::String(content.clone()));
                *last = user;
            }
        }
        let tools = match tool_choice {
            _ if !has_tools => None,
            ToolChoice::None => None,
            ToolChoice::Named(name) => Some(
                tools
                    .into_iter()
                    .flatten()
                    .filter(|tool| tool.pointer("/function/name") == Some(&name))
                    .collect::<Vec<_>>(),
            )
            .filter(|tools| !tools.is_empty()),
            ToolChoice::Auto | ToolChoice::Required => tools.filter(|tools| !tools.is_empty()),
        };
        Ok(Prepared {
            messages: conversation.into_iter().map(Value::Object).collect(),
            tools,
            variables,
            prefill,
        })
    }

    /// `process_content_for_template_format` and `normalize_tool_content` on a dumped
    /// message whose null content was made "".
    fn for_template(&self, mut message: Map<String, Value>) -> Map<String, Value> {
        if message.get("content").is_none_or(Value::is_null) {
            message.insert("content".into(), Value::String(String::new()));
        }
        message.retain(|_, value| !value.is_null());
        let parts = match message.get_mut("content") {
            Some(Value::Array(parts)) => std::mem::take(parts),
            _ => return message,
        };
        let joined = |parts: &[Value]| {
            let texts: Vec<&str> = parts.iter().filter_map(text_of).collect();
            Value::String(texts.join(" "))
        };
        let tool_text =
            message["role"] == "tool" && parts.iter().all(|part| part["type"] == "text");
        let content = if !self.content_as_parts || tool_text {
            joined(&parts)
        } else {
            // Thinking parts are dropped; text and tool references kept. The content key
            // moves last (the message is rebuilt without it, then given it).
            message.shift_remove("content");
            Value::Array(
                parts
                    .into_iter()
                    .filter(|part| part["type"] == "text" || part["type"] == "tool_reference")
                    .collect(),
            )
        };
        message.insert("content".into(), content);
        message
    }
}

/// `OpenAIServingChat._validate_request` (the chat endpoint only): empty conversations,
/// request templates, tool choices naming no tool, duplicate tool names and tool schemas,
/// whose type names it rewrites in place first.
fn validate_request(
    dumped: &mut [Map<String, Value>],
    tools: &mut Option<Vec<Value>>,
    tool_choice: &ToolChoice,
    variables: &Map<String, Value>,
) -> Result<(), String> {
    if dumped.is_empty() {
        return Err("Messages cannot be empty.".into());
    }
    if variables.contains_key("chat_template") {
        return Err(
            "Request-supplied chat_template is not allowed. Start the server with \
                        --trust-request-chat-template to permit it."
                .into(),
        );
    }
    let message_tools: Vec<&Value> = dumped
        .iter()
        .filter(|message| hosts_tools(message))
        .filter_map(|message| message.get("tools")?.as_array())
        .flatten()
        .collect();
    let tool_name = |tool: &Value| tool.pointer("/function/name").cloned();
    let effective_names: Vec<Value> = tools
        .iter()
        .flatten()
        .chain(message_tools.iter().copied())
        .filter_map(tool_name)
        .collect();
    match tool_choice {
        ToolChoice::Required if effective_names.is_empty() => {
            return Err("Tools cannot be empty if tool choice is set to required.".into());
        }
        ToolChoice::Named(_) if effective_names.is_empty() => {
            return Err("Tools cannot be empty if tool choice is set to a specific tool.".into());
        }
        ToolChoice::Named(name) if !effective_names.contains(name) => {
            let shown = name
                .as_str()
                .map_or_else(|| name.to_string(), str::to_owned);
            return Err(format!("Tool '{shown}' not found in tools list."));
        }
        _ => {}
    }
    if !message_tools.is_empty() {
        let mut names = effective_names.clone();
        names.sort_by_key(Value::to_string);
        names.dedup();
        if names.len() != effective_names.len() {
            return Err("Tool names must be unique across request and message tools.".into());
        }
    }
    let message_tools = dumped
        .iter_mut()
        .filter(|message| hosts_tools(message))
        .filter_map(|message| message.get_mut("tools")?.as_array_mut())
        .flatten();
    for (index, tool) in tools.iter_mut().flatten().chain(message_tools).enumerate() {
        if let Some(parameters) = tool.pointer_mut("/function/parameters")
            && !parameters.is_null()
        {
            schema::normalize_types(parameters);
            schema::check(parameters).map_err(|reason| {
                format!("Tool {index} function has invalid 'parameters' schema: {reason}")
            })?;
        }
    }
    Ok(())
}

/// A message whose `tools` count (`_effective_tools`): a root, system or developer one.
fn hosts_tools(message: &Map<String, Value>) -> bool {
    matches!(
        message["role"].as_str(),
        Some("root" | "system" | "developer")
    )
}

/// A message that declares tools of its own.
fn declares_tools(message: &Map<String, Value>) -> bool {
    hosts_tools(message)
        && message["tools"]
            .as_array()
            .is_some_and(|tools| !tools.is_empty())
}

/// A text part's text.
fn text_of(part: &Value) -> Option<&str> {
    if part["type"] == "text" {
        part["text"].as_str()
    } else {
        None
    }
}

/// The endpoint a request came to: the Responses endpoint builds a chat request and skips
/// the chat endpoint's `_validate_request`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    ChatCompletions,
    Responses,
}

/// What the template renders, as SGLang hands it over.
struct Prepared {
    messages: Vec<Value>,
    tools: Option<Vec<Value>>,
    variables: Map<String, Value>,
    /// A continued last assistant message's text, after the generation prompt.
    prefill: String,
}

/// `tool_choice`, with the default `set_tool_choice_default` gives it.
enum ToolChoice {
    None,
    Auto,
    Required,
    Named(Value),
}

fn tool_choice(
    body: &Map<String, Value>,
    messages: &[Map<String, Value>],
) -> Result<ToolChoice, String> {
    let has_tools = |value: Option<&Value>| value.is_some_and(|value| !value.is_null());
    let message_tools = messages.iter().any(declares_tools);
    match body.get("tool_choice") {
        None | Some(Value::Null) if has_tools(body.get("tools")) || message_tools => {
            Ok(ToolChoice::Auto)
        }
        None | Some(Value::Null) => Ok(ToolChoice::None),
        Some(Value::String(choice)) => match choice.as_str() {
            "none" => Ok(ToolChoice::None),
            "auto" => Ok(ToolChoice::Auto),
            "required" => Ok(ToolChoice::Required),
            _ => Err(invalid(
                "Input should be 'auto', 'required' or 'none'",
                "tool_choice",
            )),
        },
        Some(Value::Object(choice)) => {
            if choice.get("type").is_some_and(|kind| kind != "function") {
                return Err(invalid("Input should be 'function'", "tool_choice.type"));
            }
            match choice.get("function") {
                Some(Value::Object(function)) => match function.get("name") {
                    None | Some(Value::Null | Value::String(_)) => Ok(ToolChoice::Named(
                        function.get("name").cloned().unwrap_or(Value::Null),
                    )),
                    Some(_) => Err(invalid(
                        "Input should be a valid string",
                        "tool_choice.function.name",
                    )),
                },
                Some(_) => Err(invalid(
                    "Input should be a valid dictionary",
                    "tool_choice.function",
                )),
                None => Err(invalid("Field required", "tool_choice.function")),
            }
        }
        Some(_) => Err(invalid("Input should be a valid dictionary", "tool_choice")),
    }
}

/// The type of the first media part of a dumped message, if any.
fn media_part(message: &Map<String, Value>) -> Option<String> {
    message.get("content")?.as_array()?.iter().find_map(|part| {
        let kind = part["type"].as_str()?;
        MEDIA_PART_TYPES.contains(&kind).then(|| {
            if kind == "input_audio" {
                "audio_url"
            } else {
                kind
            }
            .to_owned()
        })
    })
}

/// `normalize_assistant_tool_call_arguments(strict=True)`: an assistant's tool-call
/// arguments sent as a string are parsed; not a JSON object is refused.
fn parse_tool_call_arguments(message: &mut Map<String, Value>) -> Result<(), String> {
    if message.get("role").is_none_or(|role| role != "assistant") {
        return Ok(());
    }
    let Some(Value::Array(calls)) = message.get_mut("tool_calls") else {
        return Ok(());
    };
    for arguments in calls
        .iter_mut()
        .filter_map(|call| call.pointer_mut("/function/arguments"))
    {
        let Value::String(text) = arguments else {
            continue;
        };
        match serde_json::from_str::<Value>(text) {
            Ok(parsed @ Value::Object(_)) => *arguments = parsed,
            Ok(_) => {
                return Err("Assistant tool call function.arguments must be a JSON object.".into());
            }
            Err(_) => {
                return Err("Assistant tool call function.arguments must be valid JSON.".into());
            }
        }
    }
    Ok(())
}

/// `detect_jinja_template_content_format` (parser/jinja_template_utils.py): "openai" when the
/// template names images, audio, video or vision anywhere, or loops over `message.content`
/// (also as `msg` or `m`, through filters, tests and slices); "string" otherwise and when the
/// template does not parse.
fn takes_content_as_parts(source: &str) -> bool {
    if ["image", "audio", "video", "vision"]
        .iter()
        .any(|keyword| source.contains(keyword))
    {
        return true;
    }
    super::vllm::loops_over_content(source, &["message", "msg", "m"]).unwrap_or(false)
}

#[cfg(test)]
mod tests;

//! Between the HTTP body and the chat template: what the serving engine does to a request
//! before its template sees it.
//!
//! An engine does not hand the body to the template as sent. vLLM validates it with its
//! request model, parses every message (null content becomes "", text parts are joined,
//! tool-call arguments become objects, …) and re-dumps the tools; a template that renders
//! fine through vLLM can fail on the raw body, and the other way round. Each engine whose
//! handling kvlint models has its own file here (`vllm`, `sglang`, `llamacpp`). Without one,
//! the template gets the request's chat view as transformers' `apply_chat_template` would.

mod llamacpp;
mod sglang;
mod vllm;

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::error::RenderError;
use crate::request::Request;
use crate::template::ChatTemplate;
use crate::tokenize::Tokens;

use super::chat_view;
pub use llamacpp::LlamaCppServer;
pub use sglang::SglangServer;
pub use vllm::VllmServer;

/// How the engine turns a request body into the input of its chat template.
#[derive(Debug)]
pub enum EngineRequest {
    /// No engine in between: the request's chat view, as transformers'
    /// `apply_chat_template` takes it.
    AsSent,
    /// vLLM's OpenAI-compatible server (`/v1/chat/completions`).
    Vllm(Box<VllmServer>),
    /// llama.cpp's `llama-server --jinja` (`/v1/chat/completions`).
    LlamaCpp(LlamaCppServer),
    /// SGLang's OpenAI-compatible server (`/v1/chat/completions`).
    Sglang(SglangServer),
}

/// What a chat template renders for one request.
#[derive(Debug)]
pub struct TemplateInput<'a> {
    pub messages: Vec<Cow<'a, Value>>,
    pub tools: Option<Vec<Cow<'a, Value>>>,
    pub add_generation_prompt: bool,
    /// The chat template with variables the request sets (vLLM's `chat_template_kwargs`,
    /// `reasoning_effort`), to render with instead of the configured one.
    pub template: Option<Box<ChatTemplate>>,
    /// Text the engine appends to the rendered prompt: llama.cpp's assistant prefill (a last
    /// assistant message, continued rather than closed).
    pub prefill: String,
    /// The engine encodes the prompt with the tokenizer's own special tokens added (vLLM's
    /// Responses endpoint): a Llama 3 prompt then starts with two `<|begin_of_text|>`.
    pub add_special_tokens: bool,
    /// transformers' `continue_final_message` (vLLM passes the request's): the last message's
    /// text, which the rendered prompt must end with, left open. Its content was marked with
    /// [`CONTINUE_FINAL_MESSAGE_TAG`] where the prompt is cut.
    pub continue_final_message: Option<String>,
}

/// A prompt the engine renders itself, without the chat template (vLLM's Harmony for
/// gpt-oss).
#[derive(Debug)]
pub struct OwnPrompt {
    pub text: String,
    pub tokens: Tokens,
    /// Each of the request's tools as the prompt declares it, in request order.
    pub tool_declarations: Vec<String>,
}

/// transformers' `continue_final_message_tag`: appended to the final message's text, the
/// rendered prompt is cut where it appears.
pub const CONTINUE_FINAL_MESSAGE_TAG: &str = "CONTINUE_FINAL_MESSAGE_TAG ";

impl TemplateInput<'_> {
    /// The rendered prompt cut after the final message's text, as transformers cuts it; `None`
    /// where transformers raises (the template dropped part of the final message).
    pub fn continued(&self, rendered: String) -> Option<String> {
        let Some(final_text) = &self.continue_final_message else {
            return Some(rendered);
        };
        let tag = CONTINUE_FINAL_MESSAGE_TAG.trim();
        if !rendered.contains(final_text.trim()) || !rendered.contains(tag) {
            return None;
        }
        let at = rendered.rfind(tag)?;
        if rendered[at..].starts_with(CONTINUE_FINAL_MESSAGE_TAG) {
            Some(rendered[..at].to_owned())
        } else {
            Some(rendered[..at].trim_end().to_owned())
        }
    }

    /// The same input, owning what it borrowed.
    pub fn into_owned(self) -> TemplateInput<'static> {
        let owned = |values: Vec<Cow<'_, Value>>| {
            values
                .into_iter()
                .map(|value| Cow::Owned(value.into_owned()))
                .collect()
        };
        TemplateInput {
            messages: owned(self.messages),
            tools: self.tools.map(owned),
            add_generation_prompt: self.add_generation_prompt,
            template: self.template,
            prefill: self.prefill,
            add_special_tokens: self.add_special_tokens,
            continue_final_message: self.continue_final_message,
        }
    }
}

/// What the second system message of the engines' probe says.
const INLINE_SYSTEM_SENTINEL: &str = "__sglang_inline_system_sentinel__";

/// The engines' probe of a system message after the first (vLLM's
/// `_detect_merge_inline_system`, SGLang's `detect_inline_system_support`): the template
/// rendered without special tokens or variables, as their plain Jinja environments render it,
/// with a system, a user, a system and a user message; the text, or `None` where it fails.
fn inline_system_probe(template: &ChatTemplate) -> Option<String> {
    let probe: Vec<Value> = [
        ("system", "t"),
        ("user", "t"),
        ("system", INLINE_SYSTEM_SENTINEL),
        ("user", "t"),
    ]
    .iter()
    .map(|(role, content)| serde_json::json!({"role": role, "content": content}))
    .collect();
    template.bare().apply(&probe, None, false).ok()
}

/// A pydantic validation failure: its message and where in the body.
fn invalid(message: &str, place: &str) -> String {
    format!("{message} at {place}")
}

/// What vLLM's and SGLang's `AnthropicMessagesRequest` both require, checked as their
/// validators check it: a non-empty `model`, a positive `max_tokens`, a list of `messages`
/// (`AnthropicMessage`: a role of user, assistant or system, and content), and the content of
/// messages and `system` as `check_content` (the engine's own block types) checks it.
struct AnthropicRequest<'b> {
    body: &'b Map<String, Value>,
    model: &'b Value,
    max_tokens: &'b Value,
    messages: &'b Vec<Value>,
}

impl<'b> AnthropicRequest<'b> {
    fn of(
        body: &'b Value,
        check_content: fn(&Value, &str) -> Result<(), String>,
    ) -> Result<Self, String> {
        let Value::Object(body) = body else {
            return Err("Input should be a valid dictionary".into());
        };
        let model = match body.get("model") {
            Some(model @ Value::String(name)) if !name.is_empty() => model,
            Some(Value::String(_)) => return Err("Value error, Model is required at model".into()),
            Some(_) => return Err(invalid("Input should be a valid string", "model")),
            None => return Err(invalid("Field required", "model")),
        };
        let max_tokens = match body.get("max_tokens") {
            Some(number @ Value::Number(n)) if n.as_i64().is_some_and(|n| n > 0) => number,
            Some(Value::Number(_)) => {
                return Err("Value error, max_tokens must be positive at max_tokens".into());
            }
            Some(_) => return Err(invalid("Input should be a valid integer", "max_tokens")),
            None => return Err(invalid("Field required", "max_tokens")),
        };
        let messages = match body.get("messages") {
            Some(Value::Array(messages)) => messages,
            Some(_) => return Err(invalid("Input should be a valid list", "messages")),
            None => return Err(invalid("Field required", "messages")),
        };
        for (index, message) in messages.iter().enumerate() {
            let place = format!("messages.{index}");
            let Value::Object(message) = message else {
                return Err(invalid("Input should be a valid dictionary", &place));
            };
            match message.get("role").and_then(Value::as_str) {
                Some("user" | "assistant" | "system") => {}
                _ => {
                    return Err(invalid(
                        "Input should be 'user', 'assistant' or 'system'",
                        &format!("{place}.role"),
                    ));
                }
            }
            match message.get("content") {
                Some(content) => check_content(content, &format!("{place}.content"))?,
                None => return Err(invalid("Field required", &format!("{place}.content"))),
            }
        }
        if let Some(system) = body.get("system").filter(|system| !system.is_null()) {
            check_content(system, "system")?;
        }
        Ok(Self {
            body,
            model,
            max_tokens,
            messages,
        })
    }
}

/// The chat template with the variables a request sets, when one changes what the template
/// was given.
fn with_variables<'v>(
    template: &ChatTemplate,
    variables: impl Iterator<Item = (&'v String, &'v Value)>,
) -> Option<Box<ChatTemplate>> {
    let changed: Vec<(&String, &Value)> = variables
        .filter(|(name, value)| template.kwargs.get(name.as_str()) != Some(*value))
        .collect();
    if changed.is_empty() {
        return None;
    }
    let mut with_variables = template.clone();
    for (name, value) in changed {
        with_variables.kwargs.insert(name.clone(), value.clone());
    }
    Some(Box::new(with_variables))
}

impl EngineRequest {
    /// The engine's name in the renderer's name (`engine:vllm:…`), when one is modelled.
    pub fn engine_name(&self) -> Option<&'static str> {
        match self {
            Self::AsSent => None,
            Self::Vllm(_) => Some(vllm::ENGINE),
            Self::LlamaCpp(_) => Some(llamacpp::ENGINE),
            Self::Sglang(_) => Some(sglang::ENGINE),
        }
    }

    /// The format the engine renders requests in itself, instead of the chat template:
    /// `harmony` (vLLM serving gpt-oss).
    pub fn own_format(&self) -> Option<&'static str> {
        match self {
            Self::Vllm(server) if server.renders_harmony() => Some("harmony"),
            _ => None,
        }
    }

    /// Where the engine renders the request itself ([`EngineRequest::own_format`]): the
    /// prompt's text and tokens, and the tools as the prompt declares them.
    pub(super) fn own_prompt(&self, request: &Request) -> Option<Result<OwnPrompt, RenderError>> {
        match self {
            Self::Vllm(server) => server.harmony_prompt(request),
            _ => None,
        }
    }

    /// The tools to render with again when the template fails on the request's: SGLang tries
    /// once more with each tool's `function` alone, the form some templates (Mistral's)
    /// expect (`OpenAIServingChat._apply_jinja_template`).
    pub fn tools_to_retry_with<'a>(
        &self,
        tools: Option<&[Cow<'a, Value>]>,
    ) -> Option<Vec<Cow<'a, Value>>> {
        match self {
            Self::Sglang(_) => Some(
                tools?
                    .iter()
                    .map(|tool| match tool.get("function") {
                        Some(function) => Cow::Owned(function.clone()),
                        None => tool.clone(),
                    })
                    .collect(),
            ),
            _ => None,
        }
    }

    /// The engine's name in messages ("vLLM").
    pub fn display_name(&self) -> &'static str {
        match self {
            Self::AsSent => "the engine",
            Self::Vllm(_) => vllm::DISPLAY_NAME,
            Self::LlamaCpp(_) => llamacpp::DISPLAY_NAME,
            Self::Sglang(_) => sglang::DISPLAY_NAME,
        }
    }

    /// The messages, tools and generation prompt the engine gives `template` for `request`;
    /// an error where the engine refuses the request.
    ///
    /// `add_generation_prompt` is the default; a request may set its own (vLLM's does).
    pub fn template_input<'a>(
        &self,
        request: &'a Request,
        template: &ChatTemplate,
        add_generation_prompt: bool,
    ) -> Result<TemplateInput<'a>, RenderError> {
        match self {
            Self::AsSent => {
                let (messages, tools) = chat_view(request);
                Ok(TemplateInput {
                    messages,
                    tools,
                    add_generation_prompt,
                    template: None,
                    prefill: String::new(),
                    add_special_tokens: false,
                    continue_final_message: None,
                })
            }
            Self::Vllm(server) => server.template_input(request, template, add_generation_prompt),
            Self::LlamaCpp(server) => {
                server.template_input(request, template, add_generation_prompt)
            }
            Self::Sglang(server) => server.template_input(request, template, add_generation_prompt),
        }
    }
}

/// A chat template written to a file of its own, read as `--chat-template` reads it, with the
/// clock at 2026-11-29 10:00.
#[cfg(test)]
fn template_file(source: &str) -> (std::path::PathBuf, ChatTemplate) {
    #![allow(clippy::unwrap_used)]
    let folder = std::env::temp_dir().join(format!("kvlint-engine-request-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let path = folder.join(format!(
        "{}.jinja",
        blake3::hash(source.as_bytes()).to_hex()
    ));
    std::fs::write(&path, source).unwrap();
    let now = chrono::NaiveDate::from_ymd_opt(2026, 11, 29)
        .and_then(|date| date.and_hms_opt(10, 0, 0))
        .unwrap();
    let template = ChatTemplate::from_file(&path, now).unwrap();
    (path, template)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn continuing(final_text: &str) -> TemplateInput<'static> {
        TemplateInput {
            messages: Vec::new(),
            tools: None,
            add_generation_prompt: false,
            template: None,
            prefill: String::new(),
            add_special_tokens: false,
            continue_final_message: Some(final_text.to_owned()),
        }
    }

    #[test]
    fn a_continued_prompt_is_cut_where_transformers_cuts_it() {
        let input = continuing("The answer is ");
        let tagged = format!("<a>The answer is {CONTINUE_FINAL_MESSAGE_TAG}</a>");
        assert_eq!(
            input.continued(tagged).as_deref(),
            Some("<a>The answer is ")
        );
        // A template that trims the message loses the tag's space too: the rest is trimmed.
        let trimmed = "<a>The answer is CONTINUE_FINAL_MESSAGE_TAG</a>".to_owned();
        assert_eq!(
            input.continued(trimmed).as_deref(),
            Some("<a>The answer is")
        );
        assert_eq!(
            input.continued("<a></a>".to_owned()),
            None,
            "the template dropped it"
        );
    }
}

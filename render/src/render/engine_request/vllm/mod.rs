//! vLLM's OpenAI-compatible server, from a `/v1/chat/completions` body to the input of its
//! chat template, as vLLM 0.32 does it (checked turn by turn against vLLM itself by
//! `scripts/vllm_render.py` and `lint/tests/it/render_engines.rs`):
//!
//! 1. the body is validated as a `ChatCompletionRequest` (`request`): refused requests stop
//!    here, tools are re-dumped with `model_dump()`;
//! 2. `OnlineRenderer.render_chat` → `HfRenderer.render_messages`: the template's content
//!    format is detected (`template_facts`) and each message parsed (`messages`, its content
//!    parts in `content`);
//! 3. `safe_apply_chat_template` renders with the request's template variables.
//!
//! The server modelled: `--chat-template`, content format `auto`, tool calling enabled
//! (`--enable-auto-tool-choice --tool-call-parser …`), a text-only model. An Anthropic
//! Messages body is taken as vLLM's own `/v1/messages` converts it (`anthropic`), a Responses
//! body as its own `/v1/responses` does for a model without Harmony (`responses`).
//!
//! `continue_final_message` leaves the last message open as transformers does (its text
//! tagged, the rendered prompt cut at the tag).
//!
//! For gpt-oss, vLLM renders chat requests through Harmony instead of the template
//! (`harmony`).
//!
//! Not reproduced: image, audio and video parts (reported as not modelled); Responses
//! requests to gpt-oss that continue a stored response; prompts over the model's context length; templates that change a list in place, which vLLM's
//! sandboxed Jinja refuses. The transformers vLLM 0.32 pins (5.19) hands messages to the
//! template as they are, where kvlint's templates drop null keys and add a `thinking` alias
//! as later transformers do: a template that tests `message.tool_call_id is defined` on a
//! null id, or reads `message.thinking`, can differ.

mod anthropic;
mod content;
mod harmony;
mod messages;
mod request;
mod responses;
mod template_facts;

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::{OwnPrompt, TemplateInput};
use crate::error::RenderError;
use crate::request::{BodyFormat, Request};
use crate::template::ChatTemplate;
use crate::tokenize::Tokenizer;
use template_facts::TemplateFacts;
pub(super) use template_facts::loops_over_content;

/// The name in `engine:vllm:…` and `--engine vllm`.
pub(super) const ENGINE: &str = "vllm";
/// The name in messages.
pub(super) const DISPLAY_NAME: &str = "vLLM";

/// A vLLM server and what it read from its chat template.
#[derive(Debug)]
pub struct VllmServer {
    default: TemplateFacts,
    /// A tokenizer config's `tool_use` template, which requests with tools get.
    tool_use: Option<TemplateFacts>,
    /// The template fails on a system message after the first, so `/v1/messages` merges the
    /// conversation's system messages into the first (`_should_merge_inline_system`, decided
    /// once when the server starts).
    merges_inline_system: bool,
    /// A gpt-oss model: requests are rendered through Harmony, not the template.
    harmony: Option<Harmony>,
}

/// How vLLM renders for gpt-oss (`harmony`).
#[derive(Debug)]
struct Harmony {
    /// The date the system message says (`VLLM_SYSTEM_START_DATE`, else the day's).
    start_date: String,
    /// Harmony encodes its text as ordinary `o200k_base` text, special tokens never parsed.
    text_tokenizer: Tokenizer,
}

/// Why vLLM does not render a request as kvlint models it.
#[derive(Debug)]
enum Failure {
    /// vLLM answers with an error, for this reason.
    Refused(String),
    /// vLLM renders it in a way kvlint does not reproduce.
    NotModelled(String),
}

impl Failure {
    /// The same failure, placed at message `index` of the request.
    fn at(self, index: usize) -> Self {
        match self {
            Self::Refused(reason) => Self::Refused(format!("{reason} (messages.{index})")),
            Self::NotModelled(what) => Self::NotModelled(format!("{what} in messages.{index}")),
        }
    }
}

impl From<Failure> for RenderError {
    fn from(failure: Failure) -> Self {
        match failure {
            Failure::Refused(reason) => RenderError::Refused {
                engine: DISPLAY_NAME,
                reason,
            },
            Failure::NotModelled(what) => RenderError::NotModelled {
                engine: DISPLAY_NAME,
                what,
            },
        }
    }
}

impl VllmServer {
    /// A server with this chat template: `--chat-template FILE` (a Jinja file), or the
    /// template of its tokenizer config.
    pub fn for_template(template: &ChatTemplate) -> Self {
        Self {
            default: TemplateFacts::of(template.default_source()),
            tool_use: template.tool_use_source().map(TemplateFacts::of),
            merges_inline_system: super::inline_system_probe(template).is_none(),
            harmony: None,
        }
    }

    /// The same server running gpt-oss (a model whose config says `model_type: gpt_oss`):
    /// chat and Anthropic requests are rendered through Harmony, whose system message says
    /// `start_date` (`YYYY-MM-DD`).
    pub fn rendering_harmony(self, start_date: String) -> Self {
        Self {
            harmony: Some(Harmony {
                start_date,
                text_tokenizer: Tokenizer::o200k_base(),
            }),
            ..self
        }
    }

    /// Whether requests are rendered through Harmony.
    pub fn renders_harmony(&self) -> bool {
        self.harmony.is_some()
    }

    /// For gpt-oss, what vLLM prefills for the request: its text and tokens, and the tools as
    /// the prompt declares them; `None` for other models, whose template renders requests.
    pub(in crate::render) fn harmony_prompt(
        &self,
        request: &Request,
    ) -> Option<Result<OwnPrompt, RenderError>> {
        let harmony = self.harmony.as_ref()?;
        let prompt = match request.format {
            BodyFormat::OpenAiChat => harmony::chat_prompt(&request.body, &harmony.start_date),
            BodyFormat::AnthropicMessages => {
                anthropic::to_chat_body(&request.body, self.merges_inline_system)
                    .map_err(Failure::Refused)
                    .and_then(|body| {
                        harmony::chat_prompt(&Value::Object(body), &harmony.start_date)
                    })
            }
            BodyFormat::OpenAiResponses => {
                harmony::responses_prompt(&request.body, &harmony.start_date)
            }
            format @ (BodyFormat::GeminiGenerateContent | BodyFormat::BedrockConverse) => {
                Err(Failure::Refused(crate::render::unserved(format)))
            }
        };
        Some(prompt.map_err(RenderError::from).map(|prompt| {
            let (text, tokens) =
                crate::render::harmony::encode(&prompt.pieces, &harmony.text_tokenizer);
            OwnPrompt {
                text,
                tokens,
                tool_declarations: prompt.tool_declarations,
            }
        }))
    }

    /// Whether the template gets message content as a list of parts (vLLM's "openai" content
    /// format) rather than one string, for requests without or with tools.
    pub fn takes_content_as_parts(&self, has_tools: bool) -> bool {
        self.facts(has_tools).content_format == template_facts::ContentFormat::OpenAi
    }

    /// Whether the template keeps developer messages (else they become system messages).
    pub fn knows_developer_role(&self, has_tools: bool) -> bool {
        self.facts(has_tools).has_developer_role
    }

    fn facts(&self, has_tools: bool) -> &TemplateFacts {
        match &self.tool_use {
            Some(tool_use) if has_tools => tool_use,
            _ => &self.default,
        }
    }

    pub(super) fn template_input<'a>(
        &self,
        request: &'a Request,
        template: &ChatTemplate,
        add_generation_prompt: bool,
    ) -> Result<TemplateInput<'a>, RenderError> {
        match request.format {
            BodyFormat::OpenAiChat => {
                self.chat_input(&request.body, template, add_generation_prompt)
            }
            BodyFormat::AnthropicMessages => {
                let body = anthropic::to_chat_body(&request.body, self.merges_inline_system)
                    .map_err(Failure::Refused)?;
                let body = Value::Object(body);
                let input = self.chat_input(&body, template, add_generation_prompt)?;
                Ok(input.into_owned())
            }
            BodyFormat::OpenAiResponses => {
                self.responses_input(request, template, add_generation_prompt)
            }
            format @ (BodyFormat::GeminiGenerateContent | BodyFormat::BedrockConverse) => {
                Err(Failure::Refused(crate::render::unserved(format)).into())
            }
        }
    }

    /// A `/v1/chat/completions` body.
    fn chat_input<'a>(
        &self,
        body: &'a Value,
        template: &ChatTemplate,
        add_generation_prompt: bool,
    ) -> Result<TemplateInput<'a>, RenderError> {
        let Value::Object(body) = body else {
            return Err(Failure::Refused("Input should be a valid dictionary".into()).into());
        };
        let variables = request::check_request(body).map_err(Failure::Refused)?;
        request::check_template_trust(body).map_err(Failure::Refused)?;
        let Some(messages) = body.get("messages") else {
            return Err(Failure::Refused("Field required at messages".into()).into());
        };
        let Value::Array(messages) = messages else {
            return Err(Failure::Refused("Input should be a valid list at messages".into()).into());
        };
        for (index, message) in messages.iter().enumerate() {
            request::check_message(message).map_err(|reason| Failure::Refused(reason).at(index))?;
        }
        let tools = request::dumped_tools(body.get("tools")).map_err(Failure::Refused)?;
        let facts = self.facts(tools.is_some());
        let add_generation_prompt = variables
            .add_generation_prompt
            .unwrap_or(add_generation_prompt);
        let with_variables = template_with(&variables.others, facts, template);
        let mut conversation = messages::parse_messages(messages, facts)?;
        if conversation.is_empty() {
            return Err(Failure::Refused(
                "Cannot apply chat template to an empty conversation. Provide at least one \
                 message."
                    .into(),
            )
            .into());
        }
        let continue_final_message = if variables.continue_final_message {
            continue_final(
                &mut conversation,
                with_variables.as_deref().unwrap_or(template),
                add_generation_prompt,
            )?
        } else {
            None
        };
        Ok(TemplateInput {
            messages: conversation,
            tools: tools.map(|tools| tools.into_iter().map(Cow::Owned).collect()),
            add_generation_prompt,
            template: with_variables,
            prefill: String::new(),
            add_special_tokens: false,
            continue_final_message,
        })
    }

    /// A Responses body, as vLLM's `/v1/responses` turns it into chat messages (`responses`).
    fn responses_input(
        &self,
        request: &Request,
        template: &ChatTemplate,
        add_generation_prompt: bool,
    ) -> Result<TemplateInput<'static>, RenderError> {
        let converted = responses::convert(&request.body)?;
        let tools = request::dumped_tools(converted.tools.as_ref()).map_err(Failure::Refused)?;
        let facts = self.facts(tools.is_some());
        let mut conversation: Vec<Cow<'static, Value>> =
            messages::parse_messages(&converted.messages, facts)?
                .into_iter()
                .map(|message| Cow::Owned(message.into_owned()))
                .collect();
        let with_variables = template_with(&converted.variables, facts, template);
        // `build_chat_params`: a last item in progress is continued, without generation
        // prompt.
        let continue_final_message = if converted.continue_final {
            continue_final(
                &mut conversation,
                with_variables.as_deref().unwrap_or(template),
                false,
            )?
        } else {
            None
        };
        Ok(TemplateInput {
            messages: conversation,
            tools: tools.map(|tools| tools.into_iter().map(Cow::Owned).collect()),
            add_generation_prompt: add_generation_prompt && !converted.continue_final,
            template: with_variables,
            prefill: String::new(),
            // `ResponsesRequest.build_tok_params` leaves `TokenizeParams.add_special_tokens`
            // at its default, true, where the chat endpoint passes false.
            add_special_tokens: true,
            continue_final_message,
        })
    }
}

/// The chat template with the variables a request sets, when they change one it reads.
///
/// vLLM passes a template only the variables it reads (`resolve_chat_template_kwargs`);
/// the request's override the server's defaults (`--default-chat-template-kwargs`, which
/// kvlint's `--chat-template-kwargs` stands for).
fn template_with(
    variables: &Map<String, Value>,
    facts: &TemplateFacts,
    template: &ChatTemplate,
) -> Option<Box<ChatTemplate>> {
    super::with_variables(
        template,
        variables
            .iter()
            .filter(|(name, _)| facts.variables.contains(name.as_str())),
    )
}

/// transformers' `continue_final_message` on a parsed conversation: its refusals, and the
/// final message's text, tagged where the prompt is cut.
fn continue_final(
    conversation: &mut [Cow<'_, Value>],
    template: &ChatTemplate,
    add_generation_prompt: bool,
) -> Result<Option<String>, Failure> {
    if add_generation_prompt {
        return Err(Failure::Refused(
            "continue_final_message and add_generation_prompt are not compatible.".into(),
        ));
    }
    if !template.mentions("content") {
        return Err(Failure::Refused(
            "continue_final_message is set to \"content\" but this is not an accepted field in \
             the chat_template"
                .into(),
        ));
    }
    conversation
        .last_mut()
        .map(|last| mark_final_text(last.to_mut()))
        .transpose()
        .map_err(Failure::Refused)
}

/// transformers' `continue_final_message`: the final message's text (its content, or its last
/// part with a text) gets the tag the prompt is cut at; the text before it, or transformers'
/// reason to fail.
fn mark_final_text(message: &mut Value) -> Result<String, String> {
    let tag = super::CONTINUE_FINAL_MESSAGE_TAG;
    match message.get_mut("content") {
        Some(Value::String(text)) => {
            let final_text = text.clone();
            text.push_str(tag);
            Ok(final_text)
        }
        Some(Value::Array(parts)) => parts
            .iter_mut()
            .rev()
            .find_map(|part| match part.get_mut("text") {
                Some(Value::String(text)) => {
                    let final_text = text.clone();
                    text.push_str(tag);
                    Some(final_text)
                }
                _ => None,
            })
            .ok_or_else(|| {
                "continue_final_message is set but we could not find any text to continue in the \
                 final message!"
                    .into()
            }),
        _ => Err(
            "continue_final_message is set but the final message has no \"content\" to continue!"
                .into(),
        ),
    }
}

/// Whether a template iterates a message's content (vLLM's "openai" content format).
pub(super) fn iterates_content(source: &str) -> bool {
    TemplateFacts::of(source).content_format == template_facts::ContentFormat::OpenAi
}

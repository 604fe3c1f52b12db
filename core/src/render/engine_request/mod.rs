//! Between the HTTP body and the chat template: what the serving engine does to a request
//! before its template sees it.
//!
//! An engine does not hand the body to the template as sent. vLLM validates it with its
//! request model, parses every message (null content becomes "", text parts are joined,
//! tool-call arguments become objects, …) and re-dumps the tools; a template that renders
//! fine through vLLM can fail on the raw body, and the other way round. Each engine whose
//! handling kvlint models has its own file here (`vllm`); SGLang and llama.cpp will get
//! theirs. Without one, the template gets the request's chat view as transformers'
//! `apply_chat_template` would.

mod vllm;

use std::borrow::Cow;

use serde_json::Value;

use crate::error::InputError;
use crate::request::Request;
use crate::template::ChatTemplate;

use super::chat_view;
pub use vllm::VllmServer;

/// How the engine turns a request body into the input of its chat template.
#[derive(Debug)]
pub enum EngineRequest {
    /// No engine in between: the request's chat view, as transformers'
    /// `apply_chat_template` takes it. The path of engines whose request handling is not
    /// modelled yet (SGLang, llama.cpp).
    AsSent,
    /// vLLM's OpenAI-compatible server (`/v1/chat/completions`).
    Vllm(Box<VllmServer>),
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
}

impl EngineRequest {
    /// The engine's name in the renderer's name (`engine:vllm:…`), when one is modelled.
    pub fn engine_name(&self) -> Option<&'static str> {
        match self {
            Self::AsSent => None,
            Self::Vllm(_) => Some(vllm::ENGINE),
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
    ) -> Result<TemplateInput<'a>, InputError> {
        match self {
            Self::AsSent => {
                let (messages, tools) = chat_view(request);
                Ok(TemplateInput {
                    messages,
                    tools,
                    add_generation_prompt,
                    template: None,
                })
            }
            Self::Vllm(server) => server.template_input(request, template, add_generation_prompt),
        }
    }
}

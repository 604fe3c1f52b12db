//! The one factory of a renderer from what a user names: a tokenizer file, a chat template
//! file, and the engine that serves it. Without a template, provider mode on the tokenizer
//! (o200k_base when none is named); with one, engine mode: the template under that engine's
//! request layer. Every command, the configuration's defaults and the language bindings make
//! their renderer here.

use std::path::PathBuf;

use chrono::NaiveDateTime;
use kvlint_protocol::EngineName;
use serde_json::{Map, Value};

use super::{EngineRequest, LlamaCppServer, Renderer, SglangServer, VllmServer};
use crate::render::is_harmony_tokenizer;
use crate::template::{ChatTemplate, TemplateLimits};
use crate::tokenize::Tokenizer;
use kvlint_request::error::InputError;

/// The self-hosted engines whose request handling engine mode reproduces between the body and
/// the chat template.
pub const SERVING_ENGINES: [EngineName; 3] =
    [EngineName::Vllm, EngineName::Sglang, EngineName::LlamaCpp];

/// What a renderer is made of.
#[derive(Clone, Debug)]
pub struct RendererSetup {
    /// A Hugging Face `tokenizer.json`; by default the one beside a `tokenizer_config.json`
    /// template, else the embedded o200k_base.
    pub tokenizer: Option<PathBuf>,
    /// A Jinja file, or a `tokenizer_config.json` holding the template: engine mode.
    pub chat_template: Option<PathBuf>,
    /// What `strftime_now` returns in the template (and the date gpt-oss's system message
    /// carries).
    pub now: NaiveDateTime,
    /// Extra template variables, as an engine's `chat_template_kwargs`.
    pub chat_template_kwargs: Map<String, Value>,
    /// Render with the generation prompt, as engines do for every chat request.
    pub add_generation_prompt: bool,
    pub template_limits: TemplateLimits,
    /// The engine whose request handling is reproduced: vLLM's for any engine that is not
    /// SGLang or llama.cpp.
    pub serving: EngineName,
}

impl RendererSetup {
    /// Provider mode on the embedded o200k_base, served by vLLM's request layer when a
    /// template is named; `now` the template's clock.
    pub fn new(now: NaiveDateTime) -> Self {
        Self {
            tokenizer: None,
            chat_template: None,
            now,
            chat_template_kwargs: Map::new(),
            add_generation_prompt: true,
            template_limits: TemplateLimits::default(),
            serving: EngineName::Vllm,
        }
    }

    /// The tokenizer this setup reads: the one named, else a `tokenizer.json` beside a
    /// `tokenizer_config.json` template.
    pub fn tokenizer_path(&self) -> Option<PathBuf> {
        self.tokenizer.clone().or_else(|| {
            let template = self.chat_template.as_deref()?;
            let sibling = template.with_file_name("tokenizer.json");
            (template
                .extension()
                .is_some_and(|extension| extension == "json")
                && sibling.is_file())
            .then_some(sibling)
        })
    }

    /// The renderer: files read, the template compiled under the serving engine's request
    /// layer.
    pub fn renderer(&self) -> Result<Renderer, InputError> {
        let tokenizer = match &self.tokenizer_path() {
            Some(path) => Tokenizer::from_file(path)?,
            None => Tokenizer::o200k_base(),
        };
        let Some(template_path) = &self.chat_template else {
            return Ok(Renderer::Provider { tokenizer });
        };
        let mut template =
            ChatTemplate::from_file(template_path, self.now)?.with_limits(self.template_limits);
        template.kwargs = self.chat_template_kwargs.clone();
        let request = match self.serving {
            EngineName::LlamaCpp => EngineRequest::LlamaCpp(LlamaCppServer::serving(&mut template)),
            EngineName::Sglang if is_harmony_tokenizer(&tokenizer) => {
                EngineRequest::Sglang(SglangServer::serving(&mut template).serving_gpt_oss())
            }
            EngineName::Sglang => EngineRequest::Sglang(SglangServer::serving(&mut template)),
            // vLLM's, for every engine that is not self-hosted too. A gpt-oss tokenizer: vLLM
            // renders through Harmony, its system message dated the day the request comes in.
            _ if is_harmony_tokenizer(&tokenizer) => EngineRequest::Vllm(Box::new(
                VllmServer::for_template(&template)
                    .rendering_harmony(self.now.format("%Y-%m-%d").to_string()),
            )),
            _ => EngineRequest::Vllm(Box::new(VllmServer::for_template(&template))),
        };
        Ok(Renderer::Engine {
            template: Box::new(template),
            tokenizer,
            add_generation_prompt: self.add_generation_prompt,
            request,
        })
    }
}

//! How requests are rendered, as the commands' flags and `kvlint lsp`'s name it: provider mode
//! by default, a chat template for engine mode.

use std::path::PathBuf;

use chrono::NaiveDateTime;
use kvlint_core::cache::Engine;
use kvlint_protocol::EngineName;
use kvlint_render::TemplateLimits;
use kvlint_render::{Renderer, RendererSetup};
use miette::{IntoDiagnostic, WrapErr};

use super::config::Config;

/// The render flags: a chat template, a tokenizer, the time and the template's variables.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct RenderArgs {
    /// Render through this chat template (a Jinja file, or a tokenizer_config.json holding
    /// one), as an engine does.
    #[arg(long, value_name = "FILE")]
    pub chat_template: Option<PathBuf>,
    /// Tokenize with this Hugging Face tokenizer.json instead of the embedded o200k_base.
    #[arg(long, value_name = "FILE")]
    pub tokenizer: Option<PathBuf>,
    /// The time `strftime_now` returns in chat templates (`2026-11-29T10:00:00` or `2026-11-29`).
    #[arg(long, value_name = "TIME", value_parser = parse_now)]
    pub now: Option<NaiveDateTime>,
    /// Extra template variables, as an engine's `chat_template_kwargs` (a JSON object).
    #[arg(long, value_name = "JSON")]
    pub chat_template_kwargs: Option<String>,
    /// Render without the generation prompt (engines add it to every chat request).
    #[arg(long)]
    pub no_generation_prompt: bool,
    /// Bounds on each render of the chat template (`[template-limits]` of the configuration).
    #[arg(skip)]
    pub template_limits: TemplateLimits,
}

/// `--now`: a time, or a date at midnight.
pub fn parse_now(text: &str) -> Result<NaiveDateTime, String> {
    NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S")
        .or_else(|_| NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S"))
        .or_else(|_| {
            chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
                .map(|date| date.and_time(chrono::NaiveTime::MIN))
        })
        .or_else(|_| chrono::DateTime::parse_from_rfc3339(text).map(|time| time.naive_local()))
        .map_err(|_| {
            format!(
                "expected a time like 2026-11-29T10:00:00 or a date like 2026-11-29, got `{text}`"
            )
        })
}

impl RenderArgs {
    /// Fills what the flags leave unset from a configuration: its tokenizer and chat template
    /// (relative to it) and its template limits.
    pub fn apply_defaults(&mut self, config: &Config) {
        let options = &config.options;
        let resolve = |path: &Option<PathBuf>| path.as_deref().map(|path| config.resolve(path));
        self.tokenizer = self
            .tokenizer
            .take()
            .or_else(|| resolve(&options.tokenizer));
        self.chat_template = self
            .chat_template
            .take()
            .or_else(|| resolve(&options.chat_template));
        self.template_limits = options.template_limits.limits();
    }

    /// Provider mode without a chat template; engine mode through `serving`'s request
    /// handling with one.
    pub fn renderer(&self, serving: EngineName) -> miette::Result<Renderer> {
        Ok(self.setup(serving)?.renderer()?)
    }

    /// The renderer these flags name ([`RendererSetup`]), served by `serving`.
    pub fn setup(&self, serving: EngineName) -> miette::Result<RendererSetup> {
        let mut setup = RendererSetup::new(
            self.now
                .unwrap_or_else(|| chrono::Local::now().naive_local()),
        );
        setup.tokenizer = self.tokenizer.clone();
        setup.chat_template = self.chat_template.clone();
        setup.add_generation_prompt = !self.no_generation_prompt;
        setup.template_limits = self.template_limits;
        setup.serving = serving;
        // Template variables mean something only to a template.
        if let (Some(kwargs), Some(_)) = (&self.chat_template_kwargs, &self.chat_template) {
            let kwargs: serde_json::Value = serde_json::from_str(kwargs)
                .into_diagnostic()
                .wrap_err("--chat-template-kwargs must be a JSON object")?;
            let serde_json::Value::Object(kwargs) = kwargs else {
                miette::bail!("--chat-template-kwargs must be a JSON object");
            };
            setup.chat_template_kwargs = kwargs;
        }
        Ok(setup)
    }
}

/// The engine whose request handling engine mode reproduces for a cache model (`--engine
/// sglang:page=16` is SGLang); vLLM for hosted APIs and without one.
pub fn serving_engine(engine: Option<&Engine>) -> EngineName {
    engine
        .map(Engine::id)
        .filter(|engine| engine.is_self_hosted())
        .unwrap_or(EngineName::Vllm)
}

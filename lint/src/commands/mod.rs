//! One file per command. Each has its arguments (`Args`) and a `run` that returns the
//! [`Outcome`]: what to print and the exit code.

pub mod check;
pub mod diff;
#[cfg(feature = "recordings")]
pub mod import;
pub mod probe;
pub mod proxy;
pub mod render;
pub mod rule;
pub mod simulate;
pub mod template;
pub mod workload;

use std::path::PathBuf;

use chrono::NaiveDateTime;
use kvlint_core::TemplateLimits;
use kvlint_core::cache::Engine;
use kvlint_core::diagnostic::Severity;
use kvlint_core::render::{
    EngineRequest, LlamaCppServer, Renderer, SglangServer, VllmServer, is_harmony_tokenizer,
};
use kvlint_core::template::ChatTemplate;
use kvlint_core::tokenize::Tokenizer;
use kvlint_protocol::EngineName;
use miette::{IntoDiagnostic, WrapErr};

use crate::config::{Config, Discovery};
use crate::emit::{Output, OutputFormat, Terminal, emit};

/// Exit code of a run with error findings (0 is clean).
pub const EXIT_FINDINGS: u8 = 1;
/// Exit code of a usage or input error.
pub const EXIT_INPUT: u8 = 2;

/// What a command prints and how it exits.
#[derive(Debug)]
pub struct Outcome {
    pub output: String,
    pub exit_code: u8,
}

impl Outcome {
    /// Emits a command's output in `format`; exit code 2 when inputs could not be read, 1
    /// when findings are errors, else 0.
    fn emitted(
        format: OutputFormat,
        output: &Output<'_>,
        terminal: Terminal,
        input_errors: bool,
        error_findings: bool,
    ) -> miette::Result<Self> {
        Ok(Self {
            output: emit(format, output, terminal)?,
            exit_code: if input_errors {
                EXIT_INPUT
            } else if error_findings {
                EXIT_FINDINGS
            } else {
                0
            },
        })
    }
}

/// Whether any of the findings is an error.
fn has_errors<'a>(
    findings: impl IntoIterator<Item = &'a kvlint_core::diagnostic::Diagnostic>,
) -> bool {
    findings
        .into_iter()
        .any(|finding| finding.severity == Severity::Error)
}

/// How requests are rendered: provider mode by default, a chat template for engine mode.
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

/// The self-hosted engines whose request handling engine mode reproduces, between the body and
/// the chat template (`render --engine`, `workload --serving-engine`).
pub const SERVING_ENGINES: [EngineName; 3] =
    [EngineName::Vllm, EngineName::Sglang, EngineName::LlamaCpp];

/// The servers `probe` and `proxy` talk to (`--engine-kind`): the engines, and the hosted APIs
/// whose usage reports cached tokens (OpenAI's, Anthropic's).
pub const SERVER_KINDS: [EngineName; 5] = [
    EngineName::LlamaCpp,
    EngineName::Vllm,
    EngineName::Sglang,
    EngineName::OpenAi,
    EngineName::Anthropic,
];

/// The argument parser of an engine among `allowed`, by its name
/// ([`kvlint_protocol::engine`]).
pub fn engine_name(
    allowed: &'static [EngineName],
) -> impl clap::builder::TypedValueParser<Value = EngineName> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(allowed.iter().map(|engine| engine.as_str())).try_map(
        |name| EngineName::from_name(&name).ok_or_else(|| format!("unknown engine `{name}`")),
    )
}

/// The engine whose request handling engine mode reproduces for a cache model (`--engine
/// sglang:page=16` is SGLang); vLLM for hosted APIs and without one.
pub fn serving_engine(engine: Option<&Engine>) -> EngineName {
    engine
        .map(Engine::id)
        .filter(|engine| engine.is_self_hosted())
        .unwrap_or(EngineName::Vllm)
}

/// The configuration that applies in the current folder: the defaults of a command's flags.
pub fn current_config(configs: &mut Discovery) -> miette::Result<Option<Config>> {
    let here = std::env::current_dir().into_diagnostic()?;
    configs.for_folder(&here).map_err(miette::Report::new)
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
        let tokenizer_path = self.tokenizer.clone().or_else(|| {
            // A tokenizer_config.json usually sits beside its tokenizer.json.
            let template = self.chat_template.as_deref()?;
            let sibling = template.with_file_name("tokenizer.json");
            (template
                .extension()
                .is_some_and(|extension| extension == "json")
                && sibling.is_file())
            .then_some(sibling)
        });
        let tokenizer = match &tokenizer_path {
            Some(path) => Tokenizer::from_file(path)?,
            None => Tokenizer::o200k_base(),
        };
        let Some(template_path) = &self.chat_template else {
            return Ok(Renderer::Provider { tokenizer });
        };
        let now = self
            .now
            .unwrap_or_else(|| chrono::Local::now().naive_local());
        let mut template =
            ChatTemplate::from_file(template_path, now)?.with_limits(self.template_limits);
        if let Some(kwargs) = &self.chat_template_kwargs {
            let kwargs: serde_json::Value = serde_json::from_str(kwargs)
                .into_diagnostic()
                .wrap_err("--chat-template-kwargs must be a JSON object")?;
            let serde_json::Value::Object(kwargs) = kwargs else {
                miette::bail!("--chat-template-kwargs must be a JSON object");
            };
            template.kwargs = kwargs;
        }
        let request = match serving {
            EngineName::LlamaCpp => EngineRequest::LlamaCpp(LlamaCppServer::serving(&mut template)),
            EngineName::Sglang if is_harmony_tokenizer(&tokenizer) => {
                EngineRequest::Sglang(SglangServer::serving(&mut template).serving_gpt_oss())
            }
            EngineName::Sglang => EngineRequest::Sglang(SglangServer::serving(&mut template)),
            // vLLM's, which [`serving_engine`] gives for every engine that is not self-hosted.
            // A gpt-oss tokenizer: vLLM renders through Harmony, its system message dated the
            // day the request comes in.
            _ if is_harmony_tokenizer(&tokenizer) => EngineRequest::Vllm(Box::new(
                VllmServer::for_template(&template)
                    .rendering_harmony(now.format("%Y-%m-%d").to_string()),
            )),
            _ => EngineRequest::Vllm(Box::new(VllmServer::for_template(&template))),
        };
        Ok(Renderer::Engine {
            template: Box::new(template),
            tokenizer,
            add_generation_prompt: !self.no_generation_prompt,
            request,
        })
    }
}

//! `kvlint`: finds what breaks the prompt cache of LLM agents.

// Printing the report is the binary's job.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use chrono::NaiveDateTime;
use clap::{Parser, Subcommand};
use kvlint_core::cache::Engine;
use kvlint_core::diagnostic::Severity;
use kvlint_core::render::Renderer;
use kvlint_core::template::ChatTemplate;
use kvlint_core::tokenize::Tokenizer;
use miette::{IntoDiagnostic, WrapErr};

mod check;
mod config;
mod diff;
mod discover;
mod emit;
mod probe;
mod report;
mod template;

use emit::OutputFormat;
use report::CacheOptions;

#[derive(Debug, Parser)]
#[command(
    name = "kvlint",
    version,
    about = "Find what breaks the prompt cache of LLM agents"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check recorded sessions: consecutive request bodies of one agent session per file.
    Check {
        /// Session files (JSONL, JSON arrays, OpenAI Batch, {request, response} pairs) or
        /// directories to search for `*.jsonl` and `*.json`.
        #[arg(default_value = ".")]
        paths: Vec<PathBuf>,
        #[command(flatten)]
        render: RenderArgs,
        /// Predict what this engine serves from cache: vllm[:block=16][,spec], sglang[:page=1],
        /// llamacpp, openai[:MODEL], anthropic[:MODEL], gemini[:MODEL], deepseek.
        #[arg(long, value_name = "NAME[:OPTIONS]")]
        engine: Option<Engine>,
        /// Prefill speed of a self-hosted engine, for time estimates (tokens per second).
        #[arg(long, value_name = "N")]
        prefill_tps: Option<f64>,
        #[arg(long, value_enum, default_value = "human")]
        format: OutputFormat,
    },
    /// Compare two single requests token by token.
    Diff {
        previous: PathBuf,
        current: PathBuf,
        #[command(flatten)]
        render: RenderArgs,
        #[arg(long, value_enum, default_value = "human")]
        format: OutputFormat,
    },
    /// Check templates: model chat templates (Jinja, tokenizer_config.json) are rendered turn
    /// by turn and on another day; application prompt templates (Jinja, Mustache, Handlebars,
    /// format strings, Dotprompt, Prompty) are checked for volatile variables before stable text.
    Template {
        paths: Vec<PathBuf>,
        /// A tokenizer_config.json whose bos/eos and other special tokens bare Jinja
        /// templates are rendered with.
        #[arg(long, value_name = "FILE")]
        special_tokens: Option<PathBuf>,
        /// The clock `strftime_now` reads first (the check also renders a day later).
        #[arg(long, value_name = "TIME", value_parser = parse_now)]
        now: Option<NaiveDateTime>,
        #[arg(long, value_enum, default_value = "human")]
        format: OutputFormat,
    },
    /// Replay sessions against a live OpenAI-compatible engine and compare what it serves from
    /// cache with kvlint's prediction, turn by turn.
    Probe {
        sessions: Vec<PathBuf>,
        /// The engine's base URL, e.g. http://127.0.0.1:8080.
        #[arg(long, value_name = "URL", required_unless_present = "gateway")]
        engine_url: Option<String>,
        /// Fleet check: replay through this gateway (llama.cpp replicas behind it)...
        #[arg(long, value_name = "URL", requires = "replica")]
        gateway: Option<String>,
        /// ...and find which of these replicas served each turn (repeat for each).
        #[arg(long, value_name = "URL")]
        replica: Vec<String>,
        /// The kind of engine; detected from its endpoints when not given.
        #[arg(long, value_enum)]
        engine_kind: Option<probe::EngineKind>,
        /// The model name to send (else the request's).
        #[arg(long)]
        model: Option<String>,
        /// llama.cpp: read served-from-cache from `/metrics` (`llamacpp:prompt_tokens_cached_total`)
        /// around each turn, and check it against the response.
        #[arg(long)]
        metrics: bool,
        /// Seconds to wait for each answer.
        #[arg(long, default_value = "60")]
        timeout: u64,
        /// Also render each turn with this chat template and tokenizer and report whether
        /// kvlint's tokens equal the engine's.
        #[command(flatten)]
        render: RenderArgs,
        #[arg(long, value_enum, default_value = "human")]
        format: OutputFormat,
    },
    /// Write a starter kvlint.toml in the current folder.
    Init,
    /// Print the JSON schema of kvlint.toml.
    #[command(hide = true)]
    Schema,
    /// Print a rule's documentation, or list all rules.
    Rule {
        /// A rule name (`volatile-timestamp`) or code (`KV101`).
        name: Option<String>,
    },
}

#[derive(Debug, clap::Args)]
struct RenderArgs {
    /// Render through this chat template (a Jinja file, or a tokenizer_config.json holding
    /// one), as an engine does.
    #[arg(long, value_name = "FILE")]
    chat_template: Option<PathBuf>,
    /// Tokenize with this Hugging Face tokenizer.json instead of the embedded o200k_base.
    #[arg(long, value_name = "FILE")]
    tokenizer: Option<PathBuf>,
    /// The time `strftime_now` returns in chat templates (`2026-11-29T10:00:00` or `2026-11-29`).
    #[arg(long, value_name = "TIME", value_parser = parse_now)]
    now: Option<NaiveDateTime>,
    /// Extra template variables, as an engine's `chat_template_kwargs` (a JSON object).
    #[arg(long, value_name = "JSON")]
    chat_template_kwargs: Option<String>,
    /// Render without the generation prompt (engines add it to every chat request).
    #[arg(long)]
    no_generation_prompt: bool,
}

fn parse_now(text: &str) -> Result<NaiveDateTime, String> {
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
    fn renderer(&self) -> miette::Result<Renderer> {
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
        let mut template = ChatTemplate::from_file(template_path, now)?;
        if let Some(kwargs) = &self.chat_template_kwargs {
            let kwargs: serde_json::Value = serde_json::from_str(kwargs)
                .into_diagnostic()
                .wrap_err("--chat-template-kwargs must be a JSON object")?;
            let serde_json::Value::Object(kwargs) = kwargs else {
                miette::bail!("--chat-template-kwargs must be a JSON object");
            };
            template.kwargs = kwargs;
        }
        Ok(Renderer::Engine {
            template: Box::new(template),
            tokenizer,
            add_generation_prompt: !self.no_generation_prompt,
        })
    }
}

/// Exit codes: 0 clean, 1 error findings, 2 usage or input errors.
const EXIT_FINDINGS: u8 = 1;
const EXIT_INPUT: u8 = 2;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return ExitCode::from(if error.use_stderr() { EXIT_INPUT } else { 0 });
        }
    };
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("{error:?}");
            ExitCode::from(EXIT_INPUT)
        }
    }
}

fn terminal_width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|columns| columns.parse().ok())
        .unwrap_or(100)
}

fn use_color() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

fn run(cli: Cli) -> miette::Result<u8> {
    match cli.command {
        Command::Check {
            paths,
            render,
            engine,
            prefill_tps,
            format,
        } => {
            // Defaults come from the configuration of the current folder; flags win.
            let mut configs = config::Discovery::default();
            let here = std::env::current_dir().into_diagnostic()?;
            let defaults = configs.for_folder(&here).map_err(miette::Report::new)?;
            let mut render = render;
            let mut engine = engine;
            if let Some(defaults) = &defaults {
                let options = &defaults.options;
                render.tokenizer = render.tokenizer.or_else(|| {
                    options
                        .tokenizer
                        .as_deref()
                        .map(|path| defaults.resolve(path))
                });
                render.chat_template = render.chat_template.or_else(|| {
                    options
                        .chat_template
                        .as_deref()
                        .map(|path| defaults.resolve(path))
                });
                if engine.is_none()
                    && let Some(spec) = &options.engine
                {
                    engine = Some(spec.parse().map_err(|error| {
                        miette::Report::new(error)
                            .wrap_err(format!("in {}", defaults.path.display()))
                    })?);
                }
            }
            let renderer = render.renderer()?;
            let options = CacheOptions {
                engine,
                prefill_tokens_per_second: prefill_tps,
            };
            let report = check::check(&paths, &renderer, &options, &mut configs);
            let output = match format {
                OutputFormat::Human => emit::human::render(&report, use_color(), terminal_width()),
                OutputFormat::Json => emit::json::render(&report),
                OutputFormat::Sarif => emit::sarif::render(&report),
                OutputFormat::Github => emit::github::render(&report),
                OutputFormat::Junit => emit::junit::render(&report),
            };
            print!("{output}");
            Ok(if !report.errors.is_empty() {
                EXIT_INPUT
            } else if report.count(Severity::Error) > 0 {
                EXIT_FINDINGS
            } else {
                0
            })
        }
        Command::Diff {
            previous,
            current,
            render,
            format,
        } => {
            let renderer = render.renderer()?;
            let (result, current_file) = diff::diff(&previous, &current, &renderer)?;
            match format {
                OutputFormat::Json => print!(
                    "{}",
                    serde_json::to_string_pretty(&result).unwrap_or_default() + "\n"
                ),
                OutputFormat::Human => print!(
                    "{}",
                    emit::human::render_diff(&result, &current_file, use_color(), terminal_width())
                ),
                OutputFormat::Sarif | OutputFormat::Github | OutputFormat::Junit => {
                    miette::bail!("`kvlint diff` prints `--format human` or `json`")
                }
            }
            Ok(match &result.finding {
                Some(finding) if finding.severity == Severity::Error => EXIT_FINDINGS,
                _ => 0,
            })
        }
        Command::Template {
            paths,
            special_tokens,
            now,
            format,
        } => {
            if paths.is_empty() {
                miette::bail!("`kvlint template` needs at least one chat template file");
            }
            let now = now.unwrap_or_else(|| chrono::Local::now().naive_local());
            let mut configs = config::Discovery::default();
            let report =
                template::check_templates(&paths, special_tokens.as_ref(), now, &mut configs);
            let errors = report
                .templates
                .iter()
                .flat_map(|template| &template.findings)
                .any(|finding| finding.severity == Severity::Error);
            let unreadable = !report.errors.is_empty();
            let output = match format {
                OutputFormat::Json => {
                    serde_json::to_string_pretty(&report).unwrap_or_default() + "\n"
                }
                OutputFormat::Human => {
                    emit::human::render_templates(&report, use_color(), terminal_width())
                }
                OutputFormat::Sarif => emit::sarif::render(&report.into_report()),
                OutputFormat::Github => emit::github::render(&report.into_report()),
                OutputFormat::Junit => emit::junit::render(&report.into_report()),
            };
            print!("{output}");
            Ok(if unreadable {
                EXIT_INPUT
            } else if errors {
                EXIT_FINDINGS
            } else {
                0
            })
        }
        Command::Probe {
            sessions,
            engine_url,
            gateway,
            replica,
            metrics,
            engine_kind,
            model,
            timeout,
            render,
            format,
        } => {
            let own_renderer = render
                .chat_template
                .is_some()
                .then(|| render.renderer())
                .transpose()?;
            let timeout = std::time::Duration::from_secs(timeout);
            let mut fleet = gateway.as_deref().map(|gateway| {
                probe::Fleet::new(
                    probe::Client::new(gateway, timeout),
                    replica
                        .iter()
                        .map(|url| probe::Client::new(url, timeout))
                        .collect(),
                )
            });
            let client = probe::Client::new(
                engine_url
                    .as_deref()
                    .or(gateway.as_deref())
                    .unwrap_or_default(),
                timeout,
            );
            let kind = if fleet.is_some() {
                probe::EngineKind::Llamacpp
            } else {
                engine_kind.unwrap_or_else(|| client.detect())
            };
            let mut report = probe::ProbeReport {
                version: report::REPORT_VERSION,
                sessions: Vec::new(),
                errors: Vec::new(),
            };
            // vLLM and SGLang answer only for the model they serve.
            let model = model.or_else(|| {
                matches!(kind, probe::EngineKind::Vllm | probe::EngineKind::Sglang)
                    .then(|| client.served_model())
                    .flatten()
            });
            let mut seen = Vec::new();
            for path in &sessions {
                match kvlint_core::session::SessionFile::read(path) {
                    Ok(session) => report.sessions.push(match fleet.as_mut() {
                        Some(fleet) => probe::probe_fleet(fleet, &session, model.as_deref()),
                        None if matches!(
                            kind,
                            probe::EngineKind::Openai | probe::EngineKind::Anthropic
                        ) =>
                        {
                            probe::probe_hosted(&client, kind, &session, model.as_deref())
                        }
                        None => probe::probe_session(
                            &client,
                            kind,
                            &session,
                            model.as_deref(),
                            own_renderer.as_ref(),
                            &mut seen,
                            metrics,
                        ),
                    }),
                    Err(error) => {
                        eprintln!("{:?}", miette::Report::new(error));
                        report.errors.push(report::ErrorReport {
                            path: path.display().to_string(),
                            message: "cannot be read".into(),
                        });
                    }
                }
            }
            match format {
                OutputFormat::Json => print!(
                    "{}",
                    serde_json::to_string_pretty(&report).unwrap_or_default() + "\n"
                ),
                _ => print!("{}", emit::human::render_probe(&report)),
            }
            Ok(if !report.complete() {
                EXIT_INPUT
            } else if !report.all_match() {
                EXIT_FINDINGS
            } else {
                0
            })
        }
        Command::Init => {
            let path = config::init(Path::new("."))?;
            println!("wrote {}", path.display());
            Ok(0)
        }
        Command::Schema => {
            print!("{}", config::schema());
            Ok(0)
        }
        Command::Rule { name } => {
            print!("{}", rule_docs(name.as_deref())?);
            Ok(0)
        }
    }
}

fn rule_docs(name: Option<&str>) -> miette::Result<String> {
    let Some(name) = name else {
        let mut rules = kvlint_rules::RULES.to_vec();
        rules.sort_by_key(|rule| rule.meta().code);
        let mut listing = String::new();
        for rule in rules {
            let meta = rule.meta();
            listing.push_str(&format!(
                "{}  {:<20} {}\n",
                meta.code, meta.name, meta.summary
            ));
        }
        return Ok(listing);
    };
    let rule = kvlint_rules::rule(name).ok_or_else(|| {
        let names: Vec<&str> = kvlint_rules::RULES
            .iter()
            .map(|rule| rule.meta().name)
            .collect();
        miette::miette!(
            help = format!("known rules: {}", names.join(", ")),
            "unknown rule `{name}`"
        )
    })?;
    let meta = rule.meta();
    Ok(format!(
        "# {} ({})\n\n{}.\n\n{}",
        meta.name,
        meta.code,
        meta.summary,
        meta.documentation()
    ))
}

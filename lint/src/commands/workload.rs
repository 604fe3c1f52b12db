//! `kvlint workload SESSIONS…`: the reuse a workload creates, its distributions, and what the
//! application's own findings cost; or a benchmark dataset of its shape
//! (`--export-benchmark`), or its hashed trace in a fleet tool's format (`--export-trace`,
//! in `hashed.rs`). The sessions are traced once per renderer and block size and the trace
//! kept on disk, so that later runs (and `kvlint simulate`) skip the rendering; hashed traces
//! are read as they are (`--hashed-trace`).

mod hashed;
mod logs;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kvlint_core::cache::{Engine, MODELS, parse_ttl};
use kvlint_fleet::Trace;
use kvlint_protocol::EngineName;
use kvlint_render::render::Renderer;
use kvlint_request::request::Request;
use kvlint_workload::export::{Format, export};
use kvlint_workload::html::workload_html;
use kvlint_workload::{
    HostedCache, InputFile, LoggedSession, Prices, TraceSetup, WorkloadInputs, workload_report_on,
};
use miette::{IntoDiagnostic, WrapErr};

pub use self::hashed::TraceFormat;
use self::hashed::{export_trace, hashed_traces};
pub use self::logs::{LogArgs, LogSummary, summary_human, summary_json};
use kvlint_render::SERVING_ENGINES;

use super::{Outcome, current_config, engine_name};
use crate::emit::human;
use crate::input::{input_text, parse_all};
use crate::workspace::config::Discovery;
use crate::workspace::discover::session_files;
use crate::workspace::render::RenderArgs;

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  kvlint workload sessions/                        the reuse, as a table
  kvlint workload sessions/ --format html -o workload.html
  kvlint workload sessions/ --export-benchmark vllm-custom -o bench.jsonl
  kvlint workload --dataset bench.jsonl            a benchmark's own sharing, to compare
  kvlint workload prod/ --compare-dataset bench.jsonl --format html -o prod-vs-bench.html")]
pub struct Args {
    /// Session files, recordings or folders: anything `kvlint check` reads.
    pub sessions: Vec<PathBuf>,
    /// Benchmark datasets measured as they are, each prompt tokenized without a template:
    /// vLLM custom JSONL (`prompt`), GuideLLM JSONL, ShareGPT JSON, kvlint's chat JSONL.
    #[arg(long, value_name = "FILE")]
    pub dataset: Vec<PathBuf>,
    #[command(flatten)]
    pub trace: TraceArgs,
    #[arg(long, value_enum, default_value = "human")]
    pub format: WorkloadFormat,
    /// Write the report or the benchmark to this file instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Write the workload's hashed trace: block ids chained as the engine's prefix cache
    /// chains them, numbered in first-seen order, no text (`weka` with `-o DIR`: one file
    /// per conversation).
    #[arg(
        long,
        value_enum,
        value_name = "FORMAT",
        conflicts_with = "export_benchmark"
    )]
    pub export_trace: Option<TraceFormat>,
    /// Tokens per block of the exported trace (default: the format's: mooncake 512, bailian
    /// 16, weka 64, lmcache 256). Sessions are traced at this size; a hashed trace read as input yields
    /// multiples of its own.
    #[arg(long, value_name = "TOKENS", requires = "export_trace")]
    pub block_size: Option<u32>,
    /// Write a benchmark dataset of the workload's shape (random words, no text of it).
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub export_benchmark: Option<ExportFormat>,
    /// Sessions to compare the workload with (production against a benchmark's): the HTML
    /// report draws their sharing rate and distributions over the workload's, on the same
    /// axes; the human report follows with theirs.
    #[arg(long, value_name = "PATH", conflicts_with = "export_benchmark")]
    pub compare: Vec<PathBuf>,
    /// Benchmark datasets to compare with, as `--dataset` reads them.
    #[arg(long, value_name = "FILE", conflicts_with = "export_benchmark")]
    pub compare_dataset: Vec<PathBuf>,
    /// Price the misses at a hosted model's prices, named as `--engine` names it
    /// (`anthropic:claude-sonnet-4-5`, `openai:gpt-5.6`): avoidable and unavoidable misses in
    /// dollars, and its default cache lifetime for the expiries.
    #[arg(long, value_name = "PROVIDER:MODEL")]
    pub priced_as: Option<Engine>,
    /// How long the cache keeps a prefix after its last use (`5m`, `1h`, `12h`): a prefix sent
    /// longer ago is a miss, an avoidable one (default: the `--priced-as` model's lifetime;
    /// without either, none expires).
    #[arg(long, value_name = "DURATION", value_parser = parse_lifetime)]
    pub cache_lifetime: Option<f64>,
}

fn parse_lifetime(text: &str) -> Result<f64, String> {
    parse_ttl(text)
        .map(|lifetime| lifetime.as_secs_f64())
        .filter(|seconds| *seconds > 0.0)
        .ok_or_else(|| {
            format!("`{text}` is not a lifetime: a number and s, m, h or d (`5m`, `1h`)")
        })
}

/// The hosted cache the misses are measured against: `--cache-lifetime`, and `--priced-as`'s
/// prices and default lifetime.
fn hosted_cache(args: &Args) -> miette::Result<HostedCache> {
    let Some(engine) = &args.priced_as else {
        return Ok(HostedCache {
            lifetime_seconds: args.cache_lifetime,
            prices: None,
        });
    };
    let named = engine.to_string();
    let (Some(provider), Some(model)) = (
        engine.provider(),
        named.split_once(':').map(|(_, model)| model),
    ) else {
        return Err(miette::miette!(
            help = "name a hosted API's model: anthropic:claude-sonnet-4-5, openai:gpt-5.6, gemini:gemini-2.5-flash, xai:grok-4.7",
            "--priced-as {named}: not a hosted API's model"
        ));
    };
    let figures = MODELS.lookup(provider, model).ok_or_else(|| {
        miette::miette!(
            help = "`kvlint models` lists the table",
            "--priced-as {named}: the price table has no row for it"
        )
    })?;
    // The lifetime the API gives a request to this model that asks for none.
    let plain = serde_json::json!({"model": model, "messages": [{"role": "user", "content": "."}]});
    let default_lifetime = Request::from_body(&plain)
        .ok()
        .and_then(|request| engine.cache_ttl(&request))
        .map(|lifetime| lifetime.as_secs_f64());
    Ok(HostedCache {
        lifetime_seconds: args.cache_lifetime.or(default_lifetime),
        prices: Some(Prices {
            model: format!("{}/{}", figures.provider, model),
            input: figures.input,
            cached_input: figures.cached_input,
            cache_write: figures.cache_write,
        }),
    })
}

/// How sessions become a trace: their rendering, its block size and the trace cache.
#[derive(Debug, Clone, clap::Args)]
pub struct TraceArgs {
    /// Tokens per block: the engine's (vLLM 16 by default, SGLang's page size); with hashed
    /// traces alone, the traces' own.
    #[arg(long, value_name = "TOKENS")]
    pub block: Option<u32>,
    /// Hashed traces (Mooncake or Bailian JSON Lines, Claude Code conversations as AIPerf
    /// reads them, LMCache lookup-hash logs; a file or a folder of them): their block ids are
    /// the trace's blocks.
    #[arg(long, value_name = "FILE")]
    pub hashed_trace: Vec<PathBuf>,
    /// The hashed traces' format (default: told by their first record).
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub hashed_format: Option<TraceFormat>,
    /// Tokens per block id in the hashed traces (default: the format's: mooncake 512,
    /// bailian 16; weka and lmcache files say their own).
    #[arg(long, value_name = "TOKENS")]
    pub hashed_block: Option<u32>,
    #[command(flatten)]
    pub logs: LogArgs,
    #[command(flatten)]
    pub render: RenderArgs,
    /// With a chat template: the engine whose request parsing is reproduced.
    #[arg(long, default_value = "vllm", value_name = "ENGINE", value_parser = engine_name(&SERVING_ENGINES))]
    pub serving_engine: EngineName,
    /// Where traces are kept (default: `$XDG_CACHE_HOME/kvlint/traces`, else
    /// `~/.cache/kvlint/traces`).
    #[arg(long, value_name = "DIR")]
    pub trace_cache: Option<PathBuf>,
    /// Trace the sessions again, and keep nothing on disk.
    #[arg(long)]
    pub no_trace_cache: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WorkloadFormat {
    Human,
    Json,
    /// A self-contained page with plots.
    Html,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// `vllm bench serve --dataset-name custom`: JSONL of prompt and output_tokens.
    VllmCustom,
    /// ShareGPT JSON.
    Sharegpt,
    /// GuideLLM JSONL: prompt, prompt_tokens_count, output_tokens_count.
    Guidellm,
    /// JSONL of chat requests with session and arrival time.
    ChatJsonl,
}

impl ExportFormat {
    fn format(self) -> Format {
        match self {
            Self::VllmCustom => Format::VllmCustom,
            Self::Sharegpt => Format::ShareGpt,
            Self::Guidellm => Format::GuideLlm,
            Self::ChatJsonl => Format::ChatJsonl,
        }
    }
}

/// A workload traced: the trace, the renderer, how long tracing took (`None`: read from
/// the cache), and what reading the request logs found (`--log`).
pub struct Traced {
    pub trace: Trace,
    pub renderer: Renderer,
    pub tracing_seconds: Option<f64>,
    pub log: Option<LogSummary>,
}

/// The trace of `sessions` and `datasets` with the hashed traces and request logs `args`
/// names, assembled by [`WorkloadInputs::trace`] (from the cache when it holds it).
pub fn traced(
    sessions: &[PathBuf],
    datasets: &[PathBuf],
    args: &TraceArgs,
) -> miette::Result<Traced> {
    let mut render = args.render.clone();
    if let Some(defaults) = current_config(&mut Discovery::default())? {
        render.apply_defaults(&defaults);
    }
    let renderer = render.renderer(args.serving_engine)?;
    let files: Vec<PathBuf> = session_files(sessions)
        .into_iter()
        .map(|candidate| candidate.path)
        .collect();
    let hashed = hashed_traces(args)?;
    let logs = logs::read(&args.logs)?;
    if let Some(logs) = &logs
        && logs::nothing_used(&logs.summary)
        && files.is_empty()
        && datasets.is_empty()
        && hashed.is_empty()
    {
        miette::bail!(
            "no row of the request logs could be used\n{}",
            summary_human(&logs.summary)
        );
    }
    if files.is_empty() && datasets.is_empty() && logs.is_none() && hashed.is_empty() {
        miette::bail!("no session file found in {}", shown(sessions));
    }
    let read = |path: &PathBuf, roots: &[PathBuf]| -> miette::Result<InputFile> {
        let bytes = std::fs::read(path)
            .into_diagnostic()
            .wrap_err_with(|| format!("reading {}", path.display()))?;
        Ok(InputFile {
            name: path.display().to_string(),
            relative: relative_name(path, roots),
            bytes,
        })
    };
    let mut inputs = WorkloadInputs {
        files: files
            .iter()
            .map(|path| read(path, sessions))
            .collect::<miette::Result<_>>()?,
        datasets: datasets
            .iter()
            .map(|path| read(path, &[]))
            .collect::<miette::Result<_>>()?,
        hashed,
        logged: None,
    };
    let mut log = None;
    if let Some(logs) = logs {
        // A log's session is named `FILE#n`, its file named as a session file is: its
        // identity, unless it carries a session key.
        let named = |path: &str| match path.rsplit_once('#') {
            Some((file, number)) => format!(
                "{}#{number}",
                relative_name(Path::new(file), &args.logs.log)
            ),
            None => path.to_owned(),
        };
        inputs.logged = Some(
            logs.sessions
                .into_iter()
                .map(|session| LoggedSession {
                    name: named(&session.path),
                    session,
                })
                .collect(),
        );
        log = Some(logs.summary);
    }
    let setup = TraceSetup {
        renderer: &renderer,
        renderer_key: format!("{} {:?}", renderer.name(), args.serving_engine),
        block: args.block,
        cache: (!args.no_trace_cache).then(|| cache_folder(args)),
    };
    let assembled = inputs
        .trace(&setup, |name, bytes| {
            let text = input_text(name.clone(), bytes)?;
            parse_all(name, Arc::from(text))
        })
        .map_err(miette::Report::new)?;
    if let Some(error) = assembled.not_kept {
        // A cache that cannot be written costs the next run the rendering, nothing else.
        eprintln!("kvlint: {error}");
    }
    Ok(Traced {
        trace: assembled.trace,
        renderer,
        tracing_seconds: assembled.tracing_seconds,
        log,
    })
}

/// `file`'s name relative to the folder of `roots` it was found in (a file given itself: its
/// file name), with `/` between folders: the same whether the folder was given as `prod`,
/// `./prod` or an absolute path.
fn relative_name(file: &Path, roots: &[PathBuf]) -> String {
    let relative = roots
        .iter()
        .filter(|root| root.is_dir())
        .find_map(|root| file.strip_prefix(root).ok())
        .filter(|relative| !relative.as_os_str().is_empty());
    let relative =
        relative.unwrap_or_else(|| Path::new(file.file_name().unwrap_or(file.as_os_str())));
    relative
        .components()
        .map(|component| component.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

fn shown(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|path| path.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The files' and folders' own names, for a legend.
fn short_names(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|path| relative_name(path, &[]))
        .collect::<Vec<_>>()
        .join(", ")
}

fn cache_folder(args: &TraceArgs) -> PathBuf {
    if let Some(folder) = &args.trace_cache {
        return folder.clone();
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("kvlint").join("traces")
}

/// The request logs' summary on standard error, for the outputs that have no place for it
/// (the human and JSON reports carry it).
pub fn log_to_stderr(traced: &Traced) {
    if let Some(log) = &traced.log {
        eprint!("kvlint: {}", summary_human(log));
    }
}

/// Writes `text` to `output`, or returns it for standard output.
pub fn deliver(output: Option<&Path>, text: String) -> miette::Result<String> {
    match output {
        Some(path) => {
            std::fs::write(path, text)
                .into_diagnostic()
                .wrap_err_with(|| format!("writing {}", path.display()))?;
            Ok(String::new())
        }
        None => Ok(text),
    }
}

pub fn run(mut args: Args) -> miette::Result<Outcome> {
    if let Some(format) = args.export_trace {
        let block = args
            .block_size
            .unwrap_or(format.format().default_block_size());
        if block == 0 {
            miette::bail!("--block-size must be a positive number of tokens");
        }
        args.trace.block = Some(block);
        let traced = traced(&args.sessions, &args.dataset, &args.trace)?;
        log_to_stderr(&traced);
        return export_trace(
            &traced.trace,
            format.format(),
            block,
            args.output.as_deref(),
        );
    }
    let traced = traced(&args.sessions, &args.dataset, &args.trace)?;
    if args.export_benchmark.is_some() || args.format == WorkloadFormat::Html {
        log_to_stderr(&traced);
    }
    if let Some(format) = args.export_benchmark {
        let mut buffer = Vec::new();
        let written = export(
            &traced.trace,
            traced.renderer.tokenizer(),
            format.format(),
            &mut buffer,
        )
        .map_err(miette::Report::new)?;
        let text = String::from_utf8(buffer).into_diagnostic()?;
        let output = deliver(args.output.as_deref(), text)?;
        if args.output.is_some() {
            eprintln!(
                "kvlint workload: {written} requests written as {}",
                format.format().name()
            );
        }
        return Ok(Outcome {
            output,
            exit_code: 0,
        });
    }
    let cache = hosted_cache(&args)?;
    let report = workload_report_on(&traced.trace, &cache);
    let compared = compared(&args)?;
    let text = match args.format {
        WorkloadFormat::Human => {
            let mut text = human::render_workload(&report, traced.tracing_seconds);
            if let Some(log) = &traced.log {
                text.push('\n');
                text.push_str(&summary_human(log));
            }
            if let Some((name, compared)) = &compared {
                text.push_str(&format!("\ncompared with {name}:\n"));
                text.push_str(&human::render_workload(
                    &workload_report_on(&compared.trace, &cache),
                    compared.tracing_seconds,
                ));
            }
            text
        }
        WorkloadFormat::Json => {
            let mut value = serde_json::to_value(&report).into_diagnostic()?;
            if let (Some(log), Some(object)) = (&traced.log, value.as_object_mut()) {
                object.insert("log".into(), summary_json(log));
            }
            let mut json = serde_json::to_string_pretty(&value).into_diagnostic()?;
            json.push('\n');
            json
        }
        WorkloadFormat::Html => {
            let name = short_names(&[args.sessions.clone(), args.dataset.clone()].concat());
            let compared = compared
                .map(|(name, compared)| (name, workload_report_on(&compared.trace, &cache)));
            let mut workloads = vec![(name.as_str(), &report)];
            if let Some((name, report)) = &compared {
                workloads.push((name.as_str(), report));
            }
            workload_html("kvlint workload", &workloads, &[])
        }
    };
    Ok(Outcome {
        output: deliver(args.output.as_deref(), text)?,
        exit_code: 0,
    })
}

/// The workload `--compare` and `--compare-dataset` name, traced as the first is (its hashed
/// traces aside), with its name.
fn compared(args: &Args) -> miette::Result<Option<(String, Traced)>> {
    if args.compare.is_empty() && args.compare_dataset.is_empty() {
        return Ok(None);
    }
    if args.format == WorkloadFormat::Json {
        miette::bail!(
            "--compare is drawn in the HTML report and printed in the human one, not in JSON: run the JSON report on each workload"
        );
    }
    let mut trace_args = args.trace.clone();
    trace_args.hashed_trace.clear();
    let name = short_names(&[args.compare.clone(), args.compare_dataset.clone()].concat());
    Ok(Some((
        name,
        traced(&args.compare, &args.compare_dataset, &trace_args)?,
    )))
}

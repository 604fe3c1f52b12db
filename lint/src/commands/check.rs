//! `kvlint check`: analyse session files and report.

use std::path::PathBuf;
use std::sync::Arc;

use kvlint_core::cache::Engine;
use kvlint_core::error::read_text;
use kvlint_core::render::Renderer;
use kvlint_core::session::SessionFile;
use miette::WrapErr;
use rayon::prelude::*;

use super::{Outcome, RenderArgs, ServingEngine, current_config};
use crate::config::{Config, Discovery};
use crate::discover::{Candidate, looks_like_session, session_files};
use crate::emit::{Output, OutputFormat, Terminal};
use crate::report::{CacheOptions, ErrorReport, Report, SessionReport};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session files (JSONL, JSON arrays, OpenAI Batch, {request, response} pairs) or
    /// directories to search for `*.jsonl` and `*.json`.
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub render: RenderArgs,
    /// Predict what this engine serves from cache: vllm[:block=16][,spec], sglang[:page=1],
    /// llamacpp, openai[:MODEL], anthropic[:MODEL], gemini[:MODEL], deepseek. With a chat
    /// template, requests are parsed as this engine parses them (vLLM's parsing unless
    /// sglang or llamacpp is named; theirs is not modelled yet).
    #[arg(long, value_name = "NAME[:OPTIONS]")]
    pub engine: Option<Engine>,
    /// Prefill speed of a self-hosted engine, for time estimates (tokens per second).
    #[arg(long, value_name = "N", value_parser = parse_prefill_tps, allow_negative_numbers = true)]
    pub prefill_tps: Option<f64>,
    #[arg(long, value_enum, default_value = "human")]
    pub format: OutputFormat,
}

/// A prefill speed: a finite number of tokens per second, at least one.
fn parse_prefill_tps(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(speed) if speed.is_finite() && speed >= 1.0 => Ok(speed),
        _ => Err(format!(
            "expected tokens per second, a number of at least 1 (such as 2500), got `{text}`"
        )),
    }
}

pub fn run(mut args: Args, terminal: Terminal) -> miette::Result<Outcome> {
    // Defaults come from the configuration of the current folder; flags win.
    let mut configs = Discovery::default();
    if let Some(defaults) = current_config(&mut configs)? {
        args.render.apply_defaults(&defaults);
        if args.engine.is_none()
            && let Some(spec) = &defaults.options.engine
        {
            args.engine = Some(
                spec.parse()
                    .map_err(miette::Report::new)
                    .wrap_err(format!("in {}", defaults.path.display()))?,
            );
        }
    }
    let renderer = args
        .render
        .renderer(ServingEngine::of(args.engine.as_ref()))?;
    let options = CacheOptions {
        engine: args.engine,
        prefill_tokens_per_second: args.prefill_tps,
    };
    let report = check(&args.paths, &renderer, &options, &mut configs);
    Outcome::emitted(
        args.format,
        &Output::Check(&report),
        terminal,
        !report.errors.is_empty(),
        super::has_errors(report.sessions.iter().flat_map(|session| &session.findings)),
    )
}

/// A file to analyse: its text and the configuration that applies to it.
struct Pending {
    candidate: Candidate,
    text: String,
    config: Option<Config>,
}

/// Checks every session found under `paths`, sessions in parallel; the report keeps the order
/// in which they were found.
pub fn check(
    paths: &[PathBuf],
    renderer: &Renderer,
    options: &CacheOptions,
    configs: &mut Discovery,
) -> Report {
    // Reading and configuration first, in order (the configuration cache is shared); then the
    // analysis of every session in parallel.
    let mut found: Vec<Result<Pending, ErrorReport>> = Vec::new();
    for candidate in session_files(paths) {
        let text = match read_text(&candidate.path) {
            Ok(text) => text,
            Err(error) => {
                found.push(Err(error.into()));
                continue;
            }
        };
        if !candidate.explicit && !looks_like_session(&text) {
            continue;
        }
        found.push(match configs.for_file(&candidate.path) {
            Ok(config) => Ok(Pending {
                candidate,
                text,
                config,
            }),
            Err(error) => Err(error.into()),
        });
    }
    let analysed: Vec<Result<SessionReport, ErrorReport>> = found
        .into_par_iter()
        .map(|file| {
            let file = file?;
            let display = file.candidate.path.display().to_string();
            let mut session = SessionFile::parse(display, Arc::from(file.text))
                .and_then(|session| SessionReport::new(&session, renderer, options))?;
            if let Some(config) = &file.config {
                session.apply_config(config);
            }
            Ok(session)
        })
        .collect();
    let mut report = Report::new();
    for result in analysed {
        match result {
            Ok(session) => report.sessions.push(session),
            Err(error) => report.errors.push(error),
        }
    }
    report
}

//! `kvlint check`: analyse session files and report.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use kvlint_core::cache::Engine;
use rayon::prelude::*;

use super::Outcome;
use crate::emit::{Output, OutputFormat, Terminal};
use crate::input::{parse_all, read_input};
use crate::report::{ErrorReport, Report, SessionReport};
use crate::workspace::check::{Setup, check_sessions};
use crate::workspace::config::{Config, Discovery};
use crate::workspace::discover::{Candidate, looks_like_session, session_files};
use crate::workspace::render::RenderArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session files (JSONL, JSON arrays, OpenAI Batch, {request, response} pairs) or
    /// directories to search for session files and recordings (`*.jsonl`, `*.json`, cassettes,
    /// HAR files, Inspect logs).
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub render: RenderArgs,
    /// Predict what this engine serves from cache: vllm[:block=16][,spec], sglang[:page=1],
    /// llamacpp, openai[:MODEL], anthropic[:MODEL], gemini[:MODEL], deepseek, xai[:MODEL]. With a chat
    /// template, requests are parsed as this engine parses them (vLLM's parsing unless
    /// llamacpp or sglang is named).
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

pub fn run(args: Args, terminal: Terminal) -> miette::Result<Outcome> {
    let report = check(&args, &mut Discovery::default());
    Outcome::emitted(
        args.format,
        &Output::Check(&report),
        terminal,
        !report.errors.is_empty(),
        super::has_errors(report.sessions.iter().flat_map(|session| &session.findings)),
    )
}

/// A setup that could not be made: a configuration naming a tokenizer or chat template that
/// does not load, or an engine kvlint does not know.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("{what}")]
struct SetupError {
    what: String,
    #[diagnostic_source]
    source: Box<dyn miette::Diagnostic + Send + Sync>,
}

/// A file to analyse: its text and the configuration that applies to it.
struct Pending {
    candidate: Candidate,
    text: String,
    config: Option<Config>,
}

/// Checks every session found under `paths`, sessions in parallel, each with the configuration
/// found upward from its file; the report keeps the order in which they were found.
pub fn check(args: &Args, configs: &mut Discovery) -> Report {
    // Reading and configuration first, in order (the configuration cache is shared); then the
    // analysis of every session in parallel.
    let mut found: Vec<Result<Pending, ErrorReport>> = Vec::new();
    for candidate in session_files(&args.paths) {
        let text = match read_input(&candidate.path) {
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
    // One setup per configuration, made once; one that fails is reported once, and its
    // sessions are not checked.
    let mut setups: HashMap<Option<PathBuf>, Option<Arc<Setup>>> = HashMap::new();
    let mut with_setups = Vec::with_capacity(found.len());
    for file in found {
        let Ok(file) = file else {
            with_setups.push(file.map(|file| (file, None)));
            continue;
        };
        let key = file.config.as_ref().map(|config| config.path.clone());
        let setup = setups.entry(key).or_insert_with(|| {
            match Setup::of(
                &args.render,
                args.engine.as_ref(),
                args.prefill_tps,
                file.config.as_ref(),
            ) {
                Ok(setup) => Some(Arc::new(setup)),
                Err(error) => {
                    let (path, what) = match &file.config {
                        Some(config) => {
                            let path = config.path.display().to_string();
                            let what = format!(
                                "{path}: cannot check the sessions under this configuration"
                            );
                            (path, what)
                        }
                        None => {
                            let path = file.candidate.path.display().to_string();
                            let what = format!("{path}: cannot be checked with the flags given");
                            (path, what)
                        }
                    };
                    let error = SetupError {
                        what,
                        source: error.into(),
                    };
                    with_setups.push(Err(ErrorReport::new(path, error)));
                    None
                }
            }
        });
        if let Some(setup) = setup.clone() {
            with_setups.push(Ok((file, Some(setup))));
        }
    }
    let analysed: Vec<Result<SessionReport, ErrorReport>> = with_setups
        .into_par_iter()
        .flat_map_iter(|file| match file {
            Ok((file, Some(setup))) => check_text(
                &file.candidate.path.display().to_string(),
                file.text,
                file.config.as_ref(),
                &setup,
            ),
            Ok((_, None)) => Vec::new(),
            Err(error) => vec![Err(error)],
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

/// Checks the text of a session file, or each session a recording holds.
pub(crate) fn check_text(
    path: &str,
    text: String,
    config: Option<&Config>,
    setup: &Setup,
) -> Vec<Result<SessionReport, ErrorReport>> {
    let sessions = match parse_all(path.to_owned(), Arc::from(text)) {
        Ok(sessions) => sessions,
        Err(error) => return vec![Err(error.into())],
    };
    check_sessions(&sessions, config, setup)
}

//! `kvlint probe`: replay sessions against a live engine and compare what it serves from cache
//! with kvlint's prediction, turn by turn.

use std::path::PathBuf;
use std::time::Duration;

use kvlint_protocol::EngineName;

use super::{Outcome, SERVER_KINDS, engine_name};
use crate::emit::{self, Output, OutputFormat, OutputKind, Terminal};
use crate::engine_client::{Api, Client};
use crate::probe::{self, Fleet};
use crate::report::REPORT_VERSION;
use crate::report::probe::ProbeReport;
use crate::workspace::render::RenderArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    pub sessions: Vec<PathBuf>,
    /// The engine's base URL, e.g. http://127.0.0.1:8080.
    #[arg(long, value_name = "URL", required_unless_present = "gateway")]
    pub engine_url: Option<String>,
    /// Fleet check: replay through this gateway (llama.cpp replicas behind it)...
    #[arg(long, value_name = "URL", requires = "replica")]
    pub gateway: Option<String>,
    /// ...and find which of these replicas served each turn (repeat for each).
    #[arg(long, value_name = "URL")]
    pub replica: Vec<String>,
    /// The kind of engine; detected from its endpoints when not given.
    #[arg(long, value_parser = engine_name(&SERVER_KINDS))]
    pub engine_kind: Option<EngineName>,
    /// The model name to send (else the request's).
    #[arg(long)]
    pub model: Option<String>,
    /// llama.cpp: read served-from-cache from `/metrics` (`llamacpp:prompt_tokens_cached_total`)
    /// around each turn, and check it against the response.
    #[arg(long)]
    pub metrics: bool,
    /// Seconds to wait for each answer.
    #[arg(long, default_value = "60")]
    pub timeout: u64,
    /// Also render each turn with this chat template and tokenizer and report whether
    /// kvlint's tokens equal the engine's.
    #[command(flatten)]
    pub render: RenderArgs,
    #[arg(long, value_enum, default_value = "human")]
    pub format: OutputFormat,
}

pub fn run(args: Args, terminal: Terminal) -> miette::Result<Outcome> {
    emit::supported(OutputKind::Probe, args.format)?;
    let timeout = Duration::from_secs(args.timeout);
    let mut fleet = args.gateway.as_deref().map(|gateway| {
        Fleet::new(
            Client::new(gateway, timeout),
            args.replica
                .iter()
                .map(|url| Client::new(url, timeout))
                .collect(),
        )
    });
    let client = Client::new(
        args.engine_url
            .as_deref()
            .or(args.gateway.as_deref())
            .unwrap_or_default(),
        timeout,
    );
    let kind = if fleet.is_some() {
        EngineName::LlamaCpp
    } else {
        args.engine_kind.unwrap_or_else(|| client.detect())
    };
    // Each provider's key goes to that provider's header only.
    let client = client.for_api(match kind {
        EngineName::Anthropic => Api::Anthropic,
        _ => Api::OpenAiCompatible,
    });
    // kvlint renders each turn as the probed engine parses it.
    let serving = if kind.is_self_hosted() {
        kind
    } else {
        EngineName::Vllm
    };
    let own_renderer = args
        .render
        .chat_template
        .is_some()
        .then(|| args.render.renderer(serving))
        .transpose()?;
    let mut report = ProbeReport {
        version: REPORT_VERSION,
        sessions: Vec::new(),
        errors: Vec::new(),
    };
    // vLLM and SGLang answer only for the model they serve.
    let model = args.model.or_else(|| {
        matches!(kind, EngineName::Vllm | EngineName::Sglang)
            .then(|| client.served_model())
            .flatten()
    });
    let mut seen = Vec::new();
    // A recording is replayed session by session, each as recorded; one file at a time.
    let sessions = args.sessions.iter().flat_map(|path| {
        crate::input::read_all(path).map_or_else(
            |error| vec![Err(error)],
            |found| found.into_iter().map(Ok).collect(),
        )
    });
    for session in sessions {
        let session = match session {
            Ok(session) => session,
            Err(error) => {
                report.errors.push(error.into());
                continue;
            }
        };
        let probed = match fleet.as_mut() {
            Some(fleet) => probe::probe_fleet(fleet, &session, model.as_deref()),
            None if !kind.is_self_hosted() => {
                probe::probe_hosted(&client, kind, &session, model.as_deref())
            }
            None => probe::probe_session(
                &client,
                kind,
                &session,
                model.as_deref(),
                own_renderer.as_ref(),
                &mut seen,
                args.metrics,
            ),
        };
        match probed {
            Ok(probed) => report.sessions.push(probed),
            Err(error) => report.errors.push(error.into()),
        }
    }
    Outcome::emitted(
        args.format,
        &Output::Probe(&report),
        terminal,
        !report.complete(),
        !report.all_match(),
    )
}

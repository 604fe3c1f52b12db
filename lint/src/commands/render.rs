//! `kvlint render SESSION…`: exactly what the engine prefills for each turn, as text and
//! token ids; the turns it would refuse, with its reason.

use std::borrow::Cow;
use std::path::PathBuf;

use kvlint_core::session::{SessionFile, Turn};
use kvlint_protocol::EngineName;
use kvlint_render::render::{Rendered, Renderer};
use kvlint_request::error::InputError;

use kvlint_render::SERVING_ENGINES;

use super::{Outcome, current_config, engine_name};
use crate::emit::{self, Output, OutputFormat, OutputKind, Terminal};
use crate::report::render::{RenderReport, RenderedSession, RenderedTurn};
use crate::report::{ErrorReport, REPORT_VERSION};
use crate::workspace::config::Discovery;
use crate::workspace::render::RenderArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session files (JSONL, JSON arrays, OpenAI Batch, {request, response} pairs).
    #[arg(required = true)]
    pub sessions: Vec<PathBuf>,
    /// Only this turn (counted from 0, as in `kvlint check`).
    #[arg(long, value_name = "N")]
    pub turn: Option<usize>,
    /// With a chat template: the engine whose request parsing is reproduced.
    #[arg(long, default_value = "vllm", value_parser = engine_name(&SERVING_ENGINES))]
    pub engine: EngineName,
    #[command(flatten)]
    pub render: RenderArgs,
    #[arg(long, value_enum, default_value = "human")]
    pub format: OutputFormat,
}

/// `--turn N` past the end of a session.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("{path} has no turn {turn}: its turns are 0 to {last}")]
#[diagnostic(code(kvlint::no_such_turn))]
struct NoSuchTurn {
    path: String,
    turn: usize,
    last: usize,
}

pub fn run(mut args: Args, terminal: Terminal) -> miette::Result<Outcome> {
    emit::supported(OutputKind::Render, args.format)?;
    if let Some(defaults) = current_config(&mut Discovery::default())? {
        args.render.apply_defaults(&defaults);
    }
    let renderer = args.render.renderer(args.engine)?;
    let report = render_sessions(&args.sessions, args.turn, &renderer);
    let refused = report
        .sessions
        .iter()
        .flat_map(|session| &session.turns)
        .any(|turn| turn.error.is_some());
    Outcome::emitted(
        args.format,
        &Output::Render(&report),
        terminal,
        !report.errors.is_empty(),
        refused,
    )
}

/// Renders every turn of each session (or only turn `only`), in order.
pub fn render_sessions(
    paths: &[PathBuf],
    only: Option<usize>,
    renderer: &Renderer,
) -> RenderReport {
    let mut report = RenderReport {
        version: REPORT_VERSION,
        sessions: Vec::new(),
        errors: Vec::new(),
    };
    for path in paths {
        let sessions = match crate::input::read_all(path) {
            Ok(sessions) => sessions,
            Err(error) => {
                report.errors.push(error.into());
                continue;
            }
        };
        for session in &sessions {
            render_one(session, only, renderer, &mut report);
        }
    }
    report
}

/// Renders one session into the report (or says it has no turn `only`).
fn render_one(
    session: &SessionFile,
    only: Option<usize>,
    renderer: &Renderer,
    report: &mut RenderReport,
) {
    let last = session.len().saturating_sub(1);
    if let Some(turn) = only.filter(|turn| *turn > last) {
        let path = session.path.clone();
        report.errors.push(ErrorReport::new(
            path.clone(),
            NoSuchTurn { path, turn, last },
        ));
        return;
    }
    match render_session(session, only, renderer) {
        Ok(rendered) => report.sessions.push(rendered),
        Err(error) => report.errors.push(error.into()),
    }
}

fn render_session(
    session: &SessionFile,
    only: Option<usize>,
    renderer: &Renderer,
) -> Result<RenderedSession, InputError> {
    let mut turns = Vec::new();
    // The turn before, so that parts sent again reuse its tokens.
    let mut previous: Option<(Cow<'_, Turn>, Rendered)> = None;
    for index in 0..session.len() {
        if only.is_some_and(|only| only != index) {
            continue;
        }
        let turn = session.turn(index)?;
        let hint = previous
            .as_ref()
            .map(|(turn, rendered)| (&turn.request, rendered));
        match renderer.render_after(&turn.request, hint) {
            Ok(rendered) => {
                turns.push(RenderedTurn {
                    index,
                    format: turn.request.format.name(),
                    text: Some(rendered.text.clone()),
                    token_ids: Some(rendered.tokens.ids()),
                    error: None,
                });
                previous = Some((turn, rendered));
            }
            Err(source) => {
                let error = session.turn_error(index, source);
                turns.push(RenderedTurn {
                    index,
                    format: turn.request.format.name(),
                    text: None,
                    token_ids: None,
                    error: Some(ErrorReport::new(session.path.clone(), error)),
                });
                previous = None;
            }
        }
    }
    Ok(RenderedSession {
        path: session.path.clone(),
        renderer: renderer.name(),
        turns,
    })
}

//! The pipeline, assembled once: every command, the SDK's guard, the tests and the benchmarks
//! call [`check_session`] or [`check_pair`].
//!
//! session → render → tokens → turn diff → rules → diagnostics; with an engine, each turn's
//! cache view → predicted cache use and the breakpoint audit.

use kvlint_core::cache::Engine;
use kvlint_core::diagnostic::Diagnostic;
use kvlint_core::diff::{RenderedRequest, TurnDiff, diff_turns};
use kvlint_core::error::InputError;
use kvlint_core::locate::Locator;
use kvlint_core::prediction::{SessionCacheView, TurnCachePrediction};
use kvlint_core::render::{Rendered, Renderer};
use kvlint_core::session::SessionFile;
use kvlint_core::tokenize::Tokenizer;
use rayon::prelude::*;

use crate::{RuleInput, TurnPair, diagnose};

/// Turns rendered at once, in parallel: enough to keep every core busy, few enough that only
/// a handful of renderings are held, not the whole session's.
const RENDER_BATCH: usize = 16;

/// A session checked: each turn's diff against the one before, the findings in turn order,
/// and, with an engine, what it serves from cache.
#[derive(Debug)]
pub struct SessionCheck {
    pub turns: Vec<TurnDiff>,
    pub findings: Vec<Diagnostic>,
    /// With an engine: each turn's predicted cache use.
    pub predictions: Option<Vec<TurnCachePrediction>>,
}

impl SessionCheck {
    pub fn prompt_tokens(&self) -> usize {
        self.turns.iter().map(|turn| turn.prompt_tokens).sum()
    }

    pub fn reused_tokens(&self) -> usize {
        self.turns.iter().map(|turn| turn.reused_tokens).sum()
    }
}

/// Checks a recorded session: renders its turns (in parallel batches), diffs each against the
/// one before, names every break, and with `engine` predicts its cache use and audits its
/// breakpoints.
pub fn check_session(
    session: &SessionFile,
    renderer: &Renderer,
    engine: Option<&Engine>,
) -> Result<SessionCheck, InputError> {
    let mut turns = Vec::with_capacity(session.turns.len());
    let mut findings = Vec::new();
    let mut cache_view = engine.map(|_| SessionCacheView::new(renderer));
    let mut previous: Option<Rendered> = None;
    for (batch_index, batch) in session.turns.chunks(RENDER_BATCH).enumerate() {
        let renderings: Vec<_> = batch
            .par_iter()
            .map(|turn| renderer.render(&turn.request))
            .collect();
        for (offset, (turn, rendered)) in batch.iter().zip(renderings).enumerate() {
            let index = batch_index * RENDER_BATCH + offset;
            let rendered = rendered.map_err(|source| InputError::Turn {
                path: session.path.clone(),
                line: session.turn_line(turn),
                turn: index,
                source: Box::new(source),
            })?;
            if let Some(view) = &mut cache_view {
                view.push(&turn.request, &rendered, turn.response.as_ref(), renderer);
            }
            let previous_side = previous.as_ref().and_then(|rendered| {
                let request = &session.turns.get(index.checked_sub(1)?)?.request;
                Some(RenderedRequest { request, rendered })
            });
            let current = RenderedRequest {
                request: &turn.request,
                rendered: &rendered,
            };
            let (diff, finding) =
                check_pair(previous_side, current, index, renderer.tokenizer(), session);
            findings.extend(finding);
            turns.push(diff);
            previous = Some(rendered);
        }
    }
    let predictions = engine.zip(cache_view).map(|(engine, view)| {
        for issue in view.audit_breakpoints(engine) {
            let span = session
                .locate(issue.turn, &issue.block, 0)
                .map(|start| session.span(start, start + 1));
            findings.extend(diagnose(&RuleInput::Breakpoint {
                issue: &issue,
                span,
            }));
        }
        findings.sort_by_key(|finding| finding.turn);
        view.predict(engine)
    });
    Ok(SessionCheck {
        turns,
        findings,
        predictions,
    })
}

/// Checks one request against the one before it (`None` for a first turn): the turn diff, and
/// the finding that names the break when the later request does not extend the earlier.
/// `locator` places the finding in the file the requests came from.
pub fn check_pair(
    previous: Option<RenderedRequest<'_>>,
    current: RenderedRequest<'_>,
    index: usize,
    tokenizer: &Tokenizer,
    locator: &dyn Locator,
) -> (TurnDiff, Option<Diagnostic>) {
    let diff = diff_turns(previous, current, index, tokenizer, locator);
    let finding =
        previous
            .zip(diff.first_divergence.as_ref())
            .and_then(|(previous, divergence)| {
                diagnose(&RuleInput::TurnPair(&TurnPair {
                    index,
                    previous: previous.request,
                    current: current.request,
                    previous_rendered: previous.rendered,
                    current_rendered: current.rendered,
                    divergence,
                }))
            });
    (diff, finding)
}

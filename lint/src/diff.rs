//! `kvlint diff A B`: two single requests, token by token.

use std::path::Path;

use kvlint_core::analysis::{TurnDiff, TurnPair, diff_turns};
use kvlint_core::diagnostic::Diagnostic;
use kvlint_core::error::InputError;
use kvlint_core::render::{Rendered, Renderer};
use kvlint_core::session::SessionFile;
use serde::Serialize;
use similar::TextDiff;

use crate::report::REPORT_VERSION;

/// The comparison of two requests.
#[derive(Debug, Serialize)]
pub struct RequestDiff {
    pub version: u32,
    pub previous: RequestSide,
    pub current: RequestSide,
    pub renderer: String,
    pub reused_tokens: usize,
    pub first_divergence: Option<kvlint_core::analysis::Divergence>,
    pub finding: Option<Diagnostic>,
    /// A unified diff of the two rendered prompts.
    pub rendered_diff: String,
}

#[derive(Debug, Serialize)]
pub struct RequestSide {
    pub path: String,
    pub format: String,
    pub prompt_tokens: usize,
}

fn single_request(path: &Path) -> Result<SessionFile, InputError> {
    let session = SessionFile::read(path)?;
    if session.turns.len() != 1 {
        return Err(InputError::NotOneRequest {
            path: session.path.clone(),
            turns: session.turns.len(),
        });
    }
    Ok(session)
}

pub fn diff(
    previous_path: &Path,
    current_path: &Path,
    renderer: &Renderer,
) -> Result<(RequestDiff, String), InputError> {
    let previous = single_request(previous_path)?;
    let current = single_request(current_path)?;
    let render = |session: &SessionFile| -> Result<Rendered, InputError> {
        renderer.render(&session.turns[0].request)
    };
    let (previous_rendered, current_rendered) = (render(&previous)?, render(&current)?);
    let turn_diff: TurnDiff = diff_turns(
        Some((&previous.turns[0].request, &previous_rendered)),
        (&current, &current.turns[0], &current_rendered),
        1,
        renderer,
    );
    let finding = turn_diff.first_divergence.as_ref().map(|divergence| {
        kvlint_rules::diagnose(&TurnPair {
            index: 1,
            previous: &previous.turns[0],
            current: &current.turns[0],
            previous_rendered: &previous_rendered,
            current_rendered: &current_rendered,
            divergence,
        })
    });
    let rendered_diff = TextDiff::from_lines(&previous_rendered.text, &current_rendered.text)
        .unified_diff()
        .context_radius(2)
        .header(&previous.path, &current.path)
        .to_string();
    let side = |session: &SessionFile, rendered: &Rendered| RequestSide {
        path: session.path.clone(),
        format: session.turns[0].request.format.name().to_owned(),
        prompt_tokens: rendered.tokens.len(),
    };
    let result = RequestDiff {
        version: REPORT_VERSION,
        previous: side(&previous, &previous_rendered),
        current: side(&current, &current_rendered),
        renderer: renderer.name(),
        reused_tokens: turn_diff.reused_tokens,
        first_divergence: turn_diff.first_divergence,
        finding,
        rendered_diff,
    };
    Ok((result, current.text.to_string()))
}

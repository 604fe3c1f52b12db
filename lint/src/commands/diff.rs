//! `kvlint diff A B`: two single requests, token by token.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kvlint_core::diff::RenderedRequest;
use kvlint_core::session::{SessionFile, Turn};
use kvlint_protocol::EngineName;
use kvlint_render::render::{Rendered, Renderer};
use kvlint_request::diagnostic::Diagnostic;
use kvlint_request::error::InputError;
use kvlint_request::locate::{LineColumn, Locator};
use kvlint_request::path::PartPath;
use kvlint_rules::ThinkingPrefixCheck;
use kvlint_rules::thinking::Account;
use similar::TextDiff;

use super::{Outcome, current_config};
use crate::emit::{self, Output, OutputFormat, OutputKind, Terminal};
use crate::report::REPORT_VERSION;
use crate::report::diff::{RequestDiff, RequestSide};
use crate::workspace::check::anthropic_account;
use crate::workspace::config::Discovery;
use crate::workspace::render::RenderArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    pub previous: PathBuf,
    pub current: PathBuf,
    #[command(flatten)]
    pub render: RenderArgs,
    #[arg(long, value_enum, default_value = "human")]
    pub format: OutputFormat,
}

pub fn run(mut args: Args, terminal: Terminal) -> miette::Result<Outcome> {
    emit::supported(OutputKind::Diff, args.format)?;
    let mut account = Account::Unknown;
    if let Some(defaults) = current_config(&mut Discovery::default())? {
        args.render.apply_defaults(&defaults);
        account = anthropic_account(&defaults)?;
    }
    let renderer = args.render.renderer(EngineName::Vllm)?;
    let result = diff(&args.previous, &args.current, &renderer, account)?;
    Outcome::emitted(
        args.format,
        &Output::Diff(&result),
        terminal,
        false,
        super::has_errors(result.finding.iter().chain(&result.thinking)),
    )
}

/// The one request a file holds, and the file.
fn single_request(path: &Path) -> Result<(SessionFile, Turn), InputError> {
    let session = crate::input::read_session(path)?;
    if session.len() != 1 {
        return Err(InputError::NotOneRequest {
            path: session.path.clone(),
            turns: session.len(),
        });
    }
    let turn = session.turn(0)?.into_owned();
    Ok((session, turn))
}

/// Places the later request of a diff, which is turn 1 of the pair but the only turn of its file.
struct SingleRequest<'a>(&'a SessionFile);

impl Locator for SingleRequest<'_> {
    fn locate(&self, _turn: usize, part: &PartPath, offset_in_part: usize) -> Option<usize> {
        self.0.locate(0, part, offset_in_part)
    }

    fn line_column(&self, offset: usize) -> LineColumn {
        self.0.line_column(offset)
    }
}

/// The two requests of `kvlint diff` compared, with the prefix check of returned thinking
/// blocks on `account`.
pub fn diff(
    previous_path: &Path,
    current_path: &Path,
    renderer: &Renderer,
    account: Account,
) -> Result<RequestDiff, InputError> {
    let (previous, previous_turn) = single_request(previous_path)?;
    let (current, current_turn) = single_request(current_path)?;
    let previous_rendered = renderer.render(&previous_turn.request)?;
    let current_rendered = renderer.render(&current_turn.request)?;
    fn side<'a>(turn: &'a Turn, rendered: &'a Rendered) -> RenderedRequest<'a> {
        RenderedRequest {
            request: &turn.request,
            rendered,
        }
    }
    let (turn_diff, findings) = kvlint_rules::check_pair(
        Some(side(&previous_turn, &previous_rendered)),
        side(&current_turn, &current_rendered),
        1,
        renderer.tokenizer(),
        &SingleRequest(&current),
        account,
    );
    let rendered_diff = TextDiff::from_lines(&previous_rendered.text, &current_rendered.text)
        .unified_diff()
        .context_radius(2)
        .header(&previous.path, &current.path)
        .to_string();
    let report_side = |session: &SessionFile, turn: &Turn, rendered: &Rendered| RequestSide {
        path: session.path.clone(),
        format: turn.request.format.name().to_owned(),
        prompt_tokens: rendered.tokens.len(),
    };
    let (thinking, finding): (Vec<Diagnostic>, Vec<Diagnostic>) = findings
        .into_iter()
        .partition(|finding| finding.rule == ThinkingPrefixCheck::META.name);
    let result = RequestDiff {
        version: REPORT_VERSION,
        previous: report_side(&previous, &previous_turn, &previous_rendered),
        current: report_side(&current, &current_turn, &current_rendered),
        renderer: renderer.name(),
        reused_tokens: turn_diff.reused_tokens,
        first_divergence: turn_diff.first_divergence,
        finding: finding.into_iter().next(),
        thinking: thinking.into_iter().next(),
        rendered_diff,
        current_source: Arc::clone(&current.text),
    };
    Ok(result)
}

//! `kvlint diff`'s and `kvlint render`'s human output: two requests compared, and prompts as
//! the engine prefills them.

use std::fmt::Write as _;

use super::finding::render_finding;
use super::handler;
use crate::emit::{Terminal, printable};
use crate::report::diff::RequestDiff;
use crate::report::render::RenderReport;

/// Renders `kvlint diff`: token counts, the finding, and the rendered prompts' diff.
pub fn render_diff(diff: &RequestDiff, terminal: Terminal) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} → {} ({}): {} and {} prompt tokens, {} reused",
        printable(&diff.previous.path),
        printable(&diff.current.path),
        diff.renderer,
        diff.previous.prompt_tokens,
        diff.current.prompt_tokens,
        diff.reused_tokens,
    );
    let handler = handler(terminal);
    match &diff.finding {
        Some(finding) => {
            render_finding(&mut out, &handler, &diff.current.path, &diff.current_source, finding);
            out.push_str(&printable(&diff.rendered_diff));
        }
        None => out.push_str("the second request extends the first: its whole prompt is a cache hit up to the new content\n"),
    }
    if let Some(thinking) = &diff.thinking {
        render_finding(
            &mut out,
            &handler,
            &diff.current.path,
            &diff.current_source,
            thinking,
        );
    }
    out
}

/// Renders `kvlint render`: each turn's prompt as the engine prefills it, verbatim between
/// two rules, or why it cannot be rendered.
pub fn render_prompts(report: &RenderReport, terminal: Terminal) -> String {
    let handler = handler(terminal);
    let mut out = String::new();
    for error in &report.errors {
        let _ = handler.render_report(&mut out, error.diagnostic.as_ref());
    }
    for session in &report.sessions {
        for turn in &session.turns {
            match (&turn.text, &turn.token_ids, &turn.error) {
                (Some(text), Some(ids), _) => {
                    let _ = writeln!(
                        out,
                        "── {} · turn {} · {} tokens · {} ──",
                        session.path,
                        turn.index,
                        ids.len(),
                        session.renderer
                    );
                    out.push_str(text);
                    if !text.ends_with('\n') {
                        out.push('\n');
                    }
                    let _ = writeln!(out, "── end of turn {} ──", turn.index);
                }
                (_, _, Some(error)) => {
                    let _ = handler.render_report(&mut out, error.diagnostic.as_ref());
                }
                _ => {}
            }
        }
    }
    out
}

//! Human output: each finding through miette, with the place in the file, the diverging
//! tokens of both turns side by side, the tokens lost and what to do instead.
//!
//! This file holds `kvlint check`'s and `kvlint template`'s output; `finding` draws one
//! finding, and each other command's output has its own file.

mod finding;
mod import;
mod probe;
mod prompts;
mod simulate;
mod workload;

use std::fmt::Write as _;

use kvlint_request::diagnostic::{Severity, SeverityCounts};
use miette::{GraphicalReportHandler, GraphicalTheme};

use super::{Terminal, printable};
use crate::report::template::TemplateReport;
use crate::report::{Report, SessionReport};
use finding::render_finding;

pub use import::render_import;
pub use probe::render_probe;
pub use prompts::{render_diff, render_prompts};
pub use simulate::render_simulation;
pub use workload::render_workload;

fn handler(terminal: Terminal) -> GraphicalReportHandler {
    let theme = if terminal.color {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    GraphicalReportHandler::new_themed(theme).with_width(terminal.width)
}

/// Renders the whole report: the terminal's colour picks the theme, its width wraps messages.
pub fn render(report: &Report, terminal: Terminal) -> String {
    let handler = handler(terminal);
    let mut out = String::new();
    for error in &report.errors {
        // Writing into a String cannot fail.
        let _ = handler.render_report(&mut out, error.diagnostic.as_ref());
    }
    for session in &report.sessions {
        for finding in &session.findings {
            render_finding(&mut out, &handler, &session.path, &session.source, finding);
        }
        if let Some(table) = cache_table(session) {
            out.push_str(&table);
        }
        for repeated in &session.repeated_keys {
            let object = if repeated.object.is_empty() {
                "the body".to_owned()
            } else {
                format!("`{}`", printable(&repeated.object))
            };
            let _ = writeln!(
                out,
                "{}:{}:{}: warning: `{}` is given twice in {object} (first at {}:{}): kvlint reads the last value, as most JSON parsers do; a provider may read the first or refuse the body",
                printable(&session.path),
                repeated.line,
                repeated.column,
                printable(&repeated.key),
                repeated.first_line,
                repeated.first_column,
            );
        }
        for skipped in &session.skipped {
            let _ = writeln!(
                out,
                "{}:{}: skipped: {}",
                printable(&session.path),
                skipped.line,
                printable(&skipped.reason)
            );
        }
        let _ = writeln!(out, "{}", session_line(session));
    }
    let _ = writeln!(out, "{}", totals_line(report));
    out
}

/// Renders `kvlint template`: each template's findings with the text around each break.
pub fn render_templates(report: &TemplateReport, terminal: Terminal) -> String {
    let handler = handler(terminal);
    let mut out = String::new();
    for error in &report.errors {
        let _ = handler.render_report(&mut out, error.diagnostic.as_ref());
    }
    for template in &report.templates {
        for finding in &template.findings {
            render_finding(
                &mut out,
                &handler,
                &template.path,
                &template.source,
                finding,
            );
        }
        let counts = SeverityCounts::of(&template.findings);
        let _ = writeln!(
            out,
            "{}: {} errors, {} warnings, {} info",
            printable(&template.path),
            counts.errors,
            counts.warnings,
            counts.infos
        );
    }
    // What the check had to assume or leave out, after the results.
    for template in &report.templates {
        for note in &template.notes {
            let _ = writeln!(
                out,
                "note: {}: {}",
                printable(&template.path),
                printable(note)
            );
        }
    }
    out
}

/// The per-turn table of predicted cache use, with `--engine`.
fn cache_table(session: &SessionReport) -> Option<String> {
    let cache = session.cache.as_ref()?;
    let mut table = format!("{} on {}\n", printable(&session.path), cache.engine);
    let _ = writeln!(
        table,
        "{:>6} {:>8} {:>9} {:>8} {:>9}  first cause",
        "turn", "prompt", "unchanged", "cached", "computed"
    );
    for turn in &session.turns {
        let cause = session
            .findings
            .iter()
            .find(|finding| finding.turn == turn.diff.index)
            .map(|finding| match finding.part.to_string().as_str() {
                // A session's finding names no part.
                "" => finding.rule.to_owned(),
                part => format!("{} at {part}", finding.rule),
            })
            .unwrap_or_default();
        let _ = writeln!(
            table,
            "{:>6} {:>8} {:>9} {:>8} {:>9}  {cause}",
            turn.diff.index,
            turn.diff.prompt_tokens,
            turn.diff.reused_tokens,
            turn.predicted_cached_tokens.unwrap_or(0),
            turn.computed_tokens.unwrap_or(0),
        );
    }
    let percent = |part: usize| {
        if cache.prompt_tokens == 0 {
            0.0
        } else {
            part as f64 * 100.0 / cache.prompt_tokens as f64
        }
    };
    // The engine's cache, predicted: not the session line's prefix kept from turn to turn.
    let _ = write!(
        table,
        "served from cache on {} (predicted): {} of {} prompt tokens ({:.0}%); with a stable prefix {} ({:.0}%)",
        cache.engine,
        cache.cached_tokens,
        cache.prompt_tokens,
        percent(cache.cached_tokens),
        cache.stable_prefix_cached_tokens,
        percent(cache.stable_prefix_cached_tokens),
    );
    if let Some(cost) = &cache.cost {
        let unverified = if cost.prices_verified {
            ""
        } else {
            ", unverified"
        };
        let _ = write!(
            table,
            "; cost ${:.4} as recorded, ${:.4} with a stable prefix ({} prices as of {}{unverified})",
            cost.recorded_usd, cost.stable_prefix_usd, cost.model, cost.prices_as_of,
        );
        if let Some(model) = &cost.unlisted_model {
            let model = if model.is_empty() {
                "no model named".to_owned()
            } else {
                format!("`{}` is not in the price table", printable(model))
            };
            let _ = write!(
                table,
                "; {model}: the minimum cacheable length and prices are {}'s defaults",
                cost.model.trim_end_matches('/'),
            );
        }
    }
    if let Some(seconds) = &cache.prefill_seconds {
        let _ = write!(
            table,
            "; prefill {:.1} s, {:.1} s with a stable prefix",
            seconds.recorded, seconds.stable_prefix
        );
    }
    table.push('\n');
    Some(table)
}

fn session_line(session: &SessionReport) -> String {
    let summary = &session.summary;
    let approximate = if session.approximate {
        " (approximate counts)"
    } else {
        ""
    };
    let found_in = session
        .recording
        .as_ref()
        .map(|found| {
            let interactions: Vec<String> =
                found.interactions.iter().map(ToString::to_string).collect();
            let rebuilt = if found.reconstructed {
                "; bodies rebuilt from span attributes, their serialization unknown"
            } else {
                ""
            };
            let grouped: String = found
                .grouped_by
                .describe()
                .into_iter()
                .chain(
                    found
                        .parent
                        .map(|parent| found.grouped_by.describe_parent(parent)),
                )
                .chain(found.grouped_by.tally())
                .map(|part| format!("; {part}"))
                .collect();
            format!(
                " (session {} of {} in this {}, interactions {}{rebuilt}{grouped})",
                found.session,
                found.sessions,
                found.container,
                interactions.join(", ")
            )
        })
        .unwrap_or_default();
    let on_server = session
        .turns
        .iter()
        .filter(|turn| turn.diff.server_prefix)
        .count();
    let on_server = match on_server {
        0 => String::new(),
        count => format!(
            " ({count} turns continue a response kept on the server: their history is not in the bodies, their instructions, tools and settings are checked)"
        ),
    };
    let implied = session
        .implied_provider
        .as_ref()
        .map(|implied| {
            format!(
                " (provider {} implied by {}; pass --engine to choose)",
                implied.engine,
                printable(&implied.implied_by)
            )
        })
        .unwrap_or_default();
    format!(
        "{}{found_in}: {} turns, {} prompt tokens, {} unchanged from the turn before ({:.0}%){approximate}{on_server}{implied}, {} errors, {} warnings, {} info",
        printable(&session.path),
        summary.turns,
        summary.prompt_tokens,
        summary.reused_tokens,
        summary.reuse_ratio * 100.0,
        summary.findings.errors,
        summary.findings.warnings,
        summary.findings.infos,
    )
}

fn totals_line(report: &Report) -> String {
    let errors = report.count(Severity::Error);
    let warnings = report.count(Severity::Warning);
    let infos = report.count(Severity::Info);
    let unreadable = if report.errors.is_empty() {
        String::new()
    } else {
        format!(", {} files could not be read", report.errors.len())
    };
    format!(
        "checked {} sessions: {errors} errors, {warnings} warnings, {infos} info{unreadable}",
        report.sessions.len()
    )
}

//! Human output: each finding through miette, with the place in the file, the diverging
//! tokens of both turns side by side, the tokens lost and what to do instead.

use std::fmt::Write as _;

use kvlint_core::diagnostic::{Diagnostic, Severity, SeverityCounts};
use kvlint_core::excerpt::Excerpt;
use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, SourceCode};
use similar::ChangeTag;

use super::{Terminal, invisible_name, printable};
use crate::report::diff::RequestDiff;
use crate::report::import::ImportReport;
use crate::report::probe::{Outcome, ProbeReport};
use crate::report::render::RenderReport;
use crate::report::template::TemplateReport;
use crate::report::{Report, SessionReport};

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

/// Renders `kvlint probe`: a per-turn table of predicted and observed cached tokens.
pub fn render_probe(report: &ProbeReport, terminal: Terminal) -> String {
    let handler = handler(terminal);
    let mut out = String::new();
    for error in &report.errors {
        let _ = handler.render_report(&mut out, error.diagnostic.as_ref());
    }
    for session in &report.sessions {
        let _ = writeln!(
            out,
            "{} on {} ({:?})",
            printable(&session.path),
            printable(&session.engine_url),
            session.engine_kind
        );
        let _ = writeln!(
            out,
            "{:>6} {:>8} {:>10} {:>10}  result",
            "turn", "prompt", "predicted", "observed"
        );
        let number =
            |value: Option<usize>| value.map_or_else(|| "-".to_owned(), |value| value.to_string());
        for turn in &session.turns {
            let result = match turn.outcome {
                Outcome::Match => "match",
                Outcome::Mismatch => "MISMATCH",
                Outcome::Error => "ERROR",
            };
            let own = match turn.own_rendering_matches {
                Some(false) => "; kvlint's own rendering differs",
                _ => "",
            };
            let note = turn
                .note
                .as_deref()
                .map(|note| format!(": {}", printable(note)))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{:>6} {:>8} {:>10} {:>10}  {result}{note}{own}",
                turn.index,
                number(turn.prompt_tokens),
                number(turn.predicted_cached_tokens),
                number(turn.observed_cached_tokens),
            );
        }
    }
    let turns: Vec<_> = report
        .sessions
        .iter()
        .flat_map(|session| &session.turns)
        .collect();
    let count = |outcome| turns.iter().filter(|turn| turn.outcome == outcome).count();
    let failed = count(Outcome::Error);
    let _ = writeln!(
        out,
        "probed {} turns: {} match, {} do not{}",
        turns.len(),
        count(Outcome::Match),
        count(Outcome::Mismatch),
        if failed > 0 {
            format!(", {failed} failed")
        } else {
            String::new()
        }
    );
    out
}

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
    match &diff.finding {
        Some(finding) => {
            let handler = handler(terminal);
            render_finding(&mut out, &handler, &diff.current.path, &diff.current_source, finding);
            out.push_str(&printable(&diff.rendered_diff));
        }
        None => out.push_str("the second request extends the first: its whole prompt is a cache hit up to the new content\n"),
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

/// What `kvlint import` found in each recording and wrote.
pub fn render_import(report: &ImportReport, terminal: Terminal) -> String {
    let handler = handler(terminal);
    let mut out = String::new();
    for error in &report.errors {
        let _ = handler.render_report(&mut out, error.diagnostic.as_ref());
    }
    for recording in &report.recordings {
        let _ = writeln!(
            out,
            "{} ({}): {} interactions, {} sessions, {} passed over",
            printable(&recording.path),
            recording.container,
            recording.interactions,
            recording.sessions.len(),
            recording.skipped.len()
        );
        for session in &recording.sessions {
            let rewritten = match session.rewritten {
                0 => String::new(),
                _ if session.reconstructed => " (bodies rebuilt from span attributes)".into(),
                count => format!(" ({count} bodies written out again by the recorder)"),
            };
            let _ = writeln!(
                out,
                "  {}: {} turns from interactions {}{rewritten}",
                printable(&session.file),
                session.turns,
                session
                    .interactions
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
            );
        }
        for skipped in &recording.skipped {
            let _ = writeln!(
                out,
                "  interaction {} passed over: {}",
                skipped.interaction,
                printable(&skipped.reason)
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
        "{:>6} {:>8} {:>8} {:>8} {:>9}  first cause",
        "turn", "prompt", "reused", "cached", "computed"
    );
    for turn in &session.turns {
        let cause = session
            .findings
            .iter()
            .find(|finding| finding.turn == turn.diff.index)
            .map(|finding| format!("{} at {}", finding.rule, finding.part))
            .unwrap_or_default();
        let _ = writeln!(
            table,
            "{:>6} {:>8} {:>8} {:>8} {:>9}  {cause}",
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
    let _ = write!(
        table,
        "served from cache: {} of {} prompt tokens ({:.0}%); with a stable prefix {} ({:.0}%)",
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
            format!(
                " (session {} of {} in this {}, interactions {}{rebuilt})",
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
    format!(
        "{}{found_in}: {} turns, {} prompt tokens, {} reused ({:.0}%){approximate}{on_server}, {} errors, {} info",
        printable(&session.path),
        summary.turns,
        summary.prompt_tokens,
        summary.reused_tokens,
        summary.reuse_ratio * 100.0,
        summary.findings.errors,
        summary.findings.infos,
    )
}

fn totals_line(report: &Report) -> String {
    let errors = report.count(Severity::Error);
    let infos = report.count(Severity::Info);
    let unreadable = if report.errors.is_empty() {
        String::new()
    } else {
        format!(", {} files could not be read", report.errors.len())
    };
    format!(
        "checked {} sessions: {errors} errors, {infos} info{unreadable}",
        report.sessions.len()
    )
}

/// A finding through miette, then, for a pair of turns, both turns' token windows on one line
/// of their own under the help: never wrapped, so that what differs stays side by side.
fn render_finding(
    out: &mut String,
    handler: &GraphicalReportHandler,
    path: &str,
    file: &str,
    finding: &Diagnostic,
) {
    // Input text (tool names, paths, parts of the prompt) reaches the terminal only printable.
    let shown = Diagnostic {
        message: printable(&finding.message).into_owned(),
        help: printable(&finding.help).into_owned(),
        ..finding.clone()
    };
    // Writing into a String cannot fail.
    let _ = handler.render_report(out, &FindingReport::new(&printable(path), file, &shown));
    if finding.previous_window.is_empty() && finding.current_window.is_empty() {
        return;
    }
    let (previous, current) = visible_windows(&finding.previous_window, &finding.current_window);
    let _ = writeln!(
        out,
        "        turn {}: {previous}  ┃  turn {}: {current}",
        finding.turn.saturating_sub(1),
        finding.turn,
    );
}

/// One finding as a miette diagnostic.
#[derive(Debug)]
struct FindingReport<'a> {
    finding: &'a Diagnostic,
    title: String,
    source: Option<Excerpt>,
}

impl<'a> FindingReport<'a> {
    fn new(path: &str, file: &str, finding: &'a Diagnostic) -> Self {
        let place = finding
            .span
            .map(|span| format!("{path}:{}:{}", span.line, span.column))
            .unwrap_or_else(|| path.to_owned());
        // Findings of a pair of turns show both turns' tokens; a template finding has none.
        let has_windows =
            !(finding.previous_window.is_empty() && finding.current_window.is_empty());
        let title = if has_windows {
            format!(
                "{place}: turn {}: {} [{}]",
                finding.turn, finding.message, finding.rule
            )
        } else {
            format!("{place}: {} [{}]", finding.message, finding.rule)
        };
        let source = finding
            .span
            .map(|span| Excerpt::around(path, file, span.offset, span.len));
        Self {
            finding,
            title,
            source,
        }
    }
}

/// The two turns' token windows, each as one quoted line that shows what differs: spaces that
/// differ between the windows are `·`; everywhere, a newline is `⏎`, tabs and carriage returns
/// are escaped, and invisible or terminal-controlling characters are named.
fn visible_windows(previous: &str, current: &str) -> (String, String) {
    let (mut previous_shown, mut current_shown) = (String::from('"'), String::from('"'));
    for change in similar::TextDiff::from_chars(previous, current).iter_all_changes() {
        let differs = change.tag() != ChangeTag::Equal;
        let shown = visible(change.value(), differs);
        if change.tag() != ChangeTag::Insert {
            previous_shown.push_str(&shown);
        }
        if change.tag() != ChangeTag::Delete {
            current_shown.push_str(&shown);
        }
    }
    previous_shown.push('"');
    current_shown.push('"');
    (previous_shown, current_shown)
}

/// Text of a window made visible on one line; `differs` when the other window lacks it.
fn visible(text: &str, differs: bool) -> String {
    let mut shown = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            ' ' if differs => shown.push('·'),
            '\n' => shown.push('⏎'),
            '\r' => shown.push_str("\\r"),
            '\t' => shown.push_str("\\t"),
            '"' => shown.push_str("\\\""),
            '\\' => shown.push_str("\\\\"),
            other => match invisible_name(other) {
                Some(name) => shown.push_str(&name),
                None => shown.push(other),
            },
        }
    }
    shown
}

impl std::fmt::Display for FindingReport<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.title)
    }
}

impl std::error::Error for FindingReport<'_> {}

impl miette::Diagnostic for FindingReport<'_> {
    fn code<'b>(&'b self) -> Option<Box<dyn std::fmt::Display + 'b>> {
        Some(Box::new(self.finding.code))
    }

    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.finding.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
            Severity::Info => miette::Severity::Advice,
        })
    }

    fn help<'b>(&'b self) -> Option<Box<dyn std::fmt::Display + 'b>> {
        Some(Box::new(&self.finding.help))
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        self.source.as_ref().map(|source| source as &dyn SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let span = self.finding.span?;
        let source = self.source.as_ref()?;
        let label =
            if self.finding.previous_window.is_empty() && self.finding.current_window.is_empty() {
                format!("{} tokens after this are lost", self.finding.tokens_lost)
            } else if self.finding.tokens_lost == 0 {
                // A template's finding: its prompts are not tokenized.
                format!("the prompt of turn {} changes here", self.finding.turn)
            } else {
                format!(
                    "turn {} diverges here: {} tokens lost",
                    self.finding.turn, self.finding.tokens_lost
                )
            };
        Some(Box::new(std::iter::once(
            LabeledSpan::new_primary_with_span(Some(label), source.clip(span.offset, span.len)),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::visible_windows;

    #[test]
    fn what_differs_is_visible_and_windows_do_not_wrap() {
        let (previous, current) = visible_windows("a b\nc", "a  b\nc");
        // The space that differs is a dot; the one both share stays a space.
        assert_eq!(previous, "\"a b⏎c\"");
        assert_eq!(current, "\"a ·b⏎c\"");
        let (previous, current) = visible_windows("x\u{200B}y", "x\u{1b}[31my\u{202E}");
        assert_eq!(previous, "\"x<ZWSP>y\"");
        assert_eq!(current, "\"x<U+001B>[31my<U+202E>\"");
        let (previous, current) = visible_windows("\u{feff}{\"a\":\t1}", "{\"a\":\t1}\r");
        assert_eq!(previous, "\"<BOM>{\\\"a\\\":\\t1}\"");
        assert_eq!(current, "\"{\\\"a\\\":\\t1}\\r\"");
    }
}

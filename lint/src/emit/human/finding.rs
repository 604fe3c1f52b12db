//! One finding as miette draws it, with both turns' token windows side by side.

use std::fmt::Write as _;

use kvlint_request::diagnostic::{Diagnostic, Severity};
use kvlint_request::excerpt::Excerpt;
use miette::{GraphicalReportHandler, LabeledSpan, SourceCode};
use similar::ChangeTag;

use crate::emit::{invisible_name, printable};

/// A finding through miette, then, for a pair of turns, both turns' token windows on one line
/// of their own under the help: never wrapped, so that what differs stays side by side.
pub(super) fn render_finding(
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
        finding.previous_turn(),
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
        let no_windows =
            self.finding.previous_window.is_empty() && self.finding.current_window.is_empty();
        let label = if no_windows && self.finding.tokens_lost == 0 {
            // Nothing recomputed to count (a refused request, a prompt under the minimum).
            "here".to_owned()
        } else if no_windows {
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

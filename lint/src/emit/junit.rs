//! JUnit XML: a test suite per session, a test case per turn; a turn that recomputes cached
//! content fails. For CI systems that show test reports.

use std::fmt::Write as _;

use kvlint_core::diagnostic::{Diagnostic, Severity};

use crate::report::{Report, SessionReport};

pub fn render(report: &Report) -> String {
    let tests: usize = report
        .sessions
        .iter()
        .map(|session| session.turns.len())
        .sum::<usize>()
        + report.errors.len();
    let failures: usize = report.sessions.iter().map(failed_turns).sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"kvlint\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{}\">",
        report.errors.len()
    );
    for error in &report.errors {
        let path = attribute(&error.path);
        let _ = writeln!(
            out,
            "  <testsuite name=\"{path}\" tests=\"1\" failures=\"0\" errors=\"1\">\n    \
             <testcase name=\"input\" classname=\"{path}\">\n      \
             <error type=\"input-error\" message=\"{}\"/>\n    </testcase>\n  </testsuite>",
            attribute(&error.message)
        );
    }
    for session in &report.sessions {
        let path = attribute(&session.path);
        let _ = writeln!(
            out,
            "  <testsuite name=\"{path}\" tests=\"{}\" failures=\"{}\" errors=\"0\">",
            session.turns.len(),
            failed_turns(session)
        );
        for turn in &session.turns {
            let index = turn.diff.index;
            let findings = || {
                session
                    .findings
                    .iter()
                    .filter(move |finding| finding.turn == index)
            };
            let errors: Vec<&Diagnostic> = findings()
                .filter(|finding| finding.severity == Severity::Error)
                .collect();
            let others: Vec<&Diagnostic> = findings()
                .filter(|finding| finding.severity != Severity::Error)
                .collect();
            let _ = write!(
                out,
                "    <testcase name=\"turn {index}\" classname=\"{path}\""
            );
            if errors.is_empty() && others.is_empty() {
                out.push_str("/>\n");
                continue;
            }
            out.push_str(">\n");
            if let Some(first) = errors.first() {
                let body: Vec<String> = errors
                    .iter()
                    .map(|finding| describe(&session.path, finding))
                    .collect();
                let _ = writeln!(
                    out,
                    "      <failure type=\"{}\" message=\"{}\">{}</failure>",
                    attribute(first.rule),
                    attribute(&first.message),
                    text(&body.join("\n"))
                );
            }
            if !others.is_empty() {
                let body: Vec<String> = others
                    .iter()
                    .map(|finding| {
                        format!(
                            "{}: {}",
                            finding.severity.as_str(),
                            describe(&session.path, finding)
                        )
                    })
                    .collect();
                let _ = writeln!(
                    out,
                    "      <system-out>{}</system-out>",
                    text(&body.join("\n"))
                );
            }
            out.push_str("    </testcase>\n");
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

fn failed_turns(session: &SessionReport) -> usize {
    session
        .turns
        .iter()
        .filter(|turn| {
            session.findings.iter().any(|finding| {
                finding.turn == turn.diff.index && finding.severity == Severity::Error
            })
        })
        .count()
}

/// A finding as lines: rule and place, message, help.
fn describe(path: &str, finding: &Diagnostic) -> String {
    let place = finding
        .span
        .map(|span| format!("{path}:{}:{}", span.line, span.column))
        .unwrap_or_else(|| path.to_owned());
    format!(
        "{} ({}) at {}, {place}\n{}\nhelp: {}\n",
        finding.rule, finding.code, finding.part, finding.message, finding.help
    )
}

/// Character data. Control characters XML 1.0 cannot hold become U+FFFD.
fn text(raw: &str) -> String {
    let mut escaped = String::with_capacity(raw.len());
    for character in raw.chars() {
        match character {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&apos;"),
            '\t' | '\n' | '\r' => escaped.push(character),
            control if control < ' ' => escaped.push('\u{FFFD}'),
            other => escaped.push(other),
        }
    }
    escaped
}

/// An attribute value: line breaks and tabs as character references, which parsers keep
/// (a literal one is normalized to a space).
fn attribute(raw: &str) -> String {
    text(raw)
        .replace('\t', "&#9;")
        .replace('\n', "&#10;")
        .replace('\r', "&#13;")
}

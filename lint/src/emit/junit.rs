//! JUnit XML: a test suite per session, a test case per turn; a turn that recomputes cached
//! content fails. For CI systems that show test reports.

use std::fmt::Write as _;

use kvlint_request::diagnostic::{Diagnostic, Severity};

use crate::report::{CheckedFile, ErrorReport};

pub fn render(files: &[CheckedFile<'_>], errors: &[ErrorReport]) -> String {
    let tests: usize = files.iter().map(|file| file.turns).sum::<usize>() + errors.len();
    let failures: usize = files.iter().map(failed_turns).sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"kvlint\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{}\">",
        errors.len()
    );
    for error in errors {
        let path = attribute(&error.path);
        let _ = writeln!(
            out,
            "  <testsuite name=\"{path}\" tests=\"1\" failures=\"0\" errors=\"1\">\n    \
             <testcase name=\"input\" classname=\"{path}\">\n      \
             <error type=\"input-error\" message=\"{}\"/>\n    </testcase>\n  </testsuite>",
            attribute(&error.message)
        );
    }
    for file in files {
        let path = attribute(file.path);
        let _ = writeln!(
            out,
            "  <testsuite name=\"{path}\" tests=\"{}\" failures=\"{}\" errors=\"0\">",
            file.turns,
            failed_turns(file)
        );
        for index in 0..file.turns {
            let findings = || {
                file.findings
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
                    .map(|finding| describe(file.path, finding))
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
                            describe(file.path, finding)
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

fn failed_turns(file: &CheckedFile<'_>) -> usize {
    (0..file.turns)
        .filter(|turn| {
            file.findings
                .iter()
                .any(|finding| finding.turn == *turn && finding.severity == Severity::Error)
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

//! GitHub Actions workflow commands: an annotation per finding on the run's summary and the
//! pull request's diff.

use std::fmt::Write as _;

use kvlint_request::diagnostic::Severity;

use crate::report::{CheckedFile, ErrorReport};

pub fn render(files: &[CheckedFile<'_>], errors: &[ErrorReport]) -> String {
    let mut out = String::new();
    for error in errors {
        let _ = writeln!(
            out,
            "::error file={}::{}",
            escape_property(&error.path),
            escape_data(&error.message)
        );
    }
    for file in files {
        for finding in file.findings {
            let command = match finding.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
                Severity::Info => "notice",
            };
            let mut properties = format!("file={}", escape_property(file.path));
            if let Some(span) = finding.span {
                let _ = write!(
                    properties,
                    ",line={},col={},endLine={},endColumn={}",
                    span.line, span.column, span.end_line, span.end_column
                );
            }
            let title = format!("{} ({})", finding.rule, finding.code);
            let message = format!("{}\nhelp: {}", finding.message, finding.help);
            let _ = writeln!(
                out,
                "::{command} {properties},title={}::{}",
                escape_property(&title),
                escape_data(&message)
            );
        }
    }
    out
}

/// A command's message: `%`, CR and LF would end or corrupt the command; characters that
/// control a terminal are named.
fn escape_data(text: &str) -> String {
    super::printable(text)
        .replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A property value: also `:` and `,`, which separate the properties and the message.
fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

//! Output as one boundary: every command hands its result to [`emit`] as an [`Output`], and
//! each format is a small emitter over that plain data. A command × format pair an emitter
//! does not support is refused with a message (exit 2), never printed in another format.

pub mod github;
pub mod human;
pub mod json;
pub mod junit;
pub mod sarif;

use std::borrow::Cow;

use clap::ValueEnum;
use kvlint_request::excerpt::controls_terminal;
use serde::Serialize;

use crate::report::diff::RequestDiff;
use crate::report::import::ImportReport;
use crate::report::probe::ProbeReport;
use crate::report::render::RenderReport;
use crate::report::template::TemplateReport;
use crate::report::{CheckedFile, ErrorReport, Report};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Findings with the place in the file, the diverging tokens and a help line.
    Human,
    /// The JSON report, version 1.
    Json,
    /// SARIF 2.1.0, for GitHub code scanning and other static-analysis viewers.
    Sarif,
    /// GitHub Actions workflow commands: one annotation per finding.
    Github,
    /// JUnit XML: a test suite per session, a test case per turn.
    Junit,
}

/// What a command produced, for the emitters.
#[derive(Serialize)]
#[serde(untagged)]
pub enum Output<'a> {
    Check(&'a Report),
    Template(&'a TemplateReport),
    Diff(&'a RequestDiff),
    Probe(&'a ProbeReport),
    Render(&'a RenderReport),
    #[cfg_attr(not(feature = "recordings"), allow(dead_code))]
    Import(&'a ImportReport),
}

/// Which command an output comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputKind {
    Check,
    Template,
    Diff,
    Probe,
    Render,
    Import,
}

impl Output<'_> {
    pub fn kind(&self) -> OutputKind {
        match self {
            Output::Check(_) => OutputKind::Check,
            Output::Template(_) => OutputKind::Template,
            Output::Diff(_) => OutputKind::Diff,
            Output::Probe(_) => OutputKind::Probe,
            Output::Render(_) => OutputKind::Render,
            Output::Import(_) => OutputKind::Import,
        }
    }

    /// The checked files, for the file-based emitters: none for commands without findings in
    /// files (diff, probe, render).
    fn checked_files(&self) -> Option<(Vec<CheckedFile<'_>>, &[ErrorReport])> {
        match self {
            Output::Check(report) => Some((report.checked_files(), &report.errors)),
            Output::Template(report) => Some((report.checked_files(), &report.errors)),
            Output::Diff(_) | Output::Probe(_) | Output::Render(_) | Output::Import(_) => None,
        }
    }
}

/// Whether a command's output can be printed in a format: every command prints human and JSON
/// output; those with findings in files (check, template) also SARIF, GitHub and JUnit.
/// Commands without findings in files call it before doing the work, so that a refused format
/// costs nothing.
pub fn supported(kind: OutputKind, format: OutputFormat) -> Result<(), UnsupportedFormat> {
    let command = match kind {
        OutputKind::Check | OutputKind::Template => return Ok(()),
        OutputKind::Diff => "diff",
        OutputKind::Probe => "probe",
        OutputKind::Render => "render",
        OutputKind::Import => "import",
    };
    match format {
        OutputFormat::Human | OutputFormat::Json => Ok(()),
        OutputFormat::Sarif | OutputFormat::Github | OutputFormat::Junit => {
            Err(UnsupportedFormat {
                command,
                format: format
                    .to_possible_value()
                    .map_or_else(String::new, |value| value.get_name().to_owned()),
                supported: "`--format human` or `--format json`",
            })
        }
    }
}

/// How human output is laid out.
#[derive(Clone, Copy, Debug)]
pub struct Terminal {
    pub color: bool,
    pub width: usize,
}

/// A format the command's output has no emitter for.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("`kvlint {command}` does not print `--format {format}`")]
#[diagnostic(code(kvlint::format), help("use {supported}"))]
pub struct UnsupportedFormat {
    command: &'static str,
    format: String,
    supported: &'static str,
}

/// Renders a command's output in a format.
pub fn emit(
    format: OutputFormat,
    output: &Output<'_>,
    terminal: Terminal,
) -> Result<String, UnsupportedFormat> {
    supported(output.kind(), format)?;
    let render_files: fn(&[CheckedFile<'_>], &[ErrorReport]) -> String = match format {
        OutputFormat::Json => return Ok(json::render(output)),
        OutputFormat::Human => {
            let text = match output {
                Output::Check(report) => human::render(report, terminal),
                Output::Template(report) => human::render_templates(report, terminal),
                Output::Diff(diff) => human::render_diff(diff, terminal),
                Output::Probe(report) => human::render_probe(report, terminal),
                Output::Render(report) => human::render_prompts(report, terminal),
                Output::Import(report) => human::render_import(report, terminal),
            };
            return Ok(terminal_safe(text, terminal.color));
        }
        OutputFormat::Sarif => sarif::render,
        OutputFormat::Github => github::render,
        OutputFormat::Junit => junit::render,
    };
    // `supported` refused the outputs without checked files.
    Ok(output
        .checked_files()
        .map(|(files, errors)| render_files(&files, errors))
        .unwrap_or_default())
}

/// Text from an input as it may reach a terminal: characters that control it named, as in
/// the token windows.
pub(crate) fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(controls_terminal) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .map(|character| match invisible_name(character) {
                Some(name) if controls_terminal(character) => name,
                _ => character.to_string(),
            })
            .collect(),
    )
}

/// A name for a character that shows nothing or controls the terminal: zero-width
/// characters, the byte-order mark, bidirectional overrides, other control characters.
/// Human output as it reaches the terminal: every character that controls one shown by its
/// name, but for the colour codes kvlint writes itself (`ESC [ digits ; … m`) when colours are
/// on. The last guard for input text that reached a message raw, such as a file's name.
pub(crate) fn terminal_safe(text: String, color: bool) -> String {
    if !text.chars().any(controls_terminal) {
        return text;
    }
    let mut shown = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(character) = rest.chars().next() {
        let colour_code = (color && character == '\u{1b}')
            .then(|| {
                let parameters = rest.strip_prefix("\u{1b}[")?;
                let length = parameters
                    .bytes()
                    .take_while(|byte| byte.is_ascii_digit() || *byte == b';')
                    .count();
                parameters[length..]
                    .starts_with('m')
                    .then_some("\u{1b}[".len() + length + 1)
            })
            .flatten();
        let taken = match colour_code {
            Some(length) => {
                shown.push_str(&rest[..length]);
                length
            }
            None => {
                match invisible_name(character).filter(|_| controls_terminal(character)) {
                    Some(name) => shown.push_str(&name),
                    None => shown.push(character),
                }
                character.len_utf8()
            }
        };
        rest = &rest[taken..];
    }
    shown
}

pub(crate) fn invisible_name(character: char) -> Option<String> {
    let name = match character {
        '\u{200B}' => "ZWSP",
        '\u{200C}' => "ZWNJ",
        '\u{200D}' => "ZWJ",
        '\u{2060}' => "WJ",
        '\u{FEFF}' => "BOM",
        '\u{00AD}' => "SHY",
        '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' => {
            return Some(format!("<U+{:04X}>", u32::from(character)));
        }
        other if other.is_control() => return Some(format!("<U+{:04X}>", u32::from(other))),
        _ => return None,
    };
    Some(format!("<{name}>"))
}

#[cfg(test)]
mod tests {
    use super::terminal_safe;

    #[test]
    fn only_colour_codes_reach_the_terminal() {
        let text = "\u{1b}[31merror\u{1b}[0m in \u{1b}]0;pwned\u{7}.jsonl\u{1b}[2J\n".to_owned();
        assert_eq!(
            terminal_safe(text.clone(), true),
            "\u{1b}[31merror\u{1b}[0m in <U+001B>]0;pwned<U+0007>.jsonl<U+001B>[2J\n"
        );
        assert_eq!(
            terminal_safe(text, false),
            "<U+001B>[31merror<U+001B>[0m in <U+001B>]0;pwned<U+0007>.jsonl<U+001B>[2J\n"
        );
        assert_eq!(
            terminal_safe("plain\ttext\n".into(), false),
            "plain\ttext\n"
        );
    }
}

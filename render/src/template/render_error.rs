//! Template errors as the user reads them: what failed, the undefined name or the unknown
//! method, and the template line with its text.

use std::sync::LazyLock;

use minijinja::{Error as JinjaError, ErrorKind};
use regex::Regex;

use super::environment::RaisedByTemplate;
use super::limits::OutputCapExceeded;
use super::source::TemplateSource;
use crate::error::RenderError;
use crate::excerpt::without_controls;

/// The special tokens a template reads from the tokenizer config.
pub(super) const SPECIAL_TOKENS: [&str; 2] = ["bos_token", "eos_token"];

static UNDEFINED: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"`([A-Za-z_][A-Za-z0-9_]*)` is undefined").ok());

/// The top-level variable whose being undefined made the render fail (`functions`, not
/// `message.content`).
pub(super) fn undefined_variable(error: &JinjaError) -> Option<String> {
    let detail = error.detail()?;
    let captures = UNDEFINED.as_ref()?.captures(detail)?;
    Some(captures.get(1)?.as_str().to_owned())
}

/// Whether the template itself refused the input (`raise_exception`).
pub(super) fn raised_by_template(error: &JinjaError) -> bool {
    std::error::Error::source(error).is_some_and(|source| source.is::<RaisedByTemplate>())
}

/// The error of a template that does not compile or render.
pub(super) fn template_error(
    path: &str,
    error: &JinjaError,
    sources: &[TemplateSource],
) -> RenderError {
    let source = sources
        .iter()
        .find(|source| error.name().is_some_and(|name| name == source.name));
    let place = match error.line() {
        Some(line) => {
            let code = source
                .and_then(|source| source.line_text(line))
                .map(|code| format!(" (`{}`)", without_controls(&code)))
                .unwrap_or_default();
            let line_kind = match source.map(|source| source.origin) {
                Some(super::source::Origin::File) | None => "line",
                Some(_) => "template line",
            };
            format!(" at {line_kind} {line}{code}")
        }
        None => String::new(),
    };
    let detail = error
        .detail()
        .map(|detail| format!(": {}", without_controls(detail)))
        .unwrap_or_default();
    let path = path.to_owned();
    // Past a bound the template is at fault whatever the conversation: its own error, and help
    // naming the key that raises the bound.
    if let Some(limit) = exceeded_limit(error) {
        let (message, help) = match limit {
            Limit::Output(exceeded) => (
                format!("{exceeded}{place}"),
                "a loop that prints without end, or a value printed far larger than the conversation; for a trusted template, raise `output-per-input-byte` in `[template-limits]` of kvlint.toml",
            ),
            Limit::Fuel => (
                format!("the template did more work than its limit allows{place}"),
                "work counts instructions and the data made (one unit per 64 bytes): a loop without a sensible end or a string grown in a loop; for a trusted template, raise `fuel` in `[template-limits]` of kvlint.toml",
            ),
            Limit::Recursion => (
                format!("{}{place}{detail}", error.kind()),
                "loops, conditions and macro calls nest deeper than `recursion` in `[template-limits]` of kvlint.toml allows",
            ),
        };
        return RenderError::TemplateLimit {
            path,
            message,
            help: Some(help.to_owned()),
        };
    }
    let message = if raised_by_template(error) {
        format!("the template raised an exception{place}{detail}")
    } else {
        format!("{}{place}{detail}", error.kind())
    };
    let help = match undefined_variable(error) {
        Some(token) if SPECIAL_TOKENS.contains(&token.as_str()) => Some(format!(
            "the template reads `{token}`, a special token of the model's tokenizer config: render it with that tokenizer_config.json"
        )),
        Some(variable) => Some(format!(
            "the template needs a `{variable}` variable that transformers does not pass: an engine passes it in chat_template_kwargs"
        )),
        None if error.kind() == ErrorKind::UnknownMethod => Some(
            "the template calls a Python method that kvlint's Jinja engine does not know".into(),
        ),
        None => None,
    };
    RenderError::Template {
        path,
        message,
        help,
    }
}

/// A bound a render went past.
enum Limit<'a> {
    Output(&'a OutputCapExceeded),
    Fuel,
    Recursion,
}

fn exceeded_limit(error: &JinjaError) -> Option<Limit<'_>> {
    if let Some(exceeded) = std::error::Error::source(error)
        .and_then(|source| source.downcast_ref::<OutputCapExceeded>())
    {
        return Some(Limit::Output(exceeded));
    }
    if error.kind() == ErrorKind::OutOfFuel {
        return Some(Limit::Fuel);
    }
    (error.detail() == Some(RECURSION_EXCEEDED)).then_some(Limit::Recursion)
}

/// minijinja's message for nesting past the recursion limit.
const RECURSION_EXCEEDED: &str = "recursion limit exceeded";

#[cfg(test)]
mod tests {
    /// A pattern that does not compile is `None` at run time, and an undefined variable would
    /// go unnamed: it fails here instead.
    #[test]
    fn every_static_pattern_compiles() {
        assert!(super::UNDEFINED.is_some(), "UNDEFINED does not compile");
    }
}

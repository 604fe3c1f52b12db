//! A template's text and where it sits in the user's file: a Jinja file, or a string inside
//! a `tokenizer_config.json`. Places the template engine reports (byte ranges of a
//! template's text) are mapped back to lines and columns of the file.

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use crate::diagnostic::Span;
use crate::locate::{LineColumn, raw_offset_in_string, value_range};
use crate::path::PathSegment;

/// Where a template's text is in its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Origin {
    /// The whole file is the template.
    File,
    /// `"chat_template": "..."` of a tokenizer config.
    ConfigString,
    /// `"chat_template": [..., {"name": ..., "template": "..."}]`, the entry at this index.
    ConfigEntry(usize),
}

/// One named template of a file.
#[derive(Clone, Debug)]
pub(super) struct TemplateSource {
    /// The name it is registered under (`default`, `tool_use`, ...).
    pub name: String,
    pub text: String,
    pub origin: Origin,
}

impl TemplateSource {
    /// The text of 1-based line `line`, trimmed and shortened for a message.
    pub fn line_text(&self, line: usize) -> Option<String> {
        let text = self.text.lines().nth(line.checked_sub(1)?)?.trim();
        if text.is_empty() {
            return None;
        }
        let shortened: String = text.chars().take(100).collect();
        Some(if shortened.len() < text.len() {
            format!("{shortened}…")
        } else {
            shortened
        })
    }

    /// The place in the file of a byte range of this template's text.
    pub fn file_span(&self, file_text: &str, range: &Range<usize>) -> Option<Span> {
        let (start, end) = match self.origin {
            Origin::File => (range.start, range.end),
            Origin::ConfigString | Origin::ConfigEntry(_) => {
                let literal_range = match self.origin {
                    Origin::ConfigEntry(index) => value_range(
                        file_text,
                        &[
                            PathSegment::Key("chat_template"),
                            PathSegment::Index(index),
                            PathSegment::Key("template"),
                        ],
                    ),
                    _ => value_range(file_text, &[PathSegment::Key("chat_template")]),
                }?;
                let literal = file_text.get(literal_range.clone())?;
                (
                    literal_range.start + raw_offset_in_string(literal, range.start),
                    literal_range.start + raw_offset_in_string(literal, range.end),
                )
            }
        };
        if end > file_text.len() || start > end {
            return None;
        }
        let from = LineColumn::of_offset(file_text, start);
        let to = LineColumn::of_offset(file_text, end);
        Some(Span {
            line: from.line,
            column: from.column,
            end_line: to.line,
            end_column: to.column,
            offset: start,
            len: end - start,
        })
    }
}

/// transformers' `{% generation %}` block marks assistant tokens and renders its body as
/// is; an always-true `if` block keeps the same whitespace handling. Each tag keeps its
/// length and its line breaks, so that places in the rewritten text are places in the file.
pub(crate) fn without_generation_blocks(source: &str) -> String {
    static TAGS: LazyLock<Option<Regex>> =
        LazyLock::new(|| Regex::new(r"\{%(-|\+)?\s*(end)?generation\s*(-|\+)?%\}").ok());
    match TAGS.as_ref() {
        Some(tags) => tags
            .replace_all(source, |captures: &regex::Captures<'_>| {
                let whole = captures.get(0).map_or("", |m| m.as_str());
                let open = captures.get(1).map_or("", |m| m.as_str());
                let close = captures.get(3).map_or("", |m| m.as_str());
                let statement = if captures.get(2).is_some() {
                    "endif"
                } else {
                    "if true"
                };
                let head = format!("{{%{open} {statement}");
                let tail = format!("{close}%}}");
                let newlines = whole.matches('\n').count();
                let padding = whole
                    .len()
                    .saturating_sub(head.len() + tail.len() + newlines)
                    .max(1);
                format!(
                    "{head}{}{}{tail}",
                    "\n".repeat(newlines),
                    " ".repeat(padding)
                )
            })
            .into_owned(),
        None => source.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_tags_keep_their_length() {
        let source = "a{% generation %}b{%- endgeneration -%}c{%generation%}";
        let rewritten = without_generation_blocks(source);
        assert_eq!(rewritten.len(), source.len());
        assert_eq!(
            rewritten,
            "a{% if true    %}b{%- endif         -%}c{% if true  %}"
        );
    }
}

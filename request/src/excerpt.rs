//! A short window of a file around a place, as miette source code.
//!
//! Session files put a whole request on one line, often hundreds of kilobytes long. Showing
//! that line in full would bury the place; an excerpt shows the characters around it, with
//! the file's real line and column numbers.

use std::ops::Range;
use std::sync::LazyLock;

use miette::{MietteError, MietteSpanContents, SourceCode, SourceSpan, SpanContents};
use regex::Regex;

use crate::locate::{LineColumn, floor_char_boundary};

/// Characters shown on each side of the place.
const CONTEXT_CHARS: usize = 60;

#[derive(Clone, Debug)]
pub struct Excerpt {
    name: String,
    text: String,
    /// Byte offset of `text` in the file.
    offset: usize,
    /// 0-based line and column of `text`'s start.
    line: usize,
    column: usize,
}

impl Excerpt {
    /// The line around `offset..offset + len`, cut to a window of the file's text.
    pub fn around(name: &str, file: &str, offset: usize, len: usize) -> Self {
        let offset = floor_char_boundary(file, offset);
        let line_start = file[..offset].rfind('\n').map_or(0, |newline| newline + 1);
        let line_end = file[offset..]
            .find('\n')
            .map_or(file.len(), |newline| offset + newline);
        let end = floor_char_boundary(file, (offset + len).min(line_end));
        let start = back_chars(file, offset, CONTEXT_CHARS).max(line_start);
        let stop = forward_chars(file, end, CONTEXT_CHARS).min(line_end);
        let position = LineColumn::of_offset(file, start);
        Self {
            name: name.to_owned(),
            text: masked(
                &file[line_start..line_end],
                start - line_start..stop - line_start,
            ),
            offset: start,
            line: position.line - 1,
            column: position.column - 1,
        }
    }

    /// A label span clipped to what the excerpt shows.
    pub fn clip(&self, offset: usize, len: usize) -> SourceSpan {
        let start = offset.clamp(self.offset, self.offset + self.text.len());
        let end = (offset + len).clamp(start, self.offset + self.text.len());
        SourceSpan::new(
            start.into(),
            (end - start).max(usize::from(self.text.is_empty())),
        )
    }
}

/// Fields whose values are secrets: shown masked in excerpts (files from pull requests may
/// hold keys, and error output lands in CI logs).
static SECRET_FIELD: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)"[a-z0-9_\-]*(?:api[_\-]?key|authorization|token|password|secret)[a-z0-9_\-]*"\s*:\s*"((?:[^"\\]|\\.)*)""#,
    )
    .ok()
});

/// `line[window]` as it may be shown: the value of every secret-named string field of the line
/// replaced by `*`, and characters that control a terminal (C0 but tab, C1, bidirectional
/// overrides) by `?`, byte for byte, so that offsets into the excerpt stay valid.
fn masked(line: &str, window: Range<usize>) -> String {
    let mut text = line[window.clone()].as_bytes().to_vec();
    if let Some(secret_field) = SECRET_FIELD.as_ref() {
        for value in secret_field
            .captures_iter(line)
            .filter_map(|captures| captures.get(1))
        {
            let from = value.start().clamp(window.start, window.end) - window.start;
            let to = value.end().clamp(window.start, window.end) - window.start;
            text[from..to].fill(b'*');
        }
    }
    mask_controls(&line[window], &mut text);
    // Only whole characters were replaced (a value starts and ends at a quote; the window
    // at char boundaries), so the bytes are UTF-8 still.
    String::from_utf8(text).unwrap_or_default()
}

/// `text` as it may be shown in a terminal: characters that control one replaced by `?`, byte
/// for byte, so that offsets into it stay valid.
pub fn without_controls(text: &str) -> String {
    if !text.chars().any(controls_terminal) {
        return text.to_owned();
    }
    let mut bytes = text.as_bytes().to_vec();
    mask_controls(text, &mut bytes);
    String::from_utf8(bytes).unwrap_or_default()
}

/// Replaces, in `bytes` (a copy of `text`), every character that controls a terminal by `?`.
fn mask_controls(text: &str, bytes: &mut [u8]) {
    for (offset, character) in text.char_indices() {
        if controls_terminal(character) {
            bytes[offset..offset + character.len_utf8()].fill(b'?');
        }
    }
}

/// Whether a character, printed raw, can change what a terminal shows: control characters
/// (but tab and newline) and the bidirectional overrides and isolates.
pub fn controls_terminal(character: char) -> bool {
    (character.is_control() && !matches!(character, '\t' | '\n'))
        || matches!(character, '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

fn back_chars(text: &str, offset: usize, count: usize) -> usize {
    text[..offset]
        .char_indices()
        .rev()
        .nth(count.saturating_sub(1))
        .map_or(0, |(index, _)| index)
}

fn forward_chars(text: &str, offset: usize, count: usize) -> usize {
    text[offset..]
        .char_indices()
        .nth(count)
        .map_or(text.len(), |(index, _)| offset + index)
}

impl SourceCode for Excerpt {
    fn read_span<'a>(
        &'a self,
        _span: &SourceSpan,
        _context_lines_before: usize,
        _context_lines_after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, MietteError> {
        Ok(Box::new(
            MietteSpanContents::new_named(
                self.name.clone(),
                self.text.as_bytes(),
                SourceSpan::new(self.offset.into(), self.text.len()),
                self.line,
                self.column,
                1,
            )
            .with_language("json"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_real_line_and_a_window_of_a_long_line() {
        let file = format!("first\n{}X{}\nlast", "a".repeat(500), "b".repeat(500));
        let offset = file.find('X').unwrap();
        let excerpt = Excerpt::around("f.jsonl", &file, offset, 1);
        assert_eq!(excerpt.line, 1);
        assert_eq!(excerpt.column, 500 - CONTEXT_CHARS);
        assert_eq!(excerpt.text.len(), 2 * CONTEXT_CHARS + 1);
        assert_eq!(
            &file[excerpt.offset..excerpt.offset + excerpt.text.len()],
            excerpt.text
        );
        let span = excerpt.clip(offset, 10_000);
        assert_eq!(span.offset(), offset);
        assert_eq!(span.len(), CONTEXT_CHARS + 1);
    }

    #[test]
    fn secret_values_are_masked_byte_for_byte() {
        let file = r#"{"api_key": "sk-live-ünïcode", "messages": 3, "Authorization": "Bearer x", "model": "m"}"#;
        let offset = file.find("\"messages\"").unwrap();
        let excerpt = Excerpt::around("f.json", file, offset, 1);
        assert_eq!(excerpt.text.len(), file.len());
        assert!(!excerpt.text.contains("sk-live") && !excerpt.text.contains("Bearer"));
        assert!(
            excerpt.text.contains(r#""api_key": "*"#),
            "{}",
            excerpt.text
        );
        assert!(
            excerpt.text.contains(r#""messages": 3"#) && excerpt.text.contains(r#""model": "m""#)
        );
    }

    /// A pattern that does not compile is `None` at run time, and secret fields would be shown
    /// unmasked in excerpts: it fails here instead.
    #[test]
    fn every_static_pattern_compiles() {
        assert!(SECRET_FIELD.is_some(), "SECRET_FIELD does not compile");
    }
}

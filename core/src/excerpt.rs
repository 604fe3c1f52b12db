//! A short window of a file around a place, as miette source code.
//!
//! Session files put a whole request on one line, often hundreds of kilobytes long. Showing
//! that line in full would bury the place; an excerpt shows the characters around it, with
//! the file's real line and column numbers.

use miette::{MietteError, MietteSpanContents, SourceCode, SourceSpan, SpanContents};

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
            text: file[start..stop].to_owned(),
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
}

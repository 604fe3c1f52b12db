//! Finding where a value sits in the user's file.
//!
//! `serde_json` parses values but forgets where they were. Diagnostics need the exact
//! place, so this module scans the raw JSON text again, only along the one path that is
//! asked for, and maps offsets inside decoded strings back to the file's bytes.

use std::ops::Range;

use crate::diagnostic::Span;
use crate::path::{PartPath, PathSegment};

/// A 1-based line and column (in characters) in a text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct LineColumn {
    pub line: usize,
    pub column: usize,
}

impl LineColumn {
    pub fn of_offset(text: &str, offset: usize) -> Self {
        let offset = floor_char_boundary(text, offset.min(text.len()));
        let before = &text[..offset];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
        let column = before[line_start..].chars().count() + 1;
        Self { line, column }
    }
}

/// Lines and columns of many offsets of one text (a recording of thousands of requests, one
/// line of megabytes): where its lines start and, every [`LineIndex::BLOCK`] bytes, how many
/// characters come before, so that each conversion reads at most a block of the text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LineIndex {
    line_starts: Vec<usize>,
    chars_before_block: Vec<usize>,
}

impl LineIndex {
    pub const BLOCK: usize = 4096;

    pub fn new(text: &str) -> Self {
        let bytes = text.as_bytes();
        let line_starts = std::iter::once(0)
            .chain(
                bytes
                    .iter()
                    .enumerate()
                    .filter(|(_, byte)| **byte == b'\n')
                    .map(|(newline, _)| newline + 1),
            )
            .collect();
        let mut chars_before_block = vec![0];
        for block in bytes.chunks(Self::BLOCK) {
            let before = chars_before_block.last().copied().unwrap_or(0);
            chars_before_block.push(before + chars_in(block));
        }
        Self {
            line_starts,
            chars_before_block,
        }
    }

    /// [`LineColumn::of_offset`] in `text`, the text this index was made of.
    pub fn line_column(&self, text: &str, offset: usize) -> LineColumn {
        let offset = floor_char_boundary(text, offset);
        let line = self
            .line_starts
            .partition_point(|start| *start <= offset)
            .max(1);
        let line_start = self.line_starts.get(line - 1).copied().unwrap_or(0);
        let column = self
            .chars_before(text, offset)
            .saturating_sub(self.chars_before(text, line_start))
            + 1;
        LineColumn { line, column }
    }

    /// The byte offset of `line` and `column` (1-based, the column in characters) in `text`:
    /// the end of the line when it is shorter, the end of the text when it has fewer lines.
    pub fn offset_of(&self, text: &str, line: usize, column: usize) -> usize {
        let line = line.max(1);
        let Some(&line_start) = self.line_starts.get(line - 1) else {
            return text.len();
        };
        let line_end = self
            .line_starts
            .get(line)
            .map_or(text.len(), |next| next.saturating_sub(1));
        let wanted = self.chars_before(text, line_start) + column.saturating_sub(1);
        // From the start of the block the character is in (or of the line), a block at most.
        let block = self
            .chars_before_block
            .partition_point(|before| *before <= wanted)
            .saturating_sub(1);
        let mut offset = (block * Self::BLOCK).clamp(line_start, line_end.max(line_start));
        let mut counted = self.chars_before(text, offset);
        while !text.is_char_boundary(offset) {
            offset += 1;
        }
        for character in text.get(offset..line_end).unwrap_or_default().chars() {
            if counted >= wanted {
                break;
            }
            offset += character.len_utf8();
            counted += 1;
        }
        offset
    }

    fn chars_before(&self, text: &str, offset: usize) -> usize {
        let block = offset / Self::BLOCK;
        let before = self.chars_before_block.get(block).copied().unwrap_or(0);
        before
            + chars_in(
                text.as_bytes()
                    .get(block * Self::BLOCK..offset)
                    .unwrap_or_default(),
            )
    }
}

/// The characters that start in `bytes` of UTF-8 (its bytes that do not continue one).
fn chars_in(bytes: &[u8]) -> usize {
    bytes.iter().filter(|byte| (**byte & 0xC0) != 0x80).count()
}

/// Where the parts of a session's turns are in the user's file: what placing a finding needs.
///
/// A `SessionFile` (`kvlint_core::session`) places parts in the file it was read from;
/// requests that come from no file (the SDK's guard) use [`Unplaced`].
pub trait Locator: Sync {
    /// The byte offset in the source of byte `offset_in_part` of `part`'s text in turn `turn`.
    fn locate(&self, turn: usize, part: &PartPath, offset_in_part: usize) -> Option<usize>;

    fn line_column(&self, offset: usize) -> LineColumn;

    /// The span between two byte offsets of the source.
    fn span(&self, start: usize, end: usize) -> Span {
        let from = self.line_column(start);
        let to = self.line_column(end);
        Span {
            line: from.line,
            column: from.column,
            end_line: to.line,
            end_column: to.column,
            offset: start,
            len: end.saturating_sub(start),
        }
    }
}

/// Requests with no source file: findings name the part, with no span.
pub struct Unplaced;

impl Locator for Unplaced {
    fn locate(&self, _turn: usize, _part: &PartPath, _offset_in_part: usize) -> Option<usize> {
        None
    }

    fn line_column(&self, _offset: usize) -> LineColumn {
        LineColumn { line: 0, column: 0 }
    }
}

/// The largest char boundary at or below `offset`.
pub fn floor_char_boundary(text: &str, offset: usize) -> usize {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

/// The byte range of the value at `path` inside the JSON document `json`.
///
/// Returns `None` when the text is not valid JSON along the way or the path does not exist.
pub fn value_range(json: &str, path: &[PathSegment]) -> Option<Range<usize>> {
    let start = value_start(json, path)?;
    let mut scanner = Scanner {
        bytes: json.as_bytes(),
        position: start,
    };
    scanner.skip_value()?;
    Some(start..scanner.position)
}

/// Where the value at `path` starts inside the JSON document `json`: [`value_range`]'s start,
/// without reading the value to its end.
pub fn value_start(json: &str, path: &[PathSegment]) -> Option<usize> {
    let mut scanner = Scanner {
        bytes: json.as_bytes(),
        position: 0,
    };
    scanner.skip_whitespace();
    for segment in path {
        match (segment, scanner.peek()?) {
            (PathSegment::Key(wanted), b'{') => scanner.enter_member(wanted)?,
            (PathSegment::Index(wanted), b'[') => scanner.enter_element(*wanted)?,
            _ => return None,
        }
    }
    Some(scanner.position)
}

/// The byte ranges of the items of the JSON array `json` starts with, found in one pass:
/// `None` when it is not an array, or not valid JSON along the way.
pub fn array_item_ranges(json: &str) -> Option<Vec<Range<usize>>> {
    let mut scanner = Scanner {
        bytes: json.as_bytes(),
        position: 0,
    };
    scanner.expect(b'[')?;
    let mut items = Vec::new();
    scanner.skip_whitespace();
    if scanner.peek()? == b']' {
        return Some(items);
    }
    loop {
        scanner.skip_whitespace();
        let start = scanner.position;
        scanner.skip_value()?;
        items.push(start..scanner.position);
        scanner.skip_whitespace();
        match scanner.peek()? {
            b',' => scanner.position += 1,
            b']' => return Some(items),
            _ => return None,
        }
    }
}

/// Maps a byte offset inside a decoded JSON string to the byte offset in its raw literal.
///
/// `literal` is the raw text of the string value, quotes included.
pub fn raw_offset_in_string(literal: &str, decoded_offset: usize) -> usize {
    let bytes = literal.as_bytes();
    let mut raw = 1; // after the opening quote
    let mut decoded = 0;
    while raw < bytes.len() && decoded < decoded_offset {
        match bytes[raw] {
            b'"' => break,
            b'\\' => {
                let escape_len = if bytes.get(raw + 1) == Some(&b'u') {
                    6
                } else {
                    2
                };
                let code_unit = literal
                    .get(raw + 2..raw + 6)
                    .and_then(|hex| u16::from_str_radix(hex, 16).ok());
                let decoded_len = match (escape_len, code_unit) {
                    (6, Some(unit)) if (0xD800..0xDC00).contains(&unit) => {
                        // A surrogate pair: two escapes make one 4-byte character.
                        raw += 6;
                        4
                    }
                    (6, Some(unit)) => char::from_u32(u32::from(unit)).map_or(3, char::len_utf8),
                    _ => 1,
                };
                raw += escape_len;
                decoded += decoded_len;
            }
            byte => {
                let char_len = utf8_len(byte);
                raw += char_len;
                decoded += char_len;
            }
        }
    }
    raw.min(bytes.len())
}

fn utf8_len(first_byte: u8) -> usize {
    match first_byte {
        0x00..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        _ => 4,
    }
}

struct Scanner<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.position).copied()
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.position += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        self.skip_whitespace();
        (self.peek()? == byte).then(|| self.position += 1)
    }

    /// Positions the scanner at the value of member `wanted` of the object it is on.
    fn enter_member(&mut self, wanted: &str) -> Option<()> {
        self.expect(b'{')?;
        loop {
            self.skip_whitespace();
            if self.peek()? == b'}' {
                return None;
            }
            let key_start = self.position;
            self.skip_string()?;
            let key: String = serde_json::from_slice(&self.bytes[key_start..self.position]).ok()?;
            self.expect(b':')?;
            self.skip_whitespace();
            if key == wanted {
                return Some(());
            }
            self.skip_value()?;
            self.skip_whitespace();
            if self.peek()? == b',' {
                self.position += 1;
            }
        }
    }

    /// Positions the scanner at element `wanted` of the array it is on.
    fn enter_element(&mut self, wanted: usize) -> Option<()> {
        self.expect(b'[')?;
        for _ in 0..wanted {
            self.skip_whitespace();
            if self.peek()? == b']' {
                return None;
            }
            self.skip_value()?;
            self.expect(b',')?;
        }
        self.skip_whitespace();
        (self.peek()? != b']').then_some(())
    }

    fn skip_string(&mut self) -> Option<()> {
        (self.peek()? == b'"').then_some(())?;
        self.position += 1;
        loop {
            match self.peek()? {
                b'\\' => self.position += 2,
                b'"' => {
                    self.position += 1;
                    return Some(());
                }
                _ => self.position += 1,
            }
        }
    }

    fn skip_value(&mut self) -> Option<()> {
        self.skip_whitespace();
        match self.peek()? {
            b'"' => self.skip_string(),
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match self.peek()? {
                        b'"' => {
                            self.skip_string()?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                self.position += 1;
                                return Some(());
                            }
                        }
                        _ => {}
                    }
                    self.position += 1;
                }
            }
            _ => {
                while !matches!(
                    self.peek(),
                    None | Some(b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t')
                ) {
                    self.position += 1;
                }
                Some(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::PartPath;

    #[test]
    fn a_line_index_places_every_offset_as_counting_from_the_start_does() {
        // Lines long and short, characters of one to four bytes across the blocks' edges,
        // a text ending in a newline and one not.
        let line = "é\u{1F600}a\u{2603}".repeat(700);
        for text in [
            format!("{line}\n\nshort\n{line}{line}\n"),
            format!("\n{line}x"),
            String::new(),
        ] {
            let index = LineIndex::new(&text);
            for offset in 0..=text.len() + 2 {
                let place = index.line_column(&text, offset);
                assert_eq!(
                    place,
                    LineColumn::of_offset(&text, offset),
                    "offset {offset}"
                );
                // And back, to the character's start.
                let start = floor_char_boundary(&text, offset);
                assert_eq!(index.offset_of(&text, place.line, place.column), start);
            }
            // Past a line's end, past the text's, and line 0 (a place not found).
            let mut line_start = 0;
            for (number, line) in text.split('\n').enumerate() {
                let end = line_start + line.len();
                assert_eq!(
                    index.offset_of(&text, number + 1, line.chars().count() + 5),
                    end
                );
                line_start = end + 1;
            }
            let lines = text.split('\n').count();
            assert_eq!(index.offset_of(&text, lines + 1, 1), text.len());
            assert_eq!(index.offset_of(&text, 0, 0), 0);
        }
    }

    const BODY: &str = r#"{"model": "m", "messages": [ {"role":"system","content":"Now: \"12:00\"\n\u00e9x"},
      {"role": "user", "content": [{"type": "text", "text": "hi"}]} ]}"#;

    fn slice(path: &PartPath) -> &'static str {
        let range = value_range(BODY, path.segments()).unwrap_or(0..0);
        &BODY[range]
    }

    #[test]
    fn finds_nested_values() {
        let messages = PartPath::root().key("messages");
        assert_eq!(slice(&messages.index(0).key("role")), r#""system""#);
        assert_eq!(
            slice(&messages.index(1).key("content").index(0).key("text")),
            r#""hi""#
        );
        assert!(value_range(BODY, messages.index(2).segments()).is_none());
        assert!(value_range(BODY, PartPath::root().key("tools").segments()).is_none());
    }

    #[test]
    fn maps_decoded_offsets_through_escapes() {
        let literal = slice(&PartPath::root().key("messages").index(0).key("content"));
        // Decoded: `Now: "12:00"\néx`; the `1` is at decoded byte 6, raw byte 8.
        assert_eq!(raw_offset_in_string(literal, 6), 8);
        // `x` follows `é` (2 bytes decoded, 6 raw), after `\n` (1 decoded, 2 raw).
        let decoded_x = "Now: \"12:00\"\né".len();
        assert_eq!(&literal[raw_offset_in_string(literal, decoded_x)..], "x\"");
    }

    #[test]
    fn line_and_column_count_characters() {
        let text = "ab\ncdé€f";
        assert_eq!(
            LineColumn::of_offset(text, text.find('f').unwrap_or(0)),
            LineColumn { line: 2, column: 5 }
        );
    }
}

//! Byte offsets in a document and the positions of the protocol: a line, and a character
//! counted in the encoding agreed at initialization (UTF-16 code units unless the client
//! offers UTF-8).

use std::ops::Range;

use lsp_types::{Position, PositionEncodingKind};

/// How the protocol's `character` counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Utf8,
    Utf16,
}

impl Encoding {
    /// UTF-8 when the client offers it (nothing to convert), else UTF-16, the default every
    /// client understands.
    pub fn negotiate(offered: Option<&[PositionEncodingKind]>) -> Self {
        if offered.is_some_and(|kinds| kinds.contains(&PositionEncodingKind::UTF8)) {
            Self::Utf8
        } else {
            Self::Utf16
        }
    }

    pub fn kind(self) -> PositionEncodingKind {
        match self {
            Self::Utf8 => PositionEncodingKind::UTF8,
            Self::Utf16 => PositionEncodingKind::UTF16,
        }
    }

    fn width(self, character: char) -> usize {
        match self {
            Self::Utf8 => character.len_utf8(),
            Self::Utf16 => character.len_utf16(),
        }
    }
}

/// Where each line of a text starts, to convert between offsets and positions.
#[derive(Debug)]
pub struct LineIndex {
    line_starts: Vec<usize>,
    encoding: Encoding,
}

impl LineIndex {
    pub fn new(text: &str, encoding: Encoding) -> Self {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(newline, _)| newline + 1))
            .collect();
        Self {
            line_starts,
            encoding,
        }
    }

    /// The position of byte `offset` (clamped to the text, and back to a character boundary).
    pub fn position(&self, text: &str, offset: usize) -> Position {
        let offset = kvlint_request::locate::floor_char_boundary(text, offset.min(text.len()));
        let line = self.line_starts.partition_point(|start| *start <= offset) - 1;
        let start = self.line_starts[line];
        let character = text[start..offset]
            .chars()
            .map(|character| self.encoding.width(character))
            .sum::<usize>();
        Position::new(saturate(line), saturate(character))
    }

    pub fn range(&self, text: &str, bytes: &Range<usize>) -> lsp_types::Range {
        lsp_types::Range::new(
            self.position(text, bytes.start),
            self.position(text, bytes.end),
        )
    }

    /// The byte offset of `position`; a character past the end of its line is the line's end,
    /// a line past the end of the text is the text's end.
    pub fn offset(&self, text: &str, position: Position) -> usize {
        let Some(&start) = self.line_starts.get(position.line as usize) else {
            return text.len();
        };
        let end = self
            .line_starts
            .get(position.line as usize + 1)
            .map_or(text.len(), |next| next - 1);
        let mut counted = 0;
        for (index, character) in text[start..end].char_indices() {
            if counted >= position.character as usize {
                return start + index;
            }
            counted += self.encoding.width(character);
        }
        end
    }

    /// The bytes of line `line` (0-based) without its line ending.
    pub fn line(&self, text: &str, line: usize) -> Range<usize> {
        let start = self.line_starts.get(line).copied().unwrap_or(text.len());
        let end = self
            .line_starts
            .get(line + 1)
            .map_or(text.len(), |next| next - 1);
        let end = if text[start..end].ends_with('\r') {
            end - 1
        } else {
            end
        };
        start..end
    }

    /// The line (0-based) byte `offset` is on.
    pub fn line_of(&self, offset: usize) -> usize {
        self.line_starts.partition_point(|start| *start <= offset) - 1
    }
}

fn saturate(value: usize) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf16_counts_surrogate_pairs_twice() {
        // `é` is one UTF-16 unit and two bytes; `🕒` is two units and four bytes.
        let text = "ab\né🕒x\n";
        let index = LineIndex::new(text, Encoding::Utf16);
        let x = text.find('x').unwrap_or_default();
        assert_eq!(index.position(text, x), Position::new(1, 3));
        assert_eq!(index.offset(text, Position::new(1, 3)), x);
        let utf8 = LineIndex::new(text, Encoding::Utf8);
        assert_eq!(utf8.position(text, x), Position::new(1, 6));
        assert_eq!(utf8.offset(text, Position::new(1, 6)), x);
    }

    #[test]
    fn positions_past_the_end_clamp() {
        let text = "one\r\ntwo";
        let index = LineIndex::new(text, Encoding::Utf16);
        assert_eq!(index.offset(text, Position::new(0, 99)), 4);
        assert_eq!(index.offset(text, Position::new(7, 0)), text.len());
        assert_eq!(index.line(text, 0), 0..3);
        assert_eq!(index.line(text, 1), 5..8);
        assert_eq!(index.position(text, 99), Position::new(1, 3));
    }
}

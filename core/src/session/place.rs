//! Placing a turn's parts in the file they were read from (or the recording they came from).

use std::ops::Range;
use std::sync::Arc;

use kvlint_render::RenderError;
use serde_json::Value;

use super::SessionFile;
use crate::json::compact_json;
use kvlint_request::error::InputError;
use kvlint_request::locate::{LineColumn, Locator, raw_offset_in_string, value_range};
use kvlint_request::path::{PartPath, PathSegment};

impl SessionFile {
    /// Turn `index` of this session cannot be rendered because of `source`: placed at the
    /// part of the body `source` names, or at the line the turn starts on.
    pub fn turn_error(&self, index: usize, source: RenderError) -> InputError {
        let part = match &source {
            RenderError::RefusedPart { part, .. } => self.locate(index, part, 0),
            _ => None,
        };
        let (line, column) = match part.map(|offset| self.line_column(offset)) {
            Some(position) => (position.line, position.column),
            None => (self.turn_line(index), 0),
        };
        InputError::Turn {
            path: self.path.clone(),
            line,
            column,
            turn: index,
            source: Box::new(source),
        }
    }

    pub(super) fn locate_value(
        &self,
        document: &Range<usize>,
        body_path: &PartPath,
        part: &PartPath,
    ) -> Option<Range<usize>> {
        let mut segments: Vec<PathSegment> = body_path.segments().to_vec();
        segments.extend_from_slice(part.segments());
        let range = value_range(&self.text[document.clone()], &segments)?;
        Some(document.start + range.start..document.start + range.end)
    }

    /// The bytes of the JSON document that holds turn `index` (a line of a JSONL file, an item
    /// of an array).
    pub fn turn_document(&self, index: usize) -> Option<Range<usize>> {
        self.turns.get(index).map(|turn| turn.document.clone())
    }

    /// The bytes of the file that hold `part` of turn `turn`'s body, as written (for a session
    /// read from a recording, `None`: its bodies are the recording's, in its own escapes).
    pub fn value_range(&self, turn: usize, part: &PartPath) -> Option<Range<usize>> {
        if self.origin.is_some() {
            return None;
        }
        let turn = self.turns.get(turn)?;
        self.locate_value(&turn.document, &turn.body_path, part)
    }

    /// The byte offset in the file of `offset_in_part` bytes into the decoded value of `part`
    /// of turn `turn`.
    ///
    /// For string values the offset is mapped through JSON escapes; for other values (a tool
    /// schema, an object) the start of the value is returned.
    pub fn part_offset(
        &self,
        turn: usize,
        part: &PartPath,
        offset_in_part: usize,
    ) -> Option<usize> {
        let turn = self.turns.get(turn)?;
        let mut part = part.clone();
        let mut range = self.locate_value(&turn.document, &turn.body_path, &part);
        // A path may name a key the body left out (e.g. a message's `content: null`):
        // fall back to the closest enclosing value that exists.
        while range.is_none() && !part.segments().is_empty() {
            part = part.truncated(part.segments().len() - 1);
            range = self.locate_value(&turn.document, &turn.body_path, &part);
        }
        let range = range?;
        let literal = &self.text[range.clone()];
        if literal.starts_with('"') {
            return Some(range.start + raw_offset_in_string(literal, offset_in_part));
        }
        // A tool schema or tool input is rendered compact; when the file has it compact too,
        // offsets into the rendering are offsets into the file.
        let compact = serde_json::from_str::<Value>(literal)
            .is_ok_and(|value| compact_json(&value) == literal);
        Some(
            range.start
                + if compact {
                    offset_in_part.min(literal.len())
                } else {
                    0
                },
        )
    }

    /// The text findings are placed in: the session file's, or the recording's.
    pub fn source_text(&self) -> &Arc<str> {
        self.origin
            .as_ref()
            .map_or(&self.text, |origin| &origin.text)
    }

    /// The line turn `index` starts on.
    pub fn turn_line(&self, index: usize) -> usize {
        if let Some(origin) = &self.origin {
            return self
                .line_column(origin.body_offsets.get(index).copied().unwrap_or(0))
                .line;
        }
        let Some(turn) = self.turns.get(index) else {
            return 0;
        };
        let start = self
            .locate_value(&turn.document, &turn.body_path, &PartPath::root())
            .map_or(turn.document.start, |range| range.start);
        self.line_column(start).line
    }
}

impl Locator for SessionFile {
    fn locate(&self, turn: usize, part: &PartPath, offset_in_part: usize) -> Option<usize> {
        let offset = self.part_offset(turn, part, offset_in_part)?;
        match &self.origin {
            Some(origin) => origin.body_offsets.get(turn).copied(),
            None => Some(offset),
        }
    }

    fn line_column(&self, offset: usize) -> LineColumn {
        match &self.origin {
            Some(origin) => origin.lines.line_column(&origin.text, offset),
            None => LineColumn::of_offset(&self.text, offset),
        }
    }
}

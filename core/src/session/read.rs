//! Reading a session file's documents: the containers around a request body, its turns
//! parsed and kept while the budget lasts, a bad document placed in the file.

use std::ops::Range;
use std::sync::Arc;

use serde_json::Value;

use super::{RepeatedKey, SessionFile, Skipped, Turn, TurnRecord, recorded_time};
use crate::duplicate_keys::duplicate_keys;
use crate::json::{heap_size, kind_of};
use kvlint_request::error::InputError;
use kvlint_request::excerpt::Excerpt;
use kvlint_request::locate::LineColumn;
use kvlint_request::path::PartPath;
use kvlint_request::request::{BodyError, Message, Part, Request, SharedParts};

/// What a JSON document of a session file holds.
pub(super) enum Document {
    Turn(Box<Turn>, PartPath),
    Skipped(Skipped),
}

impl SessionFile {
    /// Parses a session, keeping parsed turns up to `budget` bytes (estimated).
    pub fn parse_keeping(path: String, text: Arc<str>, budget: usize) -> Result<Self, InputError> {
        let mut reader = Reader {
            budget: Some(budget),
            shared: SharedParts::default(),
        };
        let mut session = Self {
            path,
            text,
            turns: Vec::new(),
            skipped: Vec::new(),
            part_texts: Vec::new(),
            repeated_keys: Vec::new(),
            origin: None,
        };
        // A byte-order mark is harmless: the text after it is read.
        let bom = if session.text.starts_with('\u{FEFF}') {
            '\u{FEFF}'.len_utf8()
        } else {
            0
        };
        let trimmed_start = session.text.len() - session.text[bom..].trim_start().len();
        match session.text.as_bytes().get(trimmed_start) {
            None => {
                return Err(InputError::Empty {
                    path: session.path.clone(),
                });
            }
            Some(b'[') => session.read_array(trimmed_start, &mut reader)?,
            Some(_) => session.read_documents(trimmed_start, &mut reader)?,
        }
        session.part_texts = match reader.budget {
            Some(_) => reader.shared.into_texts(),
            None => session.kept_texts(),
        };
        Ok(session)
    }

    /// Every distinct text of the turns kept.
    fn kept_texts(&self) -> Vec<Arc<str>> {
        let mut texts = std::collections::HashSet::new();
        for kept in self.turns.iter().filter_map(|record| record.kept.as_ref()) {
            texts.extend(kept.request.parts.iter().map(|part| Arc::clone(&part.text)));
        }
        texts.into_iter().collect()
    }

    fn read_array(&mut self, start: usize, reader: &mut Reader) -> Result<(), InputError> {
        let document = start..self.text.len();
        let text = Arc::clone(&self.text);
        // Each item is a document of its own: a turn parsed again reads only its item.
        let items: Vec<&serde_json::value::RawValue> =
            serde_json::from_str(&text[document.clone()])
                .map_err(|error| self.json_error(document.clone(), &error))?;
        self.find_repeated_keys(&document);
        for item in items {
            let item_start = item.get().as_ptr() as usize - text.as_ptr() as usize;
            let item_range = item_start..item_start + item.get().len();
            let value = self.parse_json(item_range.clone())?;
            self.read_document(value, item_range, reader)?;
        }
        Ok(())
    }

    /// JSON documents one after the other: JSONL, one body per line, or bodies pretty-printed
    /// over several lines (as `jq .` writes them).
    fn read_documents(&mut self, start: usize, reader: &mut Reader) -> Result<(), InputError> {
        let text = Arc::clone(&self.text);
        let mut documents = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        let mut end = start;
        while let Some(parsed) = documents.next() {
            let rest = &text[end..];
            let document_start = end + (rest.len() - rest.trim_start().len());
            end = start + documents.byte_offset();
            let value = parsed.map_err(|error| self.json_error(start..text.len(), &error))?;
            self.find_repeated_keys(&(document_start..end));
            self.read_document(value, document_start..end, reader)?;
        }
        Ok(())
    }

    /// Reads one document: a turn, kept while the budget lasts, or a request passed over.
    /// The turns kept are the session's first: once one does not fit, no later one is kept
    /// and their texts are not shared.
    fn read_document(
        &mut self,
        value: Value,
        document: Range<usize>,
        reader: &mut Reader,
    ) -> Result<(), InputError> {
        let mut unshared = SharedParts::default();
        let shared = match reader.budget {
            Some(_) => &mut reader.shared,
            None => &mut unshared,
        };
        let earlier = self
            .turns
            .last()
            .and_then(|record| record.kept.as_ref())
            .map(|turn| &turn.request);
        match self.document(value, document.clone(), shared, earlier)? {
            Document::Turn(turn, body_path) => {
                let request = &turn.request;
                let format = request.format;
                let prompt_bytes = request.parts.iter().map(|part| part.text.len()).sum();
                // Sized only while the budget lasts: once closed, nothing more is kept.
                let size = reader.budget.map(|_| estimated_size(&turn));
                let kept = match (reader.budget, size) {
                    (Some(left), Some(size)) if size <= left => {
                        reader.budget = Some(left - size);
                        Some(turn)
                    }
                    _ => {
                        // The texts of the turns kept stay shared; this turn's are let go.
                        reader.budget = None;
                        reader.shared = SharedParts::default();
                        None
                    }
                };
                self.turns.push(TurnRecord {
                    document,
                    body_path,
                    format,
                    prompt_bytes,
                    kept,
                });
            }
            Document::Skipped(skipped) => self.skipped.push(skipped),
        }
        Ok(())
    }

    /// Notes the keys a parsed document gives twice in an object.
    fn find_repeated_keys(&mut self, document: &Range<usize>) {
        for repeated in duplicate_keys(&self.text[document.clone()]) {
            let second = LineColumn::of_offset(&self.text, document.start + repeated.second);
            let first = LineColumn::of_offset(&self.text, document.start + repeated.first);
            self.repeated_keys.push(RepeatedKey {
                key: repeated.key,
                object: repeated.object,
                line: second.line,
                column: second.column,
                first_line: first.line,
                first_column: first.column,
            });
        }
    }

    pub(super) fn parse_json(&self, document: Range<usize>) -> Result<Value, InputError> {
        serde_json::from_str(&self.text[document.clone()])
            .map_err(|error| self.json_error(document, &error))
    }

    /// A JSON error in `document`, placed in the file.
    fn json_error(&self, document: Range<usize>, error: &serde_json::Error) -> InputError {
        let document_text = &self.text[document.clone()];
        let offset_in_document = byte_offset_of(document_text, error.line(), error.column());
        let offset = document.start + offset_in_document;
        let position = LineColumn::of_offset(&self.text, offset);
        let message = error.to_string();
        let message = message
            .split(" at line ")
            .next()
            .unwrap_or(&message)
            .to_owned();
        InputError::Json {
            path: self.path.clone(),
            line: position.line,
            column: position.column,
            message,
            source_code: Excerpt::around(&self.path, &self.text, offset, 1),
            span: (offset, 1).into(),
        }
    }

    /// Unwraps the known containers around a request body and parses the body, taking over
    /// from `earlier` (the turn read before it) the messages it sends again
    /// ([`Request::parse_after`]).
    pub(super) fn document(
        &self,
        value: Value,
        document: Range<usize>,
        shared: &mut SharedParts,
        earlier: Option<&Request>,
    ) -> Result<Document, InputError> {
        let Value::Object(mut object) = value else {
            return Err(self.body_error(
                &document,
                &PartPath::root(),
                BodyError::new(
                    PartPath::root(),
                    format!("expected a request body object, found {}", kind_of(&value)),
                ),
            ));
        };
        let is_batch_line = object.contains_key("custom_id") || object.contains_key("method");
        if let Some(url) = object
            .get("url")
            .and_then(Value::as_str)
            .filter(|url| is_batch_line && !kvlint_protocol::endpoint::is_prompt_path(url))
        {
            return Ok(Document::Skipped(Skipped {
                line: LineColumn::of_offset(&self.text, document.start).line,
                reason: format!("an OpenAI Batch request to {url}, which takes no prompt"),
            }));
        }
        let time = ["time", "timestamp", "started_at"]
            .iter()
            .find_map(|key| object.get(*key).and_then(recorded_time));
        let (body, response, body_path) = match (object.remove("body"), object.remove("request")) {
            (Some(body), _) if is_batch_line => (body, None, PartPath::root().key("body")),
            (_, Some(request)) if request.is_object() => (
                request,
                object.remove("response"),
                PartPath::root().key("request"),
            ),
            (body, request) => {
                if let Some(body) = body {
                    object.insert("body".into(), body);
                }
                if let Some(request) = request {
                    object.insert("request".into(), request);
                }
                (Value::Object(object), None, PartPath::root())
            }
        };
        let request = Request::parse_after(body, shared, earlier)
            .map_err(|error| self.body_error(&document, &body_path, error))?;
        Ok(Document::Turn(
            Box::new(Turn {
                time: time.or_else(|| response.as_ref()?.get("created").and_then(recorded_time)),
                request,
                response,
            }),
            body_path,
        ))
    }

    fn body_error(
        &self,
        document: &Range<usize>,
        body_path: &PartPath,
        error: BodyError,
    ) -> InputError {
        let offset = self
            .locate_value(document, body_path, &error.path)
            .map_or(document.start, |range| range.start);
        let position = LineColumn::of_offset(&self.text, offset);
        let at = if error.path.segments().is_empty() {
            String::new()
        } else {
            format!(" (at `{}`)", error.path)
        };
        InputError::Body {
            path: self.path.clone(),
            line: position.line,
            column: position.column,
            message: format!("{}{at}", error.message),
            expected: error.expected,
            source_code: Excerpt::around(&self.path, &self.text, offset, 1),
            span: (offset, 1).into(),
        }
    }
}

/// What reading a session carries from one document to the next.
struct Reader {
    /// What parsed turns may still keep, in bytes (estimated); `None` once a turn did not fit.
    budget: Option<usize>,
    shared: SharedParts,
}

/// The memory a parsed turn takes, about: its JSON values (the body, the tools' definitions,
/// the response), and a record per part and message (part texts are shared, not counted).
fn estimated_size(turn: &Turn) -> usize {
    let request = &turn.request;
    heap_size(&request.body)
        + request
            .tools
            .iter()
            .map(|tool| heap_size(&tool.definition))
            .sum::<usize>()
        + turn.response.as_ref().map_or(0, heap_size)
        + request.parts.len() * size_of::<Part>()
        + request.messages.len() * size_of::<Message>()
}

/// serde_json reports a 1-based line and column (column counted in bytes).
fn byte_offset_of(text: &str, line: usize, column: usize) -> usize {
    let line_start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    (line_start + column.saturating_sub(1)).min(text.len())
}

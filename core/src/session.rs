//! Reading session files: one file is one agent session, its turns in file order.
//!
//! Accepted containers: JSONL with one request body per line, a JSON array of bodies,
//! OpenAI Batch lines (`{custom_id, method, url, body}`) and `{request, response}` pairs.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use crate::duplicate_keys::duplicate_keys;
use crate::error::{InputError, read_text};
use crate::excerpt::Excerpt;
use crate::json::{compact_json, kind_of};
use crate::locate::{LineColumn, Locator, raw_offset_in_string, value_range};
use crate::path::{PartPath, PathSegment};
use crate::request::{BodyError, Request, SharedParts};

/// One recorded request of a session, parsed.
#[derive(Debug, Clone)]
pub struct Turn {
    pub request: Request,
    /// The engine's answer, when the file records `{request, response}` pairs.
    pub response: Option<Value>,
    /// The JSON document holding this turn: a line of a JSONL file, or the whole file.
    document: Range<usize>,
    /// From the document's root to the request body (`[3]`, `body`, `request`, or nothing).
    body_path: PartPath,
}

/// A session file and its turns.
#[derive(Debug, Clone)]
pub struct SessionFile {
    pub path: String,
    pub text: Arc<str>,
    pub turns: Vec<Turn>,
    /// Requests the file holds that are not prompts (an OpenAI Batch line to another
    /// endpoint): passed over, and said.
    pub skipped: Vec<Skipped>,
    /// Every distinct text the turns' parts hold, each once.
    pub part_texts: Vec<Arc<str>>,
    /// Keys a document gives twice in one object: kvlint reads the last, a provider may not.
    pub repeated_keys: Vec<RepeatedKey>,
}

/// A key given twice in one object of a session file, both places in the file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RepeatedKey {
    pub key: String,
    /// The object, from its document's root (`messages[1]`; empty for the root).
    pub object: String,
    /// Where the key is given the second time, and the first.
    pub line: usize,
    pub column: usize,
    pub first_line: usize,
    pub first_column: usize,
}

/// A request passed over, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Skipped {
    pub line: usize,
    pub reason: String,
}

/// What a JSON document of a session file holds.
enum Document {
    Turn(Box<Turn>),
    Skipped(Skipped),
}

/// The endpoints of OpenAI Batch lines that carry prompts.
const PROMPT_ENDPOINTS: [&str; 3] = ["/chat/completions", "/responses", "/messages"];

impl SessionFile {
    pub fn read(path: &Path) -> Result<Self, InputError> {
        let display = path.display().to_string();
        Self::parse(display, Arc::from(read_text(path)?))
    }

    pub fn parse(path: String, text: Arc<str>) -> Result<Self, InputError> {
        let mut session = Self {
            path,
            text,
            turns: Vec::new(),
            skipped: Vec::new(),
            part_texts: Vec::new(),
            repeated_keys: Vec::new(),
        };
        // A byte-order mark is harmless: the text after it is read.
        let bom = if session.text.starts_with('\u{FEFF}') {
            '\u{FEFF}'.len_utf8()
        } else {
            0
        };
        let trimmed_start = session.text.len() - session.text[bom..].trim_start().len();
        let mut shared = SharedParts::default();
        match session.text.as_bytes().get(trimmed_start) {
            None => {
                return Err(InputError::Empty {
                    path: session.path.clone(),
                });
            }
            Some(b'[') => session.read_array(trimmed_start, &mut shared)?,
            Some(_) => session.read_documents(trimmed_start, &mut shared)?,
        }
        session.part_texts = shared.into_texts();
        Ok(session)
    }

    fn read_array(&mut self, start: usize, shared: &mut SharedParts) -> Result<(), InputError> {
        let document = start..self.text.len();
        let value = self.parse_json(document.clone())?;
        self.find_repeated_keys(&document);
        let Value::Array(items) = value else {
            return Ok(());
        };
        for (index, item) in items.into_iter().enumerate() {
            let read = self.turn(
                item,
                document.clone(),
                PartPath::root().index(index),
                shared,
            )?;
            self.add(read);
        }
        Ok(())
    }

    /// JSON documents one after the other: JSONL, one body per line, or bodies pretty-printed
    /// over several lines (as `jq .` writes them).
    fn read_documents(&mut self, start: usize, shared: &mut SharedParts) -> Result<(), InputError> {
        let text = Arc::clone(&self.text);
        let mut documents = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        let mut end = start;
        while let Some(parsed) = documents.next() {
            let rest = &text[end..];
            let document_start = end + (rest.len() - rest.trim_start().len());
            end = start + documents.byte_offset();
            let value = parsed.map_err(|error| self.json_error(start..text.len(), &error))?;
            self.find_repeated_keys(&(document_start..end));
            let read = self.turn(value, document_start..end, PartPath::root(), shared)?;
            self.add(read);
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

    fn parse_json(&self, document: Range<usize>) -> Result<Value, InputError> {
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

    fn add(&mut self, document: Document) {
        match document {
            Document::Turn(turn) => self.turns.push(*turn),
            Document::Skipped(skipped) => self.skipped.push(skipped),
        }
    }

    /// Unwraps the known containers around a request body and parses the body.
    fn turn(
        &self,
        value: Value,
        document: Range<usize>,
        path_in_document: PartPath,
        shared: &mut SharedParts,
    ) -> Result<Document, InputError> {
        let Value::Object(mut object) = value else {
            return Err(self.body_error(
                &document,
                &path_in_document,
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
            .filter(|url| is_batch_line && !PROMPT_ENDPOINTS.iter().any(|end| url.ends_with(end)))
        {
            return Ok(Document::Skipped(Skipped {
                line: LineColumn::of_offset(&self.text, document.start).line,
                reason: format!("an OpenAI Batch request to {url}, which takes no prompt"),
            }));
        }
        let (body, response, body_path) = match (object.remove("body"), object.remove("request")) {
            (Some(body), _) if is_batch_line => (body, None, path_in_document.key("body")),
            (_, Some(request)) if request.is_object() => (
                request,
                object.remove("response"),
                path_in_document.key("request"),
            ),
            (body, request) => {
                if let Some(body) = body {
                    object.insert("body".into(), body);
                }
                if let Some(request) = request {
                    object.insert("request".into(), request);
                }
                (Value::Object(object), None, path_in_document)
            }
        };
        let request = Request::parse(body, shared)
            .map_err(|error| self.body_error(&document, &body_path, error))?;
        Ok(Document::Turn(Box::new(Turn {
            request,
            response,
            document,
            body_path,
        })))
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

    fn locate_value(
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

    /// The byte offset in the file of `offset_in_part` bytes into the decoded value of `part`.
    ///
    /// For string values the offset is mapped through JSON escapes; for other values (a tool
    /// schema, an object) the start of the value is returned.
    pub fn part_offset(
        &self,
        turn: &Turn,
        part: &PartPath,
        offset_in_part: usize,
    ) -> Option<usize> {
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

    /// The line a turn starts on.
    pub fn turn_line(&self, turn: &Turn) -> usize {
        let start = self
            .locate_value(&turn.document, &turn.body_path, &PartPath::root())
            .map_or(turn.document.start, |range| range.start);
        self.line_column(start).line
    }
}

impl Locator for SessionFile {
    fn locate(&self, turn: usize, part: &PartPath, offset_in_part: usize) -> Option<usize> {
        self.part_offset(self.turns.get(turn)?, part, offset_in_part)
    }

    fn line_column(&self, offset: usize) -> LineColumn {
        LineColumn::of_offset(&self.text, offset)
    }
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

//! Reading session files: one file is one agent session, its turns in file order.
//!
//! Accepted containers: JSONL with one request body per line, a JSON array of bodies,
//! OpenAI Batch lines (`{custom_id, method, url, body}`) and `{request, response}` pairs. A
//! recording (a VCR cassette, a HAR file) holds sessions of its own: the `kvlint-recordings`
//! crate reads each and hands it over as a [`SessionFile`] with its [`Origin`], its turns
//! placed at their bodies in the recording.
//!
//! Memory: a session file is read whole and every turn is parsed once, to report a bad one
//! before any check. Parsed turns are kept up to [`KEPT_TURNS_BUDGET`]; a turn beyond it is
//! parsed again from the file's text when it is used ([`SessionFile::turn`]), so a session
//! of any length takes its text, that budget and the turns in use, not a parse of every turn.

use std::borrow::Cow;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use crate::duplicate_keys::duplicate_keys;
use crate::error::InputError;
use crate::excerpt::Excerpt;
use crate::json::{compact_json, heap_size, kind_of};
use crate::locate::{LineColumn, Locator, raw_offset_in_string, value_range};
use crate::path::{PartPath, PathSegment};
use crate::request::{BodyError, BodyFormat, Message, Part, Request, SharedParts};

/// How much memory parsed turns may keep, estimated (see [`SessionFile::turn`]): every turn
/// of a session that fits is parsed once; a longer session parses its later turns again each
/// time they are used.
pub const KEPT_TURNS_BUDGET: usize = 256 << 20;

/// One recorded request of a session, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub request: Request,
    /// The engine's answer, when the file records `{request, response}` pairs.
    pub response: Option<Value>,
    /// When the request was sent, in seconds since the Unix epoch: the pair's `time` (a
    /// number of seconds, or RFC 3339 text), else the response's `created`.
    pub time: Option<f64>,
}

/// Seconds since the Unix epoch of an RFC 3339 time (`2026-12-01T05:33:53.120Z`).
pub fn unix_seconds(text: &str) -> Option<f64> {
    let time = chrono::DateTime::parse_from_rfc3339(text).ok()?;
    Some(time.timestamp() as f64 + f64::from(time.timestamp_subsec_micros()) / 1e6)
}

/// A time a recording gives: seconds (milliseconds when larger than any date in seconds), or
/// RFC 3339 text.
fn time_of(value: &Value) -> Option<f64> {
    match value {
        Value::Number(number) => {
            let seconds = number.as_f64()?;
            Some(if seconds > 1e11 {
                seconds / 1e3
            } else {
                seconds
            })
        }
        Value::String(text) => unix_seconds(text),
        _ => None,
    }
}

/// Where a turn is in its file, and the turn parsed when it is kept.
#[derive(Debug, Clone)]
struct TurnRecord {
    /// The JSON document holding this turn: a line of a JSONL file, or an item of an array.
    document: Range<usize>,
    /// From the document's root to the request body (`body`, `request`, or nothing).
    body_path: PartPath,
    format: BodyFormat,
    /// The bytes of the turn's prompt text.
    prompt_bytes: usize,
    kept: Option<Box<Turn>>,
}

/// A session file and its turns.
#[derive(Debug, Clone)]
pub struct SessionFile {
    pub path: String,
    pub text: Arc<str>,
    turns: Vec<TurnRecord>,
    /// Requests the file holds that are not prompts (an OpenAI Batch line to another
    /// endpoint): passed over, and said.
    pub skipped: Vec<Skipped>,
    /// Every distinct text the turns' parts hold, each once.
    pub part_texts: Vec<Arc<str>>,
    /// Keys a document gives twice in one object: kvlint reads the last, a provider may not.
    pub repeated_keys: Vec<RepeatedKey>,
    /// For a session found in a recording: the recording, and where each turn's body is.
    pub origin: Option<Origin>,
}

/// Where a session found in a recording comes from. Its turns are placed at their bodies in
/// the recording (the body's start: a recording writes a body in its own escapes).
#[derive(Debug, Clone)]
pub struct Origin {
    /// `vcr-yaml`, `har`, … (`kvlint_recordings::Container::as_str`).
    pub container: &'static str,
    /// This session's number among the recording's (from 1), and how many it holds.
    pub session: usize,
    pub sessions: usize,
    /// The recording's text.
    pub text: Arc<str>,
    /// The recording's interactions the turns came from.
    pub interactions: Vec<usize>,
    /// The byte offset of each turn's body in the recording's text.
    pub body_offsets: Vec<usize>,
    /// Whether a body was rebuilt from what the recorder kept (a trace's span attributes):
    /// its JSON serialization is kvlint's, so nothing is claimed of the one sent.
    pub reconstructed: bool,
    /// How the session was told apart from the recording's others.
    pub grouped_by: kvlint_protocol::grouping::GroupedBy,
    /// The number (from 1) of the session that spawned it (a sub-agent's parent).
    pub parent: Option<usize>,
    /// The host every request was sent to, when the recording's URLs name the same one
    /// (`kvlint_protocol::endpoint::hosted_api` tells the hosted API it is).
    pub host: Option<String>,
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
    Turn(Box<Turn>, PartPath),
    Skipped(Skipped),
}

/// The text of a session file (UTF-8, a byte-order mark kept for the parser to pass over).
pub fn read_text(path: &Path) -> Result<String, InputError> {
    let display = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| InputError::Io {
        path: display.clone(),
        source,
    })?;
    crate::error::utf8_text(display, bytes)
}

impl SessionFile {
    /// Reads a session file (`kvlint_recordings::read_session` also inflates a compressed
    /// one and says when the file is a recording).
    pub fn read(path: &Path) -> Result<Self, InputError> {
        Self::parse(path.display().to_string(), Arc::from(read_text(path)?))
    }

    pub fn parse(path: String, text: Arc<str>) -> Result<Self, InputError> {
        Self::parse_keeping(path, text, KEPT_TURNS_BUDGET)
    }

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

    /// How many turns the session has.
    pub fn len(&self) -> usize {
        self.turns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.turns.is_empty()
    }

    /// Turn `index`, parsed: the one kept, or parsed again from the file's text.
    pub fn turn(&self, index: usize) -> Result<Cow<'_, Turn>, InputError> {
        let record = self.record(index)?;
        if let Some(kept) = &record.kept {
            return Ok(Cow::Borrowed(kept));
        }
        let value = self.parse_json(record.document.clone())?;
        match self.document(value, record.document.clone(), &mut SharedParts::default())? {
            Document::Turn(turn, _) => Ok(Cow::Owned(*turn)),
            Document::Skipped(_) => Err(self.no_turn(index)),
        }
    }

    /// The turns in order, each parsed when it is reached.
    pub fn turns(&self) -> impl Iterator<Item = Result<Cow<'_, Turn>, InputError>> + '_ {
        (0..self.len()).map(|index| self.turn(index))
    }

    /// How many turns are kept parsed (the others are parsed again when used).
    pub fn kept_turns(&self) -> usize {
        self.turns
            .iter()
            .filter(|record| record.kept.is_some())
            .count()
    }

    /// The API each turn is written for, in order.
    pub fn formats(&self) -> impl Iterator<Item = BodyFormat> + '_ {
        self.turns.iter().map(|record| record.format)
    }

    /// The bytes of prompt text turn `index` sends: about the work of rendering it.
    pub fn prompt_bytes(&self, index: usize) -> usize {
        self.turns
            .get(index)
            .map_or(0, |record| record.prompt_bytes)
    }

    /// Every distinct text of the turns kept.
    fn kept_texts(&self) -> Vec<Arc<str>> {
        let mut texts = std::collections::HashSet::new();
        for kept in self.turns.iter().filter_map(|record| record.kept.as_ref()) {
            texts.extend(kept.request.parts.iter().map(|part| Arc::clone(&part.text)));
        }
        texts.into_iter().collect()
    }

    fn record(&self, index: usize) -> Result<&TurnRecord, InputError> {
        self.turns.get(index).ok_or_else(|| self.no_turn(index))
    }

    fn no_turn(&self, index: usize) -> InputError {
        InputError::NoTurn {
            path: self.path.clone(),
            turn: index,
        }
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
        match self.document(value, document.clone(), shared)? {
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

    /// Unwraps the known containers around a request body and parses the body.
    fn document(
        &self,
        value: Value,
        document: Range<usize>,
        shared: &mut SharedParts,
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
            .find_map(|key| object.get(*key).and_then(time_of));
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
        let request = Request::parse(body, shared)
            .map_err(|error| self.body_error(&document, &body_path, error))?;
        Ok(Document::Turn(
            Box::new(Turn {
                time: time.or_else(|| response.as_ref()?.get("created").and_then(time_of)),
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
        LineColumn::of_offset(self.source_text(), offset)
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

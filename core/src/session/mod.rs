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

use kvlint_request::error::InputError;
use kvlint_request::path::PartPath;
use kvlint_request::request::{BodyFormat, Request, SharedParts};

mod place;
mod read;

use read::Document;

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

/// A time a recording gives: seconds since the Unix epoch (milliseconds when larger than any
/// date in seconds), or RFC 3339 text.
pub fn recorded_time(value: &Value) -> Option<f64> {
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
    /// Its lines, which place the findings of all its sessions.
    pub lines: Arc<kvlint_request::locate::LineIndex>,
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

/// The text of a session file (UTF-8, a byte-order mark kept for the parser to pass over).
pub fn read_text(path: &Path) -> Result<String, InputError> {
    let display = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| InputError::Io {
        path: display.clone(),
        source,
    })?;
    kvlint_request::error::utf8_text(display, bytes)
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

    /// Whether the grouping of its recording read turn `turn` as the session's compaction.
    pub fn compacted_at(&self, turn: usize) -> bool {
        self.origin
            .as_ref()
            .is_some_and(|origin| origin.grouped_by.compacted_at(turn))
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
        let document = record.document.clone();
        match self.document(value, document, &mut SharedParts::default(), None)? {
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

    fn record(&self, index: usize) -> Result<&TurnRecord, InputError> {
        self.turns.get(index).ok_or_else(|| self.no_turn(index))
    }

    fn no_turn(&self, index: usize) -> InputError {
        InputError::NoTurn {
            path: self.path.clone(),
            turn: index,
        }
    }
}

//! Input files as kvlint reads them: a session file, or a recording and the sessions it
//! holds; a gzip-compressed file inflated, an Inspect `.eval` log as the JSON log it holds.

use std::path::Path;
use std::sync::Arc;

use kvlint_core::session::{Origin, SessionFile};
use kvlint_request::error::InputError;
use kvlint_request::locate::LineIndex;

use crate::{Recording, RecordingError, unpack};

/// The text of an input file: a session file, or a recording; a gzip-compressed one
/// inflated, an Inspect `.eval` log as the JSON log it holds.
pub fn read_input(path: &Path) -> Result<String, InputError> {
    let display = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| InputError::Io {
        path: display.clone(),
        source,
    })?;
    input_text(display, bytes)
}

/// The text of an input file's bytes, as [`read_input`] reads them; `display` names the file
/// in errors.
pub fn input_text(display: String, bytes: Vec<u8>) -> Result<String, InputError> {
    match unpack(&bytes) {
        Ok(Some(text)) => Ok(text),
        Ok(None) => kvlint_request::error::utf8_text(display, bytes),
        Err(bad) => Err(bad_recording(&display, bad)),
    }
}

/// Reads one session file. A recording (a VCR cassette, a HAR file) given instead is an
/// error that says so, not a JSON error.
pub fn read_session(path: &Path) -> Result<SessionFile, InputError> {
    parse_session(path.display().to_string(), Arc::from(read_input(path)?))
}

/// Parses one session file; a recording is an error that says so, as in [`read_session`].
pub fn parse_session(path: String, text: Arc<str>) -> Result<SessionFile, InputError> {
    match SessionFile::parse(path.clone(), Arc::clone(&text)) {
        Err(error @ (InputError::Json { .. } | InputError::Body { .. })) => {
            Err(recording_error(&path, text.as_bytes()).unwrap_or(error))
        }
        parsed => parsed,
    }
}

/// Reads a session file, or each session of a recording (a VCR cassette, gzip-compressed or
/// not; a HAR file; an Inspect log; an OTLP trace), reading the file once.
pub fn read_all(path: &Path) -> Result<Vec<SessionFile>, InputError> {
    parse_all(path.display().to_string(), Arc::from(read_input(path)?))
}

/// A session file's session, or each session of the recording `text` holds.
pub fn parse_all(path: String, text: Arc<str>) -> Result<Vec<SessionFile>, InputError> {
    match SessionFile::parse(path.clone(), Arc::clone(&text)) {
        Ok(session) => Ok(vec![session]),
        Err(error @ (InputError::Json { .. } | InputError::Body { .. })) => {
            match Recording::read(text.as_bytes()) {
                Ok(Some(recording)) => sessions_of(&path, &text, &recording),
                Ok(None) => Err(error),
                Err(bad) => Err(bad_recording(&path, bad)),
            }
        }
        Err(error) => Err(error),
    }
}

/// Each session a recording holds, placed in the recording (`text`).
fn sessions_of(
    path: &str,
    text: &Arc<str>,
    recording: &Recording,
) -> Result<Vec<SessionFile>, InputError> {
    let found = recording.sessions();
    let count = found.sessions.len();
    let lines = Arc::new(LineIndex::new(text));
    found
        .sessions
        .into_iter()
        .enumerate()
        .map(|(number, found)| {
            let mut session = SessionFile::parse(path.to_owned(), Arc::from(found.jsonl()))?;
            session.origin = Some(Origin {
                host: found.host().map(str::to_owned),
                container: recording.container.as_str(),
                session: number + 1,
                sessions: count,
                text: Arc::clone(text),
                lines: Arc::clone(&lines),
                body_offsets: found
                    .at
                    .iter()
                    .map(|place| lines.offset_of(text, place.line, place.column))
                    .collect(),
                interactions: found.interactions,
                reconstructed: found.reconstructed,
                grouped_by: found.grouped_by,
                parent: found.parent.map(|parent| parent + 1),
            });
            Ok(session)
        })
        .collect()
}

/// The error for a recording given where a session file is expected, when `bytes` are one
/// (or one that cannot be read).
fn recording_error(path: &str, bytes: &[u8]) -> Option<InputError> {
    match Recording::read(bytes) {
        Ok(recording) => Some(InputError::Recording {
            path: path.to_owned(),
            container: recording?.container.as_str(),
        }),
        Err(error) => Some(bad_recording(path, error)),
    }
}

fn bad_recording(path: &str, error: RecordingError) -> InputError {
    InputError::BadRecording {
        path: path.to_owned(),
        line: error.at.line,
        column: error.at.column,
        message: error.message,
    }
}

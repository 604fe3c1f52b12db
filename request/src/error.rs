//! Typed errors for bad input: each names the file, the place and what was expected.

use miette::{Diagnostic, SourceSpan};
use thiserror::Error;

use crate::excerpt::Excerpt;
use crate::path::PartPath;

/// A problem with an input file, a template or a tokenizer.
///
/// Every variant that points into a file carries the file's text, so miette can show the place.
#[derive(Debug, Error, Diagnostic)]
pub enum InputError {
    #[error("cannot read {path}")]
    #[diagnostic(code(kvlint::io))]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },

    #[error("{path}:{line}:{column}: not UTF-8: byte 0x{byte:02X}")]
    #[diagnostic(
        code(kvlint::encoding),
        help("kvlint reads UTF-8 text; re-encode the file (e.g. `iconv -t UTF-8`)")
    )]
    Encoding {
        path: String,
        line: usize,
        column: usize,
        byte: u8,
    },

    #[error("{path} is empty")]
    #[diagnostic(
        code(kvlint::empty_input),
        help("expected agent request bodies: one JSON object per line (JSONL) or a JSON array")
    )]
    Empty { path: String },

    #[error("{path} is a recording ({container}), not a session file")]
    #[diagnostic(
        code(kvlint::recording),
        help(
            "a recording holds sessions: read it with a recording reader, or write the sessions \
             it holds out as session files first"
        )
    )]
    Recording {
        path: String,
        container: &'static str,
    },

    #[error("{}: a recording that cannot be read: {message}", file_place(path, *line, *column))]
    #[diagnostic(code(kvlint::invalid_recording))]
    BadRecording {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },

    #[error("{path}:{line}:{column}: invalid JSON: {message}")]
    #[diagnostic(code(kvlint::invalid_json))]
    Json {
        path: String,
        line: usize,
        column: usize,
        message: String,
        #[source_code]
        source_code: Excerpt,
        #[label("{message}")]
        span: SourceSpan,
    },

    #[error("{path}:{line}:{column}: {message}")]
    #[diagnostic(code(kvlint::invalid_body))]
    Body {
        path: String,
        line: usize,
        column: usize,
        message: String,
        #[help]
        expected: Option<String>,
        #[source_code]
        source_code: Excerpt,
        #[label("here")]
        span: SourceSpan,
    },

    /// Built by `SessionFile::turn_error` (kvlint-core), which places it.
    #[error("{}: turn {turn} cannot be rendered", file_place(path, *line, *column))]
    #[diagnostic(code(kvlint::render))]
    Turn {
        path: String,
        line: usize,
        /// 0 when the error is about the turn as a whole (placed at its line).
        column: usize,
        turn: usize,
        #[diagnostic_source]
        source: Box<dyn Diagnostic + Send + Sync>,
    },

    #[error("{path}: expected one request body, found {turns} turns")]
    #[diagnostic(
        code(kvlint::not_one_request),
        help("one request body was expected here; a file of several turns is a session")
    )]
    NotOneRequest { path: String, turns: usize },

    #[error("{path} has no turn {turn}")]
    #[diagnostic(code(kvlint::no_turn))]
    NoTurn { path: String, turn: usize },

    // `Tokenizer`, `Template`, `TemplateLimit`, `Refused`, `RefusedPart` and `NotModelled`:
    // kvlint-render's `RenderError`, converted into the type the SDK's API has always named
    // (a unit test there keeps the two printing the same).
    #[error("cannot load tokenizer {path}: {message}")]
    #[diagnostic(
        code(kvlint::tokenizer),
        help("expected a Hugging Face `tokenizer.json`")
    )]
    Tokenizer { path: String, message: String },

    #[error("chat template {path}: {message}")]
    #[diagnostic(code(kvlint::template))]
    Template {
        path: String,
        message: String,
        #[help]
        help: Option<String>,
    },

    /// A template past a bound on its render (work, output, nesting): hostile, or a loop gone
    /// wrong, whatever conversation it is given.
    #[error("chat template {path}: {message}")]
    #[diagnostic(code(kvlint::template_limit))]
    TemplateLimit {
        path: String,
        message: String,
        #[help]
        help: Option<String>,
    },

    /// An application prompt template that is not well formed.
    #[error("{path}:{line}:{column}: {message}")]
    #[diagnostic(code(kvlint::template_syntax))]
    TemplateSyntax {
        path: String,
        line: usize,
        column: usize,
        message: String,
        #[help]
        help: Option<String>,
        #[source_code]
        source_code: Excerpt,
        #[label("here")]
        span: SourceSpan,
    },

    /// The engine answers the request with an error instead of prefilling it.
    #[error("{engine} refuses the request: {reason}")]
    #[diagnostic(
        code(kvlint::refused),
        help("the engine answers this body with HTTP 400 before rendering it; fix the request")
    )]
    Refused {
        engine: &'static str,
        reason: String,
    },

    /// The request refused for one of its parts (`part`, a path in the body).
    #[error("{engine} refuses the request: {reason} (at `{part}`)")]
    #[diagnostic(
        code(kvlint::refused),
        help("the engine answers this body with HTTP 400 before rendering it; fix the request")
    )]
    RefusedPart {
        engine: &'static str,
        reason: String,
        part: PartPath,
    },

    /// A request the engine accepts, through a path kvlint does not reproduce.
    #[error("kvlint does not model how {engine} renders {what}")]
    #[diagnostic(code(kvlint::not_modelled))]
    NotModelled { engine: &'static str, what: String },
}

/// A file's text: an unreadable file or one that is not UTF-8 is an error naming the place.
pub fn read_text(path: &std::path::Path) -> Result<String, InputError> {
    let display = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| InputError::Io {
        path: display.clone(),
        source,
    })?;
    utf8_text(display, bytes)
}

/// The bytes of file `display` as text, or where they stop being UTF-8.
pub fn utf8_text(display: String, bytes: Vec<u8>) -> Result<String, InputError> {
    String::from_utf8(bytes).map_err(|error| {
        let valid = error.utf8_error().valid_up_to();
        let bytes = error.as_bytes();
        let before = String::from_utf8_lossy(&bytes[..valid]);
        let position = crate::locate::LineColumn::of_offset(&before, valid);
        InputError::Encoding {
            path: display,
            line: position.line,
            column: position.column,
            byte: bytes.get(valid).copied().unwrap_or_default(),
        }
    })
}

impl InputError {
    /// The file this error is about.
    pub fn path(&self) -> &str {
        match self {
            Self::Io { path, .. }
            | Self::Encoding { path, .. }
            | Self::Empty { path }
            | Self::Recording { path, .. }
            | Self::BadRecording { path, .. }
            | Self::Json { path, .. }
            | Self::Body { path, .. }
            | Self::Turn { path, .. }
            | Self::NotOneRequest { path, .. }
            | Self::NoTurn { path, .. }
            | Self::Tokenizer { path, .. }
            | Self::Template { path, .. }
            | Self::TemplateLimit { path, .. }
            | Self::TemplateSyntax { path, .. } => path,
            // About a request, not a file: the `Turn` error around them names the file.
            Self::Refused { .. } | Self::RefusedPart { .. } | Self::NotModelled { .. } => "",
        }
    }
}

/// `path:line:column`, `path:line` for an error about a whole line (column 0), or `path`
/// alone for an error about the whole file (line 0).
fn file_place(path: &str, line: usize, column: usize) -> String {
    match (line, column) {
        (0, _) => path.to_owned(),
        (line, 0) => format!("{path}:{line}"),
        (line, column) => format!("{path}:{line}:{column}"),
    }
}

#[cfg(test)]
mod tests {
    use miette::Diagnostic;

    use super::*;

    #[test]
    fn an_input_error_names_the_concept_not_a_command() {
        for error in [
            InputError::Recording {
                path: "session.yaml".to_owned(),
                container: "VCR cassette",
            },
            InputError::NotOneRequest {
                path: "session.jsonl".to_owned(),
                turns: 3,
            },
        ] {
            let help = error
                .help()
                .map(|help| help.to_string())
                .unwrap_or_default();
            assert!(!help.is_empty() && !help.contains("kvlint "), "{help}");
        }
    }
}

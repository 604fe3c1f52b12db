//! Typed errors for bad input: each names the file, the place and what was expected.

use miette::{Diagnostic, SourceSpan};
use thiserror::Error;

use crate::excerpt::Excerpt;

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

    #[error("{path} is empty")]
    #[diagnostic(
        code(kvlint::empty_input),
        help("expected agent request bodies: one JSON object per line (JSONL) or a JSON array")
    )]
    Empty { path: String },

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

    #[error("{path}:{line}: turn {turn} cannot be rendered")]
    #[diagnostic(code(kvlint::render))]
    Turn {
        path: String,
        line: usize,
        turn: usize,
        #[diagnostic_source]
        source: Box<dyn Diagnostic + Send + Sync>,
    },

    #[error("{path}: expected one request body, found {turns} turns")]
    #[diagnostic(
        code(kvlint::not_one_request),
        help("`kvlint diff` compares two single requests; use `kvlint check` for a session")
    )]
    NotOneRequest { path: String, turns: usize },

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

    /// A request the engine accepts, through a path kvlint does not reproduce.
    #[error("kvlint does not model how {engine} renders {what}")]
    #[diagnostic(code(kvlint::not_modelled))]
    NotModelled { engine: &'static str, what: String },
}

impl InputError {
    /// The file this error is about.
    pub fn path(&self) -> &str {
        match self {
            Self::Io { path, .. }
            | Self::Empty { path }
            | Self::Json { path, .. }
            | Self::Body { path, .. }
            | Self::Turn { path, .. }
            | Self::NotOneRequest { path, .. }
            | Self::Tokenizer { path, .. }
            | Self::Template { path, .. } => path,
            // About a request, not a file: the `Turn` error around them names the file.
            Self::Refused { .. } | Self::NotModelled { .. } => "",
        }
    }
}

//! Sessions where they are recorded: HTTP cassettes of test suites and browser or proxy
//! captures, read for the request bodies they hold and grouped into sessions.
//!
//! Containers, recognized by their content (`Recording::read`):
//! - **VCR cassettes** in YAML: vcrpy and pytest-recording (`interactions[].request.body`, a
//!   string, a `!!binary` base64 body, gzip-compressed or not, or pydantic-ai's
//!   `parsed_body` mapping), go-vcr (`interactions[].request.body`, `url`), Ruby's VCR and R's
//!   vcr (`http_interactions[].request.body.string`, Ruby's `!binary` tag); vcrpy cassettes
//!   as base64 of zlib of msgpack, the whole file (LangGraph's documentation);
//! - **HAR 1.2** (browser devtools, mitmproxy, Charles, Polly.js): `log.entries[].request`,
//!   the body in `postData.text`;
//! - **Inspect AI eval logs** in JSON: each `model` event's `call.request`, its
//!   `attachment://` strings resolved;
//! - **OpenTelemetry traces** in OTLP JSON: each model call's prompt, rebuilt from its
//!   span's attributes (OpenInference, GenAI semantic conventions) as a chat body, marked
//!   reconstructed.
//!
//! One recording often holds several conversations and calls that are not prompts
//! (embeddings, token counts, tracing, other services). `Recording::sessions` keeps the
//! requests in a known request format, and groups them into sessions (`group`).
//!
//! Input files are read here ([`read_all`], [`parse_all`], [`read_session`]): a session file
//! as `kvlint-core` parses it, or each session a recording holds, placed at its bodies in the
//! recording; a gzip-compressed file inflated, an Inspect `.eval` zip as the log it holds.
//!
//! This crate holds what reading recordings needs that the analysis does not (compression,
//! zip, msgpack, base64): `kvlint-core` never calls into it, and the SDK never compiles it.

mod group;
mod har;
mod input;
mod inspect;
pub mod log;
mod otel;
mod place;
mod vcr;
pub mod yaml;

use std::io::Read;

use serde_json::Value;

use kvlint_core::response::parse_response;

pub use group::{FoundSessions, Session};
pub use input::{input_text, parse_all, parse_session, read_all, read_input, read_session};
pub use yaml::Place;

/// The kind of file a recording came in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Container {
    /// vcrpy / pytest-recording (`interactions`, `uri`).
    VcrPy,
    /// A vcrpy cassette as msgpack, zlib-compressed and base64-encoded (LangGraph's docs).
    VcrMsgpack,
    /// go-vcr (`interactions`, `url`).
    GoVcr,
    /// Ruby's VCR or R's vcr (`http_interactions`).
    RubyVcr,
    /// HTTP Archive 1.2.
    Har,
    /// An Inspect AI eval log in JSON.
    Inspect,
    /// OpenTelemetry spans in OTLP JSON.
    Otlp,
}

impl Container {
    /// The name in reports: `vcr-yaml`, `vcr-msgpack`, `go-vcr`, `ruby-vcr`, `har`, `inspect`,
    /// `otlp`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::VcrPy => "vcr-yaml",
            Self::VcrMsgpack => "vcr-msgpack",
            Self::GoVcr => "go-vcr",
            Self::RubyVcr => "ruby-vcr",
            Self::Har => "har",
            Self::Inspect => "inspect",
            Self::Otlp => "otlp",
        }
    }
}

/// One recorded HTTP request.
#[derive(Clone, Debug, PartialEq)]
pub struct Interaction {
    /// Its place among the recording's interactions (0-based).
    pub index: usize,
    pub method: String,
    pub url: String,
    pub body: Body,
    /// Where the request's body is in the recording file (the request's, without a body).
    pub at: Place,
    /// The response recorded with it, as JSON (a stream reassembled): what was generated,
    /// and the usage the provider or engine reported.
    pub response: Option<Value>,
    /// The conversation a trace says the request belongs to (`gen_ai.conversation.id`).
    pub conversation: Option<String>,
    /// The request's headers that keys are read from ([`kvlint_protocol::key`]'s tables:
    /// the routing headers), name and value as recorded.
    pub key_headers: Vec<(String, String)>,
    /// When the request was sent, in seconds since the Unix epoch, when the recording says.
    pub time: Option<f64>,
}

/// The headers of `headers` (name and value) that keys are read from.
fn key_headers<'a>(headers: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<(String, String)> {
    headers
        .into_iter()
        .filter(|(name, _)| kvlint_protocol::key::is_key_header(name))
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect()
}

/// A request's body as recorded.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    /// The bytes sent, as text: byte-exact serialization (key order, spacing) is known.
    Sent(String),
    /// A structure the recorder wrote out again (pydantic-ai's `parsed_body`): key order is
    /// kept, spacing and escapes are not the ones sent.
    Rewritten(Value),
    /// A body rebuilt from what the recorder kept of it (a trace's span attributes): the
    /// prompt's texts are the ones sent, its JSON serialization (key order, spacing) is not
    /// known.
    Reconstructed(Value),
    /// No body, or one that is not text (an upload, a compressed body that does not inflate).
    None(String),
}

/// A recording and the interactions it holds.
#[derive(Clone, Debug)]
pub struct Recording {
    pub container: Container,
    pub interactions: Vec<Interaction>,
}

/// Why a file that looks like a recording cannot be read as one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordingError {
    pub at: Place,
    pub message: String,
}

/// At most this many bytes come out of a compressed body or file.
const MAX_INFLATED: u64 = 256 << 20;

impl Recording {
    /// The recording `bytes` hold, `Ok(None)` when they are not one (a session file, most
    /// likely), or why a file that is one cannot be read. A gzip-compressed file is inflated.
    pub fn read(bytes: &[u8]) -> Result<Option<Self>, RecordingError> {
        let unpacked = unpack(bytes)?;
        let bytes = unpacked.as_deref().map_or(bytes, str::as_bytes);
        let Ok(text) = std::str::from_utf8(bytes) else {
            return Ok(None);
        };
        let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
        let start = text.trim_start();
        if start.starts_with('{') {
            // One JSON document (a trace, a HAR file, an Inspect log), or JSON lines (a
            // Collector's trace file).
            return Ok(match serde_json::from_str::<Value>(text) {
                Ok(root) => otel::read_document(&root, text)
                    .or_else(|| har::read(&root, text))
                    .or_else(|| inspect::read(&root, text)),
                Err(_) => otel::read_lines(text),
            });
        }
        if !vcr::looks_like_cassette(text) {
            return Ok(vcr::read_msgpack(text));
        }
        let root = yaml::parse(text).map_err(|error| RecordingError {
            at: error.at,
            message: format!("invalid YAML: {}", error.message),
        })?;
        Ok(root.and_then(|root| vcr::read(&root)))
    }

    /// The prompts the recording holds, grouped into sessions, and what was passed over.
    pub fn sessions(&self) -> FoundSessions {
        group::sessions(&self.interactions)
    }
}

/// The text a packed file stands for: a gzip-compressed file (a compressed cassette)
/// inflated, an Inspect `.eval` log (a zip) as the JSON log it holds. `Ok(None)` when the
/// bytes are neither.
pub fn unpack(bytes: &[u8]) -> Result<Option<String>, RecordingError> {
    let error = |message: String| RecordingError {
        at: Place::default(),
        message,
    };
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let inflated = inflate(bytes).map_err(error)?;
        return String::from_utf8(inflated)
            .map(Some)
            .map_err(|_| error("the inflated file is not UTF-8 text".into()));
    }
    if bytes.starts_with(b"PK\x03\x04") {
        return inspect::eval_log_text(bytes).map(Some).map_err(error);
    }
    Ok(None)
}

/// A gzip or zlib stream inflated, bounded.
fn inflate(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let result = if bytes.starts_with(&[0x1f, 0x8b]) {
        flate2::read::MultiGzDecoder::new(bytes)
            .take(MAX_INFLATED)
            .read_to_end(&mut out)
    } else {
        flate2::read::ZlibDecoder::new(bytes)
            .take(MAX_INFLATED)
            .read_to_end(&mut out)
    };
    result.map_err(|error| format!("a compressed body does not inflate: {error}"))?;
    Ok(out)
}

/// A recorded response body as JSON: inflated when compressed, a stream reassembled.
fn response_of(body: Body) -> Option<Value> {
    match body {
        Body::Sent(text) => parse_response(&text),
        Body::Rewritten(value) | Body::Reconstructed(value) => Some(value),
        Body::None(_) => None,
    }
}

/// A body's bytes as the text sent: inflated when compressed.
fn body_text(bytes: Vec<u8>) -> Body {
    let bytes = if bytes.starts_with(&[0x1f, 0x8b]) || bytes.starts_with(&[0x78]) {
        match inflate(&bytes) {
            Ok(inflated) => inflated,
            // A body that merely starts with `x` (0x78) is not zlib: keep it as it is.
            Err(_) if !bytes.starts_with(&[0x1f, 0x8b]) => bytes,
            Err(message) => return Body::None(message),
        }
    } else {
        bytes
    };
    match String::from_utf8(bytes) {
        Ok(text) => Body::Sent(text),
        Err(_) => Body::None("a body that is not UTF-8 text".into()),
    }
}

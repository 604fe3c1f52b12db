//! What `kvlint import` prints: the session files written from each recording.

use serde::Serialize;

use super::ErrorReport;

/// What `kvlint import` prints, JSON contract v1.
#[derive(Debug, Serialize)]
pub struct ImportReport {
    pub version: u32,
    pub recordings: Vec<ImportedRecording>,
    pub errors: Vec<ErrorReport>,
}

#[derive(Debug, Serialize)]
pub struct ImportedRecording {
    pub path: String,
    /// `vcr-yaml`, `vcr-msgpack`, `go-vcr`, `ruby-vcr`, `har` or `inspect`.
    pub container: &'static str,
    pub interactions: usize,
    pub sessions: Vec<ImportedSession>,
    /// Interactions that are not prompts, and why.
    pub skipped: Vec<SkippedInteraction>,
    /// With `--explain`: every interaction, in order, with the session and turn it went to
    /// and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub placements: Vec<Placement>,
}

/// Where one interaction went, and why.
#[derive(Debug, Serialize)]
pub struct Placement {
    pub interaction: usize,
    /// The session's number (from 1), `None` when passed over.
    pub session: Option<usize>,
    /// Its turn in the session (from 0).
    pub turn: Option<usize>,
    /// What the request was (`main-turn`, `tool-round-trip`, `retry`, `side-call`,
    /// `sub-agent`, `compaction`), `None` when passed over.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<kvlint_protocol::grouping::RequestKind>,
    pub why: String,
}

#[derive(Debug, Serialize)]
pub struct ImportedSession {
    /// The session file written.
    pub file: String,
    pub turns: usize,
    /// The recording's interactions (0-based) the turns came from, in order.
    pub interactions: Vec<usize>,
    /// Where each turn's body is in the recording.
    pub lines: Vec<usize>,
    /// Bodies the recorder wrote out again (pydantic-ai's `parsed_body`): their key order is
    /// the one sent, their spacing and escapes are not.
    pub rewritten: usize,
    /// Whether bodies were rebuilt from what the recorder kept (a trace's span attributes):
    /// their serialization is kvlint's.
    pub reconstructed: bool,
    /// How it was told apart from the recording's other sessions (as in `kvlint check`'s
    /// report).
    pub grouped_by: kvlint_protocol::grouping::GroupedBy,
    /// The number of the session that spawned it (a sub-agent's parent), when the recording
    /// holds it.
    pub parent: Option<usize>,
}

#[derive(Debug, Serialize)]
pub struct SkippedInteraction {
    pub interaction: usize,
    pub reason: String,
}

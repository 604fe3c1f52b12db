//! Diagnostics: plain data that rules produce and emitters read.

use serde::Serialize;

use crate::path::PartPath;

/// How much a finding costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// A per-turn volatile tail the next turn drops: the recommended placement, with its cost.
    Info,
    Warning,
    /// Content the cache held is sent again and must be recomputed.
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Info => "info",
            Self::Warning => "warning",
            Self::Error => "error",
        }
    }
}

/// A place in an input file: 1-based lines, columns in characters; the end is exclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Span {
    pub line: usize,
    pub column: usize,
    pub end_line: usize,
    pub end_column: usize,
    /// Byte offsets in the file, for emitters that underline source.
    #[serde(skip)]
    pub offset: usize,
    #[serde(skip)]
    pub len: usize,
}

/// One finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    pub rule: &'static str,
    pub code: &'static str,
    pub severity: Severity,
    /// 0-based index of the later turn of the pair: turn 0 is a session's first request.
    /// Every output (human, JSON, SARIF, JUnit, the language server, the proxy, the guards)
    /// counts turns this way; [`Diagnostic::previous_turn`] is the earlier turn of the pair.
    pub turn: usize,
    pub part: PartPath,
    pub message: String,
    /// Tokens the previous turn had cached past the divergence point.
    pub tokens_lost: usize,
    pub span: Option<Span>,
    pub help: String,
    /// The diverging tokens of both turns, decoded.
    pub previous_window: String,
    pub current_window: String,
}

impl Diagnostic {
    /// The earlier turn of the pair, whose cached prefix [`Diagnostic::turn`] breaks.
    pub fn previous_turn(&self) -> usize {
        self.turn.saturating_sub(1)
    }
}

/// How many findings there are of each severity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SeverityCounts {
    pub errors: usize,
    pub warnings: usize,
    pub infos: usize,
}

impl SeverityCounts {
    pub fn of<'a>(findings: impl IntoIterator<Item = &'a Diagnostic>) -> Self {
        let mut counts = Self::default();
        for finding in findings {
            match finding.severity {
                Severity::Error => counts.errors += 1,
                Severity::Warning => counts.warnings += 1,
                Severity::Info => counts.infos += 1,
            }
        }
        counts
    }
}

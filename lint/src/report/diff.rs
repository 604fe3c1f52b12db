//! What `kvlint diff` prints: two single requests compared token by token, JSON contract v1.

use std::sync::Arc;

use kvlint_request::diagnostic::Diagnostic;
use serde::Serialize;

/// The comparison of two requests.
#[derive(Debug, Serialize)]
pub struct RequestDiff {
    pub version: u32,
    pub previous: RequestSide,
    pub current: RequestSide,
    pub renderer: String,
    pub reused_tokens: usize,
    pub first_divergence: Option<kvlint_core::diff::Divergence>,
    /// The cache break: the finding that names why the later request does not extend the
    /// earlier.
    pub finding: Option<Diagnostic>,
    /// The thinking blocks the later request sends back, when they fail the API's prefix
    /// check (`thinking-prefix-check`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<Diagnostic>,
    /// A unified diff of the two rendered prompts.
    pub rendered_diff: String,
    /// The later request's file, which the finding points into.
    #[serde(skip)]
    pub current_source: Arc<str>,
}

#[derive(Debug, Serialize)]
pub struct RequestSide {
    pub path: String,
    pub format: String,
    pub prompt_tokens: usize,
}

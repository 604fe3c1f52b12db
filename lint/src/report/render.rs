//! What `kvlint render` prints: the prompt the engine prefills for each turn, or its reason
//! to refuse it.

use serde::{Serialize, Serializer};

use super::ErrorReport;

/// What `kvlint render` prints, JSON contract v1.
#[derive(Debug, Serialize)]
pub struct RenderReport {
    pub version: u32,
    pub sessions: Vec<RenderedSession>,
    /// Files that could not be read.
    pub errors: Vec<ErrorReport>,
}

#[derive(Debug, Serialize)]
pub struct RenderedSession {
    pub path: String,
    pub renderer: String,
    pub turns: Vec<RenderedTurn>,
}

/// One turn: the prompt the engine prefills, or why it would not.
#[derive(Debug, Serialize)]
pub struct RenderedTurn {
    pub index: usize,
    /// The API the request body was written for (`openai-chat`, `anthropic-messages`, …).
    pub format: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_ids: Option<Vec<u32>>,
    /// The engine refuses the request, or kvlint cannot render it: the reason.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "error_message"
    )]
    pub error: Option<ErrorReport>,
}

fn error_message<S: Serializer>(
    error: &Option<ErrorReport>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match error {
        Some(error) => serializer.serialize_str(&error.message),
        None => serializer.serialize_none(),
    }
}

//! What a probe found, as plain data the emitters read: per session and turn, the tokens
//! predicted and observed from cache, and why they differ when they do.

use serde::Serialize;

use super::ErrorReport;
use kvlint_protocol::EngineName;

/// How a turn of a probe ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The engine served what kvlint predicted.
    Match,
    /// The engine answered, and served another number of tokens from cache.
    Mismatch,
    /// No comparison: the request failed, or the answer or the prediction is missing.
    Error,
}

/// One turn of a probe.
#[derive(Debug, Serialize)]
pub struct ProbeTurn {
    pub index: usize,
    /// Prompt tokens as the engine tokenizes the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_cached_tokens: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_cached_tokens: Option<usize>,
    #[serde(rename = "match")]
    pub matches: bool,
    pub outcome: Outcome,
    /// Whether kvlint's own rendering (engine mode) gives the engine's tokens, when a chat
    /// template and tokenizer were given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub own_rendering_matches: Option<bool>,
    /// With `--gateway`: the replica (index into `--replica`) that served the turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica: Option<usize>,
    /// With `--gateway`: tokens a replica that held the session's prefix would have served
    /// but the serving replica recomputed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_locality_tokens: Option<usize>,
    /// What went wrong or why prediction and observation differ.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct ProbeSession {
    pub path: String,
    pub engine_url: String,
    pub engine_kind: EngineName,
    /// With `--gateway`: the routing key sent in the `x-kvlint-routing-key` header.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routing_key: Option<String>,
    pub turns: Vec<ProbeTurn>,
}

#[derive(Debug, Serialize)]
pub struct ProbeReport {
    pub version: u32,
    pub sessions: Vec<ProbeSession>,
    pub errors: Vec<ErrorReport>,
}

impl ProbeReport {
    /// Every turn answered and observed.
    pub fn complete(&self) -> bool {
        self.errors.is_empty()
            && self
                .sessions
                .iter()
                .flat_map(|session| &session.turns)
                .all(|turn| {
                    turn.observed_cached_tokens.is_some() && turn.predicted_cached_tokens.is_some()
                })
    }

    pub fn all_match(&self) -> bool {
        self.sessions
            .iter()
            .flat_map(|session| &session.turns)
            .all(|turn| turn.matches)
    }
}

impl ProbeTurn {
    /// A turn's result; a turn without a note whose numbers differ gets the explanation, and
    /// an engine that reports more cached tokens than the prompt has is called impossible.
    pub(crate) fn new(
        index: usize,
        prompt_tokens: Option<usize>,
        predicted: Option<usize>,
        observed: Option<usize>,
        note: Option<String>,
    ) -> Self {
        let matches = predicted.is_some() && predicted == observed;
        let outcome = match (predicted, observed) {
            (Some(_), Some(_)) if matches => Outcome::Match,
            (Some(_), Some(_)) => Outcome::Mismatch,
            _ => Outcome::Error,
        };
        let impossible = observed
            .zip(prompt_tokens)
            .filter(|(observed, prompt)| observed > prompt)
            .map(|(observed, prompt)| {
                format!(
                    "impossible report: the engine says it served {observed} cached tokens of a {prompt}-token prompt"
                )
            });
        Self {
            index,
            prompt_tokens,
            predicted_cached_tokens: predicted,
            observed_cached_tokens: observed,
            matches,
            outcome,
            own_rendering_matches: None,
            replica: None,
            lost_locality_tokens: None,
            note: impossible
                .or(note)
                .or_else(|| (!matches).then(|| explain_mismatch(predicted, observed, None))),
        }
    }
}

/// Why a turn's prediction and observation differ, in the likeliest cause first.
pub(crate) fn explain_mismatch(
    predicted: Option<usize>,
    observed: Option<usize>,
    own_rendering_matches: Option<bool>,
) -> String {
    match (predicted, observed, own_rendering_matches) {
        (_, _, Some(false)) => "kvlint's rendering differs from the engine's tokens: the template or tokenizer is not the engine's".into(),
        (Some(predicted), Some(observed), _) if observed < predicted => format!(
            "the engine served {observed} of the {predicted} tokens it held: the cache was evicted, another slot was used, or the request went to a replica that never saw the prefix"
        ),
        (Some(predicted), Some(observed), _) => format!(
            "the engine served {observed}, more than the {predicted} predicted: it kept a prefix from another request (another session in the same slot or cache)"
        ),
        _ => "no prediction or no observation for this turn".into(),
    }
}

//! Replaying a session against a hosted API (OpenAI, Anthropic, xAI), which offers no tokenizer:
//! the prediction is kvlint's cache model for that API on its own rendering, the one
//! `kvlint check` makes (approximate, as the report says).

use kvlint_core::session::SessionFile;
use kvlint_render::render::Renderer;
use kvlint_request::error::InputError;
use serde_json::json;

use super::observe::observed_cached;
use super::replay::chat_body;
use crate::engine_client::Client;
use crate::report::probe::{ProbeSession, ProbeTurn};
use kvlint_protocol::EngineName;

/// The Messages API version the request shapes kvlint reads are documented for.
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Replays one session against a hosted API of `kind` (`OpenAi`, `Anthropic`, `Xai`; xAI's
/// chat completions with the session routed to one server by `x-grok-conv-id`, as its prompt
/// caching guide advises).
pub fn probe_hosted(
    client: &Client,
    kind: EngineName,
    session: &SessionFile,
    model: Option<&str>,
) -> Result<ProbeSession, InputError> {
    let cache_model = client.cache_model(kind, model);
    let renderer = Renderer::provider();
    let predictions = kvlint_rules::check_session(session, &renderer, Some(&cache_model))
        .ok()
        .and_then(|checked| checked.predictions)
        .unwrap_or_default();
    let mut turns = Vec::new();
    for (index, turn) in session.turns().enumerate() {
        let turn = turn?;
        let mut note = None;
        let (path, body, headers) = if kind == EngineName::Anthropic {
            let mut body = turn.request.body.clone();
            body["max_tokens"] = json!(1);
            body["stream"] = json!(false);
            if let Some(model) = model {
                body["model"] = json!(model);
            }
            let headers = vec![("anthropic-version", ANTHROPIC_VERSION.to_owned())];
            ("/v1/messages", body, headers)
        } else {
            let mut body = chat_body(&turn, model);
            if let Some(key) = turn.request.body.get("prompt_cache_key") {
                body["prompt_cache_key"] = key.clone();
            }
            let headers = match kind {
                EngineName::Xai => vec![(
                    kvlint_protocol::key::XAI_CONVERSATION_HEADER,
                    format!("kvlint-probe-{}", session.path),
                )],
                _ => Vec::new(),
            };
            ("/v1/chat/completions", body, headers)
        };
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(name, value)| (*name, value.as_str()))
            .collect();
        let observed = client
            .post_with(path, &body, &headers)
            .map_err(|failure| failure.0)
            .and_then(|response| observed_cached(kind, &response))
            .map_err(|problem| note = Some(problem))
            .ok();
        let prediction = predictions.get(index);
        let predicted = prediction.map(|prediction| prediction.recorded.cached);
        let prompt_tokens = prediction.map(|prediction| prediction.prompt_tokens);
        turns.push(ProbeTurn::new(
            index,
            prompt_tokens,
            predicted,
            observed,
            note,
        ));
    }
    Ok(ProbeSession {
        path: session.path.clone(),
        engine_url: client.shown_url(),
        engine_kind: kind,
        routing_key: None,
        turns,
    })
}

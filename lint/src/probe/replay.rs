//! Replaying a session against a self-hosted engine (llama.cpp, vLLM, SGLang): each turn is
//! tokenized by the engine itself, predicted from what this run already sent, then sent.

use kvlint_core::session::{SessionFile, Turn};
use kvlint_render::render::Renderer;
use kvlint_request::error::InputError;
use serde_json::{Value, json};

use super::observe::observe;
use super::predict::predicted_cached;
use crate::engine_client::{Client, chat_request, engine_tokens};
use crate::report::probe::{ProbeSession, ProbeTurn, explain_mismatch};
use kvlint_protocol::EngineName;

/// Replays one session. `seen` holds the token sequences the engine already processed in
/// this run, oldest first: its cache (llama.cpp's slot, vLLM's and SGLang's prefix cache)
/// spans sessions.
pub fn probe_session(
    client: &Client,
    kind: EngineName,
    session: &SessionFile,
    model: Option<&str>,
    own_renderer: Option<&Renderer>,
    seen: &mut Vec<Vec<u32>>,
    from_metrics: bool,
) -> Result<ProbeSession, InputError> {
    // llama.cpp: more than one slot makes "the previous request" ambiguous.
    let slots = (kind == EngineName::LlamaCpp)
        .then(|| client.slot_count())
        .flatten();
    let cache_model = client.cache_model(kind, model);
    let mut turns = Vec::new();
    for (index, turn) in session.turns().enumerate() {
        let turn = turn?;
        let body = chat_body(&turn, model);
        let mut note = None;
        let tokens = engine_tokens(client, kind, &body)
            .map_err(|failure| note = Some(failure.0))
            .ok();
        let own_rendering_matches = own_renderer.zip(tokens.as_ref()).map(|(renderer, tokens)| {
            renderer
                .render(&turn.request)
                .map(|rendered| rendered.tokens.ids() == *tokens)
                .unwrap_or(false)
        });
        let predicted = tokens
            .as_ref()
            .map(|tokens| predicted_cached(&cache_model, tokens, seen.iter().map(Vec::as_slice)));
        let before = from_metrics.then(|| client.cached_total()).flatten();
        let mut observed = observe(client, kind, &body, &[], &mut note);
        if from_metrics {
            // The server's own counter, read around the request.
            let after = client.cached_total();
            match before.zip(after) {
                Some((before, after)) => {
                    let counted = (after - before).max(0.0) as usize;
                    if observed.is_some_and(|observed| observed != counted) {
                        note = Some(format!("the response says {observed:?} cached, /metrics counted {counted}"));
                    }
                    observed = Some(counted);
                }
                None => note = Some("/metrics has no llamacpp:prompt_tokens_cached_total: start llama-server with --metrics".into()),
            }
        }
        if note.is_none() && predicted != observed && slots.is_some_and(|slots| slots > 1) {
            note = Some(format!(
                "the server has {} slots (/slots): the turn may have gone to a slot holding another prefix; run it with -np 1 or pin id_slot",
                slots.unwrap_or_default()
            ));
        }
        if own_rendering_matches == Some(false) && note.is_none() {
            note = Some(explain_mismatch(predicted, observed, own_rendering_matches));
        }
        turns.push(ProbeTurn {
            own_rendering_matches,
            ..ProbeTurn::new(
                index,
                tokens.as_ref().map(Vec::len),
                predicted,
                observed,
                note,
            )
        });
        if let Some(tokens) = tokens {
            seen.push(tokens);
        }
    }
    Ok(ProbeSession {
        path: session.path.clone(),
        engine_url: client.shown_url(),
        engine_kind: kind,
        routing_key: None,
        turns,
    })
}

/// A turn's request as a chat completion with one generated token: an OpenAI chat body as
/// recorded, other APIs converted (tool-call arguments as JSON strings, as the API takes them).
pub(super) fn chat_body(turn: &Turn, model: Option<&str>) -> Value {
    let mut body = chat_request(&turn.request, model);
    body["max_tokens"] = json!(1);
    body["temperature"] = json!(0);
    body["stream"] = json!(false);
    body
}

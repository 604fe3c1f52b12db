//! Replaying a session against a self-hosted engine (llama.cpp, vLLM, SGLang): each turn is
//! tokenized by the engine itself, predicted from what this run already sent, then sent.

use kvlint_core::error::InputError;
use kvlint_core::render::{Renderer, openai_chat_body};
use kvlint_core::request::{BodyFormat, Request};
use kvlint_core::session::{SessionFile, Turn};
use serde_json::{Value, json};

use super::client::{Client, Failure};
use super::observe::observe;
use super::predict::predicted_cached;
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

/// A request's messages, tools and model in the chat shape (as a self-hosted engine's
/// Anthropic and Responses endpoints turn a body before its template runs).
pub(crate) fn chat_request(request: &Request, model: Option<&str>) -> Value {
    let (messages, tools): (Vec<Value>, Option<Vec<Value>>) = match request.format {
        BodyFormat::OpenAiChat => (
            (0..request.messages.len())
                .filter_map(|index| request.message_value(index).cloned())
                .collect(),
            request.body.get("tools").and_then(Value::as_array).cloned(),
        ),
        _ => openai_chat_body(request),
    };
    let mut body = json!({"messages": messages});
    if let Some(tools) = &tools {
        body["tools"] = json!(tools);
    }
    if let Some(model) = model.or(request.model.as_deref()) {
        body["model"] = json!(model);
    }
    body
}

/// The engine's tokens of a text it generated (no special tokens added), as the next prompt
/// holds them.
pub(crate) fn engine_text_tokens(
    client: &Client,
    kind: EngineName,
    text: &str,
) -> Result<Vec<u32>, Failure> {
    let request = match kind {
        EngineName::LlamaCpp => json!({"content": text, "add_special": false}),
        _ => json!({"prompt": text, "add_special_tokens": false}),
    };
    token_ids(&client.post("/tokenize", &request)?)
}

/// The prompt tokens the engine computes for a chat request.
pub(crate) fn engine_tokens(
    client: &Client,
    kind: EngineName,
    body: &Value,
) -> Result<Vec<u32>, Failure> {
    let response = match kind {
        EngineName::LlamaCpp => {
            let prompt = client.post("/apply-template", body)?;
            let prompt = prompt
                .get("prompt")
                .and_then(Value::as_str)
                .ok_or_else(|| Failure("/apply-template: no `prompt` in the response".into()))?;
            client.post(
                "/tokenize",
                &json!({"content": prompt, "add_special": true, "parse_special": true}),
            )?
        }
        _ => {
            let mut request = json!({"messages": body["messages"], "add_generation_prompt": true});
            if let Some(tools) = body.get("tools") {
                request["tools"] = tools.clone();
            }
            if let Some(model) = body.get("model") {
                request["model"] = model.clone();
            }
            client.post("/tokenize", &request)?
        }
    };
    token_ids(&response)
}

/// The `tokens` of a `/tokenize` response (ids, or `{id, piece}` objects).
fn token_ids(response: &Value) -> Result<Vec<u32>, Failure> {
    response
        .get("tokens")
        .and_then(Value::as_array)
        .map(|tokens| {
            tokens
                .iter()
                .filter_map(|token| token.as_u64().or_else(|| token.get("id")?.as_u64()))
                .map(|id| id as u32)
                .collect()
        })
        .ok_or_else(|| Failure("/tokenize: no `tokens` in the response".into()))
}

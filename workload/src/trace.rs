//! Sessions as an engine's prefix cache sees them: the [`kvlint_fleet::Trace`] of a workload,
//! built once per workload and block size by rendering each turn with kvlint's renderer, which
//! tokenizes only what a turn does not send again.

use kvlint_core::session::{SessionFile, Turn};
use kvlint_fleet::{Blocks, NewRequest, Trace, TraceBuilder};
use kvlint_render::render::Renderer;
use kvlint_render::tokenize::Tokens;
use kvlint_request::error::InputError;
use rayon::prelude::*;
use serde_json::Value;

/// Builds the trace of `sessions` with `renderer`, `block_size` tokens per block, each session
/// known by its key or else its path. Sessions are traced in parallel; a session's turns are
/// rendered in order, each reusing the tokens of the one before.
pub fn build_trace(
    sessions: &[SessionFile],
    renderer: &Renderer,
    block_size: u32,
) -> Result<Trace, InputError> {
    let paths: Vec<&str> = sessions
        .iter()
        .map(|session| session.path.as_str())
        .collect();
    build_named_trace(sessions, &paths, renderer, block_size)
}

/// [`build_trace`], each session known by its key or else by its name in `names` (the file it
/// came from, relative to the folder given: [`session_identity`]).
pub(crate) fn build_named_trace(
    sessions: &[SessionFile],
    names: &[&str],
    renderer: &Renderer,
    block_size: u32,
) -> Result<Trace, InputError> {
    let traced: Vec<Result<Trace, InputError>> = sessions
        .par_iter()
        .zip(names)
        .map(|(session, name)| {
            let identity = session_identity(session, name);
            trace_session(session, identity, renderer, block_size)
        })
        .collect();
    let mut trace = TraceBuilder::new(block_size, renderer.name()).finish();
    for session in traced {
        trace.append(session?);
    }
    Ok(trace)
}

/// The trace of one session, known as `identity`: each turn rendered after the one before,
/// its blocks kept up to the first token that differs from the previous prompt.
pub(crate) fn trace_session(
    session: &SessionFile,
    identity: String,
    renderer: &Renderer,
    block_size: u32,
) -> Result<Trace, InputError> {
    let mut builder = TraceBuilder::new(block_size, renderer.name());
    let block_size = builder.block_size();
    let number = builder.open(identity, 0);
    // The tokens generated for the previous turn.
    let mut previous_generated: Vec<u32> = Vec::new();
    kvlint_rules::visit_turns(
        session,
        0..session.len(),
        renderer,
        Default::default(),
        |checked| {
            let (turn, tokens) = (checked.turn, &checked.rendered.tokens);
            let (shared, shared_sequence) = match checked.previous {
                Some(before) => {
                    let shared = before.tokens.common_prefix_len(tokens);
                    let through_generated =
                        shared == before.tokens.len() && !previous_generated.is_empty();
                    let sequence = if through_generated {
                        shared + tokens.common_prefix_from(shared, &previous_generated)
                    } else {
                        shared
                    };
                    (shared, sequence)
                }
                None => (0, 0),
            };
            let kept = builder.kept_by_tokens(number, shared);
            let prompt = tokens_from(tokens, kept * block_size as usize);
            let generated = generated_ids(turn, renderer);
            builder.push(
                number,
                &NewRequest {
                    time: turn.time,
                    input_tokens: count(tokens.len()),
                    output_tokens: count(output_tokens(turn).unwrap_or(generated.len())),
                    shared_with_previous: count(shared),
                    shared_with_previous_sequence: count(shared_sequence),
                    kept_blocks: kept,
                    blocks: Blocks::Tokens {
                        prompt: &prompt,
                        generated: &generated,
                    },
                    finding: checked.cache_break().map(|finding| finding.rule),
                },
            );
            previous_generated = generated;
            Ok::<_, InputError>(())
        },
    )?;
    Ok(builder.finish())
}

/// Who a session is, for `session-hash` routing: the session key its first request carries
/// ([`kvlint_protocol::key::SESSION_KEY`]: an agent's session id, a user id, a cache key), as
/// a gateway hashing on that key sees it; else `file`, the name of the file it came from
/// (relative to the folder given, so that `prod`, `./prod` and `/abs/prod` name it alike),
/// with the session's number when a recording holds several.
pub fn session_identity(session: &SessionFile, file: &str) -> String {
    let key = session
        .turn(0)
        .ok()
        .and_then(|turn| kvlint_protocol::key::Carried::body(&turn.request.body).session_key());
    if let Some(key) = key {
        return key;
    }
    match &session.origin {
        Some(origin) if origin.sessions > 1 => format!("{file}#{}", origin.session),
        _ => file.to_owned(),
    }
}

fn count(value: usize) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

/// The token ids of `tokens` from `start` on.
fn tokens_from(tokens: &Tokens, start: usize) -> Vec<u32> {
    if start >= tokens.len() {
        return Vec::new();
    }
    tokens.ids_in(start..tokens.len())
}

/// The tokens a recorded response generated, re-tokenized from its text.
fn generated_ids(turn: &Turn, renderer: &Renderer) -> Vec<u32> {
    turn.response
        .as_ref()
        .and_then(kvlint_core::cache::generated_text)
        .map(|text| renderer.tokenizer().encode_piece(&text).ids.clone())
        .unwrap_or_default()
}

/// The output tokens a recorded response reports (`completion_tokens`, `output_tokens`).
fn output_tokens(turn: &Turn) -> Option<usize> {
    let response = turn.response.as_ref()?;
    ["/usage/completion_tokens", "/usage/output_tokens"]
        .iter()
        .find_map(|pointer| response.pointer(pointer).and_then(Value::as_u64))
        .map(|tokens| tokens as usize)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use super::*;

    fn session(path: &str, body: &str) -> SessionFile {
        SessionFile::parse(path.into(), Arc::from(format!("{body}\n"))).unwrap()
    }

    #[test]
    fn a_session_is_known_by_its_key_else_by_its_file() {
        let keyed =
            r#"{"model": "m", "user": "ada", "messages": [{"role": "user", "content": "Hi."}]}"#;
        let plain = r#"{"model": "m", "messages": [{"role": "user", "content": "Hi."}]}"#;
        // The key the request carries, wherever the file is.
        assert_eq!(
            session_identity(&session("/abs/prod/a.jsonl", keyed), "a.jsonl"),
            "ada"
        );
        assert_eq!(
            session_identity(&session("./prod/b.jsonl", keyed), "b.jsonl"),
            "ada"
        );
        // Else the file's name as given.
        let unkeyed = session("./prod/a.jsonl", plain);
        assert_eq!(session_identity(&unkeyed, "a.jsonl"), "a.jsonl");
    }
}

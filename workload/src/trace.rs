//! A workload as an engine's prefix cache sees it: per request, its session, when it was sent,
//! its prompt and output lengths, and its prompt as a chain of block hashes, stored as the
//! blocks it adds to the session's previous request (a turn resends the head of the one
//! before: only the rest is new). Built once per workload and block size, by rendering each
//! turn with kvlint's renderer, which tokenizes only what a turn does not send again.

use std::ops::Range;

use kvlint_core::error::InputError;
use kvlint_core::render::Renderer;
use kvlint_core::session::{SessionFile, Turn};
use kvlint_core::tokenize::Tokens;
use rayon::prelude::*;
use serde_json::Value;

/// One request of the workload.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceRequest {
    /// Its session, an index into [`Trace::sessions`].
    pub session: u32,
    /// When it was sent, in seconds since the Unix epoch, when the recording says.
    pub time: Option<f64>,
    pub input_tokens: u32,
    pub output_tokens: u32,
    /// Leading prompt tokens shared with the session's previous request's prompt.
    pub shared_with_previous: u32,
    /// Leading prompt tokens shared with the session's previous prompt followed by the
    /// tokens generated for it (what an engine that keeps generated tokens holds).
    pub shared_with_previous_sequence: u32,
    /// The previous request's prompt length, had this turn extended it (what the turn would
    /// share with its findings fixed).
    pub previous_input_tokens: u32,
    /// Leading full blocks equal to the session's previous request's blocks.
    pub kept_blocks: u32,
    /// Its blocks after the kept ones, in [`Trace::blocks`].
    pub new_blocks: Range<u32>,
    /// Blocks the tokens generated for it complete after the prompt's (the engine caches
    /// them too), in [`Trace::blocks`].
    pub generated_blocks: Range<u32>,
    /// The rule kvlint's check names for this turn's break, if any (in [`Trace::rules`]).
    pub finding: Option<u16>,
}

/// One session of the workload.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceSession {
    /// Who the session is, whatever path its file was given by: what `session-hash` routing
    /// hashes ([`session_identity`]).
    pub identity: String,
    /// Its requests, in [`Trace::requests`].
    pub requests: Range<u32>,
}

/// A workload's requests as block-hash chains.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// Tokens per block.
    pub block_size: u32,
    /// The renderer the prompts were tokenized with.
    pub renderer: String,
    pub sessions: Vec<TraceSession>,
    /// All requests, session after session.
    pub requests: Vec<TraceRequest>,
    /// Block hashes (the chain's, not the tokens'), referenced by the requests.
    pub blocks: Vec<u64>,
    /// Rule names, referenced by [`TraceRequest::finding`].
    pub rules: Vec<String>,
}

impl Trace {
    /// The prompt's full blocks of `request` (an index into [`Trace::requests`]), as hashes.
    pub fn prompt_blocks(&self, request: usize) -> Vec<u64> {
        let session = &self.sessions[self.requests[request].session as usize];
        let mut blocks = Vec::new();
        for earlier in session.requests.start as usize..=request {
            self.next_prompt_blocks(earlier, &mut blocks);
        }
        blocks
    }

    /// Turns `blocks`, the prompt blocks of the session's request before `request` (empty
    /// for a first request), into the prompt blocks of `request`.
    pub fn next_prompt_blocks(&self, request: usize, blocks: &mut Vec<u64>) {
        let entry = &self.requests[request];
        blocks.truncate(entry.kept_blocks as usize);
        blocks.extend_from_slice(&self.blocks[range(&entry.new_blocks)]);
    }

    /// The blocks the tokens generated for `request` complete.
    pub fn generated_blocks(&self, request: usize) -> &[u64] {
        &self.blocks[range(&self.requests[request].generated_blocks)]
    }

    /// Whether `request` is the first of its session.
    pub fn is_first(&self, request: usize) -> bool {
        let session = &self.sessions[self.requests[request].session as usize];
        session.requests.start as usize == request
    }

    /// Total prompt tokens.
    pub fn input_tokens(&self) -> u64 {
        self.requests
            .iter()
            .map(|request| u64::from(request.input_tokens))
            .sum()
    }
}

pub(crate) fn range(range: &Range<u32>) -> Range<usize> {
    range.start as usize..range.end as usize
}

/// Hashes of the chain of full blocks: each block's hash covers the one before it, so equal
/// hashes mean equal prefixes (vLLM's prefix caching keys its blocks the same way).
pub fn chain_hash(previous: u64, tokens: &[u32]) -> u64 {
    let mut hasher = blake3::Hasher::new();
    hasher.update(&previous.to_le_bytes());
    for token in tokens {
        hasher.update(&token.to_le_bytes());
    }
    let hash = hasher.finalize();
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&hash.as_bytes()[..8]);
    u64::from_le_bytes(bytes)
}

/// One session, as its requests and block hashes, before joining the others.
pub(crate) struct SessionTrace {
    identity: String,
    pub(crate) requests: Vec<TraceRequest>,
    pub(crate) blocks: Vec<u64>,
    pub(crate) rules: Vec<&'static str>,
}

/// Builds the trace of `sessions` with `renderer`, `block_size` tokens per block. Sessions are
/// traced in parallel; a session's turns are rendered in order, each reusing the tokens of the
/// one before.
pub fn build_trace(
    sessions: &[SessionFile],
    renderer: &Renderer,
    block_size: u32,
) -> Result<Trace, InputError> {
    let block_size = block_size.max(1);
    let traced: Vec<Result<SessionTrace, InputError>> = sessions
        .par_iter()
        .map(|session| trace_session(session, renderer, block_size))
        .collect();
    let mut trace = Trace {
        block_size,
        renderer: renderer.name(),
        sessions: Vec::with_capacity(sessions.len()),
        requests: Vec::new(),
        blocks: Vec::new(),
        rules: Vec::new(),
    };
    for session in traced {
        trace.push_session(session?);
    }
    Ok(trace)
}

impl Trace {
    /// Adds the sessions of `other` (traced with the same block size) after this trace's.
    pub fn append(&mut self, other: Trace) {
        let sessions = self.sessions.len() as u32;
        let requests = self.requests.len() as u32;
        let blocks = self.blocks.len() as u32;
        let rules: Vec<Option<u16>> = other
            .rules
            .iter()
            .map(|rule| self.rule_index(rule))
            .collect();
        let shift = |range: &Range<u32>, by: u32| range.start + by..range.end + by;
        self.sessions
            .extend(other.sessions.into_iter().map(|session| TraceSession {
                identity: session.identity,
                requests: shift(&session.requests, requests),
            }));
        self.requests
            .extend(other.requests.into_iter().map(|request| {
                TraceRequest {
                    session: request.session + sessions,
                    new_blocks: shift(&request.new_blocks, blocks),
                    generated_blocks: shift(&request.generated_blocks, blocks),
                    finding: request
                        .finding
                        .and_then(|rule| rules.get(usize::from(rule)).copied().flatten()),
                    ..request
                }
            }));
        self.blocks.extend(other.blocks);
    }

    /// The index of `rule` in [`Trace::rules`], added when new; `None`, and not added, when the
    /// index would not fit a `u16`.
    pub(crate) fn rule_index(&mut self, rule: &str) -> Option<u16> {
        if let Some(known) = self.rules.iter().position(|name| name == rule) {
            return u16::try_from(known).ok();
        }
        let index = u16::try_from(self.rules.len()).ok()?;
        self.rules.push(rule.to_owned());
        Some(index)
    }

    fn push_session(&mut self, session: SessionTrace) {
        let index = self.sessions.len() as u32;
        let offset = self.blocks.len() as u32;
        let first = self.requests.len() as u32;
        let shift = |range: &Range<u32>| range.start + offset..range.end + offset;
        for mut request in session.requests {
            request.session = index;
            request.new_blocks = shift(&request.new_blocks);
            request.generated_blocks = shift(&request.generated_blocks);
            request.finding = request
                .finding
                .and_then(|local| self.rule_index(session.rules[usize::from(local)]));
            self.requests.push(request);
        }
        self.blocks.extend(session.blocks);
        self.sessions.push(TraceSession {
            identity: session.identity,
            requests: first..self.requests.len() as u32,
        });
    }
}

pub(crate) fn trace_session(
    session: &SessionFile,
    renderer: &Renderer,
    block_size: u32,
) -> Result<SessionTrace, InputError> {
    let size = block_size as usize;
    let mut traced = SessionTrace {
        identity: session_identity(session, &session.path),
        requests: Vec::with_capacity(session.len()),
        blocks: Vec::new(),
        rules: Vec::new(),
    };
    // The previous turn's generated tokens and prompt block hashes.
    let mut previous_trace: Option<(Vec<u32>, Vec<u64>)> = None;
    kvlint_rules::visit_turns(session, 0..session.len(), renderer, |checked| {
        let (turn, tokens) = (checked.turn, &checked.rendered.tokens);
        let (shared, shared_sequence, previous_input) = match (checked.previous, &previous_trace) {
            (Some(before), Some((generated, _))) => {
                let shared = before.tokens.common_prefix_len(tokens);
                let through_generated = shared == before.tokens.len() && !generated.is_empty();
                let sequence = if through_generated {
                    shared + tokens.common_prefix_from(shared, generated)
                } else {
                    shared
                };
                (shared, sequence, before.tokens.len())
            }
            _ => (0, 0, 0),
        };
        // Blocks before the first token that differs are the previous turn's (its list is
        // cut there and continued, not copied).
        let mut blocks = previous_trace
            .take()
            .map(|(_, blocks)| blocks)
            .unwrap_or_default();
        let kept = (shared / size).min(blocks.len());
        blocks.truncate(kept);
        let ids = tokens_from(tokens, kept * size);
        let mut last = blocks.last().copied().unwrap_or(0);
        let new_start = traced.blocks.len() as u32;
        for block in ids.chunks_exact(size) {
            last = chain_hash(last, block);
            blocks.push(last);
            traced.blocks.push(last);
        }
        let new_blocks = new_start..traced.blocks.len() as u32;
        // The generated tokens complete the prompt's last partial block and more; the last
        // one is sampled, never computed into the cache.
        let generated = generated_ids(turn, renderer);
        let partial = &ids[ids.len() - ids.len() % size..];
        let mut sequence: Vec<u32> = partial.to_vec();
        sequence.extend_from_slice(&generated[..generated.len().saturating_sub(1)]);
        let generated_start = traced.blocks.len() as u32;
        for block in sequence.chunks_exact(size) {
            last = chain_hash(last, block);
            traced.blocks.push(last);
        }
        let finding = checked.finding.map(|finding| {
            let known = traced.rules.iter().position(|rule| *rule == finding.rule);
            let position = known.unwrap_or_else(|| {
                traced.rules.push(finding.rule);
                traced.rules.len() - 1
            });
            u16::try_from(position).unwrap_or(u16::MAX)
        });
        traced.requests.push(TraceRequest {
            session: 0,
            time: turn.time,
            input_tokens: count(tokens.len()),
            output_tokens: count(output_tokens(turn).unwrap_or(generated.len())),
            shared_with_previous: count(shared),
            shared_with_previous_sequence: count(shared_sequence),
            previous_input_tokens: count(previous_input),
            kept_blocks: count(kept),
            new_blocks,
            generated_blocks: generated_start..traced.blocks.len() as u32,
            finding,
        });
        previous_trace = Some((generated, blocks));
        Ok::<_, InputError>(())
    })?;
    Ok(traced)
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

    #[test]
    fn a_rule_is_interned_once_and_none_past_what_a_u16_indexes() {
        let mut trace = Trace {
            block_size: 16,
            renderer: String::new(),
            sessions: Vec::new(),
            requests: Vec::new(),
            blocks: Vec::new(),
            rules: (0..=u16::MAX)
                .map(|index| format!("rule-{index}"))
                .collect(),
        };
        assert_eq!(trace.rule_index("rule-7"), Some(7));
        assert_eq!(trace.rule_index("rule-65535"), Some(u16::MAX));
        // A new rule past the last index is neither given one nor kept.
        assert_eq!(trace.rule_index("new"), None);
        assert_eq!(trace.rules.len(), usize::from(u16::MAX) + 1);
        trace.rules.truncate(2);
        assert_eq!(trace.rule_index("new"), Some(2));
        assert_eq!(trace.rule_index("new"), Some(2));
        assert_eq!(trace.rules.len(), 3);
    }
}

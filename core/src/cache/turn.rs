//! What a cache sees of a session: the current turn ([`CacheTurn`]), what each earlier turn
//! left ([`Earlier`]), and what an engine serves and writes ([`Prediction`]).

use kvlint_protocol::key::{Carried, OPENAI_CACHE_ROUTING_KEY};
use serde::Serialize;
use serde_json::Value;

use kvlint_render::render::Rendered;
use kvlint_request::path::PartPath;
use kvlint_request::request::{Request, Role};

/// What a turn looks like to a cache.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheTurn {
    pub prompt_tokens: usize,
    /// Where each content block ends, in tokens, in order.
    pub block_ends: Vec<usize>,
    /// The request path of each block.
    pub block_paths: Vec<PartPath>,
    /// Indexes into `block_ends` of the blocks marked as breakpoints (Anthropic
    /// `cache_control`, with the automatic one on the last block; OpenAI
    /// `prompt_cache_breakpoint`).
    pub breakpoint_blocks: Vec<usize>,
    /// Where the latest user or tool message ends: OpenAI's implicit breakpoint.
    pub latest_input_end: usize,
    /// Tokens generated for this turn, when the response is recorded.
    pub generated_tokens: usize,
    /// The model the request names.
    pub model: Option<String>,
    /// vLLM's and SGLang's `cache_salt`: requests with another salt share nothing.
    pub cache_salt: Option<String>,
    /// The key OpenAI routes the prompt by (`prompt_cache_key`, else `user`), when sent.
    pub cache_routing_key: Option<String>,
}

/// What an earlier turn left in the cache, seen from the current turn.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Earlier {
    pub prompt_tokens: usize,
    /// Leading tokens the current prompt shares with the earlier prompt.
    pub common_prompt: usize,
    /// Leading tokens the current prompt shares with the earlier prompt followed by the
    /// tokens generated for it (engines that keep generated tokens can hit through them).
    pub common_sequence: usize,
    /// Token positions of the cache entries the earlier request wrote (breakpoint models).
    pub written: Vec<usize>,
}

/// What an engine serves and writes for one turn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Prediction {
    /// Prompt tokens served from cache.
    pub cached: usize,
    /// Prompt tokens written to the cache at a write price (breakpoint models).
    pub written: usize,
}

impl CacheTurn {
    /// The cache's view of a rendered request: where its blocks and breakpoints end, in tokens.
    pub fn new(request: &Request, rendered: &Rendered, generated_tokens: usize) -> Self {
        let tokens = &rendered.tokens;
        // The end byte of each content part, from the segments it was rendered in.
        let mut part_ends = vec![None; request.parts.len()];
        for segment in &rendered.segments {
            let end = &mut part_ends[segment.part];
            *end = Some(end.map_or(segment.range.end, |end: usize| end.max(segment.range.end)));
        }
        let mut blocks: Vec<(PartPath, usize)> = Vec::new();
        let mut latest_input_end = 0;
        for (part, end) in request.parts.iter().zip(&part_ends) {
            let Some(end) = *end else { continue };
            if part.kind.is_structural() {
                continue;
            }
            let position = tokens.count_before(end);
            let block = Request::block_of(&part.path);
            match blocks.last_mut() {
                Some((last, last_end)) if *last == block => *last_end = position,
                _ => blocks.push((block, position)),
            }
            let role = part
                .message
                .and_then(|message| request.messages.get(message))
                .map(|message| &message.role);
            if matches!(
                role,
                Some(Role::User | Role::Tool | Role::FunctionCallOutput)
            ) {
                latest_input_end = position;
            }
        }
        let mut breakpoint_blocks: Vec<usize> = blocks
            .iter()
            .enumerate()
            .filter(|(_, (block, _))| request.breakpoints.contains(block))
            .map(|(index, _)| index)
            .collect();
        if request.automatic_breakpoint && !blocks.is_empty() {
            breakpoint_blocks.push(blocks.len() - 1);
        }
        breakpoint_blocks.dedup();
        let (block_paths, block_ends) = blocks.into_iter().unzip();
        Self {
            prompt_tokens: tokens.len(),
            block_ends,
            block_paths,
            breakpoint_blocks,
            latest_input_end,
            generated_tokens,
            model: request.model.clone(),
            cache_salt: request
                .body
                .get("cache_salt")
                .and_then(Value::as_str)
                .map(str::to_owned),
            cache_routing_key: Carried::body(&request.body)
                .first(&OPENAI_CACHE_ROUTING_KEY)
                .map(|(_, key)| key),
        }
    }
}

/// The text a recorded response generated: the assistant's text and reasoning, in the order
/// an engine produces them (reasoning first).
pub fn generated_text(response: &Value) -> Option<String> {
    let message = response.pointer("/choices/0/message");
    let mut pieces: Vec<&str> = Vec::new();
    if let Some(message) = message {
        pieces.extend(message.get("reasoning_content").and_then(Value::as_str));
        pieces.extend(message.get("content").and_then(Value::as_str));
    }
    for block in response
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        pieces.extend(block.get("thinking").and_then(Value::as_str));
        pieces.extend(block.get("text").and_then(Value::as_str));
    }
    for item in response
        .get("output")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for block in item
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            pieces.extend(block.get("text").and_then(Value::as_str));
        }
    }
    (!pieces.is_empty()).then(|| pieces.concat())
}

//! Engine cache models: how many prompt tokens of a turn each engine or API serves from its
//! cache, given what earlier turns of the session left there.
//!
//! Every model reads the same facts about a turn ([`CacheTurn`]) and about each earlier turn
//! ([`Earlier`]); the facts behind each rule, with their sources, are in the doc comments of
//! the functions below and in `shared/reference/engines.md`. Per-model figures that change
//! over time (minimum cacheable lengths, prices) live in `data/models.toml`, not in code.

use std::fmt;
use std::str::FromStr;
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::path::PartPath;
use crate::render::Rendered;
use crate::request::Request;

/// An engine or API whose prefix cache kvlint predicts, as given to `--engine NAME[:options]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Engine {
    /// `vllm[:block=16][,spec]`
    Vllm { block: usize, speculative: bool },
    /// `sglang[:page=1]`
    Sglang { page: usize },
    /// `llamacpp[:cache-reuse=N]`
    LlamaCpp { cache_reuse: usize },
    /// `openai[:MODEL]`
    OpenAi { model: Option<String> },
    /// `anthropic[:MODEL]`
    Anthropic { model: Option<String> },
    /// `gemini[:MODEL]`
    Gemini { model: Option<String> },
    /// `deepseek`
    DeepSeek,
}

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

/// A cache entry position and whether it is readable by the current turn.
fn readable(earlier: &[Earlier], minimum: usize) -> impl Iterator<Item = usize> + '_ {
    earlier.iter().flat_map(move |entry| {
        entry
            .written
            .iter()
            .copied()
            .filter(move |position| *position >= minimum && *position <= entry.common_prompt)
    })
}

/// Anthropic: a breakpoint looks for an entry at most this many blocks back.
pub const ANTHROPIC_LOOKBACK_BLOCKS: usize = 20;
/// Anthropic: at most this many breakpoints in a request.
pub const ANTHROPIC_MAX_BREAKPOINTS: usize = 4;
/// OpenAI: no caching below this many prompt tokens.
pub const OPENAI_MINIMUM: usize = 1024;
/// OpenAI before GPT-5.6: hits grow in steps of this many tokens past the minimum.
pub const OPENAI_INCREMENT: usize = 128;
/// DeepSeek: the historical storage unit; shorter content is not cached.
pub const DEEPSEEK_UNIT: usize = 64;

impl Engine {
    pub fn name(&self) -> String {
        match self {
            Self::Vllm { block, speculative } => {
                format!(
                    "vllm:block={block}{}",
                    if *speculative { ",spec" } else { "" }
                )
            }
            Self::Sglang { page } => format!("sglang:page={page}"),
            Self::LlamaCpp { cache_reuse: 0 } => "llamacpp".into(),
            Self::LlamaCpp { cache_reuse } => format!("llamacpp:cache-reuse={cache_reuse}"),
            Self::OpenAi { model } => with_model("openai", model),
            Self::Anthropic { model } => with_model("anthropic", model),
            Self::Gemini { model } => with_model("gemini", model),
            Self::DeepSeek => "deepseek".into(),
        }
    }

    /// Whether the engine keeps the tokens it generates in its cache (self-hosted engines
    /// do; hosted APIs cache prompts).
    pub fn keeps_generated_tokens(&self) -> bool {
        matches!(
            self,
            Self::Vllm { .. } | Self::Sglang { .. } | Self::LlamaCpp { .. } | Self::DeepSeek
        )
    }

    /// The provider whose price and minimum figures apply, for hosted APIs.
    pub fn provider(&self) -> Option<&'static str> {
        match self {
            Self::OpenAi { .. } => Some("openai"),
            Self::Anthropic { .. } => Some("anthropic"),
            Self::Gemini { .. } => Some("gemini"),
            Self::DeepSeek => Some("deepseek"),
            _ => None,
        }
    }

    /// The figures of the model a turn uses: the engine's model, else the request's.
    pub fn figures(&self, turn: &CacheTurn) -> Option<&'static ModelFigures> {
        let provider = self.provider()?;
        let named = match self {
            Self::OpenAi { model } | Self::Anthropic { model } | Self::Gemini { model } => {
                model.as_deref()
            }
            _ => None,
        };
        MODELS.lookup(
            provider,
            named.or(turn.model.as_deref()).unwrap_or_default(),
        )
    }

    /// What this engine serves from cache for `turn`, given the earlier turns of the session
    /// (oldest first; the last is the turn right before).
    pub fn predict(&self, turn: &CacheTurn, earlier: &[Earlier]) -> Prediction {
        let longest_sequence = earlier
            .iter()
            .map(|entry| entry.common_sequence)
            .max()
            .unwrap_or(0);
        let longest_prompt = earlier
            .iter()
            .map(|entry| entry.common_prompt)
            .max()
            .unwrap_or(0);
        let n = turn.prompt_tokens;
        match self {
            Self::Vllm { block, speculative } => Prediction {
                cached: vllm_hit(n, longest_sequence, *block, *speculative),
                written: 0,
            },
            Self::Sglang { page } => Prediction {
                cached: sglang_hit(n, longest_sequence, *page),
                written: 0,
            },
            Self::LlamaCpp { .. } => Prediction {
                cached: llamacpp_hit(
                    n,
                    earlier
                        .last()
                        .map_or(0, |previous| previous.common_sequence),
                ),
                written: 0,
            },
            Self::OpenAi { .. } => {
                let figures = self.figures(turn);
                if figures.is_some_and(|figures| figures.breakpoints) {
                    breakpoint_hit(turn, earlier, &self.writes(turn), OPENAI_MINIMUM)
                } else {
                    Prediction {
                        cached: openai_hit(n, longest_prompt),
                        written: 0,
                    }
                }
            }
            Self::Anthropic { .. } => {
                let minimum = self
                    .figures(turn)
                    .map_or(1024, |figures| figures.min_cacheable_tokens);
                anthropic_hit(turn, earlier, minimum)
            }
            Self::Gemini { .. } => {
                let minimum = self
                    .figures(turn)
                    .map_or(1024, |figures| figures.min_cacheable_tokens);
                Prediction {
                    cached: gemini_hit(longest_prompt, minimum),
                    written: 0,
                }
            }
            Self::DeepSeek => Prediction {
                cached: readable_units(earlier),
                written: 0,
            },
        }
    }

    /// The cache entries this turn leaves for later turns (token positions), for the models
    /// that cache at marked points rather than at every token.
    pub fn writes(&self, turn: &CacheTurn) -> Vec<usize> {
        match self {
            Self::Anthropic { .. } => anthropic_breakpoints(turn),
            Self::OpenAi { .. } => {
                let mut positions: Vec<usize> = turn
                    .breakpoint_blocks
                    .iter()
                    .filter_map(|block| turn.block_ends.get(*block).copied())
                    .collect();
                positions.push(turn.latest_input_end);
                positions.sort_unstable();
                positions.dedup();
                positions
            }
            Self::DeepSeek => vec![
                turn.prompt_tokens,
                turn.prompt_tokens + turn.generated_tokens,
            ],
            _ => Vec::new(),
        }
    }
}

fn with_model(provider: &str, model: &Option<String>) -> String {
    match model {
        Some(model) => format!("{provider}:{model}"),
        None => provider.to_owned(),
    }
}

/// vLLM (V1, automatic prefix caching): only full blocks are hashed and cached ("We only
/// hash full blocks", `v1/core/kv_cache_utils.py:953`), and a hit never covers the last
/// prompt token (`max_cache_hit_length = request.num_tokens - 1`,
/// `v1/core/kv_cache_manager.py:295-302`): `cached = B·min(k, ⌊(N−1)/B⌋)`, with `k` the
/// leading full blocks already cached. EAGLE/MTP speculative decoding drops one more block
/// (`single_type_kv_cache_manager.py:829-830`).
pub fn vllm_hit(prompt_tokens: usize, matched: usize, block: usize, speculative: bool) -> usize {
    if block == 0 || prompt_tokens == 0 {
        return 0;
    }
    let blocks = (matched / block).min((prompt_tokens - 1) / block);
    let blocks = if speculative {
        blocks.saturating_sub(1)
    } else {
        blocks
    };
    blocks * block
}

/// SGLang (RadixAttention): the key is cut to whole pages and a match stops at `N−1` "to
/// enable logprob computation" (`srt/mem_cache/radix_cache.py:147-151`,
/// `srt/managers/schedule_batch.py:1766-1785`): `cached = P·⌊min(LCP, N−1)/P⌋`.
pub fn sglang_hit(prompt_tokens: usize, matched: usize, page: usize) -> usize {
    if page == 0 || prompt_tokens == 0 {
        return 0;
    }
    matched.min(prompt_tokens - 1) / page * page
}

/// llama.cpp `llama-server`: the longest common prefix with the slot's previous sequence,
/// one token at a time, and at least one token evaluated (`if (n_past == n_tokens && n_past
/// > 0) n_past--`, `tools/server/server-context.cpp:~3383-3387`).
pub fn llamacpp_hit(prompt_tokens: usize, matched: usize) -> usize {
    matched.min(prompt_tokens.saturating_sub(1))
}

/// llama.cpp with `--cache-reuse N`: past the common prefix, chunks of the slot's previous
/// sequence that the new prompt repeats (at least `N` tokens each, skipping cache tokens the
/// prompt dropped) are shifted into place instead of recomputed
/// (`tools/server/server-context.cpp:3467-3512`). Returns the tokens reused, before the
/// last-token rule.
pub fn llamacpp_reuse(cache: &[u32], prompt: &[u32], min_chunk: usize) -> usize {
    let common = cache.iter().zip(prompt).take_while(|(a, b)| a == b).count();
    if min_chunk == 0 {
        return common;
    }
    let (mut in_cache, mut in_prompt, mut reused) = (common, common, common);
    while in_cache < cache.len() && in_prompt < prompt.len() {
        let run = cache[in_cache..]
            .iter()
            .zip(&prompt[in_prompt..])
            .take_while(|(a, b)| a == b)
            .count();
        if run >= min_chunk {
            reused += run;
            in_cache += run;
            in_prompt += run;
        } else {
            in_cache += 1;
        }
    }
    reused
}

/// OpenAI before GPT-5.6: nothing below 1,024 tokens, then hits in 128-token increments
/// (developers.openai.com prompt-caching guide; openai-cookbook Prompt_Caching_201).
pub fn openai_hit(prompt_tokens: usize, matched: usize) -> usize {
    let matched = matched.min(prompt_tokens);
    if matched < OPENAI_MINIMUM {
        0
    } else {
        OPENAI_MINIMUM + (matched - OPENAI_MINIMUM) / OPENAI_INCREMENT * OPENAI_INCREMENT
    }
}

/// Gemini implicit caching: a prefix hit once the prompt reaches the model's minimum
/// (ai.google.dev/gemini-api/docs/caching); the granularity is not documented.
pub fn gemini_hit(matched: usize, minimum: usize) -> usize {
    if matched >= minimum { matched } else { 0 }
}

/// DeepSeek: a request hits only a whole "cache prefix unit"; units are persisted at the end
/// of each request's input and output (api-docs.deepseek.com/guides/kv_cache), and content
/// under 64 tokens is not cached (news0802).
fn readable_units(earlier: &[Earlier]) -> usize {
    earlier
        .iter()
        .flat_map(|entry| {
            entry
                .written
                .iter()
                .copied()
                .filter(move |unit| *unit >= DEEPSEEK_UNIT && *unit <= entry.common_sequence)
        })
        .max()
        .unwrap_or(0)
}

/// The positions of a request's breakpoints: the marked blocks, and the last block for the
/// automatic form. The request counts every marked block, even past the fourth.
fn anthropic_breakpoints(turn: &CacheTurn) -> Vec<usize> {
    let mut positions: Vec<usize> = turn
        .breakpoint_blocks
        .iter()
        .filter_map(|block| turn.block_ends.get(*block).copied())
        .collect();
    positions.sort_unstable();
    positions.dedup();
    positions
}

/// Anthropic: order tools → system → messages; each breakpoint looks for an entry an
/// earlier request wrote at its own block or up to 20 blocks before it; entries are written
/// at breakpoints whose prefix reaches the model's minimum (platform.claude.com prompt
/// caching docs). The tokens from the hit to the last breakpoint are written.
pub fn anthropic_hit(turn: &CacheTurn, earlier: &[Earlier], minimum: usize) -> Prediction {
    let readable: Vec<usize> = readable(earlier, minimum).collect();
    let cached = turn
        .breakpoint_blocks
        .iter()
        .flat_map(|block| {
            let first = block.saturating_sub(ANTHROPIC_LOOKBACK_BLOCKS - 1);
            (first..=*block)
                .rev()
                .filter_map(|candidate| turn.block_ends.get(candidate).copied())
        })
        .filter(|position| readable.contains(position))
        .max()
        .unwrap_or(0);
    let last_write = anthropic_breakpoints(turn)
        .into_iter()
        .filter(|position| *position >= minimum)
        .max()
        .unwrap_or(0);
    Prediction {
        cached,
        written: last_write.saturating_sub(cached),
    }
}

/// OpenAI GPT-5.6 and later: entries at breakpoints (explicit ones, and the implicit one near
/// the latest user or tool message), "not rounded to a token block"; a hit is the furthest
/// entry an earlier request wrote within the shared prefix.
fn breakpoint_hit(
    turn: &CacheTurn,
    earlier: &[Earlier],
    writes: &[usize],
    minimum: usize,
) -> Prediction {
    let cached = readable(earlier, minimum)
        .max()
        .unwrap_or(0)
        .min(turn.prompt_tokens);
    let last_write = writes
        .iter()
        .copied()
        .filter(|position| *position >= minimum)
        .max()
        .unwrap_or(0);
    Prediction {
        cached,
        written: last_write.saturating_sub(cached),
    }
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
                .map(|message| message.role.as_str());
            if matches!(role, Some("user" | "tool" | "function_call_output")) {
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

/// A problem with a turn's Anthropic cache breakpoints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BreakpointIssue {
    /// The turn whose request carries the breakpoint.
    pub turn: usize,
    pub block: PartPath,
    /// Tokens up to the end of the marked block.
    pub position: usize,
    pub kind: BreakpointIssueKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BreakpointIssueKind {
    /// More breakpoints than the API accepts: it rejects the request.
    TooMany { count: usize },
    /// The prefix up to the breakpoint is shorter than the model caches.
    BelowMinimum { minimum: usize },
    /// The next turn changes content before the breakpoint: what it wrote is never read.
    AfterVolatile { next_turn_diverges_at: usize },
    /// The next turn keeps the prefix but none of its breakpoints is within 20 blocks after
    /// this one, so the entry is not found.
    BeyondLookback { blocks: usize },
    /// The next turn has no breakpoint at or after this one.
    Unread,
}

/// Audits each turn's breakpoints against the model minimum and the turn after it.
/// `common_with_next[i]` is the number of leading tokens turn `i+1` shares with turn `i`.
pub fn audit_breakpoints(
    turns: &[CacheTurn],
    common_with_next: &[usize],
    minimum: usize,
) -> Vec<BreakpointIssue> {
    let mut issues = Vec::new();
    for (index, turn) in turns.iter().enumerate() {
        let marked: Vec<(usize, usize)> = turn
            .breakpoint_blocks
            .iter()
            .filter_map(|block| turn.block_ends.get(*block).map(|end| (*block, *end)))
            .collect();
        let issue = |block: usize, position: usize, kind| BreakpointIssue {
            turn: index,
            block: turn.block_paths.get(block).cloned().unwrap_or_default(),
            position,
            kind,
        };
        if marked.len() > ANTHROPIC_MAX_BREAKPOINTS {
            let (block, position) = marked[ANTHROPIC_MAX_BREAKPOINTS];
            issues.push(issue(
                block,
                position,
                BreakpointIssueKind::TooMany {
                    count: marked.len(),
                },
            ));
        }
        let next = turns.get(index + 1).zip(common_with_next.get(index));
        for &(block, position) in &marked {
            if position < minimum {
                issues.push(issue(
                    block,
                    position,
                    BreakpointIssueKind::BelowMinimum { minimum },
                ));
                continue;
            }
            let Some((next, &common)) = next else {
                continue;
            };
            if position > common {
                issues.push(issue(
                    block,
                    position,
                    BreakpointIssueKind::AfterVolatile {
                        next_turn_diverges_at: common,
                    },
                ));
                continue;
            }
            // The block of the next turn that ends where this one did.
            let Some(same_block) = next.block_ends.iter().position(|end| *end == position) else {
                continue;
            };
            let reach = next
                .breakpoint_blocks
                .iter()
                .filter(|later| **later >= same_block)
                .map(|later| later - same_block)
                .min();
            match reach {
                None => issues.push(issue(block, position, BreakpointIssueKind::Unread)),
                Some(blocks) if blocks >= ANTHROPIC_LOOKBACK_BLOCKS => {
                    issues.push(issue(
                        block,
                        position,
                        BreakpointIssueKind::BeyondLookback { blocks },
                    ));
                }
                Some(_) => {}
            }
        }
    }
    issues
}

/// `--engine NAME[:options]` could not be read.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("unknown engine `{spec}`: {reason}")]
#[diagnostic(
    code(kvlint::engine),
    help(
        "one of vllm[:block=16][,spec], sglang[:page=1], llamacpp[:cache-reuse=N], openai[:MODEL], anthropic[:MODEL], gemini[:MODEL], deepseek"
    )
)]
pub struct EngineSpecError {
    pub spec: String,
    pub reason: String,
}

impl FromStr for Engine {
    type Err = EngineSpecError;

    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let error = |reason: &str| EngineSpecError {
            spec: spec.to_owned(),
            reason: reason.to_owned(),
        };
        let (name, options) = spec.split_once(':').unwrap_or((spec, ""));
        let options: Vec<&str> = options
            .split(',')
            .filter(|option| !option.is_empty())
            .collect();
        let number = |key: &str, default: usize| -> Result<usize, EngineSpecError> {
            match options
                .iter()
                .find_map(|option| option.strip_prefix(key)?.strip_prefix('='))
            {
                None => Ok(default),
                Some(value) => value
                    .parse::<usize>()
                    .ok()
                    .filter(|value| *value > 0)
                    .ok_or_else(|| error(&format!("`{key}` must be a positive whole number"))),
            }
        };
        let model = || (!options.is_empty()).then(|| options.join(","));
        let known = |allowed: &[&str]| {
            options.iter().all(|option| {
                allowed.iter().any(|key| {
                    *option == *key
                        || option
                            .strip_prefix(key)
                            .is_some_and(|rest| rest.starts_with('='))
                })
            })
        };
        match name {
            "vllm" if known(&["block", "spec"]) => Ok(Self::Vllm {
                block: number("block", 16)?,
                speculative: options.contains(&"spec"),
            }),
            "sglang" if known(&["page"]) => Ok(Self::Sglang {
                page: number("page", 1)?,
            }),
            "llamacpp" | "llama.cpp" if known(&["cache-reuse"]) => Ok(Self::LlamaCpp {
                cache_reuse: options
                    .iter()
                    .find_map(|option| option.strip_prefix("cache-reuse="))
                    .map(|value| {
                        value
                            .parse()
                            .map_err(|_| error("`cache-reuse` must be a whole number"))
                    })
                    .transpose()?
                    .unwrap_or(0),
            }),
            "openai" => Ok(Self::OpenAi { model: model() }),
            "anthropic" => Ok(Self::Anthropic { model: model() }),
            "gemini" => Ok(Self::Gemini { model: model() }),
            "deepseek" if options.is_empty() => Ok(Self::DeepSeek),
            "vllm" | "sglang" | "llamacpp" | "llama.cpp" | "deepseek" => {
                Err(error("unknown option"))
            }
            _ => Err(error("not an engine kvlint models")),
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// Per-model figures from `data/models.toml`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct ModelFigures {
    pub provider: String,
    /// Matched as a prefix of the request's model name; empty matches any model.
    pub name: String,
    pub min_cacheable_tokens: usize,
    /// USD per million tokens.
    pub input: f64,
    pub cached_input: f64,
    pub cache_write: f64,
    #[serde(default)]
    pub breakpoints: bool,
    pub source: String,
    pub verified: bool,
}

impl ModelFigures {
    /// The cost in USD of one turn.
    pub fn cost(&self, prompt_tokens: usize, prediction: Prediction) -> f64 {
        let fresh = prompt_tokens.saturating_sub(prediction.cached + prediction.written);
        (fresh as f64 * self.input
            + prediction.cached as f64 * self.cached_input
            + prediction.written as f64 * self.cache_write)
            / 1_000_000.0
    }
}

/// The dated table of model figures.
#[derive(Debug, Deserialize)]
pub struct ModelTable {
    pub as_of: String,
    #[serde(rename = "model")]
    pub models: Vec<ModelFigures>,
}

impl ModelTable {
    /// The row for a model: the longest name that prefixes it, else the provider's fallback.
    pub fn lookup(&self, provider: &str, model: &str) -> Option<&ModelFigures> {
        self.models
            .iter()
            .filter(|row| row.provider == provider && model.starts_with(&row.name))
            .max_by_key(|row| row.name.len())
    }
}

/// The embedded table; an unreadable table (a build with a broken data file) is empty.
pub static MODELS: LazyLock<ModelTable> = LazyLock::new(|| {
    toml::from_str(include_str!("../data/models.toml")).unwrap_or(ModelTable {
        as_of: String::new(),
        models: Vec::new(),
    })
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_specs_parse_and_print() {
        for (spec, name) in [
            ("vllm", "vllm:block=16"),
            ("vllm:block=32,spec", "vllm:block=32,spec"),
            ("sglang:page=64", "sglang:page=64"),
            ("llamacpp", "llamacpp"),
            ("openai:gpt-4o", "openai:gpt-4o"),
            ("anthropic", "anthropic"),
            ("deepseek", "deepseek"),
        ] {
            assert_eq!(
                spec.parse::<Engine>()
                    .map(|engine| engine.name())
                    .ok()
                    .as_deref(),
                Some(name),
                "{spec}"
            );
        }
        for bad in [
            "vllm:block=0",
            "vllm:blocks=16",
            "tgi",
            "sglang:page=x",
            "deepseek:x",
        ] {
            assert!(bad.parse::<Engine>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_model_table_is_readable_and_dated() {
        assert!(!MODELS.as_of.is_empty());
        assert!(MODELS.models.len() >= 20);
        for provider in ["openai", "anthropic", "gemini", "deepseek"] {
            assert!(
                MODELS.lookup(provider, "some-future-model").is_some(),
                "{provider} has a fallback row"
            );
        }
        let sonnet = MODELS
            .lookup("anthropic", "claude-sonnet-4-5-20250929")
            .map(|row| row.name.as_str());
        assert_eq!(sonnet, Some("claude-sonnet-4-5"));
    }
}

//! The hit formula of each hosted API: how many prompt tokens it serves from cache, given
//! what earlier turns left there. Each formula cites the provider documentation it follows.
//! The self-hosted engines' rule is `kvlint_fleet::cache`'s, which the simulator's caches
//! apply too.

use super::breakpoints::{ANTHROPIC_LOOKBACK_BLOCKS, anthropic_breakpoints};
use super::turn::{CacheTurn, Earlier, Prediction};

/// OpenAI: no caching below this many prompt tokens.
pub const OPENAI_MINIMUM: usize = 1024;
/// OpenAI before GPT-5.6: hits grow in steps of this many tokens past the minimum.
pub const OPENAI_INCREMENT: usize = 128;
/// xAI: hits in blocks of this many tokens, as a third-party guide says (docs.apiyi.com's
/// Grok prompt-caching guide: "128-token block granularity"); xAI's own pages state no size.
pub const XAI_BLOCK: usize = 128;
/// DeepSeek: the historical storage unit; shorter content is not cached.
pub const DEEPSEEK_UNIT: usize = 64;

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

/// xAI: "messages at the beginning that match exactly are served from cache"
/// (docs.x.ai/developers/advanced-api-usage/prompt-caching, read 2026-12-07), once the prompt
/// reaches the model's minimum, in whole [`XAI_BLOCK`]s.
pub fn xai_hit(prompt_tokens: usize, matched: usize, minimum: usize) -> usize {
    let matched = matched.min(prompt_tokens);
    if matched < minimum {
        0
    } else {
        matched / XAI_BLOCK * XAI_BLOCK
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
pub(super) fn readable_units(earlier: &[Earlier]) -> usize {
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
pub(super) fn breakpoint_hit(
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

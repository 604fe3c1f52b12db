//! The hit formula of each engine and API: how many prompt tokens it serves from cache,
//! given what earlier turns left there. Each formula cites the source it follows.

use super::breakpoints::{ANTHROPIC_LOOKBACK_BLOCKS, anthropic_breakpoints};
use super::turn::{CacheTurn, Earlier, Prediction};
use crate::prefix::common_prefix_len;

/// OpenAI: no caching below this many prompt tokens.
pub const OPENAI_MINIMUM: usize = 1024;
/// OpenAI before GPT-5.6: hits grow in steps of this many tokens past the minimum.
pub const OPENAI_INCREMENT: usize = 128;
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
    let common = common_prefix_len(cache, prompt);
    if min_chunk == 0 {
        return common;
    }
    let (mut in_cache, mut in_prompt, mut reused) = (common, common, common);
    while in_cache < cache.len() && in_prompt < prompt.len() {
        let run = common_prefix_len(&cache[in_cache..], &prompt[in_prompt..]);
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

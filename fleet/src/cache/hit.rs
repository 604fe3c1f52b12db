//! What a self-hosted engine serves from cache, given how many leading tokens of a prompt it
//! already holds: the one statement of each engine's rule. `kvlint check --engine`, the
//! proxy's predictions and `kvlint probe` apply it to a session's token counts
//! (`kvlint_core::cache::Engine::predict`); the replica caches of `kvlint simulate`
//! ([`BlockPool`](super::BlockPool), [`RadixTree`](super::RadixTree), [`Slots`](super::Slots))
//! apply it to the run of blocks they hold. Each formula cites the engine source it follows.

/// vLLM's default block size (`--block-size`, `vllm/config/cache.py`), the size every
/// command assumes for vLLM when none is given.
pub const VLLM_BLOCK_SIZE: u32 = 16;

/// SGLang's default page size (`--page-size`, `sglang/srt/server_args.py`).
pub const SGLANG_PAGE_SIZE: u32 = 1;

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

/// llama.cpp `llama-server`: the longest common prefix with the slot's sequence, one token at
/// a time, and at least one token evaluated (`if (n_past == n_tokens && n_past > 0)
/// n_past--`, `tools/server/server-context.cpp:~3383-3387`).
pub fn llamacpp_hit(prompt_tokens: usize, matched: usize) -> usize {
    matched.min(prompt_tokens.saturating_sub(1))
}

/// llama.cpp with `--cache-reuse N`: past the common prefix, chunks of the slot's previous
/// sequence that the new prompt repeats (at least `N` items each, skipping cache items the
/// prompt dropped) are shifted into place instead of recomputed
/// (`tools/server/server-context.cpp:3467-3512`). Returns the items reused, before the
/// last-token rule. Items are tokens for a session's prediction; any sequence compares alike.
pub fn llamacpp_reuse<T: PartialEq>(cache: &[T], prompt: &[T], min_chunk: usize) -> usize {
    let common = common_prefix(cache, prompt);
    if min_chunk == 0 {
        return common;
    }
    let (mut in_cache, mut in_prompt, mut reused) = (common, common, common);
    while in_cache < cache.len() && in_prompt < prompt.len() {
        let run = common_prefix(&cache[in_cache..], &prompt[in_prompt..]);
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

fn common_prefix<T: PartialEq>(left: &[T], right: &[T]) -> usize {
    left.iter()
        .zip(right)
        .take_while(|(left, right)| left == right)
        .count()
}

/// Blocks of `block_size` tokens a hit on a prompt of `prompt_tokens` may cover: whole
/// blocks, never the last token (vLLM's and SGLang's rule at any cached length).
pub(crate) fn hit_blocks(prompt_tokens: u32, block_size: u32) -> usize {
    let block = block_size.max(1) as usize;
    vllm_hit(prompt_tokens as usize, usize::MAX, block, false) / block
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vllm_caches_whole_blocks_and_never_the_last_token() {
        // (prompt tokens N, tokens matched, block B, speculative, cached)
        for (n, matched, block, speculative, cached) in [
            (1000, 1000, 16, false, 992),  // 62 full blocks; ⌊999/16⌋ = 62
            (32, 32, 16, false, 16), // ⌊31/16⌋ = 1: the last token forces the second block out
            (1024, 1024, 16, false, 1008), // exact boundary: ⌊1023/16⌋ = 63
            (1025, 1024, 16, false, 1024), // one token more: 64 blocks, the last token stays out
            (10, 10, 16, false, 0),  // shorter than a block
            (100, 47, 16, false, 32), // a partial block is never a hit
            (1000, 1000, 16, true, 976), // EAGLE/MTP drops one more block
            (100, 100, 32, false, 96), // CPU backend's 32-token blocks: ⌊99/32⌋ = 3
            (0, 0, 16, false, 0),
        ] {
            assert_eq!(
                vllm_hit(n, matched, block, speculative),
                cached,
                "N={n} matched={matched} B={block}"
            );
        }
    }

    #[test]
    fn sglang_matches_pages_up_to_the_last_token() {
        for (n, matched, page, cached) in [
            (100, 100, 1, 99),
            (100, 40, 1, 40),
            (200, 150, 64, 128),
            (64, 64, 64, 0), // min(64, 63) = 63 < one page
            (1, 1, 1, 0),
        ] {
            assert_eq!(
                sglang_hit(n, matched, page),
                cached,
                "N={n} matched={matched} P={page}"
            );
        }
    }

    #[test]
    fn llamacpp_reuses_the_common_prefix_but_evaluates_one_token() {
        for (n, matched, cached) in [(100, 100, 99), (100, 40, 40), (1, 1, 0), (0, 0, 0)] {
            assert_eq!(llamacpp_hit(n, matched), cached, "N={n} matched={matched}");
        }
    }

    #[test]
    fn llamacpp_cache_reuse_shifts_repeated_chunks_into_place() {
        // The slot held 1..=10; the new prompt drops 4 and 5 (a pruned message) and adds 11.
        let cache: Vec<u32> = (1..=10).collect();
        let prompt = [1, 2, 3, 6, 7, 8, 9, 10, 11];
        // Common prefix 3; then 6..=10 (5 tokens) is found after skipping two cache tokens.
        assert_eq!(llamacpp_reuse(&cache, &prompt, 4), 8);
        // Chunks must be at least as long as the option says.
        assert_eq!(llamacpp_reuse(&cache, &prompt, 6), 3);
        // Without the option: the common prefix only.
        assert_eq!(llamacpp_reuse(&cache, &prompt, 0), 3);
        // Reordered content is not reused: the prompt never skips its own tokens.
        assert_eq!(llamacpp_reuse(&cache, &[1, 2, 3, 9, 10, 6, 7, 8], 2), 5);
    }

    #[test]
    fn a_hit_covers_whole_blocks_short_of_the_last_token() {
        for (tokens, block, blocks) in [(9, 4, 2), (8, 4, 1), (1, 4, 0), (0, 4, 0), (5, 0, 4)] {
            assert_eq!(hit_blocks(tokens, block), blocks, "N={tokens} B={block}");
        }
    }
}

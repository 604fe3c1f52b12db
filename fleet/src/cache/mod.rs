//! A replica's prefix cache, as each engine keeps it, over block hashes (never tokens). What
//! each engine serves of what it holds is the one rule in `hit.rs` ([`vllm_hit`],
//! [`sglang_hit`], [`llamacpp_hit`]), which `kvlint check --engine`, the proxy and `kvlint
//! probe` apply to a session's tokens too:
//!
//! - vLLM ([`BlockPool`]): whole blocks keyed by their chained hash, a hit is the longest
//!   run of cached blocks from the start and never covers the prompt's last token
//!   (`vllm/v1/core/kv_cache_manager.py`, `get_computed_blocks`: at most `num_tokens - 1`);
//!   a finished request's blocks go back to the free queue last block first, and allocation
//!   evicts from the queue's head (`block_pool.py`, `FreeKVCacheBlockQueue`): least recently
//!   used first, a request's tail before its head.
//! - SGLang ([`RadixTree`]): a radix tree of pages whose least recently used leaves are evicted
//!   (`sglang/srt/mem_cache/radix_cache.py`, `evict`); a hit is a run of pages, at most the
//!   prompt's length less one token; a finished request's prompt and output are inserted.
//! - llama.cpp ([`Slots`]): each slot holds one sequence (a prompt and what was generated for
//!   it, but the last generated token, sampled and never decoded); a request takes the idle slot whose sequence covers the largest share of its
//!   prompt (over `--slot-prompt-similarity`, 0.1), else the least recently used one, and
//!   reuses the longest common prefix, less one token when it covers the whole prompt; a slot
//!   about to lose over half its sequence first saves it in the host prompt cache
//!   (`--cache-ram`), oldest entries dropped past its size, and takes from that cache the
//!   saved sequence that keeps the most (`tools/server/server-context.cpp`,
//!   `get_available_slot`; `server-task.cpp`, `server_prompt_cache::alloc`, `load`, `update`).
//!
//! Block-granular models are exact at the engine's block size. llama.cpp matches tokens: the
//! common prefix with the session's own previous request is known to the token; with any
//! other sequence it is counted in whole blocks of the trace (at most a block short).

mod hit;
mod llamacpp;
mod sglang;
mod vllm;

pub(crate) use hit::hit_blocks;
pub use hit::{
    SGLANG_PAGE_SIZE, VLLM_BLOCK_SIZE, llamacpp_hit, llamacpp_reuse, sglang_hit, vllm_hit,
};
pub use llamacpp::Slots;
pub use sglang::RadixTree;
pub use vllm::BlockPool;

/// A request as a cache sees it.
#[derive(Clone, Copy)]
pub struct Prompt<'a> {
    /// Its index in the trace.
    pub request: usize,
    pub session: u32,
    /// The session's previous request, if any.
    pub previous: Option<usize>,
    /// Its prompt's full blocks.
    pub blocks: &'a [u64],
    /// Blocks the tokens generated for it complete after the prompt's.
    pub generated_blocks: &'a [u64],
    pub tokens: u32,
    pub output_tokens: u32,
    /// Leading tokens it shares with the previous request's prompt and generated tokens.
    pub shared_with_previous_sequence: u32,
    /// Leading tokens it shares with the sequence (prompt and generated tokens) of an earlier
    /// request of its session, to the token; `None` for another session's.
    pub lineage: &'a dyn Fn(usize) -> Option<u32>,
}

/// What serving a request did to a cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Served {
    /// Prompt tokens served from cache.
    pub cached: u32,
    /// Blocks (or sequences' blocks) the cache dropped to make room.
    pub evicted: u64,
}

/// One replica's cache.
pub enum ReplicaCache {
    Vllm(BlockPool),
    Sglang(RadixTree),
    LlamaCpp(Slots),
    /// One unbounded cache every request shares: the upper bound. It serves the longest of
    /// what any earlier request left and what the session's previous request and its answer
    /// share with the prompt, both in whole blocks of the engine's, as every engine serves.
    Ideal(BlockPool),
}

impl ReplicaCache {
    /// Prompt tokens the cache would serve `prompt` now, leaving it as it is.
    pub fn peek(&self, prompt: &Prompt<'_>) -> u32 {
        match self {
            Self::Vllm(pool) => pool.peek(prompt),
            Self::Sglang(tree) => tree.peek(prompt),
            Self::LlamaCpp(slots) => slots.peek(prompt),
            Self::Ideal(pool) => pool
                .peek(prompt)
                .max(previous_share(prompt, pool.block_size())),
        }
    }

    /// Serves `prompt`: what the cache had, then keeps its blocks (and its generated ones).
    pub fn serve(&mut self, prompt: &Prompt<'_>) -> Served {
        match self {
            Self::Vllm(pool) => pool.serve(prompt),
            Self::Sglang(tree) => tree.serve(prompt),
            Self::LlamaCpp(slots) => slots.serve(prompt),
            Self::Ideal(pool) => {
                let served = pool.serve(prompt);
                Served {
                    cached: served.cached.max(previous_share(prompt, pool.block_size())),
                    evicted: 0,
                }
            }
        }
    }
}

/// What the session's previous request and its answer share with the prompt, in whole blocks
/// of `block_size` tokens and never its last token.
fn previous_share(prompt: &Prompt<'_>, block_size: u32) -> u32 {
    if prompt.previous.is_none() {
        return 0;
    }
    vllm_hit(
        prompt.tokens as usize,
        prompt.shared_with_previous_sequence as usize,
        block_size.max(1) as usize,
        false,
    ) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt<'a>(request: usize, session: u32, blocks: &'a [u64], tokens: u32) -> Prompt<'a> {
        Prompt {
            lineage: &|_| None,
            request,
            session,
            previous: None,
            blocks,
            generated_blocks: &[],
            tokens,
            output_tokens: 0,
            shared_with_previous_sequence: 0,
        }
    }

    #[test]
    fn vllm_evicts_least_recently_used_blocks_a_request_s_tail_first() {
        let mut pool = BlockPool::new(4, Some(4));
        let a = [1, 2];
        assert_eq!(pool.serve(&prompt(0, 0, &a, 9)).cached, 0);
        // Three more blocks: the fourth place is free, the fifth takes the least recently
        // used block, which is A's tail (freed before its head).
        let b = [11, 12, 13];
        let served = pool.serve(&prompt(1, 1, &b, 12));
        assert_eq!(
            served,
            Served {
                cached: 0,
                evicted: 1
            }
        );
        // A's head is still there.
        assert_eq!(pool.peek(&prompt(2, 0, &a, 9)), 4);
        // Never the last token: a prompt of exactly two cached blocks reads one.
        let mut fresh = BlockPool::new(4, None);
        fresh.serve(&prompt(0, 0, &a, 9));
        assert_eq!(fresh.peek(&prompt(1, 0, &a, 8)), 4);
        assert_eq!(fresh.peek(&prompt(1, 0, &a, 9)), 8);
    }

    #[test]
    fn the_ideal_cache_serves_whole_blocks_like_the_engines() {
        // The session's previous request and its answer share 30 tokens with a prompt of 40:
        // one block of 16, as vLLM serves it, not 30.
        let mut ideal = ReplicaCache::Ideal(BlockPool::new(16, None));
        let blocks = [1, 2];
        let mut later = prompt(1, 0, &blocks, 40);
        later.previous = Some(0);
        later.shared_with_previous_sequence = 30;
        assert_eq!(ideal.peek(&later), 16);
        assert_eq!(ideal.serve(&later).cached, 16);
        // Tokens are blocks of one.
        let mut per_token = ReplicaCache::Ideal(BlockPool::new(1, None));
        assert_eq!(per_token.serve(&later).cached, 30);
    }

    #[test]
    fn sglang_evicts_the_least_recently_used_leaf() {
        let mut tree = RadixTree::new(4, Some(3));
        tree.serve(&prompt(0, 0, &[1, 2], 9));
        // Shares the first page.
        assert_eq!(tree.serve(&prompt(1, 1, &[1, 22], 9)).cached, 4);
        // A third branch: the oldest leaf (page 2) goes, not the shared page 1.
        assert_eq!(
            tree.serve(&prompt(2, 2, &[31], 5)),
            Served {
                cached: 0,
                evicted: 1
            }
        );
        assert_eq!(tree.peek(&prompt(3, 0, &[1, 2], 9)), 4);
        assert_eq!(tree.peek(&prompt(3, 1, &[1, 22], 9)), 8);
    }

    #[test]
    fn a_llamacpp_slot_taken_by_another_session_is_found_again_in_the_prompt_cache() {
        let first = [1, 2];
        let other = [11, 12];
        let second = [1, 2, 3];
        let turn = |slots: &mut Slots| {
            let mut x1 = prompt(0, 0, &first, 10);
            x1.output_tokens = 2;
            slots.serve(&x1);
            slots.serve(&prompt(1, 1, &other, 10));
            let mut x2 = prompt(2, 0, &second, 14);
            x2.previous = Some(0);
            x2.shared_with_previous_sequence = 12;
            slots.serve(&x2).cached
        };
        // One slot, no prompt cache: the other session took the slot.
        assert_eq!(turn(&mut Slots::new(4, 1, None)), 0);
        // Two slots: each session keeps one, and the whole sequence is read but the last
        // generated token, which was never decoded.
        assert_eq!(turn(&mut Slots::new(4, 2, None)), 11);
        // One slot and a prompt cache: the first turn's sequence was saved and comes back.
        assert_eq!(turn(&mut Slots::new(4, 1, Some(100))), 11);
        // A prompt cache too small for its 11 tokens: dropped.
        assert_eq!(turn(&mut Slots::new(4, 1, Some(10))), 0);
    }
}

//! vLLM's block pool.

use std::num::NonZeroUsize;

use lru::LruCache;
use rustc_hash::FxBuildHasher;

use super::{Prompt, Served, hit_limit};

/// vLLM's block pool: cached blocks in least-recently-used order.
pub struct BlockPool {
    block_size: u32,
    blocks: LruCache<u64, (), FxBuildHasher>,
    /// Which of a request's blocks were cached, kept between requests to save allocations.
    cached: Vec<bool>,
}

impl BlockPool {
    /// A pool of `capacity` blocks (`None`: unbounded).
    pub fn new(block_size: u32, capacity: Option<usize>) -> Self {
        let blocks = match capacity.and_then(NonZeroUsize::new) {
            Some(capacity) => LruCache::with_hasher(capacity, FxBuildHasher),
            None => LruCache::unbounded_with_hasher(FxBuildHasher),
        };
        Self {
            block_size,
            blocks,
            cached: Vec::new(),
        }
    }

    /// Tokens per block.
    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    pub(super) fn peek(&self, prompt: &Prompt<'_>) -> u32 {
        let hit = prompt
            .blocks
            .iter()
            .take(hit_limit(prompt, self.block_size))
            .take_while(|hash| self.blocks.contains(*hash))
            .count();
        hit as u32 * self.block_size
    }

    pub(super) fn serve(&mut self, prompt: &Prompt<'_>) -> Served {
        let full = || prompt.blocks.iter().chain(prompt.generated_blocks);
        // The request takes its cached blocks off the free queue first (`touch`).
        let mut cached = std::mem::take(&mut self.cached);
        cached.clear();
        cached.extend(full().map(|hash| self.blocks.get(hash).is_some()));
        let hit = cached
            .iter()
            .take(hit_limit(prompt, self.block_size))
            .take_while(|cached| **cached)
            .count();
        // Then it allocates a block for each full block not cached and for the block its last
        // tokens only partly fill: blocks without a hash, freed ones, go first (they are put
        // back at the queue's head), then the least recently used cached ones. Freed last
        // block first to the queue's tail: the request's first block ends as the most
        // recently used. A block not cached takes the place of the least recently used one
        // once the pool is full (`push` returns it), which is always another request's while
        // the request's own blocks fit in the pool: its cached ones were touched first.
        let mut evicted = 0;
        for (hash, cached) in full().rev().zip(cached.iter().rev()) {
            if *cached {
                self.blocks.promote(hash);
            } else if self.blocks.push(*hash, ()).is_some() {
                evicted += 1;
            }
        }
        let kv_tokens = prompt.tokens + prompt.output_tokens.saturating_sub(1);
        let partial = (kv_tokens.div_ceil(self.block_size) as usize).saturating_sub(cached.len());
        let capacity = self.blocks.cap().get();
        while self.blocks.len() + partial > capacity && self.blocks.pop_lru().is_some() {
            evicted += 1;
        }
        self.cached = cached;
        Served {
            cached: hit as u32 * self.block_size,
            evicted,
        }
    }
}

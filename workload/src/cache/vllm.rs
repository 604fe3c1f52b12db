//! vLLM's block pool.

use std::num::NonZeroUsize;

use lru::LruCache;
use rustc_hash::FxBuildHasher;

use super::{Prompt, Served, hit_limit};

/// vLLM's block pool: cached blocks in least-recently-used order.
pub struct BlockPool {
    block_size: u32,
    blocks: LruCache<u64, (), FxBuildHasher>,
}

impl BlockPool {
    /// A pool of `capacity` blocks (`None`: unbounded).
    pub fn new(block_size: u32, capacity: Option<usize>) -> Self {
        let blocks = match capacity.and_then(NonZeroUsize::new) {
            Some(capacity) => LruCache::with_hasher(capacity, FxBuildHasher),
            None => LruCache::unbounded_with_hasher(FxBuildHasher),
        };
        Self { block_size, blocks }
    }

    /// Tokens per block.
    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    fn hit_blocks(&self, prompt: &Prompt<'_>) -> usize {
        prompt
            .blocks
            .iter()
            .take(hit_limit(prompt, self.block_size))
            .take_while(|hash| self.blocks.contains(*hash))
            .count()
    }

    pub(super) fn peek(&self, prompt: &Prompt<'_>) -> u32 {
        self.hit_blocks(prompt) as u32 * self.block_size
    }

    pub(super) fn serve(&mut self, prompt: &Prompt<'_>) -> Served {
        let hit = self.hit_blocks(prompt);
        let full = || prompt.blocks.iter().chain(prompt.generated_blocks);
        // The request takes its cached blocks off the free queue first (`touch`).
        let cached: Vec<bool> = full().map(|hash| self.blocks.get(hash).is_some()).collect();
        // Then it allocates a block for each full block not cached and for the block its last
        // tokens only partly fill: blocks without a hash, freed ones, go first (they are put
        // back at the queue's head), then the least recently used cached ones.
        let kv_tokens = prompt.tokens + prompt.output_tokens.saturating_sub(1);
        let allocated = kv_tokens.div_ceil(self.block_size) as usize;
        let uncached = cached.iter().filter(|cached| !**cached).count();
        let partial = allocated.saturating_sub(cached.len());
        let mut evicted = 0;
        let capacity = self.blocks.cap().get();
        while self.blocks.len() + uncached + partial > capacity {
            if self.blocks.pop_lru().is_none() {
                break;
            }
            evicted += 1;
        }
        // Freed last block first to the queue's tail: the request's first block ends as the
        // most recently used.
        for (hash, cached) in full().rev().zip(cached.iter().rev()) {
            if *cached {
                self.blocks.promote(hash);
            } else {
                self.blocks.put(*hash, ());
            }
        }
        Served {
            cached: hit as u32 * self.block_size,
            evicted,
        }
    }
}

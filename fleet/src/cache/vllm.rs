//! vLLM's block pool.

use rustc_hash::FxHashMap;

use super::{Prompt, Served, vllm_hit};
use crate::recency::RecencyList;

/// vLLM's block pool: cached blocks in least-recently-used order.
pub struct BlockPool {
    block_size: u32,
    /// Blocks it holds at most (`usize::MAX`: unbounded).
    capacity: usize,
    /// Each cached block's slot in `order`.
    slots: FxHashMap<u64, u32>,
    /// The cached blocks, least recently used first.
    order: RecencyList<u64>,
    /// The slot of each block of the request served that was cached, kept between requests
    /// to save allocations.
    cached: Vec<Option<u32>>,
}

impl BlockPool {
    /// A pool of `capacity` blocks (`None` or 0: unbounded).
    pub fn new(block_size: u32, capacity: Option<usize>) -> Self {
        Self {
            block_size,
            capacity: capacity.filter(|blocks| *blocks > 0).unwrap_or(usize::MAX),
            slots: FxHashMap::default(),
            order: RecencyList::default(),
            cached: Vec::new(),
        }
    }

    /// Tokens per block.
    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    pub(super) fn peek(&self, prompt: &Prompt<'_>) -> u32 {
        let held = prompt
            .blocks
            .iter()
            .take_while(|hash| self.slots.contains_key(*hash))
            .count();
        self.hit(prompt, held)
    }

    /// What vLLM serves of a prompt whose first `held` blocks the pool holds.
    fn hit(&self, prompt: &Prompt<'_>, held: usize) -> u32 {
        let block = self.block_size as usize;
        vllm_hit(prompt.tokens as usize, held * block, block, false) as u32
    }

    /// Caches `hash` as the most recently used block, in the place of the least recently used
    /// one when the pool is full; returns whether a block was evicted.
    fn insert(&mut self, hash: u64) -> bool {
        if let Some(&slot) = self.slots.get(&hash) {
            self.order.touch(slot, hash);
            return false;
        }
        let evicted = self.slots.len() >= self.capacity && self.evict_oldest();
        let slot = self.order.push(hash);
        self.slots.insert(hash, slot);
        evicted
    }

    /// Drops the least recently used block; returns whether there was one.
    fn evict_oldest(&mut self) -> bool {
        match self.order.pop_first() {
            Some(hash) => {
                self.slots.remove(&hash);
                true
            }
            None => false,
        }
    }

    pub(super) fn serve(&mut self, prompt: &Prompt<'_>) -> Served {
        let full = || prompt.blocks.iter().chain(prompt.generated_blocks);
        // The request takes its cached blocks off the free queue first (`touch`).
        let mut cached = std::mem::take(&mut self.cached);
        cached.clear();
        for hash in full() {
            let slot = self.slots.get(hash).copied();
            if let Some(slot) = slot {
                self.order.touch(slot, *hash);
            }
            cached.push(slot);
        }
        let held = cached.iter().take_while(|slot| slot.is_some()).count();
        // Then it allocates a block for each full block not cached and for the block its last
        // tokens only partly fill: blocks without a hash, freed ones, go first (they are put
        // back at the queue's head), then the least recently used cached ones. Freed last
        // block first to the queue's tail: the request's first block ends as the most
        // recently used. A block not cached takes the place of the least recently used one
        // once the pool is full, which is always another request's while the request's own
        // blocks fit in the pool: its cached ones, touched first, keep their slots. A request
        // longer than the pool looks each one up again.
        let slots_hold = cached.len() <= self.capacity;
        let mut evicted = 0;
        for (hash, slot) in full().rev().zip(cached.iter().rev()) {
            match slot {
                Some(slot) if slots_hold => self.order.touch(*slot, *hash),
                Some(_) => {
                    if let Some(&slot) = self.slots.get(hash) {
                        self.order.touch(slot, *hash);
                    }
                }
                None => evicted += u64::from(self.insert(*hash)),
            }
        }
        let kv_tokens = prompt.tokens + prompt.output_tokens.saturating_sub(1);
        let partial = (kv_tokens.div_ceil(self.block_size) as usize).saturating_sub(cached.len());
        while self.slots.len().saturating_add(partial) > self.capacity && self.evict_oldest() {
            evicted += 1;
        }
        self.cached = cached;
        Served {
            cached: self.hit(prompt, held),
            evicted,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroUsize;

    use lru::LruCache;
    use proptest::prelude::*;

    use super::*;
    use crate::cache::hit_blocks;

    /// The pool as it was kept on the `lru` crate (checked against a live vLLM server by
    /// `live_vllm`'s `a_small_kv_cache_evicts_as_the_simulation_says`).
    struct LruPool {
        block_size: u32,
        blocks: LruCache<u64, ()>,
    }

    impl LruPool {
        fn serve(&mut self, prompt: &Prompt<'_>) -> Served {
            let full = || prompt.blocks.iter().chain(prompt.generated_blocks);
            let cached: Vec<bool> = full().map(|hash| self.blocks.get(hash).is_some()).collect();
            let hit = cached
                .iter()
                .take(hit_blocks(prompt.tokens, self.block_size))
                .take_while(|cached| **cached)
                .count();
            let mut evicted = 0;
            for (hash, cached) in full().rev().zip(cached.iter().rev()) {
                if *cached {
                    self.blocks.promote(hash);
                } else if self.blocks.push(*hash, ()).is_some() {
                    evicted += 1;
                }
            }
            let kv_tokens = prompt.tokens + prompt.output_tokens.saturating_sub(1);
            let partial =
                (kv_tokens.div_ceil(self.block_size) as usize).saturating_sub(cached.len());
            while self.blocks.len() + partial > self.blocks.cap().get()
                && self.blocks.pop_lru().is_some()
            {
                evicted += 1;
            }
            Served {
                cached: hit as u32 * self.block_size,
                evicted,
            }
        }
    }

    proptest! {
        /// Prompts that share heads of a few documents, some longer than the pool, with
        /// generated blocks and a last partial block.
        #[test]
        fn the_pool_serves_as_the_lru_crate_pool_did(
            capacity in 1usize..12,
            requests in prop::collection::vec(
                (0u64..4, 0usize..14, 0usize..3, 0u32..4, 0u32..40),
                1..40,
            ),
        ) {
            const BLOCK: u32 = 4;
            let mut pool = BlockPool::new(BLOCK, Some(capacity));
            let mut reference = LruPool {
                block_size: BLOCK,
                blocks: LruCache::new(NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN)),
            };
            for (request, (document, length, generated, extra, output)) in
                requests.into_iter().enumerate()
            {
                // Chained: a block is named by its document and its place.
                let all: Vec<u64> = (0..(length + generated) as u64)
                    .map(|place| document * 1_000 + place)
                    .collect();
                let (blocks, generated_blocks) = all.split_at(length);
                let prompt = Prompt {
                    lineage: &|_| None,
                    request,
                    session: document as u32,
                    previous: None,
                    blocks,
                    generated_blocks,
                    tokens: length as u32 * BLOCK + extra,
                    output_tokens: output,
                    shared_with_previous_sequence: 0,
                };
                prop_assert_eq!(pool.peek(&prompt), {
                    let hit = blocks
                        .iter()
                        .take(hit_blocks(prompt.tokens, BLOCK))
                        .take_while(|hash| reference.blocks.contains(*hash))
                        .count();
                    hit as u32 * BLOCK
                });
                prop_assert_eq!(pool.serve(&prompt), reference.serve(&prompt));
                prop_assert_eq!(pool.slots.len(), reference.blocks.len());
            }
        }
    }
}

//! A replica's prefix cache, as each engine keeps it, over block hashes (never tokens):
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
//!   it); a request takes the idle slot whose sequence covers the largest share of its
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

use std::collections::{BTreeSet, VecDeque};
use std::num::NonZeroUsize;

use lru::LruCache;
use rustc_hash::{FxBuildHasher, FxHashMap};

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
    /// what any earlier request left (in blocks) and what the session's previous request and
    /// its answer share with the prompt (to the token).
    Ideal(BlockPool),
}

impl ReplicaCache {
    /// Prompt tokens the cache would serve `prompt` now, leaving it as it is.
    pub fn peek(&self, prompt: &Prompt<'_>) -> u32 {
        match self {
            Self::Vllm(pool) => pool.peek(prompt),
            Self::Sglang(tree) => tree.peek(prompt),
            Self::LlamaCpp(slots) => slots.peek(prompt),
            Self::Ideal(pool) => pool.peek(prompt).max(previous_share(prompt)),
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
                    cached: served.cached.max(previous_share(prompt)),
                    evicted: 0,
                }
            }
        }
    }
}

/// What the session's previous request and its answer share with the prompt, less the last
/// token.
fn previous_share(prompt: &Prompt<'_>) -> u32 {
    if prompt.previous.is_none() {
        return 0;
    }
    prompt
        .shared_with_previous_sequence
        .min(prompt.tokens.saturating_sub(1))
}

/// Blocks a hit may cover: never the prompt's last token.
fn hit_limit(prompt: &Prompt<'_>, block_size: u32) -> usize {
    (prompt.tokens.saturating_sub(1) / block_size.max(1)) as usize
}

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

    fn hit_blocks(&self, prompt: &Prompt<'_>) -> usize {
        prompt
            .blocks
            .iter()
            .take(hit_limit(prompt, self.block_size))
            .take_while(|hash| self.blocks.contains(*hash))
            .count()
    }

    fn peek(&self, prompt: &Prompt<'_>) -> u32 {
        self.hit_blocks(prompt) as u32 * self.block_size
    }

    fn serve(&mut self, prompt: &Prompt<'_>) -> Served {
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

/// SGLang's radix tree, over page hashes: nodes with their parent, children count and last
/// access; the leaves in least-recently-used order for eviction.
pub struct RadixTree {
    page_size: u32,
    capacity: Option<usize>,
    nodes: FxHashMap<u64, Node>,
    /// Leaves by (last access, hash).
    leaves: BTreeSet<(u64, u64)>,
    clock: u64,
}

struct Node {
    parent: Option<u64>,
    children: u32,
    last_access: u64,
}

impl RadixTree {
    pub fn new(page_size: u32, capacity: Option<usize>) -> Self {
        Self {
            page_size,
            capacity,
            nodes: FxHashMap::default(),
            leaves: BTreeSet::new(),
            clock: 0,
        }
    }

    fn hit_pages(&self, prompt: &Prompt<'_>) -> usize {
        prompt
            .blocks
            .iter()
            .take(hit_limit(prompt, self.page_size))
            .take_while(|hash| self.nodes.contains_key(*hash))
            .count()
    }

    fn peek(&self, prompt: &Prompt<'_>) -> u32 {
        self.hit_pages(prompt) as u32 * self.page_size
    }

    fn touch(&mut self, hash: u64) {
        if let Some(node) = self.nodes.get_mut(&hash) {
            if node.children == 0 {
                self.leaves.remove(&(node.last_access, hash));
                self.leaves.insert((self.clock, hash));
            }
            node.last_access = self.clock;
        }
    }

    fn serve(&mut self, prompt: &Prompt<'_>) -> Served {
        self.clock += 1;
        let hit = self.hit_pages(prompt);
        // The matched path is used now (`match_prefix` updates each node's access time).
        for hash in &prompt.blocks[..hit] {
            self.touch(*hash);
        }
        let mut evicted = 0;
        let mut parent = prompt.blocks[..hit].last().copied();
        // The finished request's prompt and output go into the tree (`cache_finished_req`).
        for hash in prompt.blocks.iter().chain(prompt.generated_blocks) {
            if self.nodes.contains_key(hash) {
                self.touch(*hash);
            } else {
                evicted += self.make_room(parent);
                if let Some(parent_hash) = parent
                    && let Some(node) = self.nodes.get_mut(&parent_hash)
                {
                    if node.children == 0 {
                        self.leaves.remove(&(node.last_access, parent_hash));
                    }
                    node.children += 1;
                }
                self.nodes.insert(
                    *hash,
                    Node {
                        parent,
                        children: 0,
                        last_access: self.clock,
                    },
                );
                self.leaves.insert((self.clock, *hash));
            }
            parent = Some(*hash);
        }
        Served {
            cached: hit as u32 * self.page_size,
            evicted,
        }
    }

    /// Evicts least recently used leaves until a page fits, sparing `keep`'s path.
    fn make_room(&mut self, keep: Option<u64>) -> u64 {
        let Some(capacity) = self.capacity else {
            return 0;
        };
        let mut evicted = 0;
        while self.nodes.len() >= capacity {
            let Some(&(access, hash)) = self.leaves.iter().find(|(_, hash)| Some(*hash) != keep)
            else {
                break;
            };
            self.leaves.remove(&(access, hash));
            if let Some(node) = self.nodes.remove(&hash) {
                evicted += 1;
                if let Some(parent_hash) = node.parent
                    && let Some(parent) = self.nodes.get_mut(&parent_hash)
                {
                    parent.children -= 1;
                    if parent.children == 0 {
                        self.leaves.insert((parent.last_access, parent_hash));
                    }
                }
            }
        }
        evicted
    }
}

/// llama.cpp's slots, and its host prompt cache (`--cache-ram`).
pub struct Slots {
    block_size: u32,
    slots: Vec<Slot>,
    /// Saved sequences, oldest first; `None`: no prompt cache.
    saved: Option<VecDeque<Sequence>>,
    /// Tokens the prompt cache holds at most.
    saved_capacity: u64,
    clock: u64,
}

/// `--slot-prompt-similarity`'s default.
const SLOT_PROMPT_SIMILARITY: f64 = 0.1;

#[derive(Default)]
struct Slot {
    sequence: Option<Sequence>,
    last_used: u64,
}

/// The tokens a slot holds: a request's prompt and what was generated for it.
#[derive(Clone)]
struct Sequence {
    request: usize,
    /// Its full blocks (the trace's).
    blocks: Vec<u64>,
    tokens: u32,
}

impl Slots {
    /// `slots` slots, and a prompt cache of `saved_tokens` tokens (`None`: none, `--cache-ram
    /// 0`).
    pub fn new(block_size: u32, slots: usize, saved_tokens: Option<u64>) -> Self {
        Self {
            block_size,
            slots: (0..slots.max(1)).map(|_| Slot::default()).collect(),
            saved: saved_tokens.map(|_| VecDeque::new()),
            saved_capacity: saved_tokens.unwrap_or(0),
            clock: 0,
        }
    }

    /// Leading tokens `sequence` shares with `prompt`: to the token with an earlier request
    /// of its session, else in whole blocks.
    fn common(&self, sequence: &Sequence, prompt: &Prompt<'_>) -> u32 {
        if Some(sequence.request) == prompt.previous {
            return prompt.shared_with_previous_sequence.min(sequence.tokens);
        }
        if let Some(shared) = (prompt.lineage)(sequence.request) {
            return shared.min(sequence.tokens);
        }
        let blocks = sequence
            .blocks
            .iter()
            .zip(prompt.blocks)
            .take_while(|(left, right)| left == right)
            .count() as u32;
        (blocks * self.block_size)
            .min(sequence.tokens)
            .min(prompt.tokens)
    }

    /// The slot a request takes (`get_available_slot`), and whether the slot saves what it
    /// holds first.
    fn choose(&self, prompt: &Prompt<'_>) -> (usize, bool) {
        let mut best: Option<(usize, f64)> = None;
        for (index, slot) in self.slots.iter().enumerate() {
            let Some(sequence) = &slot.sequence else {
                continue;
            };
            let similarity =
                f64::from(self.common(sequence, prompt)) / f64::from(prompt.tokens.max(1));
            if similarity > best.map_or(0.0, |(_, best)| best)
                && similarity > SLOT_PROMPT_SIMILARITY
            {
                best = Some((index, similarity));
            }
        }
        if let Some((index, similarity)) = best {
            let kept = self.slots[index]
                .sequence
                .as_ref()
                .map_or(1, |sequence| sequence.tokens);
            let keep = similarity * f64::from(prompt.tokens) / f64::from(kept.max(1));
            return (index, keep < 0.5);
        }
        // The least recently used, the last of equals.
        let mut chosen = 0;
        for (index, slot) in self.slots.iter().enumerate() {
            if slot.last_used <= self.slots[chosen].last_used {
                chosen = index;
            }
        }
        (chosen, true)
    }

    fn peek(&self, prompt: &Prompt<'_>) -> u32 {
        let (slot, _) = self.choose(prompt);
        let held = self.slots[slot].sequence.as_ref();
        let mut common = held.map_or(0, |sequence| self.common(sequence, prompt));
        if let Some(saved) = &self.saved {
            // What loading from the prompt cache could bring.
            for sequence in saved {
                common = common.max(self.common(sequence, prompt));
            }
        }
        common.min(prompt.tokens.saturating_sub(1))
    }

    fn serve(&mut self, prompt: &Prompt<'_>) -> Served {
        self.clock += 1;
        let (index, update_cache) = self.choose(prompt);
        let mut evicted = 0;
        if update_cache && self.saved.is_some() {
            evicted += self.save(index);
            self.load(index, prompt);
            evicted += self.trim();
        }
        let slot = &self.slots[index];
        let common = slot
            .sequence
            .as_ref()
            .map_or(0, |sequence| self.common(sequence, prompt));
        let mut blocks = prompt.blocks.to_vec();
        blocks.extend_from_slice(prompt.generated_blocks);
        self.slots[index] = Slot {
            sequence: Some(Sequence {
                request: prompt.request,
                blocks,
                tokens: prompt.tokens + prompt.output_tokens,
            }),
            last_used: self.clock,
        };
        Served {
            cached: common.min(prompt.tokens.saturating_sub(1)),
            evicted,
        }
    }

    /// `prompt_save`: the slot's sequence into the prompt cache, unless one there holds it
    /// whole; saved sequences it holds whole are dropped, and the oldest make room.
    fn save(&mut self, index: usize) -> u64 {
        let Some(sequence) = self.slots[index].sequence.clone() else {
            return 0;
        };
        let capacity = self.saved_capacity;
        let Some(saved) = self.saved.as_mut() else {
            return 0;
        };
        let contains = |outer: &Sequence, inner: &Sequence| {
            inner.tokens <= outer.tokens
                && inner.blocks.len() <= outer.blocks.len()
                && outer.blocks[..inner.blocks.len()] == inner.blocks[..]
        };
        if saved.iter().any(|entry| contains(entry, &sequence)) {
            return 0;
        }
        if u64::from(sequence.tokens) > capacity {
            return 0;
        }
        // Saved sequences the slot's holds whole are obsolete, not evicted.
        saved.retain(|entry| !contains(&sequence, entry));
        let mut evicted = 0;
        while !saved.is_empty()
            && saved
                .iter()
                .map(|entry| u64::from(entry.tokens))
                .sum::<u64>()
                + u64::from(sequence.tokens)
                > capacity
        {
            if let Some(dropped) = saved.pop_front() {
                evicted += dropped.blocks.len() as u64;
            }
        }
        saved.push_back(sequence);
        evicted
    }

    /// `load`: the saved sequence that keeps the most of itself and covers more of the prompt
    /// than the slot does replaces the slot's (and leaves the cache).
    fn load(&mut self, index: usize, prompt: &Prompt<'_>) {
        let held = self.slots[index].sequence.as_ref();
        let base = held.map_or(0, |sequence| self.common(sequence, prompt));
        let mut keep_best = held.map_or(-1.0, |sequence| {
            f64::from(base) / f64::from(sequence.tokens.max(1))
        });
        let mut similarity_best = f64::from(base) / f64::from(prompt.tokens.max(1));
        let mut best = None;
        if let Some(saved) = &self.saved {
            for (position, sequence) in saved.iter().enumerate() {
                let common = f64::from(self.common(sequence, prompt));
                let keep = common / f64::from(sequence.tokens.max(1));
                let similarity = common / f64::from(prompt.tokens.max(1));
                if keep < 0.25 {
                    continue;
                }
                if keep_best < keep && similarity_best < similarity {
                    keep_best = keep;
                    similarity_best = similarity;
                    best = Some(position);
                }
            }
        }
        if let Some(position) = best
            && let Some(sequence) = self.saved.as_mut().and_then(|saved| saved.remove(position))
        {
            self.slots[index].sequence = Some(sequence);
        }
    }

    /// `update`: the oldest saved sequences dropped past the cache's size.
    fn trim(&mut self) -> u64 {
        let capacity = self.saved_capacity;
        let Some(saved) = self.saved.as_mut() else {
            return 0;
        };
        let mut evicted = 0;
        while saved
            .iter()
            .map(|entry| u64::from(entry.tokens))
            .sum::<u64>()
            > capacity
        {
            match saved.pop_front() {
                Some(dropped) => evicted += dropped.blocks.len() as u64,
                None => break,
            }
        }
        evicted
    }
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
        // Two slots: each session keeps one, and the whole sequence is read.
        assert_eq!(turn(&mut Slots::new(4, 2, None)), 12);
        // One slot and a prompt cache: the first turn's sequence was saved and comes back.
        assert_eq!(turn(&mut Slots::new(4, 1, Some(100))), 12);
        // A prompt cache too small for it: dropped.
        assert_eq!(turn(&mut Slots::new(4, 1, Some(11))), 0);
    }
}

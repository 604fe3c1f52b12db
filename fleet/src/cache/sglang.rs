//! SGLang's radix tree.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap;

use super::{Prompt, Served, sglang_hit};

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

    /// Pages SGLang serves of `prompt`: the run the tree holds, cut by its rule.
    fn hit_pages(&self, prompt: &Prompt<'_>) -> usize {
        let held = prompt
            .blocks
            .iter()
            .take_while(|hash| self.nodes.contains_key(*hash))
            .count();
        let page = self.page_size.max(1) as usize;
        sglang_hit(prompt.tokens as usize, held * page, page) / page
    }

    pub(super) fn peek(&self, prompt: &Prompt<'_>) -> u32 {
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

    pub(super) fn serve(&mut self, prompt: &Prompt<'_>) -> Served {
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

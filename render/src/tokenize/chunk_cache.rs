//! The per-chunk encoding cache a tokenizer keeps, bounded in bytes.

use std::sync::Arc;

use super::tokens::Chunk;

/// The most bytes of encodings a tokenizer's cache keeps.
pub const CHUNK_CACHE_BUDGET: usize = 256 << 20;

/// Encodings by the hash of their text, the least recently used forgotten first once they
/// take more than the budget.
pub(super) struct ChunkCache {
    pub(super) entries: lru::LruCache<blake3::Hash, Arc<Chunk>>,
    pub(super) bytes: usize,
    budget: usize,
}

impl ChunkCache {
    pub(super) fn new(budget: usize) -> Self {
        Self {
            entries: lru::LruCache::unbounded(),
            bytes: 0,
            budget,
        }
    }

    pub(super) fn get(&mut self, key: &blake3::Hash) -> Option<Arc<Chunk>> {
        self.entries.get(key).cloned()
    }

    pub(super) fn insert(&mut self, key: blake3::Hash, chunk: Arc<Chunk>) {
        self.bytes += chunk.size();
        if let Some((_, replaced)) = self.entries.push(key, chunk) {
            self.bytes -= replaced.size();
        }
        while self.bytes > self.budget {
            let Some((_, forgotten)) = self.entries.pop_lru() else {
                break;
            };
            self.bytes -= forgotten.size();
        }
    }

    pub(super) fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }
}

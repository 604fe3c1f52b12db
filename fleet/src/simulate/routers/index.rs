//! A router's own index: per replica, the units (prefix blocks in the router's units) it
//! believes the replica holds, least recently used first.

use std::collections::hash_map::Entry;

use rustc_hash::FxHashMap;

use crate::recency::RecencyList;

/// The prompt in units of `unit_tokens` tokens, on a trace of `block_size`-token blocks:
/// units rounded to whole blocks of the trace (at least one), each named by the chained hash
/// of its last block (which covers everything before it); a partial unit at the end is left
/// out, as the routers leave out a partial block. Returns the units and their tokens.
pub fn units(blocks: &[u64], block_size: u32, unit_tokens: u32) -> (Vec<u64>, u32) {
    let block_size = block_size.max(1);
    let stride = ((unit_tokens + block_size / 2) / block_size).max(1) as usize;
    let units = blocks
        .iter()
        .skip(stride - 1)
        .step_by(stride)
        .copied()
        .collect();
    (units, stride as u32 * block_size)
}

/// Which end of a prompt stays longest when the index evicts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recency {
    /// The head is touched last: leaves go first (a radix tree's LRU leaf eviction).
    HeadNewest,
    /// The units are added in order: the head goes first (an LRU cache of block hashes).
    TailNewest,
}

#[derive(Default)]
struct ReplicaIndex {
    /// Each unit's slot in `lru`.
    slots: FxHashMap<u64, u32>,
    lru: RecencyList<(u64, u64)>,
}

/// What a router believes each replica holds.
pub struct PrefixIndex {
    replicas: Vec<ReplicaIndex>,
    clock: u64,
}

impl PrefixIndex {
    pub fn new(replica_count: usize) -> Self {
        Self {
            replicas: (0..replica_count)
                .map(|_| ReplicaIndex::default())
                .collect(),
            clock: 0,
        }
    }

    /// Leading `units` the replica is believed to hold.
    pub fn matched(&self, replica: usize, units: &[u64]) -> usize {
        let index = &self.replicas[replica];
        units
            .iter()
            .take_while(|unit| index.slots.contains_key(unit))
            .count()
    }

    /// Leading `units` each replica is believed to hold.
    pub fn matched_all(&self, units: &[u64]) -> Vec<usize> {
        (0..self.replicas.len())
            .map(|replica| self.matched(replica, units))
            .collect()
    }

    pub fn contains(&self, replica: usize, unit: u64) -> bool {
        self.replicas[replica].slots.contains_key(&unit)
    }

    /// Units believed held by the replica.
    pub fn len(&self, replica: usize) -> usize {
        self.replicas[replica].slots.len()
    }

    /// Records that the replica now holds `units`, evicting the least recently used past
    /// `capacity` units.
    pub fn insert(
        &mut self,
        replica: usize,
        units: &[u64],
        recency: Recency,
        capacity: Option<usize>,
    ) {
        let index = &mut self.replicas[replica];
        let mut touch = |unit: u64| {
            self.clock += 1;
            match index.slots.entry(unit) {
                Entry::Occupied(slot) => index.lru.touch(*slot.get(), (self.clock, unit)),
                Entry::Vacant(vacant) => {
                    vacant.insert(index.lru.push((self.clock, unit)));
                }
            }
        };
        match recency {
            Recency::TailNewest => units.iter().for_each(|unit| touch(*unit)),
            Recency::HeadNewest => units.iter().rev().for_each(|unit| touch(*unit)),
        }
        if let Some(capacity) = capacity {
            self.evict_to(replica, capacity);
        }
    }

    /// Drops the replica's least recently used units until at most `capacity` are left;
    /// returns the units dropped.
    pub fn evict_to(&mut self, replica: usize, capacity: usize) -> Vec<u64> {
        let index = &mut self.replicas[replica];
        let mut dropped = Vec::new();
        while index.slots.len() > capacity {
            let Some((_, unit)) = index.lru.pop_first() else {
                break;
            };
            index.slots.remove(&unit);
            dropped.push(unit);
        }
        dropped
    }

    /// Drops the least recently used units of all replicas together until at most
    /// `capacity` are left in all (one budget shared by every replica).
    pub fn evict_all_to(&mut self, capacity: usize) {
        let mut total: usize = self.replicas.iter().map(|index| index.slots.len()).sum();
        while total > capacity {
            let oldest = self
                .replicas
                .iter_mut()
                .filter_map(|index| index.lru.first().copied().map(|first| (first, index)))
                .min_by_key(|(first, _)| *first);
            let Some(((_, unit), index)) = oldest else {
                break;
            };
            index.lru.pop_first();
            index.slots.remove(&unit);
            total -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_whole_blocks_of_the_trace_named_by_their_last_block() {
        // 16-token units on 4-token blocks: every fourth block.
        assert_eq!(units(&[1, 2, 3, 4, 5, 6, 7, 8, 9], 4, 16), (vec![4, 8], 16));
        // Units finer than the trace's blocks are its blocks.
        assert_eq!(units(&[1, 2], 16, 4), (vec![1, 2], 16));
        // 16-token units on 16-token blocks: the blocks themselves.
        assert_eq!(units(&[1, 2], 16, 16), (vec![1, 2], 16));
    }

    #[test]
    fn eviction_takes_the_tail_or_the_head_as_the_router_does() {
        let mut leaves_first = PrefixIndex::new(1);
        leaves_first.insert(0, &[1, 2, 3], Recency::HeadNewest, Some(2));
        assert_eq!(leaves_first.matched(0, &[1, 2, 3]), 2);
        let mut head_first = PrefixIndex::new(1);
        head_first.insert(0, &[1, 2, 3], Recency::TailNewest, Some(2));
        assert_eq!(head_first.matched(0, &[1, 2, 3]), 0);
        assert!(head_first.contains(0, 3));
    }
}

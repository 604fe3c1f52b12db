//! A router's own index: per replica, the units (prefix blocks in the router's units) it
//! believes the replica holds, least recently used first.

use std::collections::hash_map::Entry;

use rustc_hash::FxHashMap;

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

/// No node: the end of a [`RecencyList`].
const NONE: u32 = u32::MAX;

struct Node {
    /// (last use, unit).
    entry: (u64, u64),
    older: u32,
    newer: u32,
}

/// Entries `(last use, unit)` from the least recently used to the most, used with a clock
/// that only grows, so the order is that of a `BTreeSet<(u64, u64)>`: a doubly linked list
/// in a vector, a touch and a drop in constant time without allocating (a B-tree's log and
/// node allocations dominated the simulation of the routers' indexes). Each entry has a slot
/// its owner keeps (in a map from unit to slot).
#[derive(Default)]
pub struct RecencyList {
    nodes: Vec<Node>,
    free: Vec<u32>,
    oldest: Option<u32>,
    newest: Option<u32>,
}

impl RecencyList {
    /// Adds `entry` as the most recently used; returns its slot.
    pub fn push(&mut self, entry: (u64, u64)) -> u32 {
        let node = Node {
            entry,
            older: self.newest.unwrap_or(NONE),
            newer: NONE,
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.nodes[slot as usize] = node;
                slot
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        self.link_newest(slot);
        slot
    }

    fn link_newest(&mut self, slot: u32) {
        match self.newest {
            Some(newest) => self.nodes[newest as usize].newer = slot,
            None => self.oldest = Some(slot),
        }
        self.newest = Some(slot);
    }

    fn unlink(&mut self, slot: u32) {
        let Node { older, newer, .. } = self.nodes[slot as usize];
        match older {
            NONE => self.oldest = (newer != NONE).then_some(newer),
            older => self.nodes[older as usize].newer = newer,
        }
        match newer {
            NONE => self.newest = (older != NONE).then_some(older),
            newer => self.nodes[newer as usize].older = older,
        }
    }

    /// Makes the entry in `slot` the most recently used, at `clock`.
    pub fn touch(&mut self, slot: u32, clock: u64) {
        self.nodes[slot as usize].entry.0 = clock;
        if self.newest == Some(slot) {
            return;
        }
        self.unlink(slot);
        let node = &mut self.nodes[slot as usize];
        node.older = self.newest.unwrap_or(NONE);
        node.newer = NONE;
        self.link_newest(slot);
    }

    /// Drops the entry in `slot`; returns it.
    pub fn remove(&mut self, slot: u32) -> (u64, u64) {
        self.unlink(slot);
        self.free.push(slot);
        self.nodes[slot as usize].entry
    }

    /// The least recently used entry.
    pub fn first(&self) -> Option<&(u64, u64)> {
        self.oldest.map(|slot| &self.nodes[slot as usize].entry)
    }

    /// Drops the least recently used entry; returns it.
    pub fn pop_first(&mut self) -> Option<(u64, u64)> {
        self.oldest.map(|slot| self.remove(slot))
    }
}

#[derive(Default)]
struct ReplicaIndex {
    /// Each unit's slot in `lru`.
    slots: FxHashMap<u64, u32>,
    lru: RecencyList,
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
        let touch = |unit: u64, clock: u64, index: &mut ReplicaIndex| match index.slots.entry(unit)
        {
            Entry::Occupied(slot) => index.lru.touch(*slot.get(), clock),
            Entry::Vacant(vacant) => {
                vacant.insert(index.lru.push((clock, unit)));
            }
        };
        let index = &mut self.replicas[replica];
        match recency {
            Recency::TailNewest => {
                for unit in units {
                    self.clock += 1;
                    touch(*unit, self.clock, index);
                }
            }
            Recency::HeadNewest => {
                for unit in units.iter().rev() {
                    self.clock += 1;
                    touch(*unit, self.clock, index);
                }
            }
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
    fn the_recency_list_keeps_the_order_of_a_btreeset_of_last_uses() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let mut list = RecencyList::default();
        let mut slots: FxHashMap<u64, u32> = FxHashMap::default();
        let mut expected: std::collections::BTreeSet<(u64, u64)> = Default::default();
        let mut last_use: FxHashMap<u64, u64> = FxHashMap::default();
        for clock in 1..5_000u64 {
            let unit = rng.random_range(0..64u64);
            match rng.random_range(0..4) {
                // Drop the oldest.
                0 => {
                    let popped = list.pop_first();
                    assert_eq!(popped, expected.pop_first());
                    if let Some((_, unit)) = popped {
                        slots.remove(&unit);
                        last_use.remove(&unit);
                    }
                }
                // Drop a unit wherever it is.
                1 => {
                    if let Some(slot) = slots.remove(&unit) {
                        let before = last_use.remove(&unit).unwrap();
                        assert_eq!(list.remove(slot), (before, unit));
                        expected.remove(&(before, unit));
                    }
                }
                // Use a unit: touched, or added.
                _ => {
                    match slots.get(&unit) {
                        Some(slot) => list.touch(*slot, clock),
                        None => {
                            slots.insert(unit, list.push((clock, unit)));
                        }
                    }
                    if let Some(before) = last_use.insert(unit, clock) {
                        expected.remove(&(before, unit));
                    }
                    expected.insert((clock, unit));
                }
            }
            assert_eq!(list.first(), expected.first());
        }
        let mut drained = Vec::new();
        while let Some(entry) = list.pop_first() {
            drained.push(entry);
        }
        assert_eq!(drained, expected.into_iter().collect::<Vec<_>>());
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

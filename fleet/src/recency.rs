//! Entries from the least recently used to the most: what vLLM's block pool and the routers'
//! indexes evict from.

/// No node: the end of a [`RecencyList`].
const NONE: u32 = u32::MAX;

struct Node<T> {
    entry: T,
    older: u32,
    newer: u32,
}

/// Entries from the least recently used to the most: a doubly linked list in a vector, a
/// touch and a drop in constant time without allocating (a B-tree's log and node allocations
/// dominated the simulation of the routers' indexes, an allocation per block the `lru` crate's
/// pool). Each entry has a slot its owner keeps (in a map from its key to its slot); a slot
/// stays the entry's until the entry is dropped.
pub struct RecencyList<T> {
    nodes: Vec<Node<T>>,
    free: Vec<u32>,
    oldest: Option<u32>,
    newest: Option<u32>,
}

impl<T> Default for RecencyList<T> {
    fn default() -> Self {
        Self {
            nodes: Vec::new(),
            free: Vec::new(),
            oldest: None,
            newest: None,
        }
    }
}

impl<T: Copy> RecencyList<T> {
    /// Adds `entry` as the most recently used; returns its slot.
    pub fn push(&mut self, entry: T) -> u32 {
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

    /// Makes the entry in `slot` the most recently used, now `entry`.
    pub fn touch(&mut self, slot: u32, entry: T) {
        self.nodes[slot as usize].entry = entry;
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
    pub fn remove(&mut self, slot: u32) -> T {
        self.unlink(slot);
        self.free.push(slot);
        self.nodes[slot as usize].entry
    }

    /// The least recently used entry.
    pub fn first(&self) -> Option<&T> {
        self.oldest.map(|slot| &self.nodes[slot as usize].entry)
    }

    /// Drops the least recently used entry; returns it.
    pub fn pop_first(&mut self) -> Option<T> {
        self.oldest.map(|slot| self.remove(slot))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use rustc_hash::FxHashMap;

    use super::*;

    /// With a clock that only grows, entries `(last use, key)` keep the order of a
    /// `BTreeSet`.
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
                        Some(slot) => list.touch(*slot, (clock, unit)),
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
}

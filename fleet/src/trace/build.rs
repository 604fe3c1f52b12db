//! The one way a [`Trace`] is built, whatever it is built from: sessions rendered and
//! tokenized, a benchmark dataset's prompts, a log's rows, a hashed trace's block ids. A
//! producer says what it knows of each request (its lengths, how many leading blocks it keeps
//! from its session's previous prompt, and the rest of its prompt as tokens, block ids or
//! hashes already chained); the builder chains the new blocks, places them, notes the previous
//! prompt's length, and keeps each session's requests together in the order sessions opened.

use super::{Trace, TraceRequest, TraceSession};

/// Hashes of the chain of full blocks: each block's hash covers the one before it, so equal
/// hashes mean equal prefixes (vLLM's prefix caching keys its blocks the same way).
pub fn chain_hash(previous: u64, tokens: &[u32]) -> u64 {
    let mut hasher = blake3::Hasher::new();
    hasher.update(&previous.to_le_bytes());
    for token in tokens {
        hasher.update(&token.to_le_bytes());
    }
    let hash = hasher.finalize();
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&hash.as_bytes()[..8]);
    u64::from_le_bytes(bytes)
}

/// The hash of the prefix that ends with the block `id` after the prefix hashed `previous`.
/// The ids are a hashed trace's own, so a 64-bit mix is enough (SplitMix64's finalizer,
/// Steele, Lea and Flood, "Fast splittable pseudorandom number generators", 2014): a
/// bijection of the previous hash turned and the id multiplied by an odd constant, so that two
/// prefixes collide only as two random 64-bit values do, at a fraction of a cryptographic
/// hash's cost (a trace of ten million requests chains a quarter of a billion ids on every
/// run).
fn chain_id(previous: u64, id: u64) -> u64 {
    let mut mixed = previous.rotate_left(29) ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    mixed ^ (mixed >> 31)
}

/// A request's prompt after the blocks it keeps from its session's previous prompt.
#[derive(Clone, Copy, Debug)]
pub enum Blocks<'a> {
    /// Token ids from the first block not kept on (a partial last block included), and the
    /// tokens generated for the prompt: its full blocks are chained with [`chain_hash`], then
    /// the partial block followed by the generated tokens but the last (sampled, never
    /// computed into the cache).
    Tokens {
        prompt: &'a [u32],
        generated: &'a [u32],
    },
    /// A hashed trace's ids of the full blocks not kept, chained after the kept ones (the
    /// first after the session's seed).
    Ids(&'a [u64]),
    /// Hashes chained already (a trace's rows): the prompt's new blocks, then those its
    /// generated tokens complete.
    Chained {
        prompt: &'a [u64],
        generated: &'a [u64],
    },
}

/// What a producer knows of one request of a session.
#[derive(Clone, Copy, Debug)]
pub struct NewRequest<'a> {
    pub time: Option<f64>,
    pub input_tokens: u32,
    pub output_tokens: u32,
    /// Leading prompt tokens shared with the session's previous prompt.
    pub shared_with_previous: u32,
    /// Leading prompt tokens shared with the previous prompt followed by its generated tokens.
    pub shared_with_previous_sequence: u32,
    /// Leading full blocks equal to the previous prompt's (at most as many as it has).
    pub kept_blocks: usize,
    pub blocks: Blocks<'a>,
    /// The rule kvlint's check names for this request's break.
    pub finding: Option<&'a str>,
}

/// One session's chain as its next request is placed after the previous one: the previous
/// prompt's length and full blocks' hashes. A reader that holds only the sessions in flight
/// (a hashed trace read as it goes) keeps one per session; a [`TraceBuilder`] one per session
/// it builds.
#[derive(Clone, Debug, Default)]
pub struct SessionChain {
    /// Where the chain of a hashed trace's ids starts: 0, or a conversation's own when its
    /// ids are numbered within it.
    seed: u64,
    input_tokens: u32,
    hashes: Vec<u64>,
}

impl SessionChain {
    /// A session whose hashed ids chain from `seed` (0 for any other producer).
    pub fn seeded(seed: u64) -> Self {
        Self {
            seed,
            ..Self::default()
        }
    }

    /// The trace entry of the session's next request (numbered `session`), on blocks of
    /// `block_size` tokens: its new and generated blocks' hashes pushed to `blocks` (where the
    /// entry's ranges point).
    pub fn next(
        &mut self,
        request: &NewRequest<'_>,
        block_size: u32,
        session: u32,
        blocks: &mut Vec<u64>,
    ) -> TraceRequest {
        let size = block_size.max(1) as usize;
        let kept = request.kept_blocks.min(self.hashes.len());
        self.hashes.truncate(kept);
        let mut last = self.hashes.last().copied().unwrap_or(self.seed);
        let new_start = blocks.len() as u32;
        let generated_start = match request.blocks {
            Blocks::Tokens { prompt, generated } => {
                for block in prompt.chunks_exact(size) {
                    last = chain_hash(last, block);
                    self.hashes.push(last);
                }
                blocks.extend_from_slice(&self.hashes[kept..]);
                let generated_start = blocks.len() as u32;
                let partial = &prompt[prompt.len() - prompt.len() % size..];
                let computed = &generated[..generated.len().saturating_sub(1)];
                if partial.len() + computed.len() >= size {
                    let mut sequence = partial.to_vec();
                    sequence.extend_from_slice(computed);
                    for block in sequence.chunks_exact(size) {
                        last = chain_hash(last, block);
                        blocks.push(last);
                    }
                }
                generated_start
            }
            Blocks::Ids(ids) => {
                for id in ids {
                    last = chain_id(last, *id);
                    self.hashes.push(last);
                }
                blocks.extend_from_slice(&self.hashes[kept..]);
                blocks.len() as u32
            }
            Blocks::Chained { prompt, generated } => {
                self.hashes.extend_from_slice(prompt);
                blocks.extend_from_slice(prompt);
                let generated_start = blocks.len() as u32;
                blocks.extend_from_slice(generated);
                generated_start
            }
        };
        let previous_input_tokens = std::mem::replace(&mut self.input_tokens, request.input_tokens);
        TraceRequest {
            session,
            time: request.time,
            input_tokens: request.input_tokens,
            output_tokens: request.output_tokens,
            shared_with_previous: request.shared_with_previous,
            shared_with_previous_sequence: request.shared_with_previous_sequence,
            previous_input_tokens,
            kept_blocks: kept as u32,
            new_blocks: new_start..generated_start,
            generated_blocks: generated_start..blocks.len() as u32,
            finding: None,
        }
    }
}

/// Builds a [`Trace`] request by request. Sessions are numbered in the order they are opened
/// and their requests may arrive interleaved; the trace keeps each session's requests
/// together, in the order they were pushed.
#[derive(Debug)]
pub struct TraceBuilder {
    trace: Trace,
    /// Per session opened, its chain (`None` once closed).
    chains: Vec<Option<SessionChain>>,
    /// Whether a request was pushed to another session than the last one opened.
    interleaved: bool,
}

impl TraceBuilder {
    /// A trace of blocks of `block_size` tokens (at least 1), tokenized by `renderer` (the
    /// renderer's or the trace format's name).
    pub fn new(block_size: u32, renderer: impl Into<String>) -> Self {
        Self {
            trace: Trace {
                block_size: block_size.max(1),
                renderer: renderer.into(),
                sessions: Vec::new(),
                requests: Vec::new(),
                blocks: Vec::new(),
                rules: Vec::new(),
            },
            chains: Vec::new(),
            interleaved: false,
        }
    }

    /// Tokens per block.
    pub fn block_size(&self) -> u32 {
        self.trace.block_size
    }

    /// Opens the session `identity` (its hashed ids chained from `seed`; 0 for any other
    /// producer); returns its number.
    pub fn open(&mut self, identity: impl Into<String>, seed: u64) -> u32 {
        let session = self.trace.sessions.len() as u32;
        self.trace.sessions.push(TraceSession {
            identity: identity.into(),
            requests: 0..0,
        });
        self.chains.push(Some(SessionChain::seeded(seed)));
        session
    }

    /// The full blocks of the open `session`'s previous prompt that its next request keeps
    /// when it shares its first `shared` tokens with it.
    pub fn kept_by_tokens(&self, session: u32, shared: usize) -> usize {
        let previous = match self.chains.get(session as usize) {
            Some(Some(chain)) => chain.hashes.len(),
            _ => 0,
        };
        (shared / self.trace.block_size as usize).min(previous)
    }

    /// Adds the next request of the open `session`; a session closed or never opened takes
    /// nothing.
    pub fn push(&mut self, session: u32, request: &NewRequest<'_>) {
        let block_size = self.trace.block_size;
        let Some(Some(chain)) = self.chains.get_mut(session as usize) else {
            return;
        };
        let mut entry = chain.next(request, block_size, session, &mut self.trace.blocks);
        entry.finding = request.finding.and_then(|rule| self.trace.rule_index(rule));
        self.interleaved |= session as usize + 1 != self.chains.len();
        self.trace.requests.push(entry);
    }

    /// Frees what the builder keeps of `session` to chain its next request: it takes none.
    pub fn close(&mut self, session: u32) {
        if let Some(chain) = self.chains.get_mut(session as usize) {
            *chain = None;
        }
    }

    /// The trace: each session's requests together, sessions in the order they opened.
    pub fn finish(mut self) -> Trace {
        if self.interleaved {
            self.trace.requests.sort_by_key(|request| request.session);
        }
        let mut next = 0u32;
        let mut requests = self.trace.requests.iter().peekable();
        for (index, session) in self.trace.sessions.iter_mut().enumerate() {
            let first = next;
            while requests
                .next_if(|request| request.session as usize == index)
                .is_some()
            {
                next += 1;
            }
            session.requests = first..next;
        }
        self.trace
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn tokens<'a>(kept: usize, prompt: &'a [u32], generated: &'a [u32]) -> NewRequest<'a> {
        NewRequest {
            time: None,
            input_tokens: (kept * 2 + prompt.len()) as u32,
            output_tokens: generated.len() as u32,
            shared_with_previous: 0,
            shared_with_previous_sequence: 0,
            kept_blocks: kept,
            blocks: Blocks::Tokens { prompt, generated },
            finding: None,
        }
    }

    #[test]
    fn a_session_keeps_its_blocks_chains_the_new_and_continues_its_generated_tokens() {
        let mut builder = TraceBuilder::new(2, "t");
        let session = builder.open("s", 0);
        // 5 tokens: 2 full blocks, a partial one completed by the first generated token (the
        // second is sampled, not cached).
        builder.push(session, &tokens(0, &[1, 2, 3, 4, 5], &[6, 7]));
        // Keeps the first block, then 3 4 is replaced by 9 9.
        builder.push(session, &tokens(1, &[9, 9], &[]));
        let trace = builder.finish();
        let first = chain_hash(0, &[1, 2]);
        let second = chain_hash(first, &[3, 4]);
        assert_eq!(trace.prompt_blocks(0), vec![first, second]);
        assert_eq!(trace.generated_blocks(0), [chain_hash(second, &[5, 6])]);
        assert_eq!(
            trace.prompt_blocks(1),
            vec![first, chain_hash(first, &[9, 9])]
        );
        assert_eq!(trace.requests[1].kept_blocks, 1);
        assert_eq!(trace.requests[1].previous_input_tokens, 5);
        assert!(trace.generated_blocks(1).is_empty());
    }

    #[test]
    fn interleaved_sessions_come_out_together_in_the_order_they_opened() {
        let mut builder = TraceBuilder::new(1, "t");
        let a = builder.open("a", 0);
        let b = builder.open("b", 0);
        builder.push(a, &tokens(0, &[1], &[]));
        builder.push(b, &tokens(0, &[2], &[]));
        builder.push(a, &tokens(1, &[3], &[]));
        builder.close(b);
        builder.push(b, &tokens(0, &[4], &[]));
        let trace = builder.finish();
        assert_eq!(trace.sessions[0].requests, 0..2);
        assert_eq!(trace.sessions[1].requests, 2..3);
        let first = chain_hash(0, &[1]);
        assert_eq!(trace.prompt_blocks(1), vec![first, chain_hash(first, &[3])]);
        assert_eq!(trace.prompt_blocks(2), vec![chain_hash(0, &[2])]);
    }

    #[test]
    fn a_kept_count_past_the_previous_prompt_keeps_what_it_has() {
        let mut builder = TraceBuilder::new(1, "t");
        let session = builder.open("s", 7);
        builder.push(session, &tokens(0, &[], &[]));
        let request = NewRequest {
            blocks: Blocks::Ids(&[5]),
            ..tokens(3, &[], &[])
        };
        builder.push(session, &request);
        let trace = builder.finish();
        assert_eq!(trace.requests[1].kept_blocks, 0);
        assert_eq!(trace.prompt_blocks(1), vec![chain_id(7, 5)]);
    }
}

//! Two bounds on what any router and any eviction could serve, over a run's requests in the
//! order it served them (closed and Poisson arrivals depend on the policy, so each result
//! carries its own):
//!
//! - **The infinite shared cache**: one unbounded cache every replica shares, as `--routing
//!   ideal` keeps it ([`ReplicaCache::Ideal`]): a request is served every leading block of
//!   its prompt that any earlier request held (its prompt's or its answer's blocks), in whole
//!   blocks, never the prompt's last token.
//! - **Belady's optimal eviction at the fleet's capacity**: one pool of replicas × capacity
//!   blocks. Each request, in turn, is served the leading run of its prompt's blocks the pool
//!   holds (never the last token); then its prompt's and its answer's blocks all enter the
//!   pool, and while the pool is over capacity the block whose next use is farthest leaves
//!   it, a block never used again first. A block's use is a later request that could be
//!   served it: in its prompt, before the last token (an answer's blocks, and a prompt's
//!   last, are only stored). This is Belady's MIN with bypass, which finds the most uses of
//!   any eviction of a cache of that size. A chained hash means every prompt that holds a
//!   block holds its whole prefix, so a block's prefix is never used later than the block,
//!   and ties go to the deeper block: the pool is always prefix-closed, so the uses it finds
//!   are exactly the leading runs a request is served. Replicas of `capacity` blocks each
//!   never hold more than that pool together, so no routing and no eviction serves more. The
//!   tests check it against an exhaustive search over every eviction on small traces. (A
//!   request longer than a replica's capacity could not run on a real engine; SGLang's
//!   modelled tree keeps such a request's path beyond its capacity, outside this bound.)
//!
//! Belady's bound is not given for llama.cpp, whose slots keep sequences in its context, a
//! memory the simulation does not bound. Its cost: the run's prompt and answer blocks once
//! more in memory (12 bytes each: the hash and its next use), and the pool.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap;

use super::{Bounds, CacheSize, SimEngine};
use crate::cache::{BlockPool, Prompt, ReplicaCache, hit_blocks};
use crate::trace::Trace;

/// A request that holds a block no more.
const NEVER: u32 = u32::MAX;

/// Both bounds over `order`, the trace's requests in the order the run served them, for
/// `replicas` replicas of `cache` modelled on `engine`.
pub fn bounds(
    trace: &Trace,
    engine: SimEngine,
    replicas: usize,
    cache: CacheSize,
    order: &[u32],
) -> Bounds {
    let block_size = engine.block_size();
    let stream = BlockStream::of(trace, order);
    let mut infinite = ReplicaCache::Ideal(BlockPool::new(block_size, None));
    let mut infinite_served = 0u64;
    for position in 0..order.len() {
        infinite_served += u64::from(infinite.serve(&stream.prompt(trace, position)).cached);
    }
    let belady_served = match (engine, cache.blocks(block_size)) {
        (SimEngine::LlamaCpp { .. }, _) => None,
        (_, None) => Some(infinite_served),
        (_, Some(blocks)) => {
            Some(stream.belady_served(trace, block_size, blocks.saturating_mul(replicas.max(1))))
        }
    };
    Bounds {
        infinite_served_tokens: infinite_served,
        belady_served_tokens: belady_served,
    }
}

/// The requests' blocks in the order served: each request's prompt blocks, then its answer's.
struct BlockStream<'a> {
    order: &'a [u32],
    hashes: Vec<u64>,
    /// Where each request's blocks start in `hashes`, one more at the end.
    starts: Vec<usize>,
    /// Of each request's blocks, how many are its prompt's.
    prompt_blocks: Vec<u32>,
}

impl<'a> BlockStream<'a> {
    fn of(trace: &Trace, order: &'a [u32]) -> Self {
        let mut stream = Self {
            order,
            hashes: Vec::new(),
            starts: Vec::with_capacity(order.len() + 1),
            prompt_blocks: Vec::with_capacity(order.len()),
        };
        let mut session_blocks: FxHashMap<u32, Vec<u64>> = FxHashMap::default();
        for &request in order {
            let index = request as usize;
            let session = trace.requests[index].session;
            let blocks = session_blocks.entry(session).or_default();
            trace.next_prompt_blocks(index, blocks);
            stream.starts.push(stream.hashes.len());
            stream.prompt_blocks.push(blocks.len() as u32);
            stream.hashes.extend_from_slice(blocks);
            stream
                .hashes
                .extend_from_slice(trace.generated_blocks(index));
            if index + 1 >= trace.sessions[session as usize].requests.end as usize {
                session_blocks.remove(&session);
            }
        }
        stream.starts.push(stream.hashes.len());
        stream
    }

    /// The request served at `position`, as a cache sees it.
    fn prompt(&self, trace: &Trace, position: usize) -> Prompt<'_> {
        let index = self.order[position] as usize;
        let request = &trace.requests[index];
        let start = self.starts[position];
        Prompt {
            lineage: &|_| None,
            request: index,
            session: request.session,
            previous: (!trace.is_first(index)).then(|| index - 1),
            blocks: &self.hashes[start..start + self.prompt_blocks[position] as usize],
            generated_blocks: &self.hashes
                [start + self.prompt_blocks[position] as usize..self.starts[position + 1]],
            tokens: request.input_tokens,
            output_tokens: request.output_tokens,
            shared_with_previous_sequence: request.shared_with_previous_sequence,
        }
    }

    /// Per block of the stream, the position of the next request that could be served it
    /// (a block in its prompt, before the last token). An answer's blocks and a prompt's
    /// last ones are only stored: finding them serves nothing.
    fn next_uses(&self, trace: &Trace, block_size: u32) -> Vec<u32> {
        let mut next_use = vec![NEVER; self.hashes.len()];
        let mut later: FxHashMap<u64, u32> = FxHashMap::default();
        for position in (0..self.order.len()).rev() {
            let blocks = self.starts[position]..self.starts[position + 1];
            for access in blocks.clone() {
                next_use[access] = later.get(&self.hashes[access]).copied().unwrap_or(NEVER);
            }
            let prompt = self.prompt(trace, position);
            for hash in prompt
                .blocks
                .iter()
                .take(hit_blocks(prompt.tokens, block_size))
            {
                later.insert(*hash, position as u32);
            }
        }
        next_use
    }

    /// Prompt tokens served from one pool of `capacity` blocks with farthest-next-use
    /// eviction.
    fn belady_served(&self, trace: &Trace, block_size: u32, capacity: usize) -> u64 {
        let next_use = self.next_uses(trace, block_size);
        // Each block in the pool with its (next use, depth), and the pool by those keys.
        let mut pool: FxHashMap<u64, (u32, u32)> = FxHashMap::default();
        let mut farthest: BTreeSet<(u32, u32, u64)> = BTreeSet::new();
        let mut served = 0u64;
        for position in 0..self.order.len() {
            let prompt = self.prompt(trace, position);
            let found = prompt
                .blocks
                .iter()
                .take(hit_blocks(prompt.tokens, block_size))
                .take_while(|hash| pool.contains_key(*hash))
                .count();
            served += found as u64 * u64::from(block_size);
            for (depth, access) in (self.starts[position]..self.starts[position + 1]).enumerate() {
                let hash = self.hashes[access];
                let key = (next_use[access], depth as u32);
                if let Some(before) = pool.insert(hash, key) {
                    farthest.remove(&(before.0, before.1, hash));
                }
                farthest.insert((key.0, key.1, hash));
            }
            while pool.len() > capacity {
                let Some((_, _, hash)) = farthest.pop_last() else {
                    break;
                };
                pool.remove(&hash);
            }
        }
        served
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};

    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::simulate::run::tests::{SessionOfOne, one_request_sessions};
    use crate::simulate::{Arrival, FleetOptions, Setup, simulate};

    const BLOCK: u32 = 16;

    /// One request: its prompt's blocks, its answer's blocks, its prompt tokens.
    type Request = (Vec<u64>, Vec<u64>, u32);

    /// Requests made of paths from the root of a random tree of blocks (a chained hash names
    /// a block and its whole prefix): each a prompt down to a random node, sometimes an
    /// answer one block further, tokens that end the last block or run into another.
    fn random_requests(rng: &mut SmallRng) -> Vec<Request> {
        let nodes = rng.random_range(3..9usize);
        // parent[node]: node 0 is a root, as is any node whose parent draw is itself.
        let parent: Vec<Option<usize>> = (0..nodes)
            .map(|node| (node > 0 && rng.random_bool(0.8)).then(|| rng.random_range(0..node)))
            .collect();
        let path = |node: usize| {
            let mut path = vec![node as u64 + 100];
            let mut at = node;
            while let Some(up) = parent[at] {
                path.push(up as u64 + 100);
                at = up;
            }
            path.reverse();
            path
        };
        (0..rng.random_range(2..8))
            .map(|_| {
                let end = rng.random_range(0..nodes);
                let prompt = path(end);
                let children: Vec<usize> = (0..nodes)
                    .filter(|node| parent[*node] == Some(end))
                    .collect();
                let answer = match children.first() {
                    Some(child) if rng.random_bool(0.5) => vec![*child as u64 + 100],
                    _ => Vec::new(),
                };
                let tokens = prompt.len() as u32 * BLOCK + rng.random_range(0..3) * 5;
                (prompt, answer, tokens)
            })
            .collect()
    }

    /// A trace of one-request sessions, a second apart.
    fn trace_of(requests: &[Request]) -> Trace {
        let sessions: Vec<SessionOfOne<'_>> = requests
            .iter()
            .enumerate()
            .map(|(session, (prompt, answer, tokens))| SessionOfOne {
                time: session as f64,
                prompt,
                answer,
                tokens: *tokens,
                output_tokens: answer.len() as u32 * BLOCK,
            })
            .collect();
        one_request_sessions(BLOCK, &sessions)
    }

    /// Blocks a request may be served: never its last token.
    fn servable(tokens: u32) -> usize {
        (tokens.saturating_sub(1) / BLOCK) as usize
    }

    /// Every block held before is served.
    fn brute_infinite(requests: &[Request]) -> u64 {
        let mut held: HashSet<u64> = HashSet::new();
        let mut served = 0;
        for (prompt, answer, tokens) in requests {
            let found = prompt
                .iter()
                .take(servable(*tokens))
                .take_while(|block| held.contains(block))
                .count();
            served += found as u64 * u64::from(BLOCK);
            held.extend(prompt.iter().chain(answer));
        }
        served
    }

    /// The most any eviction serves from one pool of `capacity` blocks: after each request
    /// the pool keeps any subset of at most `capacity` of what it held and the request's
    /// blocks, every such choice tried.
    fn brute_optimum(requests: &[Request], capacity: u32) -> u64 {
        let mut bits: HashMap<u64, u32> = HashMap::new();
        for block in requests
            .iter()
            .flat_map(|(prompt, answer, _)| prompt.iter().chain(answer))
        {
            let next = bits.len() as u32;
            bits.entry(*block).or_insert(next);
        }
        let mut best: HashMap<u32, u64> = HashMap::from([(0, 0)]);
        for (prompt, answer, tokens) in requests {
            let mut next: HashMap<u32, u64> = HashMap::new();
            for (pool, served) in best {
                let found = prompt
                    .iter()
                    .take(servable(*tokens))
                    .take_while(|block| pool & (1 << bits[*block]) != 0)
                    .count();
                let served = served + found as u64 * u64::from(BLOCK);
                let full = prompt
                    .iter()
                    .chain(answer)
                    .fold(pool, |pool, block| pool | (1 << bits[block]));
                // Every subset of `full`, walked as submasks.
                let mut kept = full;
                loop {
                    if kept.count_ones() <= capacity {
                        let entry = next.entry(kept).or_insert(0);
                        *entry = (*entry).max(served);
                    }
                    if kept == 0 {
                        break;
                    }
                    kept = (kept - 1) & full;
                }
            }
            best = next;
        }
        best.into_values().max().unwrap_or(0)
    }

    fn in_order(requests: &[Request]) -> Vec<u32> {
        (0..requests.len() as u32).collect()
    }

    #[test]
    fn both_bounds_equal_an_exhaustive_search_on_small_traces() {
        let mut rng = SmallRng::seed_from_u64(28);
        for _ in 0..300 {
            let requests = random_requests(&mut rng);
            let trace = trace_of(&requests);
            let order = in_order(&requests);
            let engine = SimEngine::Vllm { block: BLOCK };
            for replicas in 1..=2u32 {
                for capacity in 1..=3u32 {
                    let found = bounds(
                        &trace,
                        engine,
                        replicas as usize,
                        CacheSize::Blocks(u64::from(capacity)),
                        &order,
                    );
                    assert_eq!(
                        found.infinite_served_tokens,
                        brute_infinite(&requests),
                        "{requests:?}"
                    );
                    assert_eq!(
                        found.belady_served_tokens,
                        Some(brute_optimum(&requests, replicas * capacity)),
                        "{requests:?} at {replicas} × {capacity}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_bound_keeps_the_block_used_soonest_not_the_most_recent() {
        // A B, then C D, then A B again (40 tokens: both blocks servable), one pool of two
        // blocks: least recently used eviction keeps C D and serves nothing; farthest next use
        // drops C D (never used again) and serves A B.
        let requests: Vec<Request> = vec![
            (vec![1, 2], vec![], 40),
            (vec![11, 12], vec![], 40),
            (vec![1, 2], vec![], 40),
        ];
        let found = bounds(
            &trace_of(&requests),
            SimEngine::Vllm { block: BLOCK },
            1,
            CacheSize::Blocks(2),
            &in_order(&requests),
        );
        assert_eq!(found.infinite_served_tokens, 32);
        assert_eq!(found.belady_served_tokens, Some(32));
        let lru = simulate(&trace_of(&requests), &setup("round-robin", 1, 2)).unwrap();
        assert_eq!(lru.served_tokens, 0);
        // llama.cpp's slots hold what the simulation does not bound: no Belady bound.
        let llamacpp = bounds(
            &trace_of(&requests),
            SimEngine::LlamaCpp {
                slots: 1,
                block: BLOCK,
            },
            1,
            CacheSize::Blocks(2),
            &in_order(&requests),
        );
        assert_eq!(llamacpp.belady_served_tokens, None);
    }

    fn setup(policy: &str, replicas: usize, capacity: u64) -> Setup {
        Setup {
            replicas,
            cache: CacheSize::Blocks(capacity),
            engine: SimEngine::Vllm { block: BLOCK },
            policy: policy.parse().unwrap(),
            arrival: Arrival::Recorded,
            prefill_tps: 1000.0,
            decode_tps: None,
            seed: 0,
            per_request: false,
            fleet: FleetOptions {
                bounds: true,
                ..FleetOptions::default()
            },
        }
    }

    #[test]
    fn no_policy_serves_more_than_belady_and_belady_no_more_than_the_infinite_cache() {
        let mut rng = SmallRng::seed_from_u64(7);
        let policies = [
            "round-robin",
            "random",
            "least-loaded",
            "session-hash",
            "prefix-aware",
            "power-of-two",
            "sglang-cache-aware",
            "dynamo-kv",
            "llmd-prefix",
            "llmd-precise",
            "aibrix-prefix",
            "ray-prefix",
        ];
        for _ in 0..60 {
            let requests = random_requests(&mut rng);
            let trace = trace_of(&requests);
            let infinite = brute_infinite(&requests);
            // A replica holds at most its capacity only when each request fits in it (SGLang's
            // tree keeps the path it inserts, as a real engine could not run a longer one).
            let longest = requests
                .iter()
                .map(|(prompt, answer, _)| (prompt.len() + answer.len()) as u64)
                .max()
                .unwrap_or(1);
            for replicas in 1..=2usize {
                for capacity in longest..=longest + 2 {
                    let optimum = brute_optimum(&requests, (replicas as u64 * capacity) as u32);
                    assert!(optimum <= infinite);
                    for (policy, engine) in policies.iter().flat_map(|policy| {
                        [
                            SimEngine::Vllm { block: BLOCK },
                            SimEngine::Sglang { page: BLOCK },
                        ]
                        .map(|engine| (policy, engine))
                    }) {
                        let mut setup = setup(policy, replicas, capacity);
                        setup.engine = engine;
                        let result = simulate(&trace, &setup).unwrap();
                        assert!(
                            result.served_tokens <= optimum,
                            "{policy} on {engine} at {replicas} × {capacity}: {} > {optimum} on {requests:?}",
                            result.served_tokens
                        );
                        assert_eq!(
                            result.bounds,
                            Some(Bounds {
                                infinite_served_tokens: infinite,
                                belady_served_tokens: Some(optimum),
                            }),
                            "{policy}"
                        );
                    }
                }
            }
        }
    }
}

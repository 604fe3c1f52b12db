//! `kvlint simulate`: a workload replayed through N replicas, each with a finite prefix cache
//! modelled like its engine ([`crate::cache`]), under routing policies, with a queueing model
//! of prefill for time to first token.
//!
//! Events happen in time order. A request arrives (at its recorded time, or when its session's
//! previous request has finished and the recorded think time has passed); the policy picks a
//! replica; the replica's cache serves what it holds of the prompt and keeps the rest; the
//! replica prefills the remaining tokens, one request after the other, at the given
//! throughput: the time to first token is the wait for the replica plus that prefill. Decoding
//! runs beside prefill (continuous batching) and only delays the session's next turn.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fmt;
use std::str::FromStr;

use kvlint_protocol::{EngineName, Spec};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution as _, Gamma};
use serde::Serialize;

use crate::cache::{BlockPool, Prompt, RadixTree, ReplicaCache, Slots};
use crate::error::SpecError;
use crate::report::arrival_order;
use crate::stats::Distribution;
use crate::trace::Trace;

/// The engine whose cache each replica models: `vllm[:block=16]`, `sglang[:page=1]`,
/// `llamacpp[:slots=1][,block=1]` (llama.cpp matches tokens: its trace has a hash per token;
/// `block=16` keeps one per 16 tokens for very large workloads, and counts a match with
/// another session's sequence in whole blocks, which can change the slot and prompt-cache
/// choices the simulation makes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimEngine {
    Vllm { block: u32 },
    Sglang { page: u32 },
    LlamaCpp { slots: u32, block: u32 },
}

/// The block size llama.cpp traces are kept at by default: a token, as llama.cpp matches.
pub const LLAMACPP_TRACE_BLOCK: u32 = 1;

impl SimEngine {
    /// Tokens per block of the trace this engine is simulated on.
    pub fn block_size(self) -> u32 {
        match self {
            Self::Vllm { block } => block,
            Self::Sglang { page } => page,
            Self::LlamaCpp { block, .. } => block,
        }
    }
}

impl fmt::Display for SimEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Vllm { block } => write!(f, "vllm:block={block}"),
            Self::Sglang { page } => write!(f, "sglang:page={page}"),
            Self::LlamaCpp { slots, block } => write!(f, "llamacpp:slots={slots},block={block}"),
        }
    }
}

impl FromStr for SimEngine {
    type Err = SpecError;

    /// Read by [`kvlint_protocol::engine::Spec`], as every engine spec is.
    fn from_str(text: &str) -> Result<Self, SpecError> {
        let spec = Spec::parse(text);
        let positive = |key: &str, default: u32| -> Result<u32, SpecError> {
            let value = spec.positive(key, u64::from(default))?;
            u32::try_from(value).map_err(|_| spec.error(format!("`{key}` is too large")).into())
        };
        let engine = match spec.engine() {
            Ok(EngineName::Vllm) => {
                spec.only(&["block"])?;
                Self::Vllm {
                    block: positive("block", 16)?,
                }
            }
            Ok(EngineName::Sglang) => {
                spec.only(&["page"])?;
                Self::Sglang {
                    page: positive("page", 1)?,
                }
            }
            Ok(EngineName::LlamaCpp) => {
                spec.only(&["slots", "block"])?;
                Self::LlamaCpp {
                    slots: positive("slots", 1)?,
                    block: positive("block", LLAMACPP_TRACE_BLOCK)?,
                }
            }
            _ => {
                return Err(spec
                    .error("one of vllm[:block=16], sglang[:page=1], llamacpp[:slots=1][,block=1]")
                    .into());
            }
        };
        Ok(engine)
    }
}

/// A replica's cache size: blocks (`4096`, `4096blocks`) or tokens (`65536tokens`); for
/// llama.cpp, the tokens its host prompt cache holds (`0`: none, `--cache-ram 0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheSize {
    Blocks(u64),
    Tokens(u64),
    Unbounded,
}

impl CacheSize {
    fn blocks(self, block_size: u32) -> Option<usize> {
        match self {
            Self::Blocks(blocks) => Some(blocks as usize),
            Self::Tokens(tokens) => Some((tokens / u64::from(block_size.max(1))) as usize),
            Self::Unbounded => None,
        }
    }

    fn tokens(self, block_size: u32) -> Option<u64> {
        match self {
            Self::Blocks(blocks) => Some(blocks * u64::from(block_size)),
            Self::Tokens(tokens) => Some(tokens),
            Self::Unbounded => None,
        }
    }
}

impl fmt::Display for CacheSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Blocks(blocks) => write!(f, "{blocks} blocks"),
            Self::Tokens(tokens) => write!(f, "{tokens} tokens"),
            Self::Unbounded => f.write_str("unbounded"),
        }
    }
}

impl FromStr for CacheSize {
    type Err = SpecError;

    fn from_str(spec: &str) -> Result<Self, SpecError> {
        if spec == "unbounded" {
            return Ok(Self::Unbounded);
        }
        let digits = spec.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        let number: u64 = digits.parse().map_err(|_| {
            SpecError::new(
                spec,
                "a number of blocks (`4096`), of tokens (`65536tokens`), or `unbounded`",
            )
        })?;
        match &spec[digits.len()..] {
            "" | "b" | "blocks" => Ok(Self::Blocks(number)),
            "t" | "tokens" => Ok(Self::Tokens(number)),
            unit => Err(SpecError::new(
                spec,
                format!("unknown unit `{unit}`: blocks or tokens"),
            )),
        }
    }
}

/// How a request is routed to a replica.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Policy {
    RoundRobin,
    Random,
    /// The replica with the least prefill queued.
    LeastLoaded,
    /// Consistent hashing on the session (nginx `hash $key consistent`).
    SessionHash,
    /// The replica with the longest cached prefix, unless its queue is over `overload`
    /// seconds: then the least loaded (the escape hatch).
    PrefixAware {
        overload: f64,
    },
    /// One infinite cache shared by every replica: the upper bound.
    Ideal,
}

/// The prefix-aware policy's default overload: seconds of prefill queued.
const DEFAULT_OVERLOAD: f64 = 5.0;

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::RoundRobin => f.write_str("round-robin"),
            Self::Random => f.write_str("random"),
            Self::LeastLoaded => f.write_str("least-loaded"),
            Self::SessionHash => f.write_str("session-hash"),
            Self::PrefixAware { overload } => write!(f, "prefix-aware:overload={overload}"),
            Self::Ideal => f.write_str("ideal"),
        }
    }
}

impl FromStr for Policy {
    type Err = SpecError;

    fn from_str(spec: &str) -> Result<Self, SpecError> {
        let (name, rest) = spec.split_once(':').unwrap_or((spec, ""));
        match (name, rest) {
            ("round-robin", "") => Ok(Self::RoundRobin),
            ("random", "") => Ok(Self::Random),
            ("least-loaded", "") => Ok(Self::LeastLoaded),
            ("session-hash", "") => Ok(Self::SessionHash),
            ("ideal", "") => Ok(Self::Ideal),
            ("prefix-aware", "") => Ok(Self::PrefixAware {
                overload: DEFAULT_OVERLOAD,
            }),
            ("prefix-aware", option) => {
                let overload = option
                    .strip_prefix("overload=")
                    .and_then(|value| value.parse::<f64>().ok())
                    .filter(|value| *value >= 0.0)
                    .ok_or_else(|| SpecError::new(spec, "prefix-aware:overload=SECONDS"))?;
                Ok(Self::PrefixAware { overload })
            }
            _ => Err(SpecError::new(
                spec,
                "one of round-robin, random, least-loaded, session-hash, prefix-aware[:overload=SECONDS], ideal",
            )),
        }
    }
}

/// When requests arrive.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arrival {
    /// At their recorded times.
    Recorded,
    /// Sessions start at `rate` per second, the gaps gamma-distributed with a coefficient of
    /// variation of `burstiness` (1: Poisson).
    Poisson { rate: f64, burstiness: f64 },
    /// `concurrency` sessions at a time, the next starting when one ends.
    Closed { concurrency: usize },
}

impl fmt::Display for Arrival {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Recorded => f.write_str("recorded"),
            Self::Poisson { rate, burstiness } => {
                write!(f, "poisson:{rate},burstiness={burstiness}")
            }
            Self::Closed { concurrency } => write!(f, "closed:{concurrency}"),
        }
    }
}

impl FromStr for Arrival {
    type Err = SpecError;

    fn from_str(spec: &str) -> Result<Self, SpecError> {
        let invalid = || {
            SpecError::new(
                spec,
                "recorded, poisson:RATE[,burstiness=B] or closed:CONCURRENCY",
            )
        };
        let (name, rest) = spec.split_once(':').unwrap_or((spec, ""));
        match name {
            "recorded" if rest.is_empty() => Ok(Self::Recorded),
            "poisson" => {
                let mut parts = rest.split(',');
                let rate: f64 = parts
                    .next()
                    .and_then(|rate| rate.parse().ok())
                    .filter(|rate: &f64| *rate > 0.0)
                    .ok_or_else(invalid)?;
                let mut burstiness = 1.0;
                for part in parts {
                    burstiness = part
                        .strip_prefix("burstiness=")
                        .and_then(|value| value.parse().ok())
                        .filter(|value: &f64| *value > 0.0)
                        .ok_or_else(invalid)?;
                }
                Ok(Self::Poisson { rate, burstiness })
            }
            "closed" => Ok(Self::Closed {
                concurrency: rest
                    .parse()
                    .ok()
                    .filter(|count| *count > 0)
                    .ok_or_else(invalid)?,
            }),
            _ => Err(invalid()),
        }
    }
}

/// One point of a simulation.
#[derive(Clone, Debug)]
pub struct Setup {
    pub replicas: usize,
    pub cache: CacheSize,
    pub engine: SimEngine,
    pub policy: Policy,
    pub arrival: Arrival,
    /// Prompt tokens a replica prefills per second.
    pub prefill_tps: f64,
    /// Tokens a request decodes per second; `None`: answers take no time.
    pub decode_tps: Option<f64>,
    pub seed: u64,
    /// Keep each request's served tokens in the result (for comparing with an engine).
    pub per_request: bool,
}

/// One replica's share of the work.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ReplicaLoad {
    pub requests: u64,
    pub prompt_tokens: u64,
    pub computed_tokens: u64,
}

/// Time to first token, in seconds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

/// What one point of a simulation found.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimulationResult {
    pub policy: String,
    pub cache: String,
    pub engine: String,
    pub replicas: usize,
    pub arrival: String,
    pub requests: u64,
    pub prompt_tokens: u64,
    pub served_tokens: u64,
    pub computed_tokens: u64,
    pub hit_rate: f64,
    /// Served tokens the replica of the session's previous request held and the serving one
    /// did not: lost to locality.
    pub lost_locality_tokens: u64,
    /// Requests that went to another replica than their session's previous one.
    pub replica_changes: u64,
    pub evicted_blocks: u64,
    pub per_replica: Vec<ReplicaLoad>,
    /// The busiest replica's computed tokens over the mean.
    pub imbalance: f64,
    pub ttft: Latency,
    /// Simulated seconds from the first arrival to the last answer.
    pub makespan: f64,
    /// Per request (trace order), the tokens served from cache, when asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub served_per_request: Option<Vec<u32>>,
}

/// An event of the simulation: a request of a session arrives.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Event {
    time: f64,
    /// Ties keep the order events were scheduled in.
    sequence: u64,
    request: usize,
}

impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.time
            .total_cmp(&other.time)
            .then(self.sequence.cmp(&other.sequence))
    }
}

/// Virtual points per replica on the consistent-hash ring (nginx's ketama uses 160).
const RING_POINTS: u32 = 160;

fn hash64(bytes: &[u8]) -> u64 {
    let hash = blake3::hash(bytes);
    let mut first = [0u8; 8];
    first.copy_from_slice(&hash.as_bytes()[..8]);
    u64::from_le_bytes(first)
}

/// Leading tokens the sequence of `earlier` (its prompt and generated tokens) shares with the
/// prompt of `later`, both of the session whose first request is `session_start`: along the
/// session, the least of what each request shares with the one before (exact unless two of
/// them diverge at the same token).
fn lineage(trace: &Trace, session_start: usize, earlier: usize, later: usize) -> Option<u32> {
    if earlier < session_start || earlier >= later {
        return None;
    }
    let requests = &trace.requests;
    let mut shared = requests[earlier + 1].shared_with_previous_sequence;
    for request in &requests[earlier + 2..=later] {
        shared = shared.min(request.shared_with_previous);
    }
    Some(shared)
}

/// Runs one point of the simulation over `trace` (whose block size must be the engine's).
pub fn simulate(trace: &Trace, setup: &Setup) -> Result<SimulationResult, SpecError> {
    let block = setup.engine.block_size();
    if trace.block_size != block {
        return Err(SpecError::new(
            &setup.engine.to_string(),
            format!(
                "the trace has blocks of {} tokens, the engine {block}",
                trace.block_size
            ),
        ));
    }
    let replica_count = setup.replicas.max(1);
    let new_cache = |cache: CacheSize| match setup.engine {
        SimEngine::Vllm { block } => ReplicaCache::Vllm(BlockPool::new(block, cache.blocks(block))),
        SimEngine::Sglang { page } => {
            ReplicaCache::Sglang(RadixTree::new(page, cache.blocks(page)))
        }
        SimEngine::LlamaCpp { slots, .. } => ReplicaCache::LlamaCpp(Slots::new(
            block,
            slots as usize,
            match cache {
                CacheSize::Unbounded => Some(u64::MAX),
                sized => sized.tokens(block).filter(|tokens| *tokens > 0),
            },
        )),
    };
    let shared = setup.policy == Policy::Ideal;
    let mut caches: Vec<ReplicaCache> = if shared {
        vec![ReplicaCache::Ideal(BlockPool::new(block, None))]
    } else {
        (0..replica_count).map(|_| new_cache(setup.cache)).collect()
    };
    let mut ring: Vec<(u64, usize)> = (0..replica_count)
        .flat_map(|replica| {
            (0..RING_POINTS).map(move |point| {
                let key = format!("replica-{replica}-{point}");
                (hash64(key.as_bytes()), replica)
            })
        })
        .collect();
    ring.sort_unstable();
    let mut rng = SmallRng::seed_from_u64(setup.seed);

    // Arrivals: the first request of each session, and how later ones follow.
    let times_known = trace.requests.iter().all(|request| request.time.is_some());
    if setup.arrival == Arrival::Recorded && !times_known {
        return Err(SpecError::new(
            "recorded",
            "some requests have no recorded time: use poisson:RATE or closed:CONCURRENCY",
        ));
    }
    let origin = trace
        .requests
        .iter()
        .filter_map(|request| request.time)
        .fold(f64::INFINITY, f64::min);
    let mut queue: BinaryHeap<Reverse<Event>> = BinaryHeap::new();
    let mut sequence = 0u64;
    let mut schedule = |queue: &mut BinaryHeap<Reverse<Event>>, time: f64, request: usize| {
        sequence += 1;
        queue.push(Reverse(Event {
            time,
            sequence,
            request,
        }));
    };
    // Sessions not started yet, in the order they start (closed arrivals).
    let session_order: Vec<usize> = {
        let mut firsts: Vec<usize> = arrival_order(trace)
            .into_iter()
            .filter(|request| trace.is_first(*request))
            .collect();
        firsts.dedup();
        firsts
    };
    let mut pending_sessions = session_order.iter().copied();
    match setup.arrival {
        Arrival::Recorded => {
            for (index, request) in trace.requests.iter().enumerate() {
                schedule(&mut queue, request.time.unwrap_or(origin) - origin, index);
            }
        }
        Arrival::Poisson { rate, burstiness } => {
            let shape = 1.0 / (burstiness * burstiness);
            let gaps = Gamma::new(shape, 1.0 / (rate * shape))
                .map_err(|error| SpecError::new(&setup.arrival.to_string(), error.to_string()))?;
            let mut time = 0.0;
            for first in pending_sessions.by_ref() {
                schedule(&mut queue, time, first);
                time += gaps.sample(&mut rng);
            }
        }
        Arrival::Closed { concurrency } => {
            for first in pending_sessions.by_ref().take(concurrency) {
                schedule(&mut queue, 0.0, first);
            }
        }
    }

    let mut free_at = vec![0.0f64; replica_count];
    let mut loads = vec![ReplicaLoad::default(); replica_count];
    let mut session_blocks: HashMap<u32, Vec<u64>> = HashMap::new();
    let mut session_replica: HashMap<u32, usize> = HashMap::new();
    let mut ttfts = Vec::with_capacity(trace.requests.len());
    let mut served_per_request = setup.per_request.then(|| vec![0u32; trace.requests.len()]);
    let (mut served_total, mut lost_locality, mut changes, mut evicted) = (0u64, 0u64, 0u64, 0u64);
    let mut next_round_robin = 0usize;
    let mut makespan = 0.0f64;
    while let Some(Reverse(event)) = queue.pop() {
        let now = event.time;
        let index = event.request;
        let request = &trace.requests[index];
        let blocks = session_blocks.entry(request.session).or_default();
        trace.next_prompt_blocks(index, blocks);
        let first = trace.is_first(index);
        let session_start = trace.sessions[request.session as usize].requests.start as usize;
        let lineage = |earlier: usize| lineage(trace, session_start, earlier, index);
        let prompt = Prompt {
            lineage: &lineage,
            request: index,
            session: request.session,
            previous: (!first).then(|| index - 1),
            blocks,
            generated_blocks: trace.generated_blocks(index),
            tokens: request.input_tokens,
            output_tokens: request.output_tokens,
            shared_with_previous_sequence: request.shared_with_previous_sequence,
        };
        let queued = |replica: usize| (free_at[replica] - now).max(0.0);
        let least_loaded = || {
            (0..replica_count)
                .min_by(|left, right| queued(*left).total_cmp(&queued(*right)))
                .unwrap_or(0)
        };
        let replica = match setup.policy {
            Policy::RoundRobin => {
                next_round_robin += 1;
                (next_round_robin - 1) % replica_count
            }
            Policy::Random => rng.random_range(0..replica_count),
            Policy::LeastLoaded | Policy::Ideal => least_loaded(),
            Policy::SessionHash => {
                let key = hash64(trace.sessions[request.session as usize].name.as_bytes());
                let point = ring.partition_point(|(hash, _)| *hash < key);
                ring[point % ring.len()].1
            }
            Policy::PrefixAware { overload } => {
                let best = (0..replica_count)
                    .max_by(|left, right| {
                        caches[*left]
                            .peek(&prompt)
                            .cmp(&caches[*right].peek(&prompt))
                            .then(queued(*right).total_cmp(&queued(*left)))
                    })
                    .unwrap_or(0);
                if queued(best) > overload {
                    least_loaded()
                } else {
                    best
                }
            }
        };
        let cache_index = if shared { 0 } else { replica };
        // What the session's previous replica would have served.
        let previous_replica = session_replica.insert(request.session, replica);
        let elsewhere = match previous_replica {
            Some(before) if before != replica && !shared => {
                changes += 1;
                Some(caches[before].peek(&prompt))
            }
            _ => None,
        };
        let served = caches[cache_index].serve(&prompt);
        if let Some(would) = elsewhere {
            lost_locality += u64::from(would.saturating_sub(served.cached));
        }
        evicted += served.evicted;
        served_total += u64::from(served.cached);
        if let Some(per_request) = served_per_request.as_mut() {
            per_request[index] = served.cached;
        }
        let computed = request.input_tokens.saturating_sub(served.cached);
        let load = &mut loads[replica];
        load.requests += 1;
        load.prompt_tokens += u64::from(request.input_tokens);
        load.computed_tokens += u64::from(computed);
        let start = now.max(free_at[replica]);
        free_at[replica] = start + f64::from(computed) / setup.prefill_tps;
        ttfts.push(free_at[replica] - now);
        let finished = free_at[replica]
            + setup
                .decode_tps
                .map_or(0.0, |tps| f64::from(request.output_tokens) / tps);
        makespan = makespan.max(finished);
        // What follows: the session's next turn, or (closed) the next session.
        let session = &trace.sessions[request.session as usize];
        let last = index + 1 >= session.requests.end as usize;
        if last {
            session_blocks.remove(&request.session);
            session_replica.remove(&request.session);
        }
        match setup.arrival {
            Arrival::Recorded => {}
            _ if !last => {
                let think = match (request.time, trace.requests[index + 1].time) {
                    (Some(now), Some(next)) => (next - now).max(0.0),
                    _ => 0.0,
                };
                schedule(&mut queue, finished + think, index + 1);
            }
            Arrival::Closed { .. } => {
                if let Some(next) = pending_sessions.next() {
                    schedule(&mut queue, finished, next);
                }
            }
            Arrival::Poisson { .. } => {}
        }
    }
    let prompt_tokens = trace.input_tokens();
    let computed_tokens = prompt_tokens - served_total;
    let mean_computed = loads
        .iter()
        .map(|load| load.computed_tokens as f64)
        .sum::<f64>()
        / replica_count as f64;
    let busiest = loads
        .iter()
        .map(|load| load.computed_tokens as f64)
        .fold(0.0, f64::max);
    let ttft = Distribution::of(ttfts);
    Ok(SimulationResult {
        policy: setup.policy.to_string(),
        cache: setup.cache.to_string(),
        engine: setup.engine.to_string(),
        replicas: replica_count,
        arrival: setup.arrival.to_string(),
        requests: trace.requests.len() as u64,
        prompt_tokens,
        served_tokens: served_total,
        computed_tokens,
        hit_rate: if prompt_tokens == 0 {
            0.0
        } else {
            served_total as f64 / prompt_tokens as f64
        },
        lost_locality_tokens: lost_locality,
        replica_changes: changes,
        evicted_blocks: evicted,
        per_replica: loads,
        imbalance: if mean_computed > 0.0 {
            busiest / mean_computed
        } else {
            1.0
        },
        ttft: Latency {
            p50: ttft.p50,
            p95: ttft.p95,
            p99: ttft.p99,
            max: ttft.max,
        },
        makespan,
        served_per_request,
    })
}

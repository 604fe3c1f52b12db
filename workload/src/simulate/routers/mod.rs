//! The routers `kvlint simulate --routing` replays, one file each: the generic policies
//! (`round-robin`, `random`, `least-loaded`, `session-hash`, `prefix-aware`) and the routers
//! as they are deployed, with their own defaults and their own index (`power-of-two`,
//! `sglang-cache-aware`, `dynamo-kv`, `dynamo-lmetric`, `llmd-prefix`, `llmd-precise`,
//! `aibrix-prefix`, `ray-prefix`).
//!
//! A router sees what the real one sees at the moment it decides ([`View`]): the prompt, the
//! session, each replica's load, and — only where the real router reads the engines' KV
//! events — the engines' caches. A router that keeps its own index (what it believes each
//! replica holds, in its own units) keeps it here, apart from the engines' caches (what is
//! served); its [`Decision`] says how many prompt tokens it expected the chosen replica to
//! serve, so the result compares belief with truth.
//!
//! Units. The trace has block hashes and token counts, not text. An index over the prompt's
//! text (SGLang's radix tree over characters, llm-d's 64-character blocks) is approximated on
//! the trace's chained block hashes: a unit of `n` characters is `n / CHARS_PER_TOKEN` tokens
//! (the gateway extension's own guess: "a good guess of average characters per token is 4",
//! `pkg/epp/scheduling/framework/plugins/multi/prefix/plugin.go`), rounded to whole blocks of
//! the trace (its finest resolution) and named by the hash of its last block. Two prompts
//! share a text unit exactly when they share its tokens; what a text index gets wrong that a
//! token index would not (other JSON bytes, another rendering of the same messages) is not in
//! a trace and is not simulated.

mod aibrix_prefix;
mod dynamo_kv;
mod index;
mod least_loaded;
mod llmd_prefix;
mod power_of_two;
mod prefix_aware;
mod random;
mod ray_prefix;
mod round_robin;
mod session_hash;
mod sglang_cache_aware;

use rand::Rng;
use rand::rngs::SmallRng;

pub use aibrix_prefix::AibrixConfig;
pub use dynamo_kv::{DynamoConfig, DynamoCost};
pub use llmd_prefix::{LlmdConfig, LlmdIndex};
pub use ray_prefix::RayConfig;
pub use sglang_cache_aware::{SglangConfig, SglangIndex};

use super::Policy;
use crate::cache::{Prompt, ReplicaCache};
use crate::error::SpecError;
use kvlint_protocol::Spec;

/// Characters per token where a router's index counts characters.
pub const CHARS_PER_TOKEN: u32 = 4;

/// One replica's load as a router reads it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReplicaSignals {
    /// Seconds of prefill queued before a new request would start.
    pub queued: f64,
    /// Requests sent and not answered yet (SGLang's `worker.load()`).
    pub running: u32,
    /// Of those, requests whose prefill has not started (vLLM's `num_requests_waiting`).
    pub waiting: u32,
    /// Prompt tokens still to prefill (Dynamo's active prefill tokens).
    pub prefill_tokens: u64,
    /// Prompt blocks of the requests running (Dynamo's active blocks).
    pub active_blocks: u64,
    /// The replica's KV blocks, when bounded.
    pub capacity_blocks: Option<u64>,
}

/// What a router sees when a request arrives.
pub struct View<'a> {
    pub prompt: &'a Prompt<'a>,
    /// Who the session is ([`crate::trace::TraceSession::identity`]).
    pub session: &'a str,
    /// The engines' caches: read only by routers that follow the engines' KV events.
    pub caches: &'a [ReplicaCache],
    pub signals: &'a [ReplicaSignals],
    /// Tokens per block of the trace.
    pub block_size: u32,
    /// Seconds since the first arrival.
    pub now: f64,
}

impl View<'_> {
    fn replica_count(&self) -> usize {
        self.signals.len()
    }

    /// The replica whose `key` is lowest, the first of equals.
    fn lowest(&self, key: impl Fn(&ReplicaSignals) -> f64) -> usize {
        (0..self.replica_count())
            .min_by(|left, right| key(&self.signals[*left]).total_cmp(&key(&self.signals[*right])))
            .unwrap_or(0)
    }

    /// Prompt tokens the engine of `replica` holds now (what its KV events published).
    fn engine_hit(&self, replica: usize) -> u32 {
        self.caches
            .get(replica)
            .map_or(0, |cache| cache.peek(self.prompt))
    }
}

/// Where a request goes, and the prompt tokens the router expected that replica to serve
/// (`None`: the router keeps no index).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub replica: usize,
    pub predicted: Option<u32>,
}

impl Decision {
    fn blind(replica: usize) -> Self {
        Self {
            replica,
            predicted: None,
        }
    }
}

/// A routing policy.
pub trait Route {
    /// Picks the replica for the request in `view`, updating what the router believes.
    fn pick(&mut self, view: &View<'_>, rng: &mut SmallRng) -> Decision;

    /// Whether it reads the replicas' load beyond their prefill queue.
    fn reads_load(&self) -> bool {
        false
    }
}

/// The router of `policy` in front of `replica_count` replicas.
pub fn router(policy: Policy, replica_count: usize) -> Box<dyn Route> {
    match policy {
        Policy::RoundRobin => Box::new(round_robin::RoundRobin::default()),
        Policy::Random => Box::new(random::Random),
        Policy::LeastLoaded | Policy::Ideal => Box::new(least_loaded::LeastLoaded),
        Policy::SessionHash => Box::new(session_hash::SessionHash::new(replica_count)),
        Policy::PrefixAware { overload } => Box::new(prefix_aware::PrefixAware { overload }),
        Policy::PowerOfTwo => Box::new(power_of_two::PowerOfTwo),
        Policy::SglangCacheAware(config) => {
            Box::new(sglang_cache_aware::CacheAware::new(config, replica_count))
        }
        Policy::Dynamo(config) => Box::new(dynamo_kv::KvRouter::new(config, replica_count)),
        Policy::Llmd(config) => Box::new(llmd_prefix::Scorers::new(config, replica_count)),
        Policy::Aibrix(config) => Box::new(aibrix_prefix::PrefixCache::new(config)),
        Policy::Ray(config) => Box::new(ray_prefix::PrefixAffinity::new(config, replica_count)),
    }
}

/// Among `candidates`, one with the lowest `cost`; equals drawn at random (reservoir), as
/// Dynamo's and the gateway extension's pickers break ties.
fn random_lowest(
    candidates: impl Iterator<Item = usize>,
    cost: impl Fn(usize) -> f64,
    rng: &mut SmallRng,
) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    let mut ties = 0u32;
    for candidate in candidates {
        let value = cost(candidate);
        match best {
            Some((_, lowest)) if value > lowest => {}
            Some((_, lowest)) if value == lowest => {
                ties += 1;
                if rng.random_range(0..ties) == 0 {
                    best = Some((candidate, value));
                }
            }
            _ => {
                best = Some((candidate, value));
                ties = 1;
            }
        }
    }
    best.map(|(candidate, _)| candidate)
}

/// `key=X`, a number in `range`, or `default`.
fn number(
    spec: &Spec<'_>,
    key: &str,
    default: f64,
    range: std::ops::RangeInclusive<f64>,
) -> Result<f64, SpecError> {
    match spec.value(key) {
        None => Ok(default),
        Some(text) => text
            .parse::<f64>()
            .ok()
            .filter(|value| range.contains(value))
            .ok_or_else(|| {
                spec.error(format!(
                    "`{key}` must be a number from {} to {}",
                    range.start(),
                    range.end()
                ))
                .into()
            }),
    }
}

/// Requests and replicas built by hand for the routers' tests.
#[cfg(test)]
mod testing {
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    use super::{Decision, ReplicaSignals, Route, View};
    use crate::cache::{Prompt, ReplicaCache};

    pub const BLOCK: u32 = 16;

    /// A first request of its session with these full blocks and tokens.
    pub fn prompt(blocks: &[u64], tokens: u32) -> Prompt<'_> {
        Prompt {
            lineage: &|_| None,
            request: 0,
            session: 0,
            previous: None,
            blocks,
            generated_blocks: &[],
            tokens,
            output_tokens: 0,
            shared_with_previous_sequence: 0,
        }
    }

    /// Replicas with these requests in flight and nothing else.
    pub fn running(counts: &[u32]) -> Vec<ReplicaSignals> {
        counts
            .iter()
            .map(|running| ReplicaSignals {
                running: *running,
                ..ReplicaSignals::default()
            })
            .collect()
    }

    /// `router`'s decision for a prompt of `blocks` and `tokens` at `now`.
    pub fn pick(
        router: &mut dyn Route,
        blocks: &[u64],
        tokens: u32,
        signals: &[ReplicaSignals],
        caches: &[ReplicaCache],
        now: f64,
        rng: &mut SmallRng,
    ) -> Decision {
        router.pick(
            &View {
                prompt: &prompt(blocks, tokens),
                session: "s",
                caches,
                signals,
                block_size: BLOCK,
                now,
            },
            rng,
        )
    }

    pub fn rng(seed: u64) -> SmallRng {
        SmallRng::seed_from_u64(seed)
    }
}

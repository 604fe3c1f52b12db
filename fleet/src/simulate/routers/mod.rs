//! The routers `kvlint simulate --routing` replays, one file each: the generic policies
//! (`round-robin`, `random`, `least-loaded`, `session-hash`, `prefix-aware`) and the routers
//! as they are deployed, with their own defaults and their own index (`power-of-two`,
//! `sglang-cache-aware`, `smg-cache-aware`, `dynamo-kv`, `dynamo-lmetric`, `llmd-prefix`,
//! `llmd-precise`, `aibrix-prefix`, `ray-prefix`).
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
mod knobs;
mod least_loaded;
mod llmd_prefix;
mod power_of_two;
mod prefix_aware;
mod random;
mod ray_prefix;
mod round_robin;
mod session_hash;
mod sglang_cache_aware;
mod smg_cache_aware;

use rand::Rng;
use rand::rngs::SmallRng;

pub use aibrix_prefix::AibrixConfig;
pub use dynamo_kv::{DynamoConfig, DynamoCost};
pub use knobs::{Knob, POLICIES, PolicyKnobs, only_knobs, routing_help, write_policy};
pub use llmd_prefix::{LlmdConfig, LlmdIndex};
pub use ray_prefix::RayConfig;
pub use sglang_cache_aware::{SglangConfig, SglangIndex, SglangMiss};
pub use smg_cache_aware::{SmgConfig, SmgMiss};

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

    /// The prompt tokens `units` of `unit_tokens` each stand for, at most the whole prompt.
    fn tokens_of(&self, units: usize, unit_tokens: u32) -> u32 {
        (units as u64 * u64::from(unit_tokens)).min(u64::from(self.prompt.tokens)) as u32
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

/// What decided a router's choice: each router with an index says which of its rules did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Branch {
    /// The router's index decided: a match it holds usable (over its threshold, or, for a
    /// router that scores, the chosen replica holds the longest match).
    Match,
    /// No usable match: the router's rule for a miss (smallest tree, least loaded, …) decided.
    Miss,
    /// A load gate (imbalance, spill, escape hatch, or a router's load score outweighing
    /// the longest match) decided, whatever the index held.
    Gate,
    /// The router keeps no index (round-robin, session-hash, least-loaded, random, …).
    Blind,
}

impl Branch {
    /// The branch as the JSON output spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Match => "match",
            Self::Miss => "miss",
            Self::Gate => "gate",
            Self::Blind => "blind",
        }
    }
}

/// What a router would have chosen for a request, with the replicas its rule held equal to
/// that choice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    pub decision: Decision,
    /// The replicas the real router could have chosen as well as `decision.replica` (its
    /// random draw among equals, or an order the simulation cannot know, such as a hash map's
    /// per-process order); `decision.replica` alone where its rule is deterministic. Sorted,
    /// and always holding `decision.replica`.
    pub ties: Vec<usize>,
    /// Which of its rules decided.
    pub branch: Branch,
}

impl Choice {
    fn alone(decision: Decision, branch: Branch) -> Self {
        Self {
            ties: vec![decision.replica],
            decision,
            branch,
        }
    }

    /// A router without an index chose `replica` (equally with `ties`).
    fn blind(replica: usize, ties: Vec<usize>) -> Self {
        Self {
            decision: Decision::blind(replica),
            ties,
            branch: Branch::Blind,
        }
    }
}

/// Of routers that score every replica (Dynamo's cost, llm-d's weighted scorers), the branch
/// that decided `chosen`: `Miss` when no replica holds any of the prompt (`overlap` 0
/// everywhere), `Match` when `chosen` holds the longest overlap, else `Gate` (the load terms
/// outweighed the longest match).
fn scored_branch(overlap: impl Fn(usize) -> f64, replica_count: usize, chosen: usize) -> Branch {
    let longest = (0..replica_count).map(&overlap).fold(0.0, f64::max);
    if longest <= 0.0 {
        Branch::Miss
    } else if overlap(chosen) >= longest {
        Branch::Match
    } else {
        Branch::Gate
    }
}

/// A routing policy.
pub trait Route {
    /// Decides the request in `view`: returns what the router chooses, and updates what it
    /// believes (its index, its counters) as if the request went to `forced`, or to its own
    /// choice when `forced` is `None`. Forcing is teacher forcing: replaying recorded
    /// arrivals, the router learns the replica that really served each request, so one
    /// disagreement does not cascade into the next decisions.
    fn decide(&mut self, view: &View<'_>, rng: &mut SmallRng, forced: Option<usize>) -> Choice;

    /// Picks the replica for the request in `view`, updating what the router believes.
    #[allow(
        dead_code,
        reason = "the routers' tests pick; the fleet may decide instead"
    )]
    fn pick(&mut self, view: &View<'_>, rng: &mut SmallRng) -> Decision {
        self.decide(view, rng, None).decision
    }

    /// What the router would choose for the request in `view`, its state updated as if the
    /// request went to `forced` (see [`Route::decide`]).
    fn pick_forced(&mut self, view: &View<'_>, rng: &mut SmallRng, forced: usize) -> Choice {
        self.decide(view, rng, Some(forced))
    }

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
        Policy::Smg(config) => Box::new(smg_cache_aware::SmgCacheAware::new(config, replica_count)),
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

/// Of `candidates`, those whose `cost` equals `chosen`'s: what [`random_lowest`] drew from.
fn ties(
    candidates: impl Iterator<Item = usize>,
    cost: impl Fn(usize) -> f64,
    chosen: usize,
) -> Vec<usize> {
    let lowest = cost(chosen);
    candidates
        .filter(|candidate| cost(*candidate) == lowest)
        .collect()
}

/// `value` as a spec prints it, when it is not `default`.
fn changed<T: PartialEq + ToString>(value: T, default: T) -> Option<String> {
    (value != default).then(|| value.to_string())
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

    use super::{Choice, Decision, ReplicaSignals, Route, View};
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

    /// `router`'s choice for a prompt of `blocks` and `tokens` at time 0, its state updated
    /// as if the request went to `forced` (its own choice when `None`).
    pub fn decide(
        router: &mut dyn Route,
        blocks: &[u64],
        tokens: u32,
        signals: &[ReplicaSignals],
        caches: &[ReplicaCache],
        forced: Option<usize>,
        rng: &mut SmallRng,
    ) -> Choice {
        router.decide(
            &View {
                prompt: &prompt(blocks, tokens),
                session: "s",
                caches,
                signals,
                block_size: BLOCK,
                now: 0.0,
            },
            rng,
            forced,
        )
    }

    /// [`pick`] on replicas with `loads` requests in flight, no cache consulted.
    pub fn pick_under(
        router: &mut dyn Route,
        blocks: &[u64],
        tokens: u32,
        loads: &[u32],
        now: f64,
        rng: &mut SmallRng,
    ) -> Decision {
        pick(router, blocks, tokens, &running(loads), &[], now, rng)
    }

    /// [`decide`] on replicas with `loads` requests in flight, no cache consulted.
    pub fn decide_under(
        router: &mut dyn Route,
        blocks: &[u64],
        tokens: u32,
        loads: &[u32],
        forced: Option<usize>,
        rng: &mut SmallRng,
    ) -> Choice {
        decide(router, blocks, tokens, &running(loads), &[], forced, rng)
    }

    pub fn rng(seed: u64) -> SmallRng {
        SmallRng::seed_from_u64(seed)
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{BLOCK, prompt, rng, running};
    use super::*;

    fn view<'a>(prompt: &'a Prompt<'a>, signals: &'a [ReplicaSignals]) -> View<'a> {
        View {
            prompt,
            session: "s",
            caches: &[],
            signals,
            block_size: BLOCK,
            now: 0.0,
        }
    }

    #[test]
    fn a_forced_replica_is_what_the_router_learns_and_its_own_choice_is_returned() {
        let idle = running(&[0, 0]);
        let request = prompt(&[1, 2, 3], 60);
        for spec in [
            "sglang-cache-aware",
            "llmd-prefix",
            "dynamo-kv:ttl=120",
            "aibrix-prefix",
            "ray-prefix",
        ] {
            for forced in [0, 1] {
                let mut router = router(spec.parse().unwrap(), 2);
                let mut rng = rng(0);
                let first = router.pick_forced(&view(&request, &idle), &mut rng, forced);
                // Nothing is known yet: the router's own choice predicts no hit.
                assert_eq!(first.decision.predicted, Some(0), "{spec}");
                assert!(first.ties.contains(&first.decision.replica), "{spec}");
                let second = router.pick(&view(&request, &idle), &mut rng);
                assert_eq!(
                    second,
                    Decision {
                        replica: forced,
                        predicted: Some(48)
                    },
                    "{spec} forced to {forced}"
                );
            }
        }
        // Round robin: the turn goes on after the forced replica.
        let mut turns = router(Policy::RoundRobin, 3);
        let mut rng = rng(0);
        let signals = running(&[0, 0, 0]);
        let forced = turns.pick_forced(&view(&request, &signals), &mut rng, 1);
        assert_eq!(forced.decision.replica, 0);
        assert_eq!(turns.pick(&view(&request, &signals), &mut rng).replica, 2);
    }

    #[test]
    fn the_ties_are_the_replicas_the_real_router_could_have_chosen_as_well() {
        let request = prompt(&[1, 2, 3], 60);
        let ties = |spec: &str, loads: &[u32]| {
            let signals = running(loads);
            router(spec.parse().unwrap(), loads.len())
                .pick_forced(&view(&request, &signals), &mut rng(0), 0)
                .ties
        };
        // Idle replicas: any (sglang-router's worker order is drawn at each start); its imbalance
        // gate: any of the least loaded, in that order too; vllm-router's gate: the first least
        // loaded in --worker-urls order.
        assert_eq!(ties("sglang-cache-aware", &[0, 0, 0]), [0, 1, 2]);
        assert_eq!(ties("sglang-cache-aware:abs=2", &[9, 0, 0]), [1, 2]);
        assert_eq!(
            ties("sglang-cache-aware:flavor=vllm-router,abs=2", &[9, 0, 0]),
            [1]
        );
        // Power of two: all but the single busiest.
        assert_eq!(ties("power-of-two", &[3, 1, 1]), [1, 2]);
        assert_eq!(ties("power-of-two", &[3, 3, 1]), [0, 1, 2]);
        assert_eq!(ties("random", &[5, 0]), [0, 1]);
        assert_eq!(ties("round-robin", &[0, 0]), [0]);
        assert_eq!(ties("dynamo-kv", &[0, 0]), [0, 1]);
        assert_eq!(ties("llmd-prefix", &[0, 0]), [0, 1]);
        assert_eq!(ties("aibrix-prefix", &[0, 1, 1]), [0]);
    }

    #[test]
    fn a_router_without_an_index_is_blind() {
        let request = prompt(&[1, 2, 3], 60);
        let signals = running(&[0, 0]);
        for spec in [
            "round-robin",
            "random",
            "least-loaded",
            "session-hash",
            "power-of-two",
        ] {
            let choice = router(spec.parse().unwrap(), 2).decide(
                &view(&request, &signals),
                &mut rng(0),
                None,
            );
            assert_eq!(choice.branch, Branch::Blind, "{spec}");
        }
    }
}

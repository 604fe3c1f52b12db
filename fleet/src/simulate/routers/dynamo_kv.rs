//! `dynamo-kv[:scale=1.0,credit=1.0,temperature=0,busy=FRACTION,ttl=SECONDS]` and
//! `dynamo-lmetric[:credit=1.0,temperature=0,busy=FRACTION,ttl=SECONDS]`:
//! NVIDIA Dynamo's KV router, `lib/kv-router/src/scheduling/selector/default.rs`
//! (ai-dynamo/dynamo `07a6c9ce`: `DefaultWorkerScorer::worker_logit`, `minimum_cost_index`,
//! `softmax_sample_index`; the same formula as `lib/llm/src/kv_router/scheduler.rs` of
//! earlier releases). Per worker:
//!
//! ```text
//! prefill blocks = (the worker's active prefill tokens + the prompt's tokens) / block
//! adjusted       = max(prefill blocks − credit × overlap blocks, 0)
//! decode blocks  = the worker's active blocks + the prompt's blocks
//! cost           = scale × adjusted + decode blocks                     (dynamo-kv)
//! cost           = adjusted × (decode blocks + 1)                       (dynamo-lmetric)
//! ```
//!
//! The lowest cost wins, equals drawn at random (`minimum_cost_index`); with
//! `temperature > 0`, a softmax over the costs normalised to their range
//! (`softmax_sample_index`). `scale` is `prefill_load_scale` (default 1.0), `credit`
//! `overlap_score_credit` (default 1.0, `kv_overlap_score_weight` in earlier releases),
//! `temperature` `router_temperature` (default 0). `busy` is
//! `active_decode_blocks_threshold`: a worker whose active blocks exceed that share of its KV
//! blocks is left out (off by default, as in Dynamo; with every worker busy the real frontend
//! answers 503 — here the request goes to the cheapest of all, as the simulation cannot
//! refuse it).
//!
//! The overlap is what the engines' KV events published: Dynamo's indexer follows each
//! engine's stored and removed blocks, so the router reads the engine caches here (belief
//! equals truth, both in the engine's blocks), without the events' delay. `ttl=SECONDS` is
//! `--no-kv-events` instead: the router's own index (`ApproxKvIndexer`), the prompt's blocks
//! recorded under the chosen worker when routed and forgotten `ttl` seconds later (Dynamo's
//! default 120), whatever the engine evicted meanwhile or kept longer. The active tokens
//! and blocks are those of the requests the simulation has in flight on the worker (prompt
//! blocks summed, not deduplicated across requests sharing a prefix as Dynamo's
//! `ActiveSequences` does; output blocks not tracked, `--router-track-output-blocks` off).
//!
//! `dynamo-lmetric` is not in any Dynamo release (Dynamo 1.6.1 has no such policy among its
//! `--router-mode` choices, `dynamo/common/configuration/groups/router_args.py:224-246` in
//! the ai-dynamo 1.6.1 wheel): it is ai-dynamo/dynamo pull request #11028, open and
//! unreleased (`--router-selection-policy lmetric`; issue #11029), after "Simple is Better:
//! Multiplication May Be All You Need for LLM Request Scheduling" (arXiv:2603.15202). The
//! formula the pull request states is the one above: the adjusted prefill blocks are not
//! multiplied by `prefill_load_scale`, so `scale` is refused here. It requires prefill-token
//! tracking, which this simulation always does (Dynamo's default,
//! `--router-track-prefill-tokens`).
//! With no release to run, it is checked against that formula only.

use std::fmt;

use kvlint_protocol::Spec;
use rand::Rng;
use rand::rngs::SmallRng;
use rustc_hash::FxHashMap;

use super::{Choice, Decision, Route, View, number, random_lowest, scored_branch, ties};
use crate::error::SpecError;

/// The cost function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DynamoCost {
    Kv,
    Lmetric,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DynamoConfig {
    pub cost: DynamoCost,
    /// `prefill_load_scale`.
    pub scale: f64,
    /// `overlap_score_credit`.
    pub credit: f64,
    /// `router_temperature`.
    pub temperature: f64,
    /// `active_decode_blocks_threshold`: a share of the worker's KV blocks.
    pub busy: Option<f64>,
    /// `--no-kv-events`: seconds a routed block is believed held; `None`: KV events.
    pub ttl: Option<u64>,
}

impl DynamoConfig {
    pub fn new(cost: DynamoCost) -> Self {
        Self {
            cost,
            scale: 1.0,
            credit: 1.0,
            temperature: 0.0,
            busy: None,
            ttl: None,
        }
    }

    pub fn parse(cost: DynamoCost, spec: &Spec<'_>) -> Result<Self, SpecError> {
        match cost {
            DynamoCost::Kv => super::only_knobs("dynamo-kv", spec)?,
            DynamoCost::Lmetric if spec.value("scale").is_some() => {
                return Err(spec
                    .error(
                        "`scale` does not apply to dynamo-lmetric: its cost (ai-dynamo/dynamo \
                         pull request #11028) is adjusted prefill × (decode + 1), \
                         prefill_load_scale unused",
                    )
                    .into());
            }
            DynamoCost::Lmetric => super::only_knobs("dynamo-lmetric", spec)?,
        }
        let default = Self::new(cost);
        Ok(Self {
            cost,
            scale: number(spec, "scale", default.scale, 0.0..=f64::MAX)?,
            credit: number(spec, "credit", default.credit, 0.0..=f64::MAX)?,
            temperature: number(spec, "temperature", default.temperature, 0.0..=f64::MAX)?,
            busy: match spec.value("busy") {
                None => None,
                Some(_) => Some(number(spec, "busy", 1.0, 0.0..=1.0)?),
            },
            ttl: match spec.value("ttl") {
                None => None,
                Some(_) => Some(spec.positive("ttl", 120)?),
            },
        })
    }

    fn cost_of(&self, prefill_blocks: f64, overlap_blocks: f64, decode_blocks: f64) -> f64 {
        let adjusted = (prefill_blocks - self.credit * overlap_blocks).max(0.0);
        match self.cost {
            DynamoCost::Kv => self.scale * adjusted + decode_blocks,
            DynamoCost::Lmetric => adjusted * (decode_blocks + 1.0),
        }
    }
}

impl fmt::Display for DynamoConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let default = Self::new(self.cost);
        let name = match self.cost {
            DynamoCost::Kv => "dynamo-kv",
            DynamoCost::Lmetric => "dynamo-lmetric",
        };
        super::write_policy(f, name, |knob| match knob {
            "scale" => super::changed(self.scale, default.scale),
            "credit" => super::changed(self.credit, default.credit),
            "temperature" => super::changed(self.temperature, default.temperature),
            "busy" => self.busy.map(|busy| busy.to_string()),
            "ttl" => self.ttl.map(|ttl| ttl.to_string()),
            _ => None,
        })
    }
}

pub struct KvRouter {
    config: DynamoConfig,
    /// Without KV events: per worker, when each routed block is forgotten.
    approximate: Vec<FxHashMap<u64, f64>>,
}

impl KvRouter {
    pub fn new(config: DynamoConfig, replica_count: usize) -> Self {
        Self {
            config,
            approximate: vec![FxHashMap::default(); replica_count],
        }
    }

    /// Prompt tokens the router believes `replica` holds.
    fn overlap(&self, view: &View<'_>, replica: usize) -> u32 {
        if self.config.ttl.is_none() {
            return view.engine_hit(replica);
        }
        let held = &self.approximate[replica];
        let blocks = view
            .prompt
            .blocks
            .iter()
            .take_while(|block| held.get(*block).is_some_and(|until| *until > view.now))
            .count();
        view.tokens_of(blocks, view.block_size)
    }
}

impl Route for KvRouter {
    fn decide(&mut self, view: &View<'_>, rng: &mut SmallRng, forced: Option<usize>) -> Choice {
        let block = f64::from(view.block_size.max(1));
        let prompt_tokens = f64::from(view.prompt.tokens);
        let prompt_blocks = (prompt_tokens / block).ceil();
        let overlaps: Vec<u32> = (0..view.replica_count())
            .map(|replica| self.overlap(view, replica))
            .collect();
        let costs: Vec<f64> = view
            .signals
            .iter()
            .zip(&overlaps)
            .map(|(signals, overlap)| {
                self.config.cost_of(
                    (signals.prefill_tokens as f64 + prompt_tokens) / block,
                    f64::from(*overlap) / block,
                    signals.active_blocks as f64 + prompt_blocks,
                )
            })
            .collect();
        let free: Vec<usize> = (0..costs.len())
            .filter(|replica| {
                let signals = &view.signals[*replica];
                match (self.config.busy, signals.capacity_blocks) {
                    (Some(busy), Some(capacity)) if capacity > 0 => {
                        (signals.active_blocks as f64 / capacity as f64) <= busy
                    }
                    _ => true,
                }
            })
            .collect();
        let candidates = if free.is_empty() {
            (0..costs.len()).collect()
        } else {
            free
        };
        let (replica, tied) = if self.config.temperature > 0.0 {
            // Every candidate has a chance.
            let drawn = softmax_sample(&candidates, &costs, self.config.temperature, rng);
            (drawn, candidates)
        } else {
            let cheapest = random_lowest(candidates.iter().copied(), |replica| costs[replica], rng)
                .unwrap_or(0);
            let tied = ties(candidates.into_iter(), |replica| costs[replica], cheapest);
            (cheapest, tied)
        };
        if let Some(ttl) = self.config.ttl {
            let held = &mut self.approximate[forced.unwrap_or(replica)];
            held.retain(|_, until| *until > view.now);
            for block in view.prompt.blocks {
                held.insert(*block, view.now + ttl as f64);
            }
        }
        Choice {
            decision: Decision {
                replica,
                predicted: Some(overlaps[replica]),
            },
            ties: tied,
            branch: scored_branch(
                |replica| f64::from(overlaps[replica]),
                overlaps.len(),
                replica,
            ),
        }
    }

    fn reads_load(&self) -> bool {
        true
    }
}

/// A candidate drawn with probability `exp(−(cost − min) / ((max − min) × temperature))`,
/// normalised; all equal: uniform (`softmax_sample_index`).
fn softmax_sample(
    candidates: &[usize],
    costs: &[f64],
    temperature: f64,
    rng: &mut SmallRng,
) -> usize {
    let (min, max) = candidates
        .iter()
        .map(|candidate| costs[*candidate])
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), cost| {
            (lo.min(cost), hi.max(cost))
        });
    let weights: Vec<f64> = candidates
        .iter()
        .map(|candidate| {
            if max == min {
                1.0
            } else {
                (-(costs[*candidate] - min) / ((max - min) * temperature)).exp()
            }
        })
        .collect();
    let sum: f64 = weights.iter().sum();
    let sample: f64 = rng.random::<f64>();
    let mut cumulative = 0.0;
    for (candidate, weight) in candidates.iter().zip(&weights) {
        cumulative += weight / sum;
        if sample <= cumulative {
            return *candidate;
        }
    }
    candidates.last().copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{BLOCK, decide, pick, prompt, rng};
    use super::super::{Branch, ReplicaSignals};
    use super::*;
    use crate::cache::ReplicaCache;
    use crate::simulate::{CacheSize, Policy, SimEngine};

    fn router(spec: &str) -> KvRouter {
        match spec.parse::<Policy>().unwrap() {
            Policy::Dynamo(config) => KvRouter::new(config, 2),
            other => panic!("{other}"),
        }
    }

    /// Replica 0's engine holds blocks 1, 2, 3; replica 1's nothing.
    fn caches() -> Vec<ReplicaCache> {
        let engine = SimEngine::Vllm { block: BLOCK };
        let mut warm = engine.cache(CacheSize::Unbounded);
        warm.serve(&prompt(&[1, 2, 3], 49));
        vec![warm, engine.cache(CacheSize::Unbounded)]
    }

    fn loads(active_blocks: [u64; 2], capacity_blocks: Option<u64>) -> Vec<ReplicaSignals> {
        active_blocks
            .iter()
            .map(|active_blocks| ReplicaSignals {
                active_blocks: *active_blocks,
                capacity_blocks,
                ..ReplicaSignals::default()
            })
            .collect()
    }

    #[test]
    fn the_branch_is_the_match_when_the_cheapest_worker_holds_the_longest_overlap() {
        let caches = caches();
        let mut rng = rng(0);
        let mut route = |blocks: &[u64], active: [u64; 2]| {
            let choice = decide(
                &mut router("dynamo-kv"),
                blocks,
                blocks.len() as u32 * BLOCK,
                &loads(active, None),
                &caches,
                None,
                &mut rng,
            );
            (choice.decision.replica, choice.branch)
        };
        // Replica 0's engine holds three of the four blocks: 5 against 8.
        assert_eq!(route(&[1, 2, 3, 4], [0, 0]), (0, Branch::Match));
        // Ten blocks active there: 15 against 8, the load outweighs the overlap.
        assert_eq!(route(&[1, 2, 3, 4], [10, 0]), (1, Branch::Gate));
        // No engine holds any of it.
        assert_eq!(route(&[7, 8], [0, 10]).1, Branch::Miss);
    }

    #[test]
    fn the_lowest_prefill_plus_decode_cost_wins() {
        let caches = caches();
        let mut rng = rng(0);
        let mut route = |spec: &str, signals: &[ReplicaSignals]| {
            // A prompt of four blocks, three of them on replica 0's engine.
            pick(
                &mut router(spec),
                &[1, 2, 3, 4],
                64,
                signals,
                &caches,
                0.0,
                &mut rng,
            )
        };
        // Idle: replica 0 costs max(4 − 3, 0) + 4 = 5, replica 1 4 + 4 = 8.
        assert_eq!(
            route("dynamo-kv", &loads([0, 0], None)),
            Decision {
                replica: 0,
                predicted: Some(48)
            }
        );
        // Ten blocks active on replica 0: 1 + 14 = 15 against 8.
        assert_eq!(route("dynamo-kv", &loads([10, 0], None)).replica, 1);
        // Prefill weighs four times: 4 × 1 + 14 = 18 against 4 × 4 + 4 = 20.
        assert_eq!(route("dynamo-kv:scale=4", &loads([10, 0], None)).replica, 0);
        // No credit for the overlap: 4 × 4 + 14 = 30 against 20.
        assert_eq!(
            route("dynamo-kv:scale=4,credit=0", &loads([10, 0], None)).replica,
            1
        );
        // lmetric multiplies: 1 × (14 + 1) = 15 against 4 × (4 + 1) = 20.
        assert_eq!(route("dynamo-lmetric", &loads([10, 0], None)).replica, 0);
        // Without credit for the overlap: 4 × (14 + 1) = 60 against 20.
        assert_eq!(
            route("dynamo-lmetric:credit=0", &loads([10, 0], None)).replica,
            1
        );
        // No prefill_load_scale in pull request #11028's cost: `scale` is refused, saying so.
        let refused = "dynamo-lmetric:scale=4".parse::<Policy>().unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("`scale` does not apply to dynamo-lmetric"),
            "{refused}"
        );
        // Busy over half of 16 blocks (10 active): replica 0 is left out, cheaper or not.
        assert_eq!(
            route("dynamo-kv:scale=4,busy=0.5", &loads([10, 0], Some(16))).replica,
            1
        );
        assert_eq!(
            route("dynamo-kv:scale=4,busy=0.7", &loads([10, 0], Some(16))).replica,
            0
        );
        // Every worker busy: the cheapest of all (the real frontend would refuse).
        assert_eq!(
            route("dynamo-kv:scale=4,busy=0.5", &loads([10, 9], Some(16))).replica,
            0
        );
    }

    #[test]
    fn without_kv_events_the_router_believes_what_it_routed_for_the_ttl() {
        let engine = SimEngine::Vllm { block: BLOCK };
        // The engines hold nothing: the router's own index is all it reads.
        let cold = [
            engine.cache(CacheSize::Unbounded),
            engine.cache(CacheSize::Unbounded),
        ];
        let mut rng = rng(0);
        let mut router = router("dynamo-kv:ttl=120");
        // Replica 1 is the cheaper (ten blocks active on replica 0): it gets blocks 1..4.
        let first = pick(
            &mut router,
            &[1, 2, 3, 4],
            64,
            &loads([10, 0], None),
            &cold,
            0.0,
            &mut rng,
        );
        assert_eq!(
            first,
            Decision {
                replica: 1,
                predicted: Some(0)
            }
        );
        // At 119 s it believes replica 1 holds them (cost 0 + 4 against 4 + 4): so the
        // engine, which holds nothing here, will not serve its prediction.
        let kept = pick(
            &mut router,
            &[1, 2, 3, 4],
            64,
            &loads([0, 0], None),
            &cold,
            119.0,
            &mut rng,
        );
        assert_eq!(
            kept,
            Decision {
                replica: 1,
                predicted: Some(64)
            }
        );
        // Refreshed at 119 s, forgotten at 239 s: equal costs, no belief either way.
        let forgotten = pick(
            &mut router,
            &[1, 2, 3, 4],
            64,
            &loads([0, 0], None),
            &cold,
            239.0,
            &mut rng,
        );
        assert_eq!(forgotten.predicted, Some(0));
    }

    #[test]
    fn equal_costs_are_drawn_at_random_and_a_temperature_samples_a_softmax() {
        let engine = SimEngine::Vllm { block: BLOCK };
        let cold = [
            engine.cache(CacheSize::Unbounded),
            engine.cache(CacheSize::Unbounded),
        ];
        let mut rng = rng(3);
        let mut ties = [0u32; 2];
        for _ in 0..1000 {
            let decision = pick(
                &mut router("dynamo-kv"),
                &[1, 2],
                40,
                &loads([0, 0], None),
                &cold,
                0.0,
                &mut rng,
            );
            ties[decision.replica] += 1;
        }
        assert!(ties[0] > 400 && ties[1] > 400, "{ties:?}");
        // Costs 5 and 8 at temperature 1: replica 0 with 1 / (1 + e^−1) ≈ 0.731.
        let caches = caches();
        let mut warm_wins = 0;
        for _ in 0..4000 {
            let decision = pick(
                &mut router("dynamo-kv:temperature=1"),
                &[1, 2, 3, 4],
                64,
                &loads([0, 0], None),
                &caches,
                0.0,
                &mut rng,
            );
            warm_wins += u32::from(decision.replica == 0);
        }
        assert!((2800..=3050).contains(&warm_wins), "{warm_wins}");
    }
}

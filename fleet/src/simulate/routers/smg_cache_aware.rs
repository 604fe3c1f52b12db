//! `smg-cache-aware[:threshold=0.3,abs=64,rel=1.5,index=text|tokens,evict=60,size=67108864,
//! miss=wait|routed,warmup=0]`:
//! the `cache_aware` policy of Shepherd Model Gateway (`smg launch --policy cache_aware`),
//! after smg-project/smg `f8daa883` (2026-08-22, smg 1.9.0),
//! `model_gateway/src/policies/cache_aware.rs`; the pinned binary, smg 1.13.0, is newer.
//!
//! 1. One pass over the workers (`select_worker`, lines 1001-1098) gathers the mean load
//!    (requests in flight, `worker.load()`) and the least loaded worker by the key
//!    (load, requests it was routed, index) (#1714): `processed`, counted here per simulated
//!    router for every request it routes (`increment_processed`). There is no max/min gate
//!    any more; only a KV-usage gate, off by default (`balance_token_usage_threshold` 1.0),
//!    not modelled.
//! 2. The tree's longest match (`select_worker_with_text`, lines 1874-1981): when matched
//!    characters over the request's exceed `threshold` (`cache_threshold`), a hit: of all the
//!    tenants of the deepest matched node (`result.matched_tenants`), the least loaded, drawn
//!    uniformly among equals (`select_matched_candidate`, 1195-1244;
//!    `argmax_with_random_ties`, 1412-1438, every candidate scoring 1.0 with the default
//!    `overlap_decay` 0 and `selection_temperature` 0). Then the spill gate
//!    (`gate_selected_candidate`, 1172-1186): when that worker's load exceeds both
//!    `rel` × the mean (`balance_rel_threshold`) and the mean + `abs`
//!    (`balance_abs_threshold`), the least loaded worker of step 1 instead.
//!    Not a hit: the least loaded worker of step 1 — not the smallest tree, as in
//!    `sglang-cache-aware`. That is `miss=routed`; smg 1.13 decides misses (and spills) by
//!    expected wait instead, `miss=wait`, the default, below.
//! 3. The request's text goes into the tree under the chosen worker (`match_and_insert_with`).
//!    Every `evict` seconds (`eviction_interval_secs`) the tree loses least recently used
//!    leaves, of all workers together, until it holds at most `size` characters
//!    (`max_tree_size`) in all: one budget for the model's tree, "shared across all workers"
//!    (`Tree::evict_tenant_by_size`, `crates/kv_index/src/string_tree.rs`).
//!
//! Defaults are smg 1.13.0's (`smg/router_args.py` in its wheel): 0.3 / 64 / 1.5, eviction
//! every 60 s, 2^26 characters. smg 1.13 also has a warm-up slice for new workers
//! (`--worker-warmup-secs 60 --worker-warmup-share 0.25 --worker-warmup-blocks 1024
//! --worker-warmup-thin-ratio 0.5 --worker-warmup-divert-every 8`) whose source is in no
//! snapshot read here: it is not modelled, `warmup` accepts only 0, and this policy matches
//! smg run with `--worker-warmup-secs 0`. Its help text also says 1.13 caps the spill gate's
//! margin at the in-flight count's swing (two standard deviations, at least four), which the
//! source read does not have; the gate here is the source's.
//!
//! `miss=wait` is smg 1.13's rule for a miss, which its debug log names
//! `expected_wait_fallback`: `select_worker_with_text` at or under the threshold goes through
//! `resolve_selection` and `select_final_from_affinity` to
//! `LeastLoadPolicy::select_min_expected_wait_with_freshness` (smg-project/smg
//! `model_gateway/src/policies/cache_aware.rs` and `least_load.rs` after `f8daa883`, as stored
//! by the code search at `65e5d81e` and `11b1fe08`; the symbols are in 1.13's `.so`). A worker
//! whose engine reports its load scores its queued and running tokens over its reported
//! throughput; a worker that reports nothing — a generic OpenAI worker such as llama-server,
//! whose `GET /v1/loads` is a 404 — scores its requests in flight from this gateway, and when
//! no worker reports, that count is every worker's score. Scores within 1e-6 tie, drawn by
//! reservoir sampling from an unseeded thread RNG. Modelled: the reporting-nothing case (the
//! fewest requests in flight, drawn uniformly among equals); the reported-throughput scores
//! are not.
//!
//! The tree is the router's belief, approximated on the trace's blocks as in
//! `sglang-cache-aware` (see [`super`]); `index=tokens` is the gRPC router's token tree.

use std::fmt;

use kvlint_protocol::Spec;
use rand::Rng;
use rand::rngs::SmallRng;

use super::index::{PrefixIndex, Recency, units};
use super::{Branch, Choice, Decision, Route, SglangConfig, View};
use crate::error::SpecError;

/// smg's knobs: those of sglang-router's `cache_aware`, with smg 1.13's defaults (the same
/// as sglang-router 0.3.2's), and its own rule for a miss.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SmgConfig {
    pub tree: SglangConfig,
    pub miss: SmgMiss,
}

/// Where a request goes that the tree does not match over the threshold, or that spills.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SmgMiss {
    /// smg 1.13: the least expected wait; with workers that report no load, the fewest
    /// requests in flight, drawn uniformly among equals.
    Wait,
    /// smg `f8daa883`: the least loaded by (load, requests routed, index).
    Routed,
}

impl SmgConfig {
    pub fn parse(spec: &Spec<'_>) -> Result<Self, SpecError> {
        super::only_knobs("smg-cache-aware", spec)?;
        if spec.whole("warmup", 0)? != 0 {
            return Err(spec
                .error(
                    "smg's warm-up slice is not modelled: only `warmup=0` (smg run with \
                     --worker-warmup-secs 0)",
                )
                .into());
        }
        let miss = match spec.value("miss") {
            None | Some("wait") => SmgMiss::Wait,
            Some("routed") => SmgMiss::Routed,
            Some(_) => return Err(spec.error("`miss` is wait or routed").into()),
        };
        Ok(Self {
            tree: SglangConfig::read(spec, SglangConfig::default())?,
            miss,
        })
    }
}

impl fmt::Display for SmgConfig {
    /// The name and the knobs that differ from the defaults.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        super::write_policy(f, "smg-cache-aware", |knob| match knob {
            "miss" => (self.miss == SmgMiss::Routed).then(|| "routed".to_owned()),
            "warmup" => None,
            knob => self.tree.changed(&SglangConfig::default(), knob),
        })
    }
}

pub struct SmgCacheAware {
    config: SglangConfig,
    miss: SmgMiss,
    tree: PrefixIndex,
    /// Requests routed to each worker (`processed`).
    processed: Vec<u64>,
    next_eviction: f64,
}

impl SmgCacheAware {
    pub fn new(SmgConfig { tree: config, miss }: SmgConfig, replica_count: usize) -> Self {
        Self {
            config,
            miss,
            tree: PrefixIndex::new(replica_count),
            processed: vec![0; replica_count],
            next_eviction: config.evict as f64,
        }
    }

    /// The worker a miss or a spill goes to, and the workers tied with it.
    fn least_waiting(
        &self,
        load: impl Fn(usize) -> u32,
        count: usize,
        rng: &mut SmallRng,
    ) -> (usize, Vec<usize>) {
        match self.miss {
            SmgMiss::Routed => {
                let least = (0..count)
                    .min_by_key(|replica| (load(*replica), self.processed[*replica], *replica))
                    .unwrap_or(0);
                (least, vec![least])
            }
            SmgMiss::Wait => {
                let lightest = (0..count).map(&load).min().unwrap_or(0);
                let tied: Vec<usize> = (0..count)
                    .filter(|replica| load(*replica) == lightest)
                    .collect();
                (tied[rng.random_range(0..tied.len())], tied)
            }
        }
    }

    /// The periodic eviction, as of `now`.
    fn evict(&mut self, now: f64, unit_tokens: u32) {
        if self.config.evict == 0 {
            return;
        }
        let capacity = self.config.tree_units(unit_tokens);
        while now >= self.next_eviction {
            self.tree.evict_all_to(capacity);
            self.next_eviction += self.config.evict as f64;
        }
    }
}

impl Route for SmgCacheAware {
    fn decide(&mut self, view: &View<'_>, rng: &mut SmallRng, forced: Option<usize>) -> Choice {
        let count = view.replica_count();
        let (units, unit_tokens) = units(view.prompt.blocks, view.block_size, 1);
        self.evict(view.now, unit_tokens);
        let load = |replica: usize| view.signals[replica].running;
        let mean = (0..count)
            .map(|replica| f64::from(load(replica)))
            .sum::<f64>()
            / count as f64;
        let matched = self.tree.matched_all(&units);
        let longest = matched.iter().copied().max().unwrap_or(0);
        let rate = if view.prompt.tokens == 0 {
            0.0
        } else {
            (longest as u64 * u64::from(unit_tokens)) as f32 / view.prompt.tokens as f32
        };
        let (replica, ties, branch) = if longest > 0 && rate > self.config.threshold as f32 {
            let holders = (0..count).filter(|replica| matched[*replica] == longest);
            let lightest = holders.clone().map(load).min().unwrap_or(0);
            let tied: Vec<usize> = holders
                .filter(|replica| load(*replica) == lightest)
                .collect();
            let drawn = tied[rng.random_range(0..tied.len())];
            let pressed = f64::from(load(drawn));
            if pressed > mean * self.config.rel && pressed > mean + self.config.abs as f64 {
                let (least, tied) = self.least_waiting(load, count, rng);
                (least, tied, Branch::Gate)
            } else {
                (drawn, tied, Branch::Match)
            }
        } else {
            let (least, tied) = self.least_waiting(load, count, rng);
            (least, tied, Branch::Miss)
        };
        let routed = forced.unwrap_or(replica);
        self.tree.insert(routed, &units, Recency::HeadNewest, None);
        self.processed[routed] += 1;
        Choice {
            decision: Decision {
                replica,
                predicted: Some(view.tokens_of(matched[replica], unit_tokens)),
            },
            ties,
            branch,
        }
    }

    fn reads_load(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{decide_under, pick, pick_under, rng, running};
    use super::*;
    use crate::simulate::Policy;

    fn router(spec: &str, replicas: usize) -> SmgCacheAware {
        match spec.parse::<Policy>().unwrap() {
            Policy::Smg(config) => SmgCacheAware::new(config, replicas),
            other => panic!("{other}"),
        }
    }

    #[test]
    fn the_branch_is_the_match_its_spill_or_the_miss() {
        let mut router = router("smg-cache-aware:abs=2,miss=routed", 2);
        let mut rng = rng(0);
        let mut route = |blocks: &[u64], tokens, loads: &[u32]| {
            let choice = decide_under(&mut router, blocks, tokens, loads, None, &mut rng);
            (
                choice.decision.replica,
                choice.decision.predicted,
                choice.branch,
            )
        };
        assert_eq!(
            route(&[1, 2, 3, 4], 64, &[0, 0]),
            (0, Some(0), Branch::Miss)
        );
        assert_eq!(
            route(&[1, 2, 3, 4], 64, &[0, 0]),
            (0, Some(64), Branch::Match)
        );
        // The holder's 9 is over 1.5 × and 2 + the mean 4.5: spilled to the least loaded.
        assert_eq!(
            route(&[1, 2, 3, 4], 64, &[9, 0]),
            (1, Some(0), Branch::Gate)
        );
        // 16 of 64 tokens (0.25): a miss, to the least routed, replica 1, which holds them.
        assert_eq!(
            route(&[1, 7, 8, 9], 64, &[0, 0]),
            (1, Some(16), Branch::Miss)
        );
    }

    #[test]
    fn a_miss_goes_to_the_least_loaded_then_least_routed_not_to_the_smallest_tree() {
        let mut router = router("smg-cache-aware:miss=routed", 2);
        let mut rng = rng(0);
        let mut route = |blocks: &[u64], tokens, loads: &[u32]| {
            pick_under(&mut router, blocks, tokens, loads, 0.0, &mut rng)
        };
        // Idle, nothing routed: the first index; then the one routed fewer requests.
        assert_eq!(route(&[1, 2, 3, 4], 64, &[0, 0]).replica, 0);
        assert_eq!(route(&[9], 16, &[0, 0]).replica, 1);
        // One request each: replica 0 again, though replica 1's tree is the smaller
        // (sglang-router's miss would go there).
        assert_eq!(route(&[7], 16, &[0, 0]).replica, 0);
        // The load comes first: replica 0 has a request in flight.
        assert_eq!(route(&[8], 16, &[1, 0]).replica, 1);
    }

    #[test]
    fn a_hit_goes_to_the_least_loaded_holder_drawn_among_equals() {
        let mut seen = [0u32; 3];
        for seed in 0..40 {
            // No margin over the mean: a busy holder spills.
            let mut router = router("smg-cache-aware:abs=0,miss=routed", 3);
            let mut rng = rng(seed);
            let mut route = |blocks: &[u64], tokens, loads: &[u32]| {
                pick_under(&mut router, blocks, tokens, loads, 0.0, &mut rng)
            };
            // Replica 0 takes blocks 1, 2 (a miss); the same prompt hits it, but with 3 in
            // flight against a mean of 1 it spills to replica 1, which now holds them too.
            assert_eq!(route(&[1, 2], 32, &[0, 0, 0]).replica, 0);
            assert_eq!(route(&[1, 2], 32, &[3, 0, 0]).replica, 1);
            // The less loaded holder, not the first holder, not the idle replica 2.
            let hit = route(&[1, 2, 3], 48, &[1, 0, 0]);
            assert_eq!(
                hit,
                Decision {
                    replica: 1,
                    predicted: Some(32)
                }
            );
            // Equal loads: either holder, at random.
            seen[route(&[1, 2, 5], 48, &[0, 0, 0]).replica] += 1;
        }
        assert!(seen[0] > 5 && seen[1] > 5 && seen[2] == 0, "{seen:?}");
    }

    #[test]
    fn the_hit_spills_over_rel_times_and_abs_above_the_mean_with_no_max_min_gate() {
        // Replica 0 holds blocks 1, 2; then the hit's decision under `loads`.
        let hit = |spec: &str, loads: &[u32]| {
            let mut router = router(spec, loads.len());
            let mut rng = rng(0);
            let idle = vec![0; loads.len()];
            pick_under(&mut router, &[1, 2], 32, &idle, 0.0, &mut rng);
            pick_under(&mut router, &[1, 2, 3], 48, loads, 0.0, &mut rng)
        };
        // Mean 2: 6 > 1.5 × 2 and 6 > 2 + 2: spilled to the least loaded, then least routed
        // (replicas 1 and 2 were routed nothing: the first index).
        assert_eq!(
            hit("smg-cache-aware:abs=2,miss=routed", &[6, 0, 0]).replica,
            1
        );
        // Mean 2: 4 > 1.5 × 2 but not over 2 + 2: kept.
        assert_eq!(
            hit("smg-cache-aware:abs=2,miss=routed", &[4, 2, 0]).replica,
            0
        );
        // Mean 6: 10 > 9 and 10 > 8: spilled; with rel=2, 10 is not over 12: kept.
        assert_eq!(
            hit("smg-cache-aware:abs=2,miss=routed", &[10, 8, 0]).replica,
            2
        );
        assert_eq!(
            hit("smg-cache-aware:abs=2,rel=2,miss=routed", &[10, 8, 0]).replica,
            0
        );
        // 70 apart and 70 > 1.5 × 0 (sglang-router's max/min gate would fire), but 70 is
        // not over the mean 35 + 64: kept.
        assert_eq!(hit("smg-cache-aware:miss=routed", &[70, 0]).replica, 0);
    }

    #[test]
    fn one_size_budget_for_the_whole_tree_and_no_warm_up() {
        // 128 characters: two 16-token units in the whole tree, evicted at 10 s.
        let mut router = router("smg-cache-aware:evict=10,size=128,miss=routed", 2);
        let mut rng = rng(0);
        let idle = running(&[0, 0]);
        pick(&mut router, &[1, 2], 32, &idle, &[], 0.0, &mut rng);
        pick(&mut router, &[5, 6], 32, &idle, &[], 1.0, &mut rng);
        // Four units in all at 10 s: replica 0's, the least recently used, go.
        let after = pick(&mut router, &[5, 6], 32, &idle, &[], 10.0, &mut rng);
        assert_eq!(
            after,
            Decision {
                replica: 1,
                predicted: Some(32)
            }
        );
        assert_eq!(router.tree.len(0), 0);
        let refused = "smg-cache-aware:warmup=60".parse::<Policy>().unwrap_err();
        assert!(
            refused.to_string().contains("--worker-warmup-secs 0"),
            "{refused}"
        );
        assert_eq!(
            "smg-cache-aware:warmup=0".parse::<Policy>().unwrap(),
            "smg-cache-aware".parse::<Policy>().unwrap()
        );
    }

    #[test]
    fn smg_1_13_sends_a_miss_to_the_fewest_in_flight_drawn_among_equals() {
        let mut seen = [0u32; 2];
        for seed in 0..40 {
            let mut router = router("smg-cache-aware", 2);
            let mut rng = rng(seed);
            let mut route = |blocks: &[u64], loads: &[u32]| {
                decide_under(
                    &mut router,
                    blocks,
                    16 * blocks.len() as u32,
                    loads,
                    None,
                    &mut rng,
                )
            };
            // Idle: both workers score 0 and tie; the draw is the router's.
            let first = route(&[1], &[0, 0]);
            assert_eq!(
                (first.ties.as_slice(), first.branch),
                (&[0, 1][..], Branch::Miss)
            );
            seen[first.decision.replica] += 1;
            // Requests routed play no part (the `routed` rule would take the other worker).
            let again = route(&[2], &[0, 0]);
            assert_eq!(again.ties, [0, 1]);
            // One request in flight on replica 0: replica 1, the only one at the minimum.
            let busy = route(&[3], &[1, 0]);
            assert_eq!((busy.decision.replica, busy.ties.as_slice()), (1, &[1][..]));
        }
        assert!(seen[0] > 5 && seen[1] > 5, "{seen:?}");
    }
}

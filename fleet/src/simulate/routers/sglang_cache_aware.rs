//! `sglang-cache-aware[:threshold=0.3,abs=64,rel=1.5,index=text|tokens,miss=load|tree,
//! flavor=sglang-router|vllm-router,evict=60,size=67108864]`:
//! the `cache_aware` policy of sglang-router 0.3.2 (its `.so` names itself
//! `sgl-model-gateway 0.3.2`) and of vllm-router 0.1.17, its fork. sglang-router 0.3.2 is the
//! release commit `c7f9bf9f5` ("[smg] release 0.3.2", 2026-01-15) of the gateway's history
//! (smg-project/smg, formerly sgl-project/sglang `sgl-model-gateway/`): the debug events its
//! `.so` names (`src/policies/cache_aware.rs:114`, `:213`, `:300`, `:336`, `:445`, `:464`) are
//! the lines of that commit's file. vllm-router's source is not published; see `miss`.
//!
//! 1. The load of a worker is its requests in flight (`worker.load()`). When
//!    `max − min > abs` (`balance_abs_threshold`) and `max > rel × min`
//!    (`balance_rel_threshold`) over all workers, the least loaded worker takes the request,
//!    and the request still goes into the tree under that worker
//!    (`CacheAwarePolicy::select_worker_min_load`, `c7f9bf9f5` lines 287-347: the first
//!    minimum of `min_by_key(load)` in the router's worker order, see `miss=load`).
//! 2. Else the tree's longest prefix match: when matched characters over the request's
//!    characters exceed `threshold` (`cache_threshold`), the worker the deepest matched node
//!    names, its `last_tenant` (`Tree::prefix_match_with_counts`, `src/policies/tree.rs`
//!    `c7f9bf9f5`; sgl-project/sglang `03744dbe`; both wheels' `.so` contain `last_tenant`):
//!    the tenant whose insert created the node (a new leaf takes its inserter, a split copies
//!    it to the new parent, another tenant's later insert leaves it), as long as it is still a
//!    tenant of the node; else the first key of the node's tenant `DashMap`, cached as
//!    `last_tenant` from then on. Here: the replica that first inserted the last matched unit
//!    while it still holds the whole match; else the lowest-numbered replica that does, which
//!    the unit names from then on. That replaces the source's `DashMap` order, by a hash
//!    seeded per process (fixed in a run, different between runs: effectively random). A unit
//!    no replica holds any more is forgotten (its node is removed), and the next replica to
//!    insert it creates it anew. The request's text goes into the tree under the chosen
//!    worker.
//! 3. Below the threshold, `miss`:
//!    - `load` (sglang-router's default): the worker with the fewest requests in flight —
//!      `healthy_indices.iter().min_by_key(|&&idx| workers[idx].load())`, `select_worker`,
//!      `c7f9bf9f5` lines 410-415, from "Fix cache-aware router should pick min load instead
//!      of min tenant size" (`6fe82758a`, 2025-12-09) — *not* the smallest tree. Equals fall
//!      to the first in the router's worker list: `HttpRouter::select_worker_for_model`
//!      (`src/routers/http/router.rs`) takes it from `WorkerRegistry::get_workers_filtered`,
//!      which without `--enable-igw` is `get_all`, the iteration of a `DashMap` keyed by
//!      `WorkerId(Uuid::new_v4())` (`src/core/worker_registry.rs`): an order fixed for the
//!      router's life and drawn anew at each start. So whenever requests do not overlap in
//!      time (every load 0), **every miss goes to one and the same replica**, and every hit
//!      to the replica that holds it — that one too: the whole fleet's traffic on one
//!      replica, whichever the start drew, whatever the workers are. Seen live: 20 of 20
//!      sequential requests on one llama-server of two, the replica varying between runs, and
//!      a miss sent while that replica had a request in flight went to the other. The load
//!      gate's least loaded falls in the same order.
//!    - `tree` (vllm-router's default, kept from the older sgl-router and unverified for
//!      vllm-router 0.1.17, whose tree never decided in front of llama-server here): the
//!      worker whose tree is smallest: `get_smallest_tenant` (`tree.rs` `8613c481`) keeps
//!      the first strict minimum while iterating the tree's `tenant_char_count` `DashMap`,
//!      whose order is a per-process hash too. The load gate's least loaded is the first in
//!      `--worker-urls` order (sgl-router `026f853b`, a `Vec` of the URLs).
//!
//!    Here each simulated router draws one random order of the replicas from the run's seed
//!    at its first request and breaks equals by it, so with idle replicas the misses go to
//!    the same replica all run, and to another one in a run with another seed. Which one the
//!    real router drew is unknowable before it decides: the first decision between equals is
//!    a tie. Teacher-forced (`kvlint simulate --calibrate`), each recorded decision between
//!    equals says that its replica comes before the others, and the model keeps to that
//!    order from then on, so only a pair of replicas never yet decided between is a tie.
//! 4. Every `evict` seconds (`eviction_interval_secs`), each worker's tree over `size`
//!    characters (`max_tree_size`) loses its least recently used leaves
//!    (`evict_tenant_by_size`).
//!
//! `flavor` sets the defaults of the router named: `sglang-router` (the default; sglang-router
//! 0.3.2, `sglang_router/router_args.py` in its wheel): 0.3 / 64 / 1.5, eviction every 60 s,
//! trees of 2^26 = 67,108,864 characters, `miss=load`; `vllm-router` (vllm-router 0.1.17,
//! `vllm_router/router_args.py` in its wheel): the same thresholds, eviction every 120 s,
//! trees of 2^25 = 33,554,432, `miss=tree`. `evict`, `size` and `miss` override either.
//!
//! Shepherd Model Gateway (smg 1.x) keeps the policy's name but not its algorithm: it is
//! `smg-cache-aware`. A hit goes to the least loaded of all the deepest node's tenants, random
//! among equals, then spills to the least loaded when its load exceeds both `rel ×` and
//! `abs +` the fleet's mean; there is no max/min gate; a miss goes to the least loaded by
//! (load, requests routed, index), not to the smallest tree; smg 1.13 adds a warm-up slice
//! for new workers.
//!
//! The tree is the router's belief, kept apart from the engines' caches: it learns a prompt
//! when it routes it (never the tokens generated, never an engine's eviction) and forgets only
//! at its own eviction. `index=text` is the HTTP router's tree over the request's text,
//! `index=tokens` the gRPC router's tree over token ids; both are approximated on the trace's
//! blocks (see [`super`]), so they choose alike and differ only in what `size` counts
//! (characters, `CHARS_PER_TOKEN` per token, or tokens).

use std::fmt;

use kvlint_protocol::Spec;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rustc_hash::FxHashMap;

use super::index::{PrefixIndex, Recency, units};
use super::{Branch, CHARS_PER_TOKEN, Choice, Decision, Route, View, number};
use crate::error::SpecError;

/// What the router's tree is over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SglangIndex {
    Text,
    Tokens,
}

/// What decides a request the tree does not match over the threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SglangMiss {
    /// The fewest requests in flight, the first of equals in the router's worker order
    /// (sgl-model-gateway 0.3.2, sglang-router 0.3.2).
    Load,
    /// The smallest tree, the first of equals in the tree's tenant order (the older
    /// sgl-router's `get_smallest_tenant`).
    Tree,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SglangConfig {
    /// `cache_threshold`: the matched share above which the match decides.
    pub threshold: f64,
    /// `balance_abs_threshold`: requests in flight.
    pub abs: u64,
    /// `balance_rel_threshold`.
    pub rel: f64,
    pub index: SglangIndex,
    /// `eviction_interval_secs`.
    pub evict: u64,
    /// `max_tree_size`: characters (text) or tokens per worker.
    pub size: u64,
    /// The rule for a miss (not a shared knob: smg has its own).
    pub miss: SglangMiss,
}

impl Default for SglangConfig {
    fn default() -> Self {
        Self {
            threshold: 0.3,
            abs: 64,
            rel: 1.5,
            index: SglangIndex::Text,
            evict: SGLANG_ROUTER.0,
            size: SGLANG_ROUTER.1,
            miss: SglangMiss::Load,
        }
    }
}

/// `eviction_interval_secs` and `max_tree_size` of sglang-router 0.3.2 and of vllm-router
/// 0.1.17 (`router_args.py` in each wheel).
const SGLANG_ROUTER: (u64, u64) = (60, 1 << 26);
const VLLM_ROUTER: (u64, u64) = (120, 1 << 25);

/// The knobs sglang-router's and smg's `cache_aware` share.
pub(super) const KNOBS: [&str; 6] = ["threshold", "abs", "rel", "index", "evict", "size"];

impl SglangConfig {
    pub fn parse(spec: &Spec<'_>) -> Result<Self, SpecError> {
        spec.only(&[KNOBS.as_slice(), &["flavor", "miss"]].concat())?;
        let default = match spec.value("flavor") {
            None | Some("sglang-router") => Self::default(),
            Some("vllm-router") => Self::vllm_router(),
            Some(_) => {
                return Err(spec
                    .error("`flavor` is sglang-router or vllm-router (smg: smg-cache-aware)")
                    .into());
            }
        };
        let miss = match spec.value("miss") {
            None => default.miss,
            Some("load") => SglangMiss::Load,
            Some("tree") => SglangMiss::Tree,
            Some(_) => return Err(spec.error("`miss` is load or tree").into()),
        };
        Ok(Self {
            miss,
            ..Self::read(spec, default)?
        })
    }

    /// vllm-router 0.1.17's defaults.
    fn vllm_router() -> Self {
        Self {
            evict: VLLM_ROUTER.0,
            size: VLLM_ROUTER.1,
            miss: SglangMiss::Tree,
            ..Self::default()
        }
    }

    /// The shared knobs of `spec` ([`KNOBS`]), each one not given from `default`; the caller
    /// has checked that `spec` has no other.
    pub(super) fn read(spec: &Spec<'_>, default: Self) -> Result<Self, SpecError> {
        Ok(Self {
            threshold: number(spec, "threshold", default.threshold, 0.0..=1.0)?,
            abs: spec.whole("abs", default.abs)?,
            rel: number(spec, "rel", default.rel, 0.0..=f64::MAX)?,
            index: match spec.value("index") {
                None | Some("text") => SglangIndex::Text,
                Some("tokens") => SglangIndex::Tokens,
                Some(_) => return Err(spec.error("`index` is text or tokens").into()),
            },
            evict: spec.whole("evict", default.evict)?,
            size: spec.positive("size", default.size)?,
            miss: default.miss,
        })
    }

    /// `size` (characters or tokens) in units of `unit_tokens` tokens.
    pub(super) fn tree_units(&self, unit_tokens: u32) -> usize {
        let per_token = match self.index {
            SglangIndex::Text => u64::from(CHARS_PER_TOKEN),
            SglangIndex::Tokens => 1,
        };
        (self.size / (u64::from(unit_tokens) * per_token).max(1)) as usize
    }

    /// The shared knobs that differ from `default`, as `key=value`.
    pub(super) fn changed(&self, default: &Self) -> Vec<String> {
        let mut knobs = Vec::new();
        if self.threshold != default.threshold {
            knobs.push(format!("threshold={}", self.threshold));
        }
        if self.abs != default.abs {
            knobs.push(format!("abs={}", self.abs));
        }
        if self.rel != default.rel {
            knobs.push(format!("rel={}", self.rel));
        }
        if self.index != default.index {
            let index = match self.index {
                SglangIndex::Text => "text",
                SglangIndex::Tokens => "tokens",
            };
            knobs.push(format!("index={index}"));
        }
        if self.evict != default.evict {
            knobs.push(format!("evict={}", self.evict));
        }
        if self.size != default.size {
            knobs.push(format!("size={}", self.size));
        }
        knobs
    }
}

impl fmt::Display for SglangConfig {
    /// The name and the knobs that differ from the defaults.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let vllm_router = (self.evict, self.size) == VLLM_ROUTER;
        let default = if vllm_router {
            Self::vllm_router()
        } else {
            Self::default()
        };
        let mut knobs = self.changed(&default);
        if self.miss != default.miss {
            knobs.push(match self.miss {
                SglangMiss::Load => "miss=load".to_owned(),
                SglangMiss::Tree => "miss=tree".to_owned(),
            });
        }
        if vllm_router {
            knobs.push("flavor=vllm-router".to_owned());
        }
        super::super::write_spec(f, "sglang-cache-aware", &knobs)
    }
}

pub struct CacheAware {
    config: SglangConfig,
    tree: PrefixIndex,
    /// The replica each unit held by any names (its node's `last_tenant`).
    creators: FxHashMap<u64, usize>,
    /// Each replica's place in the order equals fall in (the router's worker list for
    /// `miss=load`, the tree's tenant map for `miss=tree`: both hash orders fixed for the
    /// router's life), drawn once per router from the run's seed at its first request (empty
    /// before).
    hash_order: Vec<usize>,
    /// What the decisions so far showed of the real order: `before[a × replicas + b]` when
    /// replica `a` was routed to while `b` was its equal, so `a` comes before `b`.
    before: Vec<bool>,
    next_eviction: f64,
}

impl CacheAware {
    pub fn new(config: SglangConfig, replica_count: usize) -> Self {
        Self {
            config,
            tree: PrefixIndex::new(replica_count),
            creators: FxHashMap::default(),
            hash_order: Vec::new(),
            before: Vec::new(),
            next_eviction: config.evict as f64,
        }
    }

    /// The periodic eviction, as of `now`.
    fn evict(&mut self, now: f64, unit_tokens: u32, replica_count: usize) {
        if self.config.evict == 0 {
            return;
        }
        let capacity = self.config.tree_units(unit_tokens);
        while now >= self.next_eviction {
            for replica in 0..replica_count {
                for unit in self.tree.evict_to(replica, capacity) {
                    if !(0..replica_count).any(|holder| self.tree.contains(holder, unit)) {
                        self.creators.remove(&unit);
                    }
                }
            }
            self.next_eviction += self.config.evict as f64;
        }
    }

    /// The replica the deepest matched unit names: its creator while that holds all
    /// `longest` units, else the lowest-numbered replica that does, named from then on (its
    /// ties: every replica that does).
    fn match_holder(
        &mut self,
        deepest: u64,
        longest: usize,
        matched: &[usize],
    ) -> (usize, Vec<usize>) {
        if let Some(&creator) = self.creators.get(&deepest)
            && matched[creator] == longest
        {
            return (creator, vec![creator]);
        }
        let holders: Vec<usize> = (0..matched.len())
            .filter(|replica| matched[*replica] == longest)
            .collect();
        let holder = holders.first().copied().unwrap_or(0);
        self.creators.insert(deepest, holder);
        (holder, holders)
    }

    /// The first of `equals` in the hash order, with its ties: every one of `equals` no
    /// earlier decision showed to come after another. Learns that the replica routed to
    /// (`forced`, when one of `equals`) comes before the others, so that a calibration learns
    /// the real router's order from its first decision between equals.
    fn first_of(&mut self, equals: &[usize], forced: Option<usize>) -> (usize, Vec<usize>) {
        let count = self.hash_order.len();
        let ties: Vec<usize> = equals
            .iter()
            .copied()
            .filter(|later| {
                !equals
                    .iter()
                    .any(|earlier| self.before[earlier * count + later])
            })
            .collect();
        let first = ties
            .iter()
            .copied()
            .min_by_key(|replica| self.hash_order[*replica])
            .unwrap_or(0);
        let routed = forced
            .filter(|replica| equals.contains(replica))
            .unwrap_or(first);
        for &other in equals.iter().filter(|other| **other != routed) {
            self.before[routed * count + other] = true;
            self.before[other * count + routed] = false;
        }
        (first, ties)
    }
}

impl Route for CacheAware {
    fn decide(&mut self, view: &View<'_>, rng: &mut SmallRng, forced: Option<usize>) -> Choice {
        let count = view.replica_count();
        if self.hash_order.is_empty() {
            let mut order: Vec<usize> = (0..count).collect();
            order.shuffle(rng);
            self.hash_order = vec![0; count];
            for (place, replica) in order.into_iter().enumerate() {
                self.hash_order[replica] = place;
            }
        }
        if self.before.len() != count * count {
            self.before = vec![false; count * count];
        }
        let (units, unit_tokens) = units(view.prompt.blocks, view.block_size, 1);
        self.evict(view.now, unit_tokens, count);
        let loads: Vec<u32> = view.signals.iter().map(|signals| signals.running).collect();
        let max = loads.iter().copied().max().unwrap_or(0);
        let min = loads.iter().copied().min().unwrap_or(0);
        let imbalanced = u64::from(max - min) > self.config.abs
            && max as f32 > min as f32 * self.config.rel as f32;
        let matched = self.tree.matched_all(&units);
        let least_loaded = |loads: &[u32]| -> Vec<usize> {
            (0..count)
                .filter(|replica| loads[*replica] == min)
                .collect()
        };
        let (replica, ties, branch) = if imbalanced {
            let (least, ties) = match self.config.miss {
                SglangMiss::Load => self.first_of(&least_loaded(&loads), forced),
                SglangMiss::Tree => {
                    let least = view.lowest(|signals| f64::from(signals.running));
                    (least, vec![least])
                }
            };
            (least, ties, Branch::Gate)
        } else {
            let longest = matched.iter().copied().max().unwrap_or(0);
            let rate = if view.prompt.tokens == 0 {
                0.0
            } else {
                (longest as u64 * u64::from(unit_tokens)) as f32 / view.prompt.tokens as f32
            };
            let deepest = longest.checked_sub(1).and_then(|last| units.get(last));
            match deepest {
                Some(&deepest) if rate > self.config.threshold as f32 => {
                    let (holder, ties) = self.match_holder(deepest, longest, &matched);
                    (holder, ties, Branch::Match)
                }
                _ => {
                    let equals = match self.config.miss {
                        SglangMiss::Load => least_loaded(&loads),
                        SglangMiss::Tree => {
                            let size = (0..count)
                                .map(|replica| self.tree.len(replica))
                                .min()
                                .unwrap_or(0);
                            (0..count)
                                .filter(|replica| self.tree.len(*replica) == size)
                                .collect()
                        }
                    };
                    let (first, ties) = self.first_of(&equals, forced);
                    (first, ties, Branch::Miss)
                }
            }
        };
        let routed = forced.unwrap_or(replica);
        self.tree.insert(routed, &units, Recency::HeadNewest, None);
        // A unit any replica holds has its creator: the units the replica matched keep theirs.
        for unit in units.iter().skip(matched[routed]) {
            self.creators.entry(*unit).or_insert(routed);
        }
        let predicted = view.tokens_of(matched[replica], unit_tokens);
        Choice {
            decision: Decision {
                replica,
                predicted: Some(predicted),
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
    use super::super::testing::{BLOCK, decide, pick, prompt, rng, running};
    use super::*;
    use crate::simulate::Policy;

    /// A router in front of two replicas whose tenant map iterates in replica order, so that
    /// equal trees go to replica 0.
    fn router(spec: &str) -> CacheAware {
        router_of(spec, 2)
    }

    /// A router in front of `replicas` whose orders are replica order.
    fn router_of(spec: &str, replicas: usize) -> CacheAware {
        match spec.parse::<Policy>().unwrap() {
            Policy::SglangCacheAware(config) => CacheAware {
                hash_order: (0..replicas).collect(),
                ..CacheAware::new(config, replicas)
            },
            other => panic!("{other}"),
        }
    }

    #[test]
    fn the_branch_is_the_load_gate_a_match_over_the_threshold_or_the_miss() {
        let mut router = router("sglang-cache-aware:abs=2,miss=tree");
        let mut rng = rng(0);
        let mut route = |blocks: &[u64], tokens, loads: &[u32]| {
            let choice = decide(
                &mut router,
                blocks,
                tokens,
                &running(loads),
                &[],
                None,
                &mut rng,
            );
            (
                choice.decision.replica,
                choice.decision.predicted,
                choice.branch,
            )
        };
        // Empty trees, then replica 1's empty tree against replica 0's two blocks.
        assert_eq!(route(&[1, 2], 40, &[0, 0]), (0, Some(0), Branch::Miss));
        assert_eq!(route(&[9, 10, 11], 48, &[0, 0]), (1, Some(0), Branch::Miss));
        // 16 of 64 tokens matched on replica 0 (0.25): under the threshold, the smaller tree
        // (replica 0's two blocks against three) takes it, though its overlap was predicted.
        assert_eq!(
            route(&[1, 5, 6, 7], 64, &[0, 0]),
            (0, Some(16), Branch::Miss)
        );
        // 32 of 48 tokens (0.67): the match decides.
        assert_eq!(route(&[1, 2, 3], 48, &[0, 0]), (0, Some(32), Branch::Match));
        // 9 − 0 > 2 and 9 > 1.5 × 0: the least loaded, whatever the tree holds.
        assert_eq!(route(&[1, 2, 3], 48, &[9, 0]), (1, Some(0), Branch::Gate));
    }

    #[test]
    fn equal_trees_fall_to_one_hash_order_per_router_drawn_from_the_seed() {
        let idle = running(&[0, 0]);
        let mut first_misses = [0u32; 2];
        for seed in 0..40 {
            let mut rng = rng(seed);
            let Policy::SglangCacheAware(config) = "sglang-cache-aware:miss=tree".parse().unwrap()
            else {
                unreachable!()
            };
            let mut router = CacheAware::new(config, 2);
            let mut route =
                |blocks: &[u64]| pick(&mut router, blocks, 20, &idle, &[], 0.0, &mut rng).replica;
            // Both trees empty: the first replica of this router's order.
            let first = route(&[9]);
            first_misses[first] += 1;
            // The other tree is smaller; then both hold one unit: the same first replica.
            assert_eq!(route(&[5]), 1 - first, "seed {seed}");
            assert_eq!(route(&[7]), first, "seed {seed}");
        }
        // From run to run, either replica (40 runs: both seen unless the order were fixed).
        assert!(
            first_misses[0] > 5 && first_misses[1] > 5,
            "{first_misses:?}"
        );
    }

    /// The choice of `router` for `blocks` (16 tokens each) under `loads`, its state updated
    /// as if the request went to `forced`.
    fn choose(
        router: &mut CacheAware,
        blocks: &[u64],
        loads: &[u32],
        forced: Option<usize>,
    ) -> Choice {
        let prompt = prompt(blocks, 16 * blocks.len() as u32);
        let view = View {
            prompt: &prompt,
            session: "s",
            caches: &[],
            signals: &running(loads),
            block_size: BLOCK,
            now: 0.0,
        };
        router.decide(&view, &mut rng(0), forced)
    }

    #[test]
    fn a_miss_goes_to_the_least_loaded_first_in_the_worker_order_not_to_the_smallest_tree() {
        // sgl-model-gateway 0.3.2, `CacheAwarePolicy::select_worker`: under the threshold,
        // `healthy_indices.iter().min_by_key(|&&idx| workers[idx].load())`, the first minimum.
        let mut router = router("sglang-cache-aware");
        let replica = |choice: Choice| (choice.decision.replica, choice.ties, choice.branch);
        // Idle, empty trees: the first in the order (here replica 0), either as far as known.
        assert_eq!(
            replica(choose(&mut router, &[1, 2], &[0, 0], None)),
            (0, vec![0, 1], Branch::Miss)
        );
        // Another miss, idle: replica 0 again, though replica 1's tree is empty; the order is
        // known now, so replica 0 alone.
        assert_eq!(
            replica(choose(&mut router, &[9], &[0, 0], None)),
            (0, vec![0], Branch::Miss)
        );
        // A miss while replica 0 has a request in flight (1 − 0 is no imbalance): replica 1.
        assert_eq!(
            replica(choose(&mut router, &[7], &[1, 0], None)),
            (1, vec![1], Branch::Miss)
        );
        // A hit (32 of 48 tokens) stays on its replica whatever the loads under the gate.
        assert_eq!(
            replica(choose(&mut router, &[1, 2, 3], &[5, 0], None)),
            (0, vec![0], Branch::Match)
        );
        // The gate's least loaded falls in the same order: replicas 1 and 2 idle, 0 busy.
        let mut three = router_of("sglang-cache-aware:abs=2", 3);
        three.hash_order = vec![0, 2, 1];
        assert_eq!(
            replica(choose(&mut three, &[4], &[9, 0, 0], None)),
            (2, vec![1, 2], Branch::Gate)
        );
    }

    #[test]
    fn a_forced_decision_between_equals_teaches_the_real_worker_order() {
        let mut router = router("sglang-cache-aware");
        // The model's order puts replica 0 first; the real router sent the miss to replica 1.
        let first = choose(&mut router, &[1, 2], &[0, 0], Some(1));
        assert_eq!((first.decision.replica, first.ties), (0, vec![0, 1]));
        // From then on the order is the router's: every idle miss to replica 1, exactly.
        for blocks in [&[9][..], &[7, 8]] {
            let next = choose(&mut router, blocks, &[0, 0], Some(1));
            assert_eq!((next.decision.replica, next.ties), (1, vec![1]));
        }
        // The tree learned the forced replica too: a hit on [1, 2] goes to replica 1.
        assert_eq!(
            choose(&mut router, &[1, 2, 3], &[0, 0], None)
                .decision
                .replica,
            1
        );
    }

    #[test]
    fn idle_misses_all_fall_to_one_replica_per_router_drawn_from_the_seed() {
        let mut first_replicas = [0u32; 2];
        for seed in 0..40 {
            let Policy::SglangCacheAware(config) = "sglang-cache-aware".parse().unwrap() else {
                unreachable!()
            };
            let mut router = CacheAware::new(config, 2);
            let mut rng = rng(seed);
            let idle = running(&[0, 0]);
            let replicas: Vec<usize> = [&[1][..], &[2], &[3, 4], &[5]]
                .iter()
                .map(|blocks| pick(&mut router, blocks, 20, &idle, &[], 0.0, &mut rng).replica)
                .collect();
            assert!(
                replicas.iter().all(|replica| *replica == replicas[0]),
                "{replicas:?}"
            );
            first_replicas[replicas[0]] += 1;
        }
        assert!(
            first_replicas[0] > 5 && first_replicas[1] > 5,
            "{first_replicas:?}"
        );
    }

    #[test]
    fn the_flavor_sets_sglang_router_s_or_vllm_router_s_defaults() {
        let config = |spec: &str| match spec.parse::<Policy>() {
            Ok(Policy::SglangCacheAware(config)) => Ok((config.evict, config.size, config.miss)),
            Ok(other) => panic!("{other}"),
            Err(error) => Err(error.to_string()),
        };
        use SglangMiss::{Load, Tree};
        assert_eq!(config("sglang-cache-aware"), Ok((60, 67_108_864, Load)));
        assert_eq!(
            config("sglang-cache-aware:flavor=sglang-router"),
            Ok((60, 67_108_864, Load))
        );
        assert_eq!(
            config("sglang-cache-aware:flavor=vllm-router"),
            Ok((120, 33_554_432, Tree))
        );
        assert_eq!(
            config("sglang-cache-aware:flavor=vllm-router,evict=60,miss=load"),
            Ok((60, 33_554_432, Load))
        );
        assert_eq!(
            config("sglang-cache-aware:miss=tree"),
            Ok((60, 67_108_864, Tree))
        );
        assert!(
            config("sglang-cache-aware:miss=random")
                .unwrap_err()
                .contains("`miss` is load or tree")
        );
        assert!(
            config("sglang-cache-aware:flavor=smg")
                .unwrap_err()
                .contains("smg-cache-aware")
        );
        for spec in [
            "sglang-cache-aware:flavor=vllm-router",
            "sglang-cache-aware:threshold=0.5,flavor=vllm-router",
            "sglang-cache-aware:size=33554432",
            "sglang-cache-aware:miss=tree",
            "sglang-cache-aware:miss=load,flavor=vllm-router",
        ] {
            assert_eq!(spec.parse::<Policy>().unwrap().to_string(), spec);
        }
    }

    #[test]
    fn the_longest_match_over_the_threshold_else_the_smallest_tree() {
        let decisions = |spec: &str| {
            let mut router = router(spec);
            let mut rng = rng(0);
            let idle = running(&[0, 0]);
            [
                (&[1, 2][..], 40),
                (&[1, 2, 5], 50),
                (&[9], 20),
                (&[1, 7, 8], 70),
                (&[1, 7, 8, 6], 160),
            ]
            .map(|(blocks, tokens)| pick(&mut router, blocks, tokens, &idle, &[], 0.0, &mut rng))
        };
        let decision = |replica, predicted| Decision {
            replica,
            predicted: Some(predicted),
        };
        assert_eq!(
            decisions("sglang-cache-aware:miss=tree"),
            [
                // Empty trees: no match, the smallest tree (both empty: the first).
                decision(0, 0),
                // 32 of 50 tokens matched on replica 0: 0.64 > 0.3.
                decision(0, 32),
                // No match: the smaller tree, replica 1's (replica 0 holds three blocks).
                decision(1, 0),
                // 16 of 70 tokens matched on replica 0 (0.23): not enough, the smaller tree
                // (replica 1's one block against three), though replica 0 holds the prefix.
                decision(1, 0),
                // 48 of 160 tokens matched on replica 1 (exactly 0.3) is not over the
                // threshold: the smaller tree, replica 0's three blocks against four.
                decision(0, 16),
            ]
        );
        // Under a threshold of 0.2, the third block's match decides the last two.
        let lower = decisions("sglang-cache-aware:threshold=0.2,miss=tree");
        assert_eq!(lower[3], decision(0, 16));
        assert_eq!(lower[4].replica, 0);
    }

    fn warm(rng: &mut SmallRng) -> CacheAware {
        let mut router = router("sglang-cache-aware");
        pick(&mut router, &[1, 2], 40, &running(&[0, 0]), &[], 0.0, rng);
        router
    }

    #[test]
    fn an_imbalanced_fleet_goes_to_the_least_loaded_over_the_match() {
        let mut rng = rng(0);
        // Replica 0 holds the prompt; the loads decide.
        for (loads, expected) in [
            // 68 apart (> 64) and 70 > 1.5 × 2: imbalanced.
            ([70, 2], 1),
            // 64 apart: not over `abs`.
            ([66, 2], 0),
            // 90 apart but 300 ≤ 1.5 × 210: not over `rel`.
            ([300, 210], 0),
            // 110 apart and 300 > 1.5 × 190.
            ([300, 190], 1),
        ] {
            let decision = pick(
                &mut warm(&mut rng),
                &[1, 2],
                40,
                &running(&loads),
                &[],
                0.0,
                &mut rng,
            );
            assert_eq!(decision.replica, expected, "{loads:?}");
        }
        // The knobs move the gate: abs=200 keeps [300, 190] on the match.
        let mut loose = router("sglang-cache-aware:abs=200");
        pick(
            &mut loose,
            &[1, 2],
            40,
            &running(&[0, 0]),
            &[],
            0.0,
            &mut rng,
        );
        let decision = pick(
            &mut loose,
            &[1, 2],
            40,
            &running(&[300, 190]),
            &[],
            0.0,
            &mut rng,
        );
        assert_eq!(decision.replica, 0);
        // The request the balance sent goes into the least loaded replica's tree.
        let mut router = warm(&mut rng);
        pick(
            &mut router,
            &[1, 2],
            40,
            &running(&[70, 2]),
            &[],
            0.0,
            &mut rng,
        );
        assert_eq!(router.tree.matched(1, &[1, 2]), 2);
    }

    #[test]
    fn a_hit_goes_to_the_replica_whose_insert_created_the_deepest_matched_unit() {
        // 128 characters a tree: two 16-token units; evicted at 10 s.
        let mut router = router("sglang-cache-aware:evict=10,size=128,miss=tree");
        let mut rng = rng(0);
        let mut route = |blocks: &[u64], tokens, loads: &[u32], now| {
            pick(
                &mut router,
                blocks,
                tokens,
                &running(loads),
                &[],
                now,
                &mut rng,
            )
        };
        // Both trees empty: replica 0 takes block 9.
        assert_eq!(route(&[9], 20, &[0, 0], 0.0).replica, 0);
        // No match: the smaller tree, replica 1's, whose insert creates units 1 and 2.
        assert_eq!(route(&[1, 2], 40, &[0, 0], 0.0).replica, 1);
        // 70 apart: the least loaded, replica 0, which now holds units 1 and 2 too.
        assert_eq!(route(&[1, 2], 40, &[0, 70], 0.0).replica, 0);
        // Both hold the 32 matched tokens of 50 (0.64): the creator, replica 1, not the
        // lowest-numbered holder.
        let hit = route(&[1, 2, 3], 50, &[0, 0], 0.0);
        assert_eq!(
            hit,
            Decision {
                replica: 1,
                predicted: Some(32)
            }
        );
        // A unit nobody holds is forgotten with its creator. Replica 0 takes 7, 8 (trees of
        // three units each: the first), replica 1 takes 5, 6 (the smaller tree); at 10 s each
        // keeps its two most recent units, and nobody holds 1 or 2.
        assert_eq!(route(&[7, 8], 40, &[0, 0], 0.0).replica, 0);
        assert_eq!(route(&[5, 6], 40, &[0, 0], 0.0).replica, 1);
        // Trees of two units each: replica 0 creates 1 and 2 anew; replica 1 gets them
        // through the gate; the hit goes to the new creator, replica 0.
        assert_eq!(route(&[1, 2], 40, &[0, 0], 10.0).replica, 0);
        assert_eq!(route(&[1, 2], 40, &[70, 0], 10.0).replica, 1);
        assert_eq!(
            route(&[1, 2, 4], 50, &[0, 0], 10.0),
            Decision {
                replica: 0,
                predicted: Some(32)
            }
        );
    }

    #[test]
    fn a_creator_that_lost_the_match_hands_it_to_the_lowest_numbered_holder_for_good() {
        let mut rng = rng(0);
        // Four units a tree (size 256), evicted at 10 s.
        let mut router = router("sglang-cache-aware:evict=10,size=256,miss=tree");
        let mut route = |blocks: &[u64], tokens, loads: &[u32], now| {
            pick(
                &mut router,
                blocks,
                tokens,
                &running(loads),
                &[],
                now,
                &mut rng,
            )
        };
        assert_eq!(route(&[9], 20, &[0, 0], 0.0).replica, 0);
        // Replica 1 creates units 1 and 2; replica 0 gets them through the load gate.
        assert_eq!(route(&[1, 2], 40, &[0, 0], 0.0).replica, 1);
        assert_eq!(route(&[1, 2], 40, &[0, 70], 0.0).replica, 0);
        // Replica 1 fills up with four newer units (through the gate), and at 10 s loses
        // 1 and 2, its least recently used; replica 0 (9, 1, 2) keeps them.
        assert_eq!(route(&[3, 4, 5, 6], 80, &[70, 0], 0.0).replica, 1);
        let fallback = route(&[1, 2, 7], 50, &[0, 0], 10.0);
        assert_eq!(
            fallback,
            Decision {
                replica: 0,
                predicted: Some(32)
            }
        );
        // Replica 1 gets 1 and 2 again through the gate, yet unit 2 now names replica 0.
        assert_eq!(route(&[1, 2], 40, &[70, 0], 10.0).replica, 1);
        assert_eq!(route(&[1, 2, 8], 50, &[0, 0], 10.0).replica, 0);
    }

    #[test]
    fn the_tree_is_evicted_every_60_seconds_by_default() {
        let mut router = router("sglang-cache-aware:size=128");
        let mut rng = rng(0);
        let idle = running(&[0, 0]);
        pick(&mut router, &[1, 2, 3], 60, &idle, &[], 0.0, &mut rng);
        let before = pick(&mut router, &[1, 2, 3], 60, &idle, &[], 59.0, &mut rng);
        assert_eq!(before.predicted, Some(48));
        let after = pick(&mut router, &[1, 2, 3], 60, &idle, &[], 60.0, &mut rng);
        assert_eq!(after.predicted, Some(32));
    }

    #[test]
    fn the_tree_forgets_its_least_recently_used_leaves_at_each_eviction() {
        // 128 characters a tree: two 16-token blocks of 4 characters a token.
        let mut router = router("sglang-cache-aware:evict=10,size=128");
        let mut rng = rng(0);
        let idle = running(&[0, 0]);
        pick(&mut router, &[1, 2, 3], 60, &idle, &[], 0.0, &mut rng);
        // Before the eviction the whole prompt is believed held.
        let before = pick(&mut router, &[1, 2, 3], 60, &idle, &[], 9.0, &mut rng);
        assert_eq!(
            before,
            Decision {
                replica: 0,
                predicted: Some(48)
            }
        );
        // At 10 s the leaf goes: two blocks of three are left.
        let after = pick(&mut router, &[1, 2, 3], 60, &idle, &[], 10.0, &mut rng);
        assert_eq!(
            after,
            Decision {
                replica: 0,
                predicted: Some(32)
            }
        );
    }
}

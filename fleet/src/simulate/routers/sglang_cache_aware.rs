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

impl SglangConfig {
    pub fn parse(spec: &Spec<'_>) -> Result<Self, SpecError> {
        super::only_knobs("sglang-cache-aware", spec)?;
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

    /// The shared knobs of `spec`, each one not given from `default`; the caller has checked
    /// that `spec` has no other.
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

    /// A shared knob's value when it differs from `default`'s.
    pub(super) fn changed(&self, default: &Self, knob: &str) -> Option<String> {
        match knob {
            "threshold" => super::changed(self.threshold, default.threshold),
            "abs" => super::changed(self.abs, default.abs),
            "rel" => super::changed(self.rel, default.rel),
            "index" => (self.index != default.index).then(|| {
                match self.index {
                    SglangIndex::Text => "text",
                    SglangIndex::Tokens => "tokens",
                }
                .to_owned()
            }),
            "evict" => super::changed(self.evict, default.evict),
            "size" => super::changed(self.size, default.size),
            _ => None,
        }
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
        super::write_policy(f, "sglang-cache-aware", |knob| match knob {
            "miss" => (self.miss != default.miss).then(|| {
                match self.miss {
                    SglangMiss::Load => "load",
                    SglangMiss::Tree => "tree",
                }
                .to_owned()
            }),
            "flavor" => vllm_router.then(|| "vllm-router".to_owned()),
            knob => self.changed(&default, knob),
        })
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
mod tests;

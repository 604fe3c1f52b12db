//! `sglang-cache-aware[:threshold=0.3,abs=64,rel=1.5,index=text|tokens,evict=120,size=67108864]`:
//! the `cache_aware` policy of SGLang's router (and of vllm-router, its fork, and Shepherd
//! Model Gateway), `sgl-router/src/policies/cache_aware.rs`, `CacheAwarePolicy::select_worker`:
//!
//! 1. The load of a worker is its requests in flight (`worker.load()`). When
//!    `max − min > abs` (`balance_abs_threshold`) and `max > rel × min`
//!    (`balance_rel_threshold`), the least loaded worker (the first of equals) takes the
//!    request, and the request still goes into the tree under that worker.
//! 2. Else the tree's longest prefix match (`Tree::prefix_match`, `tree.rs`): when matched
//!    characters over the request's characters exceed `threshold` (`cache_threshold`), the
//!    worker holding that match; else the worker whose tree is smallest
//!    (`get_smallest_tenant`). The request's text goes into the tree under the chosen worker.
//! 3. Every `evict` seconds (`eviction_interval_secs`), each worker's tree over `size`
//!    characters (`max_tree_size`) loses its least recently used leaves
//!    (`evict_tenant_by_size`).
//!
//! Defaults: 0.3 / 64 / 1.5 / 67,108,864, as the issue says and `parse_policy_config` in
//! vllm-router's `main.rs` sets; the eviction interval is 120 s there and in SGLang's router,
//! 60 s in Shepherd Model Gateway 1.13 (its start-up log) — set `evict=60` for it. The issue's
//! other smg changes (a warm-up slice, the spill gate against the mean load) are not modelled.
//!
//! The tree is the router's belief, kept apart from the engines' caches: it learns a prompt
//! when it routes it (never the tokens generated, never an engine's eviction) and forgets only
//! at its own eviction. `index=text` is the HTTP router's tree over the request's text,
//! `index=tokens` the gRPC router's tree over token ids; both are approximated on the trace's
//! blocks (see [`super`]), so they choose alike and differ only in what `size` counts
//! (characters, `CHARS_PER_TOKEN` per token, or tokens).
//!
//! Where the source is not deterministic the simulation is: the worker holding the longest
//! match is the first tenant of the deepest node's `DashMap` (an order by hash) — here the
//! lowest-numbered replica holding it; the smallest tree's ties likewise.

use std::fmt;

use kvlint_protocol::Spec;
use rand::rngs::SmallRng;

use super::index::{PrefixIndex, Recency, units};
use super::{CHARS_PER_TOKEN, Decision, Route, View, number};
use crate::error::SpecError;

/// What the router's tree is over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SglangIndex {
    Text,
    Tokens,
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
}

impl Default for SglangConfig {
    fn default() -> Self {
        Self {
            threshold: 0.3,
            abs: 64,
            rel: 1.5,
            index: SglangIndex::Text,
            evict: 120,
            size: 67_108_864,
        }
    }
}

impl SglangConfig {
    pub fn parse(spec: &Spec<'_>) -> Result<Self, SpecError> {
        spec.only(&["threshold", "abs", "rel", "index", "evict", "size"])?;
        let default = Self::default();
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
        })
    }
}

impl fmt::Display for SglangConfig {
    /// The name and the knobs that differ from the defaults.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let default = Self::default();
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
        if self.index == SglangIndex::Tokens {
            knobs.push("index=tokens".to_owned());
        }
        if self.evict != default.evict {
            knobs.push(format!("evict={}", self.evict));
        }
        if self.size != default.size {
            knobs.push(format!("size={}", self.size));
        }
        super::super::write_spec(f, "sglang-cache-aware", &knobs)
    }
}

pub struct CacheAware {
    config: SglangConfig,
    tree: PrefixIndex,
    next_eviction: f64,
}

impl CacheAware {
    pub fn new(config: SglangConfig, replica_count: usize) -> Self {
        Self {
            config,
            tree: PrefixIndex::new(replica_count),
            next_eviction: config.evict as f64,
        }
    }

    /// The periodic eviction, as of `now`.
    fn evict(&mut self, now: f64, unit_tokens: u32, replica_count: usize) {
        if self.config.evict == 0 {
            return;
        }
        let per_token = match self.config.index {
            SglangIndex::Text => u64::from(CHARS_PER_TOKEN),
            SglangIndex::Tokens => 1,
        };
        let capacity = (self.config.size / (u64::from(unit_tokens) * per_token).max(1)) as usize;
        while now >= self.next_eviction {
            for replica in 0..replica_count {
                self.tree.evict_to(replica, capacity);
            }
            self.next_eviction += self.config.evict as f64;
        }
    }
}

impl Route for CacheAware {
    fn pick(&mut self, view: &View<'_>, _rng: &mut SmallRng) -> Decision {
        let count = view.replica_count();
        let (units, unit_tokens) = units(view.prompt.blocks, view.block_size, 1);
        self.evict(view.now, unit_tokens, count);
        let loads: Vec<u32> = view.signals.iter().map(|signals| signals.running).collect();
        let max = loads.iter().copied().max().unwrap_or(0);
        let min = loads.iter().copied().min().unwrap_or(0);
        let imbalanced = u64::from(max - min) > self.config.abs
            && max as f32 > min as f32 * self.config.rel as f32;
        let matched: Vec<usize> = (0..count)
            .map(|replica| self.tree.matched(replica, &units))
            .collect();
        let replica = if imbalanced {
            view.lowest(|signals| f64::from(signals.running))
        } else {
            let longest = matched.iter().copied().max().unwrap_or(0);
            let rate = if view.prompt.tokens == 0 {
                0.0
            } else {
                (longest as u64 * u64::from(unit_tokens)) as f32 / view.prompt.tokens as f32
            };
            if rate > self.config.threshold as f32 {
                matched
                    .iter()
                    .position(|units| *units == longest)
                    .unwrap_or(0)
            } else {
                (0..count)
                    .min_by_key(|replica| self.tree.len(*replica))
                    .unwrap_or(0)
            }
        };
        self.tree.insert(replica, &units, Recency::HeadNewest, None);
        let predicted = (matched[replica] as u64 * u64::from(unit_tokens))
            .min(u64::from(view.prompt.tokens)) as u32;
        Decision {
            replica,
            predicted: Some(predicted),
        }
    }

    fn reads_load(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{pick, rng, running};
    use super::*;
    use crate::simulate::Policy;

    fn router(spec: &str) -> CacheAware {
        match spec.parse::<Policy>().unwrap() {
            Policy::SglangCacheAware(config) => CacheAware::new(config, 2),
            other => panic!("{other}"),
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
            decisions("sglang-cache-aware"),
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
        let lower = decisions("sglang-cache-aware:threshold=0.2");
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

//! `ray-prefix[:imbalance=10,match=0.1,evict=CHARS,target=CHARS,interval=10]`: Ray Serve
//! LLM's prefix-aware router, `python/ray/llm/_internal/serve/request_router/prefix_aware/
//! prefix_aware_router.py` (`PrefixAwarePow2ReplicaRouter._prefix_match_best_replicas`,
//! `choose_replicas`, `on_request_routed`; defaults from `initialize_state`):
//!
//! 1. When the longest and the shortest replica queues (requests ongoing) are more than
//!    `imbalance` apart (`imbalanced_threshold`, 10), power of two choices.
//! 2. Else the prefix tree's longest match among the replicas: when matched characters over
//!    the prompt's reach `match` (`match_rate_threshold`, 0.1), the replicas holding it; else
//!    the replicas whose trees hold the fewest characters (`get_smallest_tenants`). Of those,
//!    the one with the fewest requests ongoing (equals drawn at random here).
//! 3. The prompt goes into the tree under the chosen replica once routed (the prompt only,
//!    "not the response"). Eviction is off by default (`do_eviction=False`); `evict=CHARS`
//!    turns it on: every `interval` seconds (`eviction_interval_secs`, 10) a replica's tree
//!    over `evict` characters (`eviction_threshold_chars`, 400,000 when on) loses its least
//!    recently used leaves down to `target` (`eviction_target_chars`, 360,000).
//!
//! The issue says "≥ 10 % match, else least cache-utilised", as the source does; it does not
//! mention the queue gate or the power-of-two fallback. Ray's tree is over the messages'
//! contents joined without a separator — text, approximated on the trace's blocks ([`super`]).

use std::fmt;

use kvlint_protocol::Spec;
use rand::rngs::SmallRng;

use super::index::{PrefixIndex, Recency, units};
use super::power_of_two::{two_choices, two_choices_ties};
use super::{Branch, CHARS_PER_TOKEN, Choice, Decision, Route, View, number, random_lowest, ties};
use crate::error::SpecError;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RayConfig {
    /// `imbalanced_threshold`: requests ongoing.
    pub imbalance: u64,
    /// `match_rate_threshold`.
    pub matched: f64,
    /// `eviction_threshold_chars` and `eviction_target_chars`, when eviction is on.
    pub evict: Option<(u64, u64)>,
    /// `eviction_interval_secs`.
    pub interval: u64,
}

impl Default for RayConfig {
    fn default() -> Self {
        Self {
            imbalance: 10,
            matched: 0.1,
            evict: None,
            interval: 10,
        }
    }
}

impl RayConfig {
    pub fn parse(spec: &Spec<'_>) -> Result<Self, SpecError> {
        super::only_knobs("ray-prefix", spec)?;
        let default = Self::default();
        let evict = match (spec.value("evict"), spec.value("target")) {
            (None, None) => None,
            (None, Some(_)) => return Err(spec.error("`target` needs `evict`").into()),
            (Some(_), _) => {
                let threshold = spec.positive("evict", 400_000)?;
                let target = spec.positive("target", threshold.min(360_000))?;
                if target > threshold {
                    return Err(spec.error("`target` is at most `evict`").into());
                }
                Some((threshold, target))
            }
        };
        Ok(Self {
            imbalance: spec.whole("imbalance", default.imbalance)?,
            matched: number(spec, "match", default.matched, 0.0..=1.0)?,
            evict,
            interval: spec.positive("interval", default.interval)?,
        })
    }
}

impl fmt::Display for RayConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let default = Self::default();
        super::write_policy(f, "ray-prefix", |knob| match knob {
            "imbalance" => super::changed(self.imbalance, default.imbalance),
            "match" => super::changed(self.matched, default.matched),
            "evict" => self.evict.map(|(threshold, _)| threshold.to_string()),
            "target" => self.evict.map(|(_, target)| target.to_string()),
            "interval" => super::changed(self.interval, default.interval),
            _ => None,
        })
    }
}

pub struct PrefixAffinity {
    config: RayConfig,
    tree: PrefixIndex,
    next_eviction: f64,
}

impl PrefixAffinity {
    pub fn new(config: RayConfig, replica_count: usize) -> Self {
        Self {
            config,
            tree: PrefixIndex::new(replica_count),
            next_eviction: config.interval as f64,
        }
    }

    fn evict(&mut self, now: f64, unit_chars: u64, replica_count: usize) {
        let Some((threshold, target)) = self.config.evict else {
            return;
        };
        while now >= self.next_eviction {
            for replica in 0..replica_count {
                if self.tree.len(replica) as u64 * unit_chars > threshold {
                    self.tree
                        .evict_to(replica, (target / unit_chars.max(1)) as usize);
                }
            }
            self.next_eviction += self.config.interval as f64;
        }
    }
}

impl Route for PrefixAffinity {
    fn decide(&mut self, view: &View<'_>, rng: &mut SmallRng, forced: Option<usize>) -> Choice {
        let count = view.replica_count();
        let (units, unit_tokens) = units(view.prompt.blocks, view.block_size, 1);
        self.evict(view.now, u64::from(unit_tokens * CHARS_PER_TOKEN), count);
        let running = |replica: usize| view.signals[replica].running;
        let most = (0..count).map(running).max().unwrap_or(0);
        let least = (0..count).map(running).min().unwrap_or(0);
        let matched = self.tree.matched_all(&units);
        let (replica, tied, branch) = if u64::from(most - least) > self.config.imbalance {
            (two_choices(view, rng), two_choices_ties(view), Branch::Gate)
        } else {
            let longest = matched.iter().copied().max().unwrap_or(0);
            let rate = if view.prompt.tokens == 0 {
                0.0
            } else {
                (longest as u64 * u64::from(unit_tokens)) as f64 / f64::from(view.prompt.tokens)
            };
            let candidates: Vec<usize> = if rate < self.config.matched {
                let smallest = (0..count).map(|replica| self.tree.len(replica)).min();
                (0..count)
                    .filter(|replica| Some(self.tree.len(*replica)) == smallest)
                    .collect()
            } else {
                (0..count)
                    .filter(|replica| matched[*replica] == longest)
                    .collect()
            };
            let load = |replica: usize| f64::from(running(replica));
            let least_busy = random_lowest(candidates.iter().copied(), load, rng).unwrap_or(0);
            // `match=0` takes every replica as a match of nothing: no match decided.
            let branch = if longest > 0 && rate >= self.config.matched {
                Branch::Match
            } else {
                Branch::Miss
            };
            (
                least_busy,
                ties(candidates.into_iter(), load, least_busy),
                branch,
            )
        };
        self.tree
            .insert(forced.unwrap_or(replica), &units, Recency::HeadNewest, None);
        Choice {
            decision: Decision {
                replica,
                predicted: Some(view.tokens_of(matched[replica], unit_tokens)),
            },
            ties: tied,
            branch,
        }
    }

    fn reads_load(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{decide_under, pick_under, rng};
    use super::*;
    use crate::simulate::Policy;

    fn ray(spec: &str, replicas: usize) -> PrefixAffinity {
        match spec.parse::<Policy>().unwrap() {
            Policy::Ray(config) => PrefixAffinity::new(config, replicas),
            other => panic!("{other}"),
        }
    }

    #[test]
    fn the_branch_is_the_queue_gate_a_tenth_matched_or_the_miss() {
        let mut router = ray("ray-prefix", 2);
        let mut rng = rng(0);
        let mut route = |blocks: &[u64], tokens, loads: &[u32], forced| {
            decide_under(&mut router, blocks, tokens, loads, forced, &mut rng)
        };
        assert_eq!(route(&[1, 2], 32, &[0, 0], Some(0)).branch, Branch::Miss);
        let matched = route(&[1, 2, 3], 48, &[0, 0], None);
        assert_eq!(
            (matched.decision.replica, matched.branch),
            (0, Branch::Match)
        );
        // 11 − 0 > 10: power of two choices.
        assert_eq!(
            route(&[1, 2, 3], 48, &[11, 0], Some(0)).branch,
            Branch::Gate
        );
        // 16 of 336 tokens matched (under 0.1): a miss, though replica 0 holds them.
        let long: Vec<u64> = [1].into_iter().chain(20..40).collect();
        let under = route(&long, 336, &[0, 0], None);
        assert_eq!(under.branch, Branch::Miss);
    }

    #[test]
    fn a_tenth_matched_keeps_the_holder_else_the_smallest_tree_else_two_choices() {
        let mut rng = rng(0);
        // Replica 1 (the least loaded of two empty trees) learns blocks 1, 2, 3.
        let mut router = ray("ray-prefix", 2);
        let first = pick_under(&mut router, &[1, 2, 3], 60, &[1, 0], 0.0, &mut rng);
        assert_eq!(
            first,
            Decision {
                replica: 1,
                predicted: Some(0)
            }
        );
        // 16 of 160 tokens (0.1): the holder, though busier.
        let held = pick_under(&mut router, &[1, 9], 160, &[0, 3], 0.0, &mut rng);
        assert_eq!(
            held,
            Decision {
                replica: 1,
                predicted: Some(16)
            }
        );
        // 16 of 170 tokens (under 0.1): the smallest tree, replica 0's.
        let small = pick_under(&mut router, &[1, 8], 170, &[3, 0], 0.0, &mut rng);
        assert_eq!(
            small,
            Decision {
                replica: 0,
                predicted: Some(0)
            }
        );
        // Queues 11 apart (> 10): power of two choices, here between both: the idle one,
        // whatever the trees hold.
        let mut router = ray("ray-prefix", 2);
        pick_under(&mut router, &[1, 2, 3], 60, &[1, 0], 0.0, &mut rng);
        let gated = pick_under(&mut router, &[1, 2, 3], 60, &[0, 11], 0.0, &mut rng);
        assert_eq!(gated.replica, 0);
        // 10 apart is not more than 10.
        let mut router = ray("ray-prefix", 2);
        pick_under(&mut router, &[1, 2, 3], 60, &[1, 0], 0.0, &mut rng);
        let kept = pick_under(&mut router, &[1, 2, 3], 60, &[0, 10], 0.0, &mut rng);
        assert_eq!(kept.replica, 1);
    }

    #[test]
    fn eviction_is_off_unless_asked() {
        let mut rng = rng(0);
        for (spec, expected) in [("ray-prefix", 48), ("ray-prefix:evict=128,target=128", 32)] {
            let mut router = ray(spec, 1);
            pick_under(&mut router, &[1, 2, 3], 60, &[0], 0.0, &mut rng);
            // At 10 s a tree over 128 characters (two 16-token blocks) loses its leaf.
            let later = pick_under(&mut router, &[1, 2, 3], 60, &[0], 10.0, &mut rng);
            assert_eq!(later.predicted, Some(expected), "{spec}");
        }
    }
}

//! `aibrix-prefix[:chars=4,entries=200000,ttl=1200,gap=8,factor=F,sigma=1]`: AIBrix's
//! `prefix-cache` routing, `pkg/plugins/gateway/algorithms/prefix_cache.go` at
//! vllm-project/aibrix `e3e10f9e` (`prefixCacheRouter::routeOriginal`, lines 374-490;
//! `getTargetPodListOnLoadImbalance`, 991-1026; `getTargetPodFromMatchedPods`, 950-989) over
//! the gateway's own index, `pkg/utils/prefixcacheindexer/hash.go` (`PrefixHashTable`):
//!
//! 1. The load of a pod is its running requests. When the busiest and the idlest pods are
//!    more than `gap` apart, strictly
//!    (`maxValue-minValue > podRunningRequestImbalanceAbsCount`,
//!    `AIBRIX_PREFIX_CACHE_POD_RUNNING_REQUEST_IMBALANCE_ABS_COUNT`, 8: lines 46, 56), only
//!    the pods at the minimum are matched. `factor=F` adds a second condition, the busiest
//!    over `F × (mean + 1)`: the `AIBRIX_PREFIX_CACHE_LOAD_IMBALANCE_FACTOR` (2 there, with a
//!    `…_MIN_GAP` of 8) that an AIBrix document describes but the code at `e3e10f9e` does not
//!    have; off by default.
//! 2. The prompt, read as characters (the default `character` tokenizer), in blocks of
//!    `chars` (`AIBRIX_PREFIX_CACHE_BLOCK_SIZE`, 4), chained hashes; a pod's match is the share
//!    of the request's hashes it holds from the head (`seqSearchPrefix`, whole percents).
//! 3. Of the matching pods, the highest share, then the fewest running requests (equals in
//!    random order: `rand.Shuffle` before `sort.SliceStable`), the first whose running
//!    requests are at most `mean + sigma × σ` of all pods
//!    (`AIBRIX_PREFIX_CACHE_STANDARD_DEVIATION_FACTOR`, 1; σ the sample deviation,
//!    `util.go:43-54`); none matching or none under that bound: the pod with the fewest
//!    running requests of all, equals drawn at random (`selectTargetPodWithLeastRequestCount`,
//!    `least_request.go:148-167`).
//! 4. The request's hashes go into the index under the chosen pod (`AddPrefix`). The index
//!    is one LRU of `entries` hashes for all pods (`AIBRIX_PREFIX_CACHE_BLOCK_NUMBER`,
//!    200,000), an entry dropped `ttl` seconds after its last use
//!    (`AIBRIX_PREFIX_CACHE_EVICTION_DURATION_MINS`, 20 minutes).
//!
//! The issue describes an older AIBrix: 128-token blocks, "imbalance > 16 running → least
//! running", "mean + 2σ". The source above says 4-character blocks
//! (`defaultPrefixCacheBlockSize`, `hash.go:34`), a gap of 8 and one σ; the defaults here are
//! the source's, and the knobs reach the older settings (`gap=16,sigma=2`; the 128-token
//! tiktoken blocks are `chars=512` at `CHARS_PER_TOKEN`). On the trace, blocks are whole
//! trace blocks ([`super`]), so the match share is counted in trace blocks.

use std::collections::hash_map::Entry as MapEntry;
use std::fmt;

use kvlint_protocol::Spec;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rustc_hash::FxHashMap;

use super::index::units;
use super::{Branch, CHARS_PER_TOKEN, Choice, Decision, Route, View, number, random_lowest, ties};
use crate::error::SpecError;
use crate::recency::RecencyList;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AibrixConfig {
    /// Characters per hashed block.
    pub chars: u32,
    /// Hashes the index keeps.
    pub entries: u64,
    /// Seconds an unused hash stays.
    pub ttl: u64,
    /// The load gate: the busiest more than `gap` requests above the idlest…
    pub gap: u64,
    /// …and, when set, over `factor × (mean + 1)`.
    pub factor: Option<f64>,
    /// Matching pods may run at most `mean + sigma × σ` requests.
    pub sigma: f64,
}

impl Default for AibrixConfig {
    fn default() -> Self {
        Self {
            chars: 4,
            entries: 200_000,
            ttl: 1200,
            gap: 8,
            factor: None,
            sigma: 1.0,
        }
    }
}

impl AibrixConfig {
    pub fn parse(spec: &Spec<'_>) -> Result<Self, SpecError> {
        super::only_knobs("aibrix-prefix", spec)?;
        let default = Self::default();
        Ok(Self {
            chars: u32::try_from(spec.positive("chars", u64::from(default.chars))?)
                .map_err(|_| spec.error("`chars` is too large"))?,
            entries: spec.positive("entries", default.entries)?,
            ttl: spec.positive("ttl", default.ttl)?,
            gap: spec.whole("gap", default.gap)?,
            factor: match spec.value("factor") {
                None => None,
                Some(_) => Some(number(spec, "factor", 0.0, 0.0..=f64::MAX)?),
            },
            sigma: number(spec, "sigma", default.sigma, 0.0..=f64::MAX)?,
        })
    }
}

impl fmt::Display for AibrixConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let default = Self::default();
        super::write_policy(f, "aibrix-prefix", |knob| match knob {
            "chars" => super::changed(self.chars, default.chars),
            "entries" => super::changed(self.entries, default.entries),
            "ttl" => super::changed(self.ttl, default.ttl),
            "factor" => self.factor.map(|factor| factor.to_string()),
            "gap" => super::changed(self.gap, default.gap),
            "sigma" => super::changed(self.sigma, default.sigma),
            _ => None,
        })
    }
}

/// The pods a hash was added for: the first 64 one bit each, inline (no allocation a hash),
/// the rest listed.
#[derive(Default)]
struct Pods {
    first: u64,
    more: Vec<usize>,
}

impl Pods {
    fn contains(&self, pod: usize) -> bool {
        if pod < 64 {
            self.first & (1 << pod) != 0
        } else {
            self.more.contains(&pod)
        }
    }

    fn insert(&mut self, pod: usize) {
        if pod < 64 {
            self.first |= 1 << pod;
        } else if !self.more.contains(&pod) {
            self.more.push(pod);
        }
    }
}

struct Entry {
    pods: Pods,
    last_use: f64,
    /// Its slot in the LRU.
    slot: u32,
}

pub struct PrefixCache {
    config: AibrixConfig,
    entries: FxHashMap<u64, Entry>,
    /// Hashes by (use sequence, hash).
    lru: RecencyList<(u64, u64)>,
    sequence: u64,
}

impl PrefixCache {
    pub fn new(config: AibrixConfig) -> Self {
        Self {
            config,
            entries: FxHashMap::default(),
            lru: RecencyList::default(),
            sequence: 0,
        }
    }

    /// Drops what is older than the TTL at `now`, and the least recently used past capacity.
    fn expire(&mut self, now: f64) {
        while let Some(&(_, hash)) = self.lru.first() {
            let stale = self
                .entries
                .get(&hash)
                .is_none_or(|entry| entry.last_use + self.config.ttl as f64 <= now);
            if !stale && self.entries.len() as u64 <= self.config.entries {
                break;
            }
            self.lru.pop_first();
            self.entries.remove(&hash);
        }
    }

    /// Marks `hash` used at `now` (`AddPrefix`), held by `pod`.
    fn touch(&mut self, hash: u64, now: f64, pod: usize) {
        self.sequence += 1;
        let entry = match self.entries.entry(hash) {
            MapEntry::Occupied(occupied) => {
                let entry = occupied.into_mut();
                self.lru.touch(entry.slot, (self.sequence, hash));
                entry
            }
            MapEntry::Vacant(vacant) => vacant.insert(Entry {
                pods: Pods::default(),
                last_use: now,
                slot: self.lru.push((self.sequence, hash)),
            }),
        };
        entry.last_use = now;
        entry.pods.insert(pod);
    }

    /// `seqSearchPrefix`: per pod, the leading hashes it holds, counted only while it
    /// held every one before and was a candidate. Its LRU reads are left out: the request's
    /// hashes are all touched again, in the same order, when they are added after the
    /// decision (nothing reads the LRU in between), which leaves the order they would.
    fn matched(&self, hashes: &[u64], mut candidates: Vec<usize>) -> Vec<usize> {
        let mut held = vec![0usize; candidates.iter().max().map_or(0, |last| last + 1)];
        for (depth, hash) in hashes.iter().enumerate() {
            let Some(entry) = self.entries.get(hash) else {
                break;
            };
            candidates.retain(|pod| entry.pods.contains(*pod));
            if candidates.is_empty() {
                break;
            }
            for pod in &candidates {
                held[*pod] = depth + 1;
            }
        }
        held
    }
}

impl Route for PrefixCache {
    fn decide(&mut self, view: &View<'_>, rng: &mut SmallRng, forced: Option<usize>) -> Choice {
        self.expire(view.now);
        let count = view.replica_count();
        let running: Vec<f64> = view
            .signals
            .iter()
            .map(|signals| f64::from(signals.running))
            .collect();
        let mean = running.iter().sum::<f64>() / count as f64;
        let (least, most) = running
            .iter()
            .fold((f64::INFINITY, 0.0f64), |(lo, hi), value| {
                (lo.min(*value), hi.max(*value))
            });
        let gated = most - least > self.config.gap as f64
            && self
                .config
                .factor
                .is_none_or(|factor| most > factor * (mean + 1.0));
        let candidates: Vec<usize> = (0..count)
            .filter(|replica| !gated || running[*replica] == least)
            .collect();
        let (hashes, unit_tokens) = units(
            view.prompt.blocks,
            view.block_size,
            (self.config.chars / CHARS_PER_TOKEN).max(1),
        );
        let mut held = self.matched(&hashes, candidates);
        held.resize(count, 0);
        let percent = |replica: usize| held[replica] * 100 / hashes.len().max(1);
        let deviation = if count > 1 {
            (running
                .iter()
                .map(|value| (value - mean).powi(2))
                .sum::<f64>()
                / (count - 1) as f64)
                .sqrt()
        } else {
            0.0
        };
        let mut matching: Vec<usize> = (0..count).filter(|replica| held[*replica] > 0).collect();
        matching.shuffle(rng);
        matching.sort_by(|left, right| {
            percent(*right)
                .cmp(&percent(*left))
                .then(running[*left].total_cmp(&running[*right]))
        });
        let best = matching
            .iter()
            .copied()
            .find(|replica| running[*replica] <= mean + self.config.sigma * deviation);
        // The imbalance gate, or matching pods all over the σ bound, decide against the match.
        let branch = match (gated, best, matching.is_empty()) {
            (true, _, _) | (false, None, false) => Branch::Gate,
            (false, Some(_), _) => Branch::Match,
            (false, None, true) => Branch::Miss,
        };
        let (replica, tied) = match best {
            // The shuffle ordered the equals.
            Some(best) => {
                let mut equals: Vec<usize> = matching
                    .into_iter()
                    .filter(|replica| {
                        percent(*replica) == percent(best) && running[*replica] == running[best]
                    })
                    .collect();
                equals.sort_unstable();
                (best, equals)
            }
            None => {
                let least = random_lowest(0..count, |replica| running[replica], rng).unwrap_or(0);
                (least, ties(0..count, |replica| running[replica], least))
            }
        };
        for hash in &hashes {
            self.touch(*hash, view.now, forced.unwrap_or(replica));
        }
        self.expire(view.now);
        Choice {
            decision: Decision {
                replica,
                predicted: Some(view.tokens_of(held[replica], unit_tokens)),
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

    fn router(spec: &str) -> PrefixCache {
        match spec.parse::<Policy>().unwrap() {
            Policy::Aibrix(config) => PrefixCache::new(config),
            other => panic!("{other}"),
        }
    }

    #[test]
    fn the_branch_is_the_match_the_imbalance_or_deviation_gate_or_the_miss() {
        let mut router = router("aibrix-prefix");
        let mut rng = rng(0);
        let mut route = |tokens, loads: &[u32], forced| {
            let blocks: &[u64] = if tokens == 40 { &[1, 2] } else { &[1, 2, 3] };
            decide_under(&mut router, blocks, tokens, loads, forced, &mut rng)
        };
        // Nothing matches; the index learns pod 0.
        assert_eq!(route(40, &[0, 0, 0], Some(0)).branch, Branch::Miss);
        let matched = route(60, &[0, 0, 0], None);
        assert_eq!(
            (matched.decision.replica, matched.branch),
            (0, Branch::Match)
        );
        // No imbalance (5 ≤ 8), but pod 0's 5 running are over mean + σ (1.67 + 2.89).
        let deviated = route(60, &[5, 0, 0], Some(0));
        assert_eq!((deviated.ties, deviated.branch), (vec![1, 2], Branch::Gate));
        // 9 − 0 > 8: only the idle pods are matched.
        let imbalanced = route(60, &[9, 0, 0], None);
        assert_eq!(
            (imbalanced.ties, imbalanced.branch),
            (vec![1, 2], Branch::Gate)
        );
    }

    /// Replica `holder` of `loads.len()` is routed blocks 1, 2 (as the least loaded); then the
    /// decision for blocks 1, 2, 3 under `loads`.
    fn second(spec: &str, holder: usize, loads: &[u32], now: f64) -> Decision {
        let mut router = router(spec);
        let mut rng = rng(0);
        let mut first = vec![1; loads.len()];
        first[holder] = 0;
        let warm = pick_under(&mut router, &[1, 2], 40, &first, 0.0, &mut rng);
        assert_eq!(
            warm,
            Decision {
                replica: holder,
                predicted: Some(0)
            }
        );
        pick_under(&mut router, &[1, 2, 3], 60, loads, now, &mut rng)
    }

    #[test]
    fn the_best_match_under_mean_plus_one_sigma_else_the_least_running() {
        // Idle: replica 1 holds 2 of 3 blocks.
        assert_eq!(
            second("aibrix-prefix", 1, &[0, 0], 0.0),
            Decision {
                replica: 1,
                predicted: Some(32)
            }
        );
        // Running 0, 0, 6: mean 2, σ = √12 ≈ 3.46; 6 > 5.46, so the holder is passed over
        // for the least running (either idle replica).
        assert_ne!(second("aibrix-prefix", 2, &[0, 0, 6], 0.0).replica, 2);
        // Two σ: 6 ≤ 8.93.
        assert_eq!(
            second("aibrix-prefix:sigma=2", 2, &[0, 0, 6], 0.0).replica,
            2
        );
        // The gate: 20 apart: only the idle replicas are matched, though three σ would let
        // the holder in.
        assert_ne!(
            second("aibrix-prefix:sigma=3", 2, &[0, 0, 20], 0.0).replica,
            2
        );
        // A gap of 30 is not reached: no gate.
        assert_eq!(
            second("aibrix-prefix:sigma=3,gap=30", 2, &[0, 0, 20], 0.0).replica,
            2
        );
        // Unused for the TTL, the hashes are gone.
        assert_eq!(
            second("aibrix-prefix:ttl=60", 1, &[0, 0], 59.0),
            Decision {
                replica: 1,
                predicted: Some(32)
            }
        );
        assert_eq!(
            second("aibrix-prefix:ttl=60", 1, &[0, 0], 60.0).predicted,
            Some(0)
        );
    }

    /// `getTargetPodListOnLoadImbalance` at `e3e10f9e`: `maxValue-minValue > 8`, nothing else.
    #[test]
    fn the_load_gate_is_more_than_eight_apart_and_nothing_else() {
        // Three σ keep the holder (replica 2, or 1) under the bound in every case below.
        // 8 apart is not more than 8: the holder.
        assert_eq!(
            second("aibrix-prefix:sigma=3", 2, &[0, 0, 8], 0.0).replica,
            2
        );
        // 9 apart: only the idle replicas are matched, so none matches: the least running.
        assert_ne!(
            second("aibrix-prefix:sigma=3", 2, &[0, 0, 9], 0.0).replica,
            2
        );
        // 10 apart, the busiest under 2 × (mean 6.67 + 1): gated all the same, to the one
        // idle replica…
        assert_eq!(
            second("aibrix-prefix:sigma=3", 1, &[0, 10, 10], 0.0).replica,
            0
        );
        // …unless the documented factor is asked for too.
        assert_eq!(
            second("aibrix-prefix:sigma=3,factor=2", 1, &[0, 10, 10], 0.0).replica,
            1
        );
    }

    #[test]
    fn the_index_keeps_its_most_recently_used_hashes() {
        let mut router = router("aibrix-prefix:entries=2");
        let mut rng = rng(0);
        pick_under(&mut router, &[1, 2, 3], 60, &[0, 1], 0.0, &mut rng);
        // Three hashes added in order: the first went.
        let decision = pick_under(&mut router, &[1, 2, 3], 60, &[0, 1], 0.0, &mut rng);
        assert_eq!(decision.predicted, Some(0));
    }

    #[test]
    fn a_hash_s_pods_past_64_are_held_too() {
        let mut pods = Pods::default();
        for pod in [70, 3, 63, 64, 3] {
            pods.insert(pod);
        }
        assert_eq!(pods.more, [70, 64]);
        assert!([3, 63, 64, 70].iter().all(|pod| pods.contains(*pod)));
        assert!(![0, 62, 65, 128].iter().any(|pod| pods.contains(*pod)));
    }
}

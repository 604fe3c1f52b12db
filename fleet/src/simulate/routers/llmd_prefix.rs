//! `llmd-prefix[:weights=3/2/2,nohit=0,chars=64,blocks=256,lru=31250]` and
//! `llmd-precise[:weights=3/2/2,nohit=2,block=64]`: llm-d's inference scheduler, the Gateway
//! API Inference Extension's endpoint picker with its scorers summed by weight and the
//! highest total picked (equals drawn at random, the max-score picker):
//!
//! - the prefix scorer, `pkg/epp/scheduling/framework/plugins/multi/prefix/plugin.go`
//!   (`Plugin::Score`, `hashPrompt`, `matchLongestPrefix`, `PreRequest`): the prompt in
//!   blocks of `chars` characters (`DefaultHashBlockSize`, 64), at most `blocks` of them
//!   (`DefaultMaxPrefixBlocks`, 256), chained hashes after one for the model; a pod's score
//!   is the leading hashes its index holds over the request's hashes. After the decision the
//!   request's hashes go into the chosen pod's LRU of `lru` entries
//!   (`DefaultLRUCapacityPerServer`, 31,250), oldest dropped first — the prompt's head, added
//!   first. A prompt under one block has no hashes and scores 0 everywhere.
//! - the precise prefix-cache scorer (`llmd-precise`), llm-d-inference-scheduler `520af478`,
//!   `pkg/epp/framework/plugins/scheduling/scorer/preciseprefixcache/precise_prefix_cache.go`
//!   (`Scorer::Score`, lines 412-520) over llm-d-kv-cache-manager `a378f5b3`
//!   `pkg/kvcache/kvblock_scorer.go` (`LongestPrefixScorer::Score`, 108-150), fed by the
//!   engines' KV events: a pod's raw score is the longest run of the request's blocks, from
//!   the first, its engine holds, in the scorer's own blocks of `block` tokens
//!   (`tokenProcessorConfig.blockSize`, 64 in the guide: "must match vLLM --block-size"),
//!   full blocks only; divided by the request's full blocks, `floor(tokens / block)`, and
//!   clipped to 1 (`absoluteScoredPods`, `utils.go:16-44`). A prompt under one block scores 0
//!   everywhere. Here the engine's cached prefix in whole scorer blocks.
//! - the no-hit LRU scorer (`nohit=W`), `pkg/epp/framework/plugins/scheduling/scorer/nohitlru/
//!   no_hit_lru.go` (`NoHitLRU::Score`, `scoreColdRequestByLRU`, `PreRequest`, lines
//!   140-320): a request is cold when no pod matched a block (`isColdRequest`, reading the
//!   match the prefix scorer stored). A warm request scores 0.5 everywhere. A cold one ranks
//!   the pods: those that never took a cold request first, in pod order, then the others from
//!   the least recently given a cold request; rank `r` of `n` pods scores `1 − r / (n − 1)`.
//!   After a cold request its pod becomes the most recent (`moveTargetPodToFront`). So the
//!   miss tie between idle pods falls deterministically, from the history of cold routings.
//! - the queue scorer (`(max − waiting) / (max − min)` of the pods' waiting requests, 1 when
//!   all are equal) and the KV-cache utilisation scorer (1 − the share of KV blocks the
//!   running requests hold).
//!
//! `weights=P/Q/K` are the prefix, queue and KV-utilisation weights, `nohit` the no-hit LRU
//! scorer's. `llmd-precise`'s defaults are the llm-d guide's, llm-d/llm-d
//! `guides/precise-prefix-cache-routing/router/precise-prefix-cache-routing.values.yaml`
//! (`076e65dc`): precise prefix 3, queue 2, KV utilisation 2, no-hit LRU 2, `blockSize: 64`.
//! The scheduler's own sample, `deploy/config/epp-precise-prefix-cache-config.yaml`
//! (`520af478`), weighs them 2/1/1 without the no-hit LRU:
//! `llmd-precise:weights=2/1/1,nohit=0`. `llmd-prefix`'s 3/2/2 is the "typical"
//! llm-d configuration, without the no-hit LRU (`K=0` drops the utilisation scorer). The
//! guide's speculative indexing (the request's blocks believed on its pod for 2 s until the
//! KV events arrive) is not modelled: the engines' caches here publish without delay.
//!
//! The approximate index is the router's belief: it learns what it routes and forgets by
//! its LRU alone, in 64-character blocks approximated as `64 / CHARS_PER_TOKEN` tokens on
//! the trace (see [`super`]). The precise scorer's belief is the engines' caches in its own
//! blocks.

use std::fmt;

use kvlint_protocol::Spec;
use rand::rngs::SmallRng;

use super::index::{PrefixIndex, Recency, units};
use super::{
    CHARS_PER_TOKEN, Choice, Decision, Route, View, number, random_lowest, scored_branch, ties,
};
use crate::error::SpecError;

/// Where the prefix scorer's index comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LlmdIndex {
    /// The router's own LRU of text-block hashes.
    Approximate,
    /// The engines' KV events.
    Precise,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LlmdConfig {
    pub index: LlmdIndex,
    /// Prefix, queue and KV-utilisation weights.
    pub weights: [f64; 3],
    /// The no-hit LRU scorer's weight.
    pub nohit: f64,
    /// Tokens per block of the precise scorer.
    pub block: u32,
    /// Characters per hashed block.
    pub chars: u32,
    /// Blocks hashed at most.
    pub blocks: u32,
    /// LRU entries per pod.
    pub lru: u32,
}

impl LlmdConfig {
    pub fn new(index: LlmdIndex) -> Self {
        Self {
            index,
            weights: [3.0, 2.0, 2.0],
            nohit: match index {
                LlmdIndex::Approximate => 0.0,
                LlmdIndex::Precise => 2.0,
            },
            block: 64,
            chars: 64,
            blocks: 256,
            lru: 31_250,
        }
    }

    pub fn parse(index: LlmdIndex, spec: &Spec<'_>) -> Result<Self, SpecError> {
        super::only_knobs(index.name(), spec)?;
        let default = Self::new(index);
        let weights = match spec.value("weights") {
            None => default.weights,
            Some(text) => {
                let parsed: Vec<f64> = text
                    .split('/')
                    .filter_map(|weight| weight.parse().ok())
                    .filter(|weight: &f64| *weight >= 0.0 && weight.is_finite())
                    .collect();
                match parsed[..] {
                    [prefix, queue, kv] => [prefix, queue, kv],
                    [prefix, queue] => [prefix, queue, 0.0],
                    _ => {
                        return Err(spec
                            .error("`weights` is PREFIX/QUEUE[/KV], numbers of 0 or more")
                            .into());
                    }
                }
            }
        };
        let small = |key: &str, default: u32| -> Result<u32, SpecError> {
            u32::try_from(spec.positive(key, u64::from(default))?)
                .map_err(|_| spec.error(format!("`{key}` is too large")).into())
        };
        Ok(Self {
            index,
            weights,
            nohit: number(spec, "nohit", default.nohit, 0.0..=f64::MAX)?,
            block: small("block", default.block)?,
            chars: small("chars", default.chars)?,
            blocks: small("blocks", default.blocks)?,
            lru: small("lru", default.lru)?,
        })
    }
}

impl fmt::Display for LlmdConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let default = Self::new(self.index);
        super::write_policy(f, self.index.name(), |knob| match knob {
            "weights" => (self.weights != default.weights).then(|| {
                let [prefix, queue, kv] = self.weights;
                format!("{prefix}/{queue}/{kv}")
            }),
            "nohit" => super::changed(self.nohit, default.nohit),
            "block" => super::changed(self.block, default.block),
            "chars" => super::changed(self.chars, default.chars),
            "blocks" => super::changed(self.blocks, default.blocks),
            "lru" => super::changed(self.lru, default.lru),
            _ => None,
        })
    }
}

impl LlmdIndex {
    /// The policy's name: `llmd-prefix` or `llmd-precise`.
    fn name(self) -> &'static str {
        match self {
            Self::Approximate => "llmd-prefix",
            Self::Precise => "llmd-precise",
        }
    }
}

/// The hash standing for the model, first of every request's hashes.
const MODEL_UNIT: u64 = 0x6d6f_6465_6c00_0000;

pub struct Scorers {
    config: LlmdConfig,
    index: PrefixIndex,
    /// The pods that took a cold request, the least recently first (the no-hit LRU).
    cold_routed: Vec<usize>,
}

impl Scorers {
    pub fn new(config: LlmdConfig, replica_count: usize) -> Self {
        Self {
            config,
            index: PrefixIndex::new(replica_count),
            cold_routed: Vec::new(),
        }
    }

    /// The no-hit LRU scorer for a cold request: pods that never took one first, in pod
    /// order, then the least recently given one; rank `r` of `n` scores `1 − r / (n − 1)`.
    fn cold_scores(&self, count: usize) -> Vec<f64> {
        if count <= 1 {
            return vec![1.0; count];
        }
        let never = (0..count).filter(|replica| !self.cold_routed.contains(replica));
        let mut scores = vec![0.0; count];
        for (rank, replica) in never.chain(self.cold_routed.iter().copied()).enumerate() {
            scores[replica] = (1.0 - rank as f64 / (count - 1) as f64).max(0.0);
        }
        scores
    }

    /// Each pod's prefix score and the prompt tokens it is believed to hold; the request's
    /// hashes.
    fn prefix_scores(&self, view: &View<'_>) -> (Vec<f64>, Vec<u32>, Vec<u64>) {
        let count = view.replica_count();
        if self.config.index == LlmdIndex::Precise {
            let block = self.config.block;
            let request_blocks = view.prompt.tokens / block;
            let held: Vec<u32> = (0..count)
                .map(|replica| view.engine_hit(replica) / block * block)
                .collect();
            let scores = held
                .iter()
                .map(|tokens| {
                    if request_blocks == 0 {
                        0.0
                    } else {
                        (f64::from(tokens / block) / f64::from(request_blocks)).min(1.0)
                    }
                })
                .collect();
            return (scores, held, Vec::new());
        }
        let (mut text_blocks, unit_tokens) = units(
            view.prompt.blocks,
            view.block_size,
            self.config.chars / CHARS_PER_TOKEN,
        );
        if text_blocks.is_empty() {
            return (vec![0.0; count], vec![0; count], Vec::new());
        }
        text_blocks.truncate(self.config.blocks as usize);
        let hashes: Vec<u64> = std::iter::once(MODEL_UNIT).chain(text_blocks).collect();
        // `matchLongestPrefix`: every pod holding the i-th hash counts it, until none does.
        let mut matched = vec![0usize; count];
        for hash in &hashes {
            let mut held_by_any = false;
            for (replica, units) in matched.iter_mut().enumerate() {
                if self.index.contains(replica, *hash) {
                    *units += 1;
                    held_by_any = true;
                }
            }
            if !held_by_any {
                break;
            }
        }
        let scores = matched
            .iter()
            .map(|units| *units as f64 / hashes.len() as f64)
            .collect();
        let held = matched
            .iter()
            .map(|units| view.tokens_of(units.saturating_sub(1), unit_tokens))
            .collect();
        (scores, held, hashes)
    }
}

impl Route for Scorers {
    fn decide(&mut self, view: &View<'_>, rng: &mut SmallRng, forced: Option<usize>) -> Choice {
        let (prefix, held, hashes) = self.prefix_scores(view);
        let waiting: Vec<u32> = view.signals.iter().map(|signals| signals.waiting).collect();
        let most = waiting.iter().copied().max().unwrap_or(0);
        let least = waiting.iter().copied().min().unwrap_or(0);
        let [prefix_weight, queue_weight, kv_weight] = self.config.weights;
        let cold = held.iter().all(|tokens| *tokens == 0);
        let nohit = if cold {
            self.cold_scores(view.replica_count())
        } else {
            vec![0.5; view.replica_count()]
        };
        let score = |replica: usize| {
            let signals = &view.signals[replica];
            let queue = if most == least {
                1.0
            } else {
                f64::from(most - waiting[replica]) / f64::from(most - least)
            };
            let kv_used = match signals.capacity_blocks {
                Some(capacity) if capacity > 0 => {
                    (signals.active_blocks as f64 / capacity as f64).min(1.0)
                }
                _ => 0.0,
            };
            prefix_weight * prefix[replica]
                + queue_weight * queue
                + kv_weight * (1.0 - kv_used)
                + self.config.nohit * nohit[replica]
        };
        let replica =
            random_lowest(0..view.replica_count(), |replica| -score(replica), rng).unwrap_or(0);
        let tied = ties(0..view.replica_count(), |replica| -score(replica), replica);
        let routed = forced.unwrap_or(replica);
        if cold && self.config.nohit > 0.0 {
            self.cold_routed.retain(|pod| *pod != routed);
            self.cold_routed.push(routed);
        }
        if !hashes.is_empty() {
            self.index.insert(
                routed,
                &hashes,
                Recency::TailNewest,
                Some(self.config.lru as usize),
            );
        }
        Choice {
            decision: Decision {
                replica,
                predicted: Some(held[replica]),
            },
            ties: tied,
            branch: scored_branch(|replica| prefix[replica], view.replica_count(), replica),
        }
    }

    fn reads_load(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests;

//! Why a policy ranks below the winner of its point: the measure it is furthest behind on and
//! what the two simulations measured behind it, as figures. The emitters word it (the command
//! line's text and JSON, the pages: `kvlint_workload::words`).

use super::SimulationResult;

/// Why a policy loses against the winner.
#[derive(Clone, Debug, PartialEq)]
pub enum Loss {
    /// It serves fewer prompt tokens from cache.
    FewerServed {
        served: u64,
        winner_served: u64,
        cause: ServedCause,
    },
    /// Its TTFT p99 is longer.
    LongerTail {
        p99: f64,
        winner_p99: f64,
        cause: TailCause,
    },
    /// Its busiest replica prefilled a larger share.
    Imbalance {
        imbalance: f64,
        winner_imbalance: f64,
        busiest: Option<Busiest>,
    },
    /// It ties the winner on every measure; the order simulated decided.
    Tie,
}

/// What the simulation measured behind serving fewer tokens.
#[derive(Clone, Debug, PartialEq)]
pub enum ServedCause {
    /// Its router replicas, each with its own index, served fewer than one router did.
    RouterReplicas {
        routers: usize,
        served: u64,
        alone_served: u64,
    },
    /// It sent requests away from their session's previous replica, which held `tokens` the
    /// new one prefilled, of a `gap` in tokens.
    Locality {
        replica_changes: u64,
        winner_replica_changes: u64,
        tokens: u64,
        gap: u64,
    },
    /// Its index predicted hits the engines did not serve.
    Mispredicted { tokens: u64, served: u64 },
    /// Its replicas evicted more (the same prefixes cached on several replicas).
    Evictions { evicted: u64, winner_evicted: u64 },
    /// None of the above stands out: its replicas held fewer of the prefixes reused.
    Held { lost_locality: u64, evicted: u64 },
}

/// What the simulation measured behind a longer TTFT tail.
#[derive(Clone, Debug, PartialEq)]
pub enum TailCause {
    /// Prefill spread less evenly.
    Spread {
        imbalance: f64,
        winner_imbalance: f64,
        busiest: Option<Busiest>,
    },
    /// More to prefill, and why.
    MorePrefill {
        computed: u64,
        winner_computed: u64,
        cause: ServedCause,
    },
    /// Neither stands out: longer queues in bursts.
    Queues {
        computed: u64,
        winner_computed: u64,
        imbalance: f64,
        winner_imbalance: f64,
        p95: f64,
        winner_p95: f64,
    },
}

/// The replica that prefilled the most: its requests, its prefilled tokens and all replicas'.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Busiest {
    pub replica: usize,
    pub requests: u64,
    pub computed: u64,
    pub total_computed: u64,
}

impl Loss {
    /// Why `loser` ranks below `winner`: the measure it is furthest behind on, relative to the
    /// winner's figure, then what the simulation measured behind that; `alone`: the loser's
    /// policy with one router, when it ran with several.
    pub fn between(
        loser: &SimulationResult,
        winner: &SimulationResult,
        alone: Option<&SimulationResult>,
    ) -> Self {
        let served_gap = winner.served_tokens.saturating_sub(loser.served_tokens);
        let served_behind = served_gap as f64 / winner.served_tokens.max(1) as f64;
        let p99_behind = (loser.ttft.p99 - winner.ttft.p99) / winner.ttft.p99.max(1e-9);
        let imbalance_behind = (loser.imbalance - winner.imbalance) / winner.imbalance.max(1e-9);
        if served_behind > 0.0 && served_behind >= p99_behind && served_behind >= imbalance_behind {
            Self::FewerServed {
                served: loser.served_tokens,
                winner_served: winner.served_tokens,
                cause: ServedCause::of(loser, winner, alone, served_gap),
            }
        } else if p99_behind > 0.0 && p99_behind >= imbalance_behind {
            Self::LongerTail {
                p99: loser.ttft.p99,
                winner_p99: winner.ttft.p99,
                cause: TailCause::of(loser, winner, alone),
            }
        } else if imbalance_behind > 0.0 {
            Self::Imbalance {
                imbalance: loser.imbalance,
                winner_imbalance: winner.imbalance,
                busiest: Busiest::of(loser),
            }
        } else {
            Self::Tie
        }
    }
}

impl ServedCause {
    /// The largest of the tokens its router replicas lost against one router, the tokens lost
    /// to locality (beyond the winner's), the hits its index predicted and the engines did not
    /// serve; else the evictions.
    fn of(
        loser: &SimulationResult,
        winner: &SimulationResult,
        alone: Option<&SimulationResult>,
        gap: u64,
    ) -> Self {
        let alone_served = alone.map_or(0, |alone| alone.served_tokens);
        let split = alone.map_or(0, |alone| {
            alone.served_tokens.saturating_sub(loser.served_tokens)
        });
        let locality = loser
            .lost_locality_tokens
            .saturating_sub(winner.lost_locality_tokens);
        let mispredicted = loser
            .belief
            .as_ref()
            .map_or(0, |belief| belief.predicted_not_served_tokens);
        if split > 0 && split >= locality && split >= mispredicted {
            Self::RouterReplicas {
                routers: loser.routers,
                served: loser.served_tokens,
                alone_served,
            }
        } else if locality >= mispredicted && locality > 0 {
            Self::Locality {
                replica_changes: loser.replica_changes,
                winner_replica_changes: winner.replica_changes,
                tokens: locality,
                gap,
            }
        } else if mispredicted > 0 {
            Self::Mispredicted {
                tokens: mispredicted,
                served: loser.served_tokens,
            }
        } else if loser.evicted_blocks > winner.evicted_blocks {
            Self::Evictions {
                evicted: loser.evicted_blocks,
                winner_evicted: winner.evicted_blocks,
            }
        } else {
            Self::Held {
                lost_locality: loser.lost_locality_tokens,
                evicted: loser.evicted_blocks,
            }
        }
    }
}

impl TailCause {
    /// The busiest replica's prefill is the imbalance times the mean, so of the two factors
    /// (prefill spread less evenly, more to prefill — and why: [`ServedCause`]) the larger one.
    fn of(
        loser: &SimulationResult,
        winner: &SimulationResult,
        alone: Option<&SimulationResult>,
    ) -> Self {
        let spread = loser.imbalance / winner.imbalance.max(1e-9);
        let more = loser.computed_tokens as f64 / winner.computed_tokens.max(1) as f64;
        if spread > 1.0 && spread >= more {
            Self::Spread {
                imbalance: loser.imbalance,
                winner_imbalance: winner.imbalance,
                busiest: Busiest::of(loser),
            }
        } else if more > 1.05 {
            let gap = loser.computed_tokens - winner.computed_tokens;
            Self::MorePrefill {
                computed: loser.computed_tokens,
                winner_computed: winner.computed_tokens,
                cause: ServedCause::of(loser, winner, alone, gap),
            }
        } else {
            Self::Queues {
                computed: loser.computed_tokens,
                winner_computed: winner.computed_tokens,
                imbalance: loser.imbalance,
                winner_imbalance: winner.imbalance,
                p95: loser.ttft.p95,
                winner_p95: winner.ttft.p95,
            }
        }
    }
}

impl Busiest {
    /// The replica of `result` that prefilled the most tokens; `None` when none took a request.
    fn of(result: &SimulationResult) -> Option<Self> {
        let total_computed = result
            .per_replica
            .iter()
            .map(|load| load.computed_tokens)
            .sum();
        result
            .per_replica
            .iter()
            .enumerate()
            .max_by_key(|(_, load)| load.computed_tokens)
            .map(|(replica, load)| Self {
                replica,
                requests: load.requests,
                computed: load.computed_tokens,
                total_computed,
            })
    }
}

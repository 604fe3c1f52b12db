//! `kvlint simulate --compare`: the decision report. At each point of the sweep (replicas ×
//! cache), the policies simulated are ranked on three measures:
//!
//! - **served tokens**: prompt tokens served from cache, more is better;
//! - **TTFT p99** under the arrivals simulated, lower is better;
//! - **load imbalance**: the busiest replica's prefilled (computed) prompt tokens over the
//!   replicas' mean ([`SimulationResult::imbalance`]; 1 is even), lower is better.
//!
//! A policy's place on each measure counts (1 is best, equals share a place); the rank orders
//! the sums of the three places, lowest first, equal sums by served tokens, then by TTFT p99.
//! Each policy below the winner gets its [`Loss`], from the figures the two simulations
//! measured: the measure it is furthest behind on, and the difference behind it (tokens the
//! session's previous replica held that another replica had to prefill, hits its index
//! predicted that the engines did not serve, evictions, the busiest replica's share). The
//! emitters word it.

use super::loss::Loss;
use super::{CacheSize, Policy, SimulationResult};

/// One policy's place in a decision report.
#[derive(Clone, Debug, PartialEq)]
pub struct Ranked {
    /// 1 for the winner.
    pub rank: usize,
    pub policy: Policy,
    pub served_tokens: u64,
    pub ttft_p99: f64,
    pub imbalance: f64,
    /// Its places on served tokens, TTFT p99 and imbalance (1: best; equals share one).
    pub places: [usize; 3],
    /// Why it loses against the winner, from the measured differences; `None` for the winner.
    pub loss: Option<Loss>,
}

/// The policies simulated at one point of the sweep, best first.
#[derive(Clone, Debug, PartialEq)]
pub struct Ranking {
    pub replicas: usize,
    pub cache: CacheSize,
    /// Router replicas without shared state each policy ran with.
    pub routers: usize,
    pub ranked: Vec<Ranked>,
}

/// Places of `values` (1: best), equals sharing the better place.
fn places(values: &[f64], better: impl Fn(f64, f64) -> bool) -> Vec<usize> {
    values
        .iter()
        .map(|value| {
            1 + values
                .iter()
                .filter(|other| better(**other, *value))
                .count()
        })
        .collect()
}

/// The decision report over `results`: one ranking per point of the sweep (replicas × cache ×
/// router replicas), in the order the points were first simulated. Where a point was also
/// simulated with one router (what `--routers N` adds beside N), the policies are ranked with N
/// and each one's single-router result measures what the N routers lose.
pub fn rank(results: &[SimulationResult]) -> Vec<Ranking> {
    let several_routers = |replicas: usize, cache: CacheSize| {
        results.iter().any(|result| {
            result.replicas == replicas && result.cache == cache && result.routers > 1
        })
    };
    let mut points: Vec<(usize, CacheSize, usize)> = Vec::new();
    for result in results {
        let point = (result.replicas, result.cache, result.routers);
        let ranked = result.routers > 1 || !several_routers(result.replicas, result.cache);
        if ranked && !points.contains(&point) {
            points.push(point);
        }
    }
    points
        .into_iter()
        .map(|(replicas, cache, routers)| {
            let at =
                |result: &&SimulationResult| result.replicas == replicas && result.cache == cache;
            let group: Vec<&SimulationResult> = results
                .iter()
                .filter(|result| at(result) && result.routers == routers)
                .collect();
            let alone: Vec<&SimulationResult> = results
                .iter()
                .filter(|result| at(result) && result.routers == 1 && routers > 1)
                .collect();
            Ranking {
                replicas,
                cache,
                routers,
                ranked: rank_point(&group, &alone),
            }
        })
        .collect()
}

/// `group` ranked; `alone`: the same policies with one router, when `group` ran with several.
fn rank_point(group: &[&SimulationResult], alone: &[&SimulationResult]) -> Vec<Ranked> {
    let served: Vec<f64> = group.iter().map(|r| r.served_tokens as f64).collect();
    let p99: Vec<f64> = group.iter().map(|r| r.ttft.p99).collect();
    let imbalance: Vec<f64> = group.iter().map(|r| r.imbalance).collect();
    let by_served = places(&served, |a, b| a > b);
    let by_p99 = places(&p99, |a, b| a < b);
    let by_imbalance = places(&imbalance, |a, b| a < b);
    let mut order: Vec<usize> = (0..group.len()).collect();
    let sum = |index: usize| by_served[index] + by_p99[index] + by_imbalance[index];
    order.sort_by(|a, b| {
        sum(*a)
            .cmp(&sum(*b))
            .then(group[*b].served_tokens.cmp(&group[*a].served_tokens))
            .then(group[*a].ttft.p99.total_cmp(&group[*b].ttft.p99))
    });
    let Some(&winner) = order.first() else {
        return Vec::new();
    };
    order
        .iter()
        .enumerate()
        .map(|(position, &index)| {
            let result = group[index];
            Ranked {
                rank: position + 1,
                policy: result.policy,
                served_tokens: result.served_tokens,
                ttft_p99: result.ttft.p99,
                imbalance: result.imbalance,
                places: [by_served[index], by_p99[index], by_imbalance[index]],
                loss: (position > 0).then(|| {
                    let single = alone.iter().find(|single| single.policy == result.policy);
                    Loss::between(result, group[winner], single.copied())
                }),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::loss::{Busiest, ServedCause, TailCause};
    use crate::simulate::tests::result_of;
    use crate::simulate::{Belief, Latency, ReplicaLoad};

    /// A result of two replicas with these figures.
    fn result(policy: &str, served: u64, p99: f64, computed: [u64; 2]) -> SimulationResult {
        let prompt_tokens = served + computed[0] + computed[1];
        let mean = (computed[0] + computed[1]) as f64 / 2.0;
        SimulationResult {
            requests: 10,
            per_replica: computed
                .iter()
                .map(|tokens| ReplicaLoad {
                    requests: 5,
                    prompt_tokens: *tokens,
                    computed_tokens: *tokens,
                })
                .collect(),
            imbalance: computed[0].max(computed[1]) as f64 / mean,
            ttft: Latency {
                p50: p99 / 2.0,
                p95: p99,
                p99,
                max: p99,
            },
            makespan: 10.0,
            ..result_of(policy, 2, CacheSize::Blocks(100), served, prompt_tokens)
        }
    }

    #[test]
    fn the_rank_sums_the_three_places_and_each_loser_says_what_it_lost() {
        let winner = result("session-hash", 1000, 1.0, [500, 500]);
        // Most served, but one replica prefills three quarters: last on the other two.
        let mut lopsided = result("sglang-cache-aware", 1100, 4.0, [300, 900]);
        lopsided.belief = Some(Belief {
            predicted_tokens: 1200,
            predicted_not_served_tokens: 200,
            served_not_predicted_tokens: 100,
        });
        // Fewer served: it moved sessions away from the replica holding their prefix.
        let mut moved = result("round-robin", 600, 1.2, [700, 700]);
        moved.replica_changes = 8;
        moved.lost_locality_tokens = 300;
        let rankings = rank(&[lopsided.clone(), moved.clone(), winner.clone()]);
        assert_eq!(rankings.len(), 1);
        let ranked = &rankings[0].ranked;
        let order: Vec<String> = ranked.iter().map(|r| r.policy.to_string()).collect();
        // Sums: session-hash 2 + 1 + 1 = 4, sglang 1 + 3 + 3 = 7, round-robin 3 + 2 + 1 = 6.
        assert_eq!(order, ["session-hash", "round-robin", "sglang-cache-aware"]);
        assert_eq!(ranked[0].places, [2, 1, 1]);
        assert_eq!(ranked[0].loss, None);
        assert_eq!(
            ranked[1].loss,
            Some(Loss::FewerServed {
                served: 600,
                winner_served: 1000,
                cause: ServedCause::Locality {
                    replica_changes: 8,
                    winner_replica_changes: 0,
                    tokens: 300,
                    gap: 400,
                },
            })
        );
        assert_eq!(
            ranked[2].loss,
            Some(Loss::LongerTail {
                p99: 4.0,
                winner_p99: 1.0,
                cause: TailCause::Spread {
                    imbalance: 1.5,
                    winner_imbalance: 1.0,
                    busiest: Some(Busiest {
                        replica: 1,
                        requests: 5,
                        computed: 900,
                        total_computed: 1200,
                    }),
                },
            })
        );
    }

    #[test]
    fn with_several_routers_the_policies_rank_with_them_and_say_what_they_lose_against_one() {
        let mut results = Vec::new();
        for (routers, cache_aware) in [(1, 1000), (3, 860)] {
            let mut hashed = result("session-hash", 950, 1.0, [500, 500]);
            hashed.routers = routers;
            let mut tree = result("sglang-cache-aware", cache_aware, 1.0, [500, 500]);
            tree.routers = routers;
            results.extend([hashed, tree]);
        }
        let rankings = rank(&results);
        // The single-router results are the reference, not a ranking of their own.
        assert_eq!(rankings.len(), 1);
        assert_eq!(rankings[0].routers, 3);
        let ranked = &rankings[0].ranked;
        assert_eq!(ranked[0].policy, Policy::SessionHash);
        assert_eq!(
            ranked[1].loss,
            Some(Loss::FewerServed {
                served: 860,
                winner_served: 950,
                cause: ServedCause::RouterReplicas {
                    routers: 3,
                    served: 860,
                    alone_served: 1000,
                },
            })
        );
    }

    #[test]
    fn a_longer_tail_is_put_down_to_the_larger_of_spread_and_prefill() {
        // The same served tokens, so the tail decides; the winner spreads 1,000 tokens 1.2× the
        // mean at most.
        let winner = result("llmd-precise", 1000, 1.0, [400, 600]);
        // A little less even (1.25×) but twice the prefill: the prefill is what grew most.
        let mut doubled = result("sglang-cache-aware", 1000, 2.0, [750, 1250]);
        doubled.lost_locality_tokens = 1000;
        doubled.replica_changes = 4;
        let Loss::LongerTail { cause, .. } = Loss::between(&doubled, &winner, None) else {
            panic!("the tail decides");
        };
        assert!(
            matches!(
                cause,
                TailCause::MorePrefill {
                    computed: 2000,
                    winner_computed: 1000,
                    ..
                }
            ),
            "{cause:?}"
        );
        // The same prefill spread unevenly: the spread.
        let lopsided = result("aibrix-prefix", 1000, 2.0, [100, 900]);
        let Loss::LongerTail { cause, .. } = Loss::between(&lopsided, &winner, None) else {
            panic!("the tail decides");
        };
        assert!(
            matches!(cause, TailCause::Spread { imbalance, .. } if imbalance == 1.8),
            "{cause:?}"
        );
    }

    #[test]
    fn a_router_whose_index_believed_more_than_was_served_says_so() {
        let winner = result("llmd-precise", 1000, 1.0, [500, 500]);
        let mut believer = result("llmd-prefix", 800, 1.0, [600, 600]);
        believer.belief = Some(Belief {
            predicted_tokens: 1040,
            predicted_not_served_tokens: 240,
            served_not_predicted_tokens: 0,
        });
        assert_eq!(
            Loss::between(&believer, &winner, None),
            Loss::FewerServed {
                served: 800,
                winner_served: 1000,
                cause: ServedCause::Mispredicted {
                    tokens: 240,
                    served: 800,
                },
            }
        );
    }
}

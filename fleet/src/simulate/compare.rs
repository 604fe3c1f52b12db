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
//! Each policy below the winner gets one line saying why it loses, built from the figures the
//! two simulations measured: the measure it is furthest behind on, and the difference behind
//! it (tokens the session's previous replica held that another replica had to prefill, hits
//! its index predicted that the engines did not serve, evictions, the busiest replica's share).

use serde::Serialize;

use super::{CacheSize, Policy, SimulationResult, as_spelled};

/// One policy's place in a decision report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Ranked {
    /// 1 for the winner.
    pub rank: usize,
    #[serde(serialize_with = "as_spelled")]
    pub policy: Policy,
    pub served_tokens: u64,
    pub ttft_p99: f64,
    pub imbalance: f64,
    /// Its places on served tokens, TTFT p99 and imbalance (1: best; equals share one).
    pub places: [usize; 3],
    /// Why it loses against the winner, from the measured differences; `None` for the winner.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The policies simulated at one point of the sweep, best first.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Ranking {
    pub replicas: usize,
    #[serde(serialize_with = "as_spelled")]
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
                reason: (position > 0).then(|| {
                    let single = alone.iter().find(|single| single.policy == result.policy);
                    reason(result, group[winner], single.copied())
                }),
            }
        })
        .collect()
}

/// `part` of `whole` in percent, one decimal.
fn percent_of(part: u64, whole: u64) -> String {
    format!("{:.1} %", 100.0 * part as f64 / whole.max(1) as f64)
}

/// Why `loser` ranks below `winner`, in one line: the measure it is furthest behind on, then
/// what the simulation measured behind that; `alone`: the loser's policy with one router, when
/// it ran with several.
pub fn reason(
    loser: &SimulationResult,
    winner: &SimulationResult,
    alone: Option<&SimulationResult>,
) -> String {
    let served_gap = winner.served_tokens.saturating_sub(loser.served_tokens);
    // How far behind on each measure, relative to the winner's figure.
    let served_behind = served_gap as f64 / winner.served_tokens.max(1) as f64;
    let p99_behind = (loser.ttft.p99 - winner.ttft.p99) / winner.ttft.p99.max(1e-9);
    let imbalance_behind = (loser.imbalance - winner.imbalance) / winner.imbalance.max(1e-9);
    if served_behind > 0.0 && served_behind >= p99_behind && served_behind >= imbalance_behind {
        format!(
            "serves {} fewer tokens from cache ({} against {}): {}",
            percent_of(served_gap, winner.served_tokens),
            grouped(loser.served_tokens),
            grouped(winner.served_tokens),
            served_cause(loser, winner, alone, served_gap)
        )
    } else if p99_behind > 0.0 && p99_behind >= imbalance_behind {
        format!(
            "TTFT p99 {:.2} s against {:.2} s: {}",
            loser.ttft.p99,
            winner.ttft.p99,
            load_cause(loser, winner, alone)
        )
    } else if imbalance_behind > 0.0 {
        format!(
            "its busiest replica prefilled {:.2}× the mean against {:.2}×: {}",
            loser.imbalance,
            winner.imbalance,
            busiest_share(loser)
        )
    } else {
        "ties the winner on every measure; ranked by order simulated".to_owned()
    }
}

/// What the simulation measured behind serving `gap` fewer tokens: the largest of the tokens
/// its router replicas lost against one router, the tokens lost to locality (beyond the
/// winner's), the hits the router's index predicted and the engines did not serve; else the
/// evictions.
fn served_cause(
    loser: &SimulationResult,
    winner: &SimulationResult,
    alone: Option<&SimulationResult>,
    gap: u64,
) -> String {
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
        format!(
            "{} routers, each with its own index, serve {} fewer tokens than one ({} against {})",
            loser.routers,
            percent_of(split, alone.map_or(0, |alone| alone.served_tokens)),
            grouped(loser.served_tokens),
            grouped(alone.map_or(0, |alone| alone.served_tokens)),
        )
    } else if locality >= mispredicted && locality > 0 {
        format!(
            "it sent {} requests away from their session's previous replica (the winner: {}), \
             which held {} prompt tokens the new one had to prefill ({} of the gap)",
            grouped(loser.replica_changes),
            grouped(winner.replica_changes),
            grouped(locality),
            percent_of(locality.min(gap), gap)
        )
    } else if mispredicted > 0 {
        format!(
            "its index predicted {} more hits than the engines served ({} tokens predicted and not served)",
            percent_of(mispredicted, loser.served_tokens),
            grouped(mispredicted)
        )
    } else if loser.evicted_blocks > winner.evicted_blocks {
        format!(
            "its replicas evicted {} blocks against {} (the same prefixes cached on several replicas)",
            grouped(loser.evicted_blocks),
            grouped(winner.evicted_blocks)
        )
    } else {
        format!(
            "its replicas held fewer of the prefixes its requests reused (lost to locality {}, evicted {} blocks)",
            grouped(loser.lost_locality_tokens),
            grouped(loser.evicted_blocks)
        )
    }
}

/// What the simulation measured behind a longer TTFT tail: the busiest replica's prefill is
/// the imbalance times the mean, so of the two factors (prefill spread less evenly, more to
/// prefill — and why: [`served_cause`]) the larger one is named.
fn load_cause(
    loser: &SimulationResult,
    winner: &SimulationResult,
    alone: Option<&SimulationResult>,
) -> String {
    let spread = loser.imbalance / winner.imbalance.max(1e-9);
    let more = loser.computed_tokens as f64 / winner.computed_tokens.max(1) as f64;
    if spread > 1.0 && spread >= more {
        format!(
            "its busiest replica prefilled {:.2}× the mean against {:.2}× ({})",
            loser.imbalance,
            winner.imbalance,
            busiest_share(loser)
        )
    } else if more > 1.05 {
        let gap = loser.computed_tokens - winner.computed_tokens;
        format!(
            "it prefilled {} more prompt tokens ({} against {}): {}",
            percent_of(gap, winner.computed_tokens),
            grouped(loser.computed_tokens),
            grouped(winner.computed_tokens),
            served_cause(loser, winner, alone, gap)
        )
    } else {
        format!(
            "with {} more prefilled, spread {:.2}× the mean at most against {:.2}×, its requests \
             met longer queues in bursts (TTFT p95 {:.2} s against {:.2} s)",
            percent_of(
                loser.computed_tokens.saturating_sub(winner.computed_tokens),
                winner.computed_tokens
            ),
            loser.imbalance,
            winner.imbalance,
            loser.ttft.p95,
            winner.ttft.p95
        )
    }
}

/// The busiest replica's requests and prefilled tokens.
fn busiest_share(result: &SimulationResult) -> String {
    let total: u64 = result
        .per_replica
        .iter()
        .map(|load| load.computed_tokens)
        .sum();
    match result
        .per_replica
        .iter()
        .enumerate()
        .max_by_key(|(_, load)| load.computed_tokens)
    {
        Some((replica, load)) => format!(
            "replica {replica} took {} requests and {} of the tokens prefilled",
            grouped(load.requests),
            percent_of(load.computed_tokens, total)
        ),
        None => "no replica took a request".to_owned(),
    }
}

/// `number` with its thousands grouped: 4,958,720.
pub fn grouped(number: u64) -> String {
    let digits = number.to_string();
    let mut text = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            text.push(',');
        }
        text.push(digit);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
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
        assert_eq!(ranked[0].reason, None);
        assert_eq!(
            ranked[1].reason.as_deref(),
            Some(
                "serves 40.0 % fewer tokens from cache (600 against 1,000): it sent 8 requests \
                 away from their session's previous replica (the winner: 0), which held 300 \
                 prompt tokens the new one had to prefill (75.0 % of the gap)"
            )
        );
        assert_eq!(
            ranked[2].reason.as_deref(),
            Some(
                "TTFT p99 4.00 s against 1.00 s: its busiest replica prefilled 1.50× the mean \
                 against 1.00× (replica 1 took 5 requests and 75.0 % of the tokens prefilled)"
            )
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
            ranked[1].reason.as_deref(),
            Some(
                "serves 9.5 % fewer tokens from cache (860 against 950): 3 routers, each with \
                 its own index, serve 14.0 % fewer tokens than one (860 against 1,000)"
            )
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
        assert!(
            reason(&doubled, &winner, None)
                .starts_with("TTFT p99 2.00 s against 1.00 s: it prefilled 100.0 % more"),
            "{}",
            reason(&doubled, &winner, None)
        );
        // The same prefill spread unevenly: the spread.
        let lopsided = result("aibrix-prefix", 1000, 2.0, [100, 900]);
        assert!(
            reason(&lopsided, &winner, None)
                .starts_with("TTFT p99 2.00 s against 1.00 s: its busiest replica prefilled 1.80×"),
            "{}",
            reason(&lopsided, &winner, None)
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
            reason(&believer, &winner, None),
            "serves 20.0 % fewer tokens from cache (800 against 1,000): its index predicted \
             30.0 % more hits than the engines served (240 tokens predicted and not served)"
        );
    }
}

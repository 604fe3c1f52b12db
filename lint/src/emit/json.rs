//! The JSON report: a contract, versioned.

use kvlint_fleet::{Ranking, SimulationResult};
use kvlint_workload::words::loss_sentence;
use serde::Serialize;

use super::Output;

pub fn render(output: &Output<'_>) -> String {
    serde_json::to_string_pretty(output).unwrap_or_default() + "\n"
}

/// `kvlint simulate`'s JSON: its results, and with `--compare` the rankings beside them, each
/// loser's reason worded as the human report words it.
pub fn simulation(results: &[SimulationResult], rankings: Option<&[Ranking]>) -> String {
    let json = match rankings {
        Some(rankings) => serde_json::to_string_pretty(&serde_json::json!({
            "rankings": rankings.iter().map(RankingJson::of).collect::<Vec<_>>(),
            "results": results,
        })),
        None => serde_json::to_string_pretty(results),
    };
    json.unwrap_or_default() + "\n"
}

/// A point of the sweep's ranking, as the JSON report spells it.
#[derive(Serialize)]
struct RankingJson {
    replicas: usize,
    cache: String,
    routers: usize,
    ranked: Vec<RankedJson>,
}

#[derive(Serialize)]
struct RankedJson {
    rank: usize,
    policy: String,
    served_tokens: u64,
    ttft_p99: f64,
    imbalance: f64,
    places: [usize; 3],
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

impl RankingJson {
    fn of(ranking: &Ranking) -> Self {
        Self {
            replicas: ranking.replicas,
            cache: ranking.cache.to_string(),
            routers: ranking.routers,
            ranked: ranking
                .ranked
                .iter()
                .map(|ranked| RankedJson {
                    rank: ranked.rank,
                    policy: ranked.policy.to_string(),
                    served_tokens: ranked.served_tokens,
                    ttft_p99: ranked.ttft_p99,
                    imbalance: ranked.imbalance,
                    places: ranked.places,
                    reason: ranked.loss.as_ref().map(loss_sentence),
                })
                .collect(),
        }
    }
}

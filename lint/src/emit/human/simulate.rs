//! `kvlint simulate`'s human output: the decision report of `--compare`, a table of the runs,
//! the fleet's sections (late signals, replica speeds, bounds, router replicas) and a sweep's
//! hit rates.

use kvlint_fleet::{Along, KNEE_GAIN, Ranking, SimulationResult, SweepGrid, sweep_grid};
use kvlint_workload::words::loss_sentence;

/// The decision report (with `--compare`), then the runs.
pub fn render_simulation(results: &[SimulationResult], rankings: &[Ranking]) -> String {
    let mut text = decision_report(rankings);
    let prompt_tokens = results.first().map_or(0, |result| result.prompt_tokens);
    text.push_str(&human(results, prompt_tokens));
    text
}

/// `--compare`'s ranked table per point of the sweep, each loser's reason under it.
pub(super) fn decision_report(rankings: &[Ranking]) -> String {
    let mut text = String::new();
    for ranking in rankings {
        text.push_str(&format!(
            "decision report: {} replicas, cache {}, {} router{} (rank: the sum of the places on served tokens, TTFT p99 and imbalance)\n\n  {:>4}  {:<30} {:>16} {:>9} {:>9}  {:>8}\n",
            ranking.replicas,
            ranking.cache,
            ranking.routers,
            if ranking.routers == 1 { "" } else { "s" },
            "rank",
            "routing",
            "served",
            "TTFT p99",
            "imbalance",
            "places",
        ));
        for ranked in &ranking.ranked {
            let [served, p99, imbalance] = ranked.places;
            text.push_str(&format!(
                "  {:>4}  {:<30} {:>16} {:>8.3}s {:>9.2}  {served}/{p99}/{imbalance}\n",
                ranked.rank,
                ranked.policy.to_string(),
                ranked.served_tokens,
                ranked.ttft_p99,
                ranked.imbalance,
            ));
        }
        text.push('\n');
        for ranked in &ranking.ranked {
            if let Some(loss) = &ranked.loss {
                text.push_str(&format!(
                    "  {} loses: {}\n",
                    ranked.policy,
                    loss_sentence(loss)
                ));
            }
        }
        text.push('\n');
    }
    text
}

fn human(results: &[SimulationResult], prompt_tokens: u64) -> String {
    let mut text = format!(
        "{} prompt tokens; {}, arrivals {}\n\n  {:<30} {:>8} {:>16} {:>7} {:>14} {:>14} {:>10} {:>9} {:>9} {:>9} {:>9}\n",
        prompt_tokens,
        results
            .first()
            .map_or(String::new(), |result| result.engine.to_string()),
        results
            .first()
            .map_or(String::new(), |result| result.arrival.to_string()),
        "routing",
        "replicas",
        "cache",
        "hit",
        "computed",
        "lost locality",
        "evicted",
        "imbalance",
        "TTFT p50",
        "p95",
        "p99",
    );
    for result in results {
        text.push_str(&format!(
            "  {:<30} {:>8} {:>16} {:>6.1}% {:>14} {:>14} {:>10} {:>9.2} {:>8.3}s {:>8.3}s {:>8.3}s\n",
            result.routing_label(),
            result.replicas,
            result.cache.to_string(),
            100.0 * result.hit_rate,
            result.computed_tokens,
            result.lost_locality_tokens,
            result.evicted_blocks,
            result.imbalance,
            result.ttft.p50,
            result.ttft.p95,
            result.ttft.p99,
        ));
    }
    let mut beliefs = String::new();
    for result in results {
        if let Some(belief) = &result.belief {
            beliefs.push_str(&format!(
                "  {:<30} {:>8} {:>16} {:>14} {:>20} {:>20}\n",
                result.routing_label(),
                result.replicas,
                result.cache.to_string(),
                belief.predicted_tokens,
                belief.predicted_not_served_tokens,
                belief.served_not_predicted_tokens,
            ));
        }
    }
    if !beliefs.is_empty() {
        text.push_str(&format!(
            "\n  the router's belief against the engines' truth, in prompt tokens:\n  {:<30} {:>8} {:>16} {:>14} {:>20} {:>20}\n{beliefs}",
            "routing", "replicas", "cache", "predicted", "predicted not served", "served not predicted",
        ));
    }
    text.push_str(&fleet_sections(results));
    text
}

/// The bounds of each run, and what router replicas without shared state lose against one.
fn fleet_sections(results: &[SimulationResult]) -> String {
    let mut text = String::new();
    if let Some(first) = results.first()
        && (first.signal_delay > 0.0 || !first.replica_speed.is_empty())
    {
        text.push_str(&format!(
            "\n  signals {} ms late; replica speeds {}\n",
            first.signal_delay * 1000.0,
            if first.replica_speed.is_empty() {
                "all 1".to_owned()
            } else {
                first
                    .replica_speed
                    .iter()
                    .map(f64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        ));
    }
    let mut bounds = String::new();
    for result in results {
        if let Some(bound) = &result.bounds {
            bounds.push_str(&format!(
                "  {:<30} {:>8} {:>16} {:>14} {:>22} {:>22}\n",
                result.routing_label(),
                result.replicas,
                result.cache.to_string(),
                result.served_tokens,
                bound.infinite_served_tokens,
                bound
                    .belady_served_tokens
                    .map_or("not modelled".to_owned(), |tokens| tokens.to_string()),
            ));
        }
    }
    if !bounds.is_empty() {
        text.push_str(&format!(
            "\n  what no router and no eviction beats, in served prompt tokens (each run's requests in the order it served them):\n  {:<30} {:>8} {:>16} {:>14} {:>22} {:>22}\n{bounds}",
            "routing", "replicas", "cache", "served", "infinite shared cache", "Belady, replicas×cache",
        ));
    }
    let mut lost = String::new();
    for result in results.iter().filter(|result| result.routers > 1) {
        let one = results.iter().find(|one| {
            one.routers == 1
                && one.policy == result.policy
                && one.replicas == result.replicas
                && one.cache == result.cache
        });
        if let Some(one) = one {
            let loss = one.served_tokens as i64 - result.served_tokens as i64;
            lost.push_str(&format!(
                "  {:<30} {:>8} {:>16} {:>8} {:>14} {:>14} {:>8.1}%\n",
                result.policy.to_string(),
                result.replicas,
                result.cache.to_string(),
                result.routers,
                one.served_tokens,
                result.served_tokens,
                if one.served_tokens == 0 {
                    0.0
                } else {
                    // Rounded first, so a gain under 0.05 % reads 0.0 %, not -0.0 %.
                    (1000.0 * loss as f64 / one.served_tokens as f64).round() / 10.0 + 0.0
                },
            ));
        }
    }
    if !lost.is_empty() {
        text.push_str(&format!(
            "\n  router replicas without shared state against one router, in served prompt tokens:\n  {:<30} {:>8} {:>16} {:>8} {:>14} {:>14} {:>9}\n{lost}",
            "routing", "replicas", "cache", "routers", "one router", "served", "lost",
        ));
    }
    for along in [Along::Cache, Along::Replicas] {
        if let Some(grid) = sweep_grid(results, along) {
            text.push_str(&sweep_table(&grid, results));
        }
    }
    text
}

/// A sweep's hit rates, a row per policy and a column per point, the knee starred.
fn sweep_table(grid: &SweepGrid, results: &[SimulationResult]) -> String {
    let dimension = match grid.along {
        Along::Cache => "cache per replica",
        Along::Replicas => "replicas",
    };
    let mut text = format!(
        "\n  hit rate along the {dimension} (* the knee: the next point serves under {:.0} % more per doubling):\n  {:<44}",
        KNEE_GAIN * 100.0,
        "routing",
    );
    for column in &grid.columns {
        text.push_str(&format!(" {column:>14}"));
    }
    text.push('\n');
    for row in &grid.rows {
        text.push_str(&format!("  {:<44}", row.label));
        for (column, cell) in row.cells.iter().enumerate() {
            let star = if row.knee == Some(column) { "*" } else { " " };
            match cell {
                Some(index) => text.push_str(&format!(
                    " {:>12.1}%{star}",
                    100.0 * results[*index].hit_rate
                )),
                None => text.push_str(&format!(" {:>14}", "")),
            }
        }
        text.push('\n');
    }
    text
}

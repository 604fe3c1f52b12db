//! The sweep over cache sizes and replica counts as one grid per dimension, each policy's
//! hit rate at each point, with its knee: the point after which more capacity stops paying.
//!
//! **The knee.** Along one dimension (cache per replica, the replicas and the rest fixed; or
//! replicas, the cache and the rest fixed), in increasing order, the knee is the first point
//! whose next point serves less than [`KNEE_GAIN`] (5 %) more prompt tokens from cache per
//! doubling: `served(next) / served(point) − 1 < 5 % × max(1, log2(next / point))`. The step to
//! `unbounded` counts as one doubling: the whole rest of the gain must be under 5 %. A
//! dimension still climbing at its last point has no knee; a policy whose served tokens do not
//! move has its knee at the first point.

use std::collections::BTreeSet;

use super::{CacheSize, SimulationResult};

/// The least growth of served tokens per doubling for the sweep to go on past a point.
pub const KNEE_GAIN: f64 = 0.05;

/// Which dimension a grid sweeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Along {
    /// Cache per replica, the replicas fixed.
    Cache,
    /// Replicas, the cache per replica fixed.
    Replicas,
}

/// One row of a grid: the results of one policy (and the fixed point of the other dimension)
/// at each column, by index into the results; the knee's column.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepRow {
    pub label: String,
    pub cells: Vec<Option<usize>>,
    pub knee: Option<usize>,
}

/// A sweep along one dimension: its columns (cache sizes or replica counts, increasing) and a
/// row per policy and fixed point of the other dimension.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepGrid {
    pub along: Along,
    pub columns: Vec<String>,
    pub rows: Vec<SweepRow>,
}

/// Where a result sits along `along`: its cache (blocks or tokens, `unbounded` infinite) or
/// its replicas.
fn position(result: &SimulationResult, along: Along) -> Option<f64> {
    match along {
        Along::Replicas => Some(result.replicas as f64),
        Along::Cache => Some(match result.cache {
            CacheSize::Blocks(size) | CacheSize::Tokens(size) => size as f64,
            CacheSize::Unbounded => f64::INFINITY,
        }),
    }
}

/// The grid along `along`, when the results hold two or more points of it.
pub fn sweep_grid(results: &[SimulationResult], along: Along) -> Option<SweepGrid> {
    let mut columns: Vec<(f64, String)> = Vec::new();
    for result in results {
        let at = position(result, along)?;
        let name = column_name(result, along);
        if !columns.iter().any(|(_, known)| *known == name) {
            columns.push((at, name));
        }
    }
    if columns.len() < 2 {
        return None;
    }
    columns.sort_by(|left, right| left.0.total_cmp(&right.0));
    let mut rows: Vec<SweepRow> = Vec::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for result in results {
        let label = row_label(result, along);
        if !seen.insert(label.clone()) {
            continue;
        }
        let cells: Vec<Option<usize>> = columns
            .iter()
            .map(|(_, name)| {
                results.iter().position(|other| {
                    row_label(other, along) == label && column_name(other, along) == *name
                })
            })
            .collect();
        let knee = knee(&columns, &cells, results);
        rows.push(SweepRow { label, cells, knee });
    }
    Some(SweepGrid {
        along,
        columns: columns.into_iter().map(|(_, name)| name).collect(),
        rows,
    })
}

fn column_name(result: &SimulationResult, along: Along) -> String {
    match along {
        Along::Cache => result.cache.to_string(),
        Along::Replicas => result.replicas.to_string(),
    }
}

/// The policy and the point of the other dimension.
fn row_label(result: &SimulationResult, along: Along) -> String {
    match along {
        Along::Cache => format!("{} · {} replicas", result.routing_label(), result.replicas),
        Along::Replicas => format!("{} · {}", result.routing_label(), result.cache),
    }
}

/// The first column whose next one adds less than [`KNEE_GAIN`] per doubling.
fn knee(
    columns: &[(f64, String)],
    cells: &[Option<usize>],
    results: &[SimulationResult],
) -> Option<usize> {
    let points: Vec<(usize, f64, u64)> = cells
        .iter()
        .enumerate()
        .filter_map(|(column, cell)| {
            cell.map(|index| (column, columns[column].0, results[index].served_tokens))
        })
        .collect();
    points.windows(2).find_map(|pair| {
        let [(column, at, served), (_, next_at, next_served)] = [pair[0], pair[1]];
        let doublings = if next_at.is_finite() {
            (next_at / at).log2().max(1.0)
        } else {
            1.0
        };
        let gain = if served == 0 {
            if next_served == 0 { 0.0 } else { f64::INFINITY }
        } else {
            next_served as f64 / served as f64 - 1.0
        };
        (gain < KNEE_GAIN * doublings).then_some(column)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::tests::result_of;

    fn result(policy: &str, replicas: usize, cache: &str, served: u64) -> SimulationResult {
        // Spelled as results print it (`4000 blocks`), read as `--cache` reads it.
        let cache = cache.replace(' ', "").parse().unwrap();
        result_of(policy, replicas, cache, served, 10_000)
    }

    #[test]
    fn the_knee_is_the_first_point_whose_next_doubling_adds_under_five_percent() {
        // 1,000 → 2,000 blocks: +50 %; 2,000 → 4,000: +4.5 % (under 5 %): the knee is at
        // 2,000. 4,000 → 16,000 is two doublings: +9 % is under 10 %.
        let results = [
            result("round-robin", 2, "4000 blocks", 4_600),
            result("round-robin", 2, "1000 blocks", 2_933),
            result("round-robin", 2, "2000 blocks", 4_400),
            result("round-robin", 2, "16000 blocks", 5_014),
            // Still climbing by a quarter per doubling: no knee.
            result("ideal", 2, "1000 blocks", 1_000),
            result("ideal", 2, "2000 blocks", 1_250),
            result("ideal", 2, "4000 blocks", 1_600),
            result("ideal", 2, "16000 blocks", 2_600),
        ];
        let grid = sweep_grid(&results, Along::Cache).unwrap();
        assert_eq!(
            grid.columns,
            ["1000 blocks", "2000 blocks", "4000 blocks", "16000 blocks"]
        );
        assert_eq!(grid.rows[0].label, "round-robin · 2 replicas");
        assert_eq!(grid.rows[0].cells, [Some(1), Some(2), Some(0), Some(3)]);
        assert_eq!(grid.rows[0].knee, Some(1));
        assert_eq!(grid.rows[1].knee, None);
        // One replica count: no replica sweep.
        assert_eq!(sweep_grid(&results, Along::Replicas), None);
    }

    #[test]
    fn the_step_to_unbounded_counts_as_one_doubling_and_replicas_sweep_alike() {
        let results = [
            result("session-hash", 2, "500 blocks", 5_000),
            result("session-hash", 2, "unbounded", 5_200),
            result("session-hash", 4, "500 blocks", 7_000),
            result("session-hash", 4, "unbounded", 7_600),
        ];
        let caches = sweep_grid(&results, Along::Cache).unwrap();
        // +4 % to unbounded: the knee is at 500; +8.6 %: none.
        assert_eq!(caches.rows[0].knee, Some(0));
        assert_eq!(caches.rows[1].knee, None);
        let replicas = sweep_grid(&results, Along::Replicas).unwrap();
        assert_eq!(replicas.columns, ["2", "4"]);
        assert_eq!(replicas.rows[0].label, "session-hash · 500 blocks");
        // 2 → 4 replicas: +40 %, +46 %: no knee.
        assert_eq!(replicas.rows[0].knee, None);
        assert_eq!(replicas.rows[1].knee, None);
    }
}

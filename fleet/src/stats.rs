//! Distributions, not means: a workload's lengths and gaps as quantiles and a histogram.

use serde::Serialize;

/// A sample's quantiles, and its values binned for a plot.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Distribution {
    pub count: usize,
    pub min: f64,
    pub p10: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
    /// Upper bounds of the histogram's bins, and how many values fall in each (a value goes
    /// into the first bin whose bound is not below it).
    pub bins: Vec<(f64, usize)>,
    /// The cumulative distribution, for a plot: values in increasing order, each with the share
    /// of the sample at or below it: the quantiles at every half percent (nearest rank, so the
    /// percentiles above are among them), each distinct value once.
    #[serde(skip)]
    pub cdf: Vec<(f64, f64)>,
}

/// Bins of a histogram.
const BINS: usize = 20;

/// Quantile steps a cumulative distribution keeps: one value per half percent.
const CDF_STEPS: usize = 200;

impl Distribution {
    /// The distribution of `values` (no value is NaN).
    pub fn of(mut values: Vec<f64>) -> Self {
        values.retain(|value| value.is_finite());
        if values.is_empty() {
            return Self::default();
        }
        // In place: a stable sort would allocate half the values again (equal values are
        // the same bits, so the order is the same).
        values.sort_unstable_by(f64::total_cmp);
        let quantile = |q: f64| {
            // Nearest rank: the smallest value with at least q of the sample at or below it.
            let rank = (q * values.len() as f64).ceil() as usize;
            values[rank.clamp(1, values.len()) - 1]
        };
        let (min, max) = (values[0], values[values.len() - 1]);
        let width = (max - min) / BINS as f64;
        let bins = if width > 0.0 {
            let mut counts = vec![0usize; BINS];
            for value in &values {
                let bin = (((value - min) / width).ceil() as usize).clamp(1, BINS) - 1;
                counts[bin] += 1;
            }
            counts
                .into_iter()
                .enumerate()
                .map(|(bin, count)| (min + width * (bin + 1) as f64, count))
                .collect()
        } else {
            vec![(max, values.len())]
        };
        let mut cdf: Vec<(f64, f64)> = Vec::with_capacity(CDF_STEPS + 1);
        for step in 0..=CDF_STEPS {
            let value = quantile(step as f64 / CDF_STEPS as f64);
            if cdf.last().is_some_and(|(last, _)| *last == value) {
                continue;
            }
            let at_or_below = values.partition_point(|other| *other <= value);
            cdf.push((value, at_or_below as f64 / values.len() as f64));
        }
        Self {
            count: values.len(),
            min,
            p10: quantile(0.10),
            p50: quantile(0.50),
            p90: quantile(0.90),
            p95: quantile(0.95),
            p99: quantile(0.99),
            max,
            mean: values.iter().sum::<f64>() / values.len() as f64,
            bins,
            cdf,
        }
    }

    /// Coefficient of variation (standard deviation over mean): 1 for Poisson arrivals, more
    /// for bursts.
    pub fn variation(values: &[f64]) -> Option<f64> {
        if values.len() < 2 {
            return None;
        }
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        if mean <= 0.0 {
            return None;
        }
        let variance = values
            .iter()
            .map(|value| (value - mean).powi(2))
            .sum::<f64>()
            / values.len() as f64;
        Some(variance.sqrt() / mean)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank() {
        let distribution = Distribution::of((1..=100).map(f64::from).collect());
        assert_eq!(
            (
                distribution.p10,
                distribution.p50,
                distribution.p90,
                distribution.p99
            ),
            (10.0, 50.0, 90.0, 99.0)
        );
        assert_eq!(
            (distribution.min, distribution.max, distribution.mean),
            (1.0, 100.0, 50.5)
        );
        assert_eq!(distribution.bins.len(), BINS);
        assert_eq!(
            distribution
                .bins
                .iter()
                .map(|(_, count)| count)
                .sum::<usize>(),
            100
        );
        // 1..=100 in 20 bins of width 4.95: the first holds 1 to 5.95.
        assert_eq!(distribution.bins[0].1, 5);
    }

    #[test]
    fn the_cumulative_distribution_steps_at_each_distinct_value() {
        let distribution = Distribution::of(vec![3.0, 1.0, 1.0, 10.0]);
        assert_eq!(distribution.cdf, vec![(1.0, 0.5), (3.0, 0.75), (10.0, 1.0)]);
        let many = Distribution::of((1..=1000).map(f64::from).collect());
        assert_eq!(many.cdf.len(), CDF_STEPS + 1);
        for percentile in [many.p50, many.p90, many.p99] {
            assert!(many.cdf.iter().any(|(value, _)| *value == percentile));
        }
        assert_eq!(many.cdf.last(), Some(&(1000.0, 1.0)));
    }

    #[test]
    fn poisson_like_gaps_vary_by_about_one_and_bursts_more() {
        assert_eq!(Distribution::variation(&[2.0, 2.0, 2.0]), Some(0.0));
        let bursty = [0.1, 0.1, 0.1, 0.1, 10.0];
        assert!(Distribution::variation(&bursty).unwrap() > 1.5);
    }
}

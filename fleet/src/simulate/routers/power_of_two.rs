//! `power-of-two`: two distinct replicas drawn at random, the one with fewer requests in
//! flight wins, the first drawn on a tie — SGLang's router, `sgl-router/src/policies/
//! power_of_two.rs`, `PowerOfTwoPolicy::select_worker` (`choose_multiple(&mut rng, 2)`, then
//! `worker1.load() <= worker2.load()`). One replica: that one. The load is read when the
//! request arrives; the real router may read loads its background task cached (every
//! `load_check_interval_secs`, 5 s): late signals are not simulated here.

use rand::Rng;
use rand::rngs::SmallRng;

use super::{Choice, Route, View};

pub struct PowerOfTwo;

impl Route for PowerOfTwo {
    fn decide(&mut self, view: &View<'_>, rng: &mut SmallRng, _forced: Option<usize>) -> Choice {
        Choice::blind(two_choices(view, rng), two_choices_ties(view))
    }

    fn reads_load(&self) -> bool {
        true
    }
}

/// Of two distinct replicas drawn at random, the one with fewer requests in flight, the first
/// drawn on a tie.
pub fn two_choices(view: &View<'_>, rng: &mut SmallRng) -> usize {
    let count = view.replica_count();
    if count < 2 {
        return 0;
    }
    let first = rng.random_range(0..count);
    let mut second = rng.random_range(0..count - 1);
    if second >= first {
        second += 1;
    }
    let running = |replica: usize| view.signals[replica].running;
    if running(first) <= running(second) {
        first
    } else {
        second
    }
}

/// The replicas some draw of two lets win: every one but the single busiest.
pub fn two_choices_ties(view: &View<'_>) -> Vec<usize> {
    let running: Vec<u32> = view.signals.iter().map(|signals| signals.running).collect();
    (0..running.len())
        .filter(|replica| {
            running.len() < 2
                || (0..running.len())
                    .any(|other| other != *replica && running[other] >= running[*replica])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::Decision;
    use super::super::testing::{pick_under, rng};
    use super::*;

    #[test]
    fn the_less_busy_of_two_drawn_replicas_wins() {
        let mut router = PowerOfTwo;
        let mut rng = rng(7);
        // Two replicas: the pair is always both, the less busy one wins.
        for _ in 0..100 {
            let decision = pick_under(&mut router, &[], 10, &[3, 1], 0.0, &mut rng);
            assert_eq!(decision, Decision::blind(1));
        }
        // Three replicas with 0, 1 and 2 requests in flight: the busiest loses every pair, and
        // the idle one wins the two pairs of three it is drawn in.
        let mut wins = [0u32; 3];
        for _ in 0..3000 {
            wins[pick_under(&mut router, &[], 10, &[0, 1, 2], 0.0, &mut rng).replica] += 1;
        }
        assert_eq!(wins[2], 0, "{wins:?}");
        assert!((1850..=2150).contains(&wins[0]), "{wins:?}");
        // Equal loads: the first drawn, either one.
        let mut tied = [0u32; 2];
        for _ in 0..1000 {
            tied[pick_under(&mut router, &[], 10, &[2, 2], 0.0, &mut rng).replica] += 1;
        }
        assert!(tied[0] > 400 && tied[1] > 400, "{tied:?}");
        // One replica: that one.
        assert_eq!(
            pick_under(&mut router, &[], 10, &[9], 0.0, &mut rng).replica,
            0
        );
    }
}

//! `prefix-aware[:overload=SECONDS]`: the replica whose engine holds the longest prefix of
//! the prompt (ties: the least loaded), unless its prefill queue is over `overload` seconds:
//! then the least loaded (the escape hatch). It reads the engines' caches: its belief is the
//! truth.

use rand::rngs::SmallRng;

use super::{Branch, Choice, Decision, Route, View};

pub struct PrefixAware {
    pub overload: f64,
}

impl Route for PrefixAware {
    fn decide(&mut self, view: &View<'_>, _rng: &mut SmallRng, _forced: Option<usize>) -> Choice {
        let queued = |replica: usize| view.signals[replica].queued;
        let best = (0..view.replica_count())
            .max_by(|left, right| {
                view.engine_hit(*left)
                    .cmp(&view.engine_hit(*right))
                    .then(queued(*right).total_cmp(&queued(*left)))
            })
            .unwrap_or(0);
        let overloaded = queued(best) > self.overload;
        let replica = if overloaded {
            view.lowest(|signals| signals.queued)
        } else {
            best
        };
        // Without a hit, `best` is one of the least queued: the escape hatch overrode no match.
        let branch = match (view.engine_hit(best), overloaded) {
            (0, _) => Branch::Miss,
            (_, true) => Branch::Gate,
            (_, false) => Branch::Match,
        };
        Choice::alone(
            Decision {
                replica,
                predicted: Some(view.engine_hit(replica)),
            },
            branch,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::ReplicaSignals;
    use super::super::testing::{BLOCK, decide, prompt, rng};
    use super::*;
    use crate::simulate::{CacheSize, SimEngine};

    #[test]
    fn the_branch_is_the_engine_s_match_the_escape_hatch_or_the_miss() {
        let engine = SimEngine::Vllm { block: BLOCK };
        let mut warm = engine.cache(CacheSize::Unbounded);
        warm.serve(&prompt(&[1, 2, 3], 49));
        let caches = [warm, engine.cache(CacheSize::Unbounded)];
        let mut router = PrefixAware { overload: 1.0 };
        let mut route = |blocks: &[u64], queued: [f64; 2]| {
            let signals = queued.map(|queued| ReplicaSignals {
                queued,
                ..ReplicaSignals::default()
            });
            let choice = decide(
                &mut router,
                blocks,
                64,
                &signals,
                &caches,
                None,
                &mut rng(0),
            );
            (choice.decision.replica, choice.branch)
        };
        assert_eq!(route(&[1, 2, 3, 4], [0.0, 0.0]), (0, Branch::Match));
        // Replica 0's queue is over a second: the least queued.
        assert_eq!(route(&[1, 2, 3, 4], [2.0, 0.0]), (1, Branch::Gate));
        // No engine holds it: the least queued, no match overridden.
        assert_eq!(route(&[7, 8, 9, 10], [2.0, 0.0]), (1, Branch::Miss));
    }
}

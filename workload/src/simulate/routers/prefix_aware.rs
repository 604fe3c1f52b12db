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

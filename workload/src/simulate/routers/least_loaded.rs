//! `least-loaded` (and `ideal`, whose replicas share one cache): the replica with the least
//! prefill queued, the first of equals.

use rand::rngs::SmallRng;

use super::{Decision, Route, View};

pub struct LeastLoaded;

impl Route for LeastLoaded {
    fn pick(&mut self, view: &View<'_>, _rng: &mut SmallRng) -> Decision {
        Decision::blind(view.lowest(|signals| signals.queued))
    }
}

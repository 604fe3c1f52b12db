//! `least-loaded` (and `ideal`, whose replicas share one cache): the replica with the least
//! prefill queued, the first of equals.

use rand::rngs::SmallRng;

use super::{Choice, Route, View};

pub struct LeastLoaded;

impl Route for LeastLoaded {
    fn decide(&mut self, view: &View<'_>, _rng: &mut SmallRng, _forced: Option<usize>) -> Choice {
        let replica = view.lowest(|signals| signals.queued);
        Choice::blind(replica, vec![replica])
    }
}

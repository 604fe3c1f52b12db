//! `round-robin`: each replica in turn. Forced to a replica, the turn continues after it.

use rand::rngs::SmallRng;

use super::{Choice, Route, View};

#[derive(Default)]
pub struct RoundRobin {
    next: usize,
}

impl Route for RoundRobin {
    fn decide(&mut self, view: &View<'_>, _rng: &mut SmallRng, forced: Option<usize>) -> Choice {
        let chosen = self.next % view.replica_count();
        self.next = forced.unwrap_or(chosen) + 1;
        Choice::blind(chosen, vec![chosen])
    }
}

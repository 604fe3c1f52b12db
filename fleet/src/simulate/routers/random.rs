//! `random`: a replica drawn uniformly, from the run's seed.

use rand::Rng;
use rand::rngs::SmallRng;

use super::{Choice, Route, View};

pub struct Random;

impl Route for Random {
    /// Any replica could have been drawn: all are tied.
    fn decide(&mut self, view: &View<'_>, rng: &mut SmallRng, _forced: Option<usize>) -> Choice {
        Choice::blind(
            rng.random_range(0..view.replica_count()),
            (0..view.replica_count()).collect(),
        )
    }
}

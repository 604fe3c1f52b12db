//! `random`: a replica drawn uniformly, from the run's seed.

use rand::Rng;
use rand::rngs::SmallRng;

use super::{Decision, Route, View};

pub struct Random;

impl Route for Random {
    fn pick(&mut self, view: &View<'_>, rng: &mut SmallRng) -> Decision {
        Decision::blind(rng.random_range(0..view.replica_count()))
    }
}

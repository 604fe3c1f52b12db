//! `round-robin`: each replica in turn.

use rand::rngs::SmallRng;

use super::{Decision, Route, View};

#[derive(Default)]
pub struct RoundRobin {
    next: usize,
}

impl Route for RoundRobin {
    fn pick(&mut self, view: &View<'_>, _rng: &mut SmallRng) -> Decision {
        self.next += 1;
        Decision::blind((self.next - 1) % view.replica_count())
    }
}

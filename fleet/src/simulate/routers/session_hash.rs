//! `session-hash`: consistent hashing on the session's identity, as nginx's
//! `hash $key consistent` does (ketama, 160 points per replica).

use rand::rngs::SmallRng;

use super::{Choice, Route, View};

/// Virtual points per replica on the consistent-hash ring (nginx's ketama uses 160).
const RING_POINTS: u32 = 160;

fn hash64(bytes: &[u8]) -> u64 {
    let hash = blake3::hash(bytes);
    let mut first = [0u8; 8];
    first.copy_from_slice(&hash.as_bytes()[..8]);
    u64::from_le_bytes(first)
}

pub struct SessionHash {
    /// The ring: points and their replicas, sorted.
    ring: Vec<(u64, usize)>,
}

impl SessionHash {
    pub fn new(replica_count: usize) -> Self {
        let mut ring: Vec<(u64, usize)> = (0..replica_count)
            .flat_map(|replica| {
                (0..RING_POINTS).map(move |point| {
                    let key = format!("replica-{replica}-{point}");
                    (hash64(key.as_bytes()), replica)
                })
            })
            .collect();
        ring.sort_unstable();
        Self { ring }
    }
}

impl Route for SessionHash {
    fn decide(&mut self, view: &View<'_>, _rng: &mut SmallRng, _forced: Option<usize>) -> Choice {
        let key = hash64(view.session.as_bytes());
        let point = self.ring.partition_point(|(hash, _)| *hash < key);
        let replica = self.ring[point % self.ring.len()].1;
        Choice::blind(replica, vec![replica])
    }
}

use super::super::testing::{BLOCK, decide_under, pick, pick_under, prompt, rng, running};
use super::*;
use crate::simulate::Policy;

/// A router in front of two replicas whose tenant map iterates in replica order, so that
/// equal trees go to replica 0.
fn router(spec: &str) -> CacheAware {
    router_of(spec, 2)
}

/// A router in front of `replicas` whose orders are replica order.
fn router_of(spec: &str, replicas: usize) -> CacheAware {
    match spec.parse::<Policy>().unwrap() {
        Policy::SglangCacheAware(config) => CacheAware {
            hash_order: (0..replicas).collect(),
            ..CacheAware::new(config, replicas)
        },
        other => panic!("{other}"),
    }
}

#[test]
fn the_branch_is_the_load_gate_a_match_over_the_threshold_or_the_miss() {
    let mut router = router("sglang-cache-aware:abs=2,miss=tree");
    let mut rng = rng(0);
    let mut route = |blocks: &[u64], tokens, loads: &[u32]| {
        let choice = decide_under(&mut router, blocks, tokens, loads, None, &mut rng);
        (
            choice.decision.replica,
            choice.decision.predicted,
            choice.branch,
        )
    };
    // Empty trees, then replica 1's empty tree against replica 0's two blocks.
    assert_eq!(route(&[1, 2], 40, &[0, 0]), (0, Some(0), Branch::Miss));
    assert_eq!(route(&[9, 10, 11], 48, &[0, 0]), (1, Some(0), Branch::Miss));
    // 16 of 64 tokens matched on replica 0 (0.25): under the threshold, the smaller tree
    // (replica 0's two blocks against three) takes it, though its overlap was predicted.
    assert_eq!(
        route(&[1, 5, 6, 7], 64, &[0, 0]),
        (0, Some(16), Branch::Miss)
    );
    // 32 of 48 tokens (0.67): the match decides.
    assert_eq!(route(&[1, 2, 3], 48, &[0, 0]), (0, Some(32), Branch::Match));
    // 9 − 0 > 2 and 9 > 1.5 × 0: the least loaded, whatever the tree holds.
    assert_eq!(route(&[1, 2, 3], 48, &[9, 0]), (1, Some(0), Branch::Gate));
}

#[test]
fn equal_trees_fall_to_one_hash_order_per_router_drawn_from_the_seed() {
    let idle = running(&[0, 0]);
    let mut first_misses = [0u32; 2];
    for seed in 0..40 {
        let mut rng = rng(seed);
        let Policy::SglangCacheAware(config) = "sglang-cache-aware:miss=tree".parse().unwrap()
        else {
            unreachable!()
        };
        let mut router = CacheAware::new(config, 2);
        let mut route =
            |blocks: &[u64]| pick(&mut router, blocks, 20, &idle, &[], 0.0, &mut rng).replica;
        // Both trees empty: the first replica of this router's order.
        let first = route(&[9]);
        first_misses[first] += 1;
        // The other tree is smaller; then both hold one unit: the same first replica.
        assert_eq!(route(&[5]), 1 - first, "seed {seed}");
        assert_eq!(route(&[7]), first, "seed {seed}");
    }
    // From run to run, either replica (40 runs: both seen unless the order were fixed).
    assert!(
        first_misses[0] > 5 && first_misses[1] > 5,
        "{first_misses:?}"
    );
}

/// The choice of `router` for `blocks` (16 tokens each) under `loads`, its state updated
/// as if the request went to `forced`.
fn choose(router: &mut CacheAware, blocks: &[u64], loads: &[u32], forced: Option<usize>) -> Choice {
    let prompt = prompt(blocks, 16 * blocks.len() as u32);
    let view = View {
        prompt: &prompt,
        session: "s",
        caches: &[],
        signals: &running(loads),
        block_size: BLOCK,
        now: 0.0,
    };
    router.decide(&view, &mut rng(0), forced)
}

#[test]
fn a_miss_goes_to_the_least_loaded_first_in_the_worker_order_not_to_the_smallest_tree() {
    // sgl-model-gateway 0.3.2, `CacheAwarePolicy::select_worker`: under the threshold,
    // `healthy_indices.iter().min_by_key(|&&idx| workers[idx].load())`, the first minimum.
    let mut router = router("sglang-cache-aware");
    let replica = |choice: Choice| (choice.decision.replica, choice.ties, choice.branch);
    // Idle, empty trees: the first in the order (here replica 0), either as far as known.
    assert_eq!(
        replica(choose(&mut router, &[1, 2], &[0, 0], None)),
        (0, vec![0, 1], Branch::Miss)
    );
    // Another miss, idle: replica 0 again, though replica 1's tree is empty; the order is
    // known now, so replica 0 alone.
    assert_eq!(
        replica(choose(&mut router, &[9], &[0, 0], None)),
        (0, vec![0], Branch::Miss)
    );
    // A miss while replica 0 has a request in flight (1 − 0 is no imbalance): replica 1.
    assert_eq!(
        replica(choose(&mut router, &[7], &[1, 0], None)),
        (1, vec![1], Branch::Miss)
    );
    // A hit (32 of 48 tokens) stays on its replica whatever the loads under the gate.
    assert_eq!(
        replica(choose(&mut router, &[1, 2, 3], &[5, 0], None)),
        (0, vec![0], Branch::Match)
    );
    // The gate's least loaded falls in the same order: replicas 1 and 2 idle, 0 busy.
    let mut three = router_of("sglang-cache-aware:abs=2", 3);
    three.hash_order = vec![0, 2, 1];
    assert_eq!(
        replica(choose(&mut three, &[4], &[9, 0, 0], None)),
        (2, vec![1, 2], Branch::Gate)
    );
}

#[test]
fn a_forced_decision_between_equals_teaches_the_real_worker_order() {
    let mut router = router("sglang-cache-aware");
    // The model's order puts replica 0 first; the real router sent the miss to replica 1.
    let first = choose(&mut router, &[1, 2], &[0, 0], Some(1));
    assert_eq!((first.decision.replica, first.ties), (0, vec![0, 1]));
    // From then on the order is the router's: every idle miss to replica 1, exactly.
    for blocks in [&[9][..], &[7, 8]] {
        let next = choose(&mut router, blocks, &[0, 0], Some(1));
        assert_eq!((next.decision.replica, next.ties), (1, vec![1]));
    }
    // The tree learned the forced replica too: a hit on [1, 2] goes to replica 1.
    assert_eq!(
        choose(&mut router, &[1, 2, 3], &[0, 0], None)
            .decision
            .replica,
        1
    );
}

#[test]
fn idle_misses_all_fall_to_one_replica_per_router_drawn_from_the_seed() {
    let mut first_replicas = [0u32; 2];
    for seed in 0..40 {
        let Policy::SglangCacheAware(config) = "sglang-cache-aware".parse().unwrap() else {
            unreachable!()
        };
        let mut router = CacheAware::new(config, 2);
        let mut rng = rng(seed);
        let idle = running(&[0, 0]);
        let replicas: Vec<usize> = [&[1][..], &[2], &[3, 4], &[5]]
            .iter()
            .map(|blocks| pick(&mut router, blocks, 20, &idle, &[], 0.0, &mut rng).replica)
            .collect();
        assert!(
            replicas.iter().all(|replica| *replica == replicas[0]),
            "{replicas:?}"
        );
        first_replicas[replicas[0]] += 1;
    }
    assert!(
        first_replicas[0] > 5 && first_replicas[1] > 5,
        "{first_replicas:?}"
    );
}

#[test]
fn the_flavor_sets_sglang_router_s_or_vllm_router_s_defaults() {
    let config = |spec: &str| match spec.parse::<Policy>() {
        Ok(Policy::SglangCacheAware(config)) => Ok((config.evict, config.size, config.miss)),
        Ok(other) => panic!("{other}"),
        Err(error) => Err(error.to_string()),
    };
    use SglangMiss::{Load, Tree};
    assert_eq!(config("sglang-cache-aware"), Ok((60, 67_108_864, Load)));
    assert_eq!(
        config("sglang-cache-aware:flavor=sglang-router"),
        Ok((60, 67_108_864, Load))
    );
    assert_eq!(
        config("sglang-cache-aware:flavor=vllm-router"),
        Ok((120, 33_554_432, Tree))
    );
    assert_eq!(
        config("sglang-cache-aware:flavor=vllm-router,evict=60,miss=load"),
        Ok((60, 33_554_432, Load))
    );
    assert_eq!(
        config("sglang-cache-aware:miss=tree"),
        Ok((60, 67_108_864, Tree))
    );
    assert!(
        config("sglang-cache-aware:miss=random")
            .unwrap_err()
            .contains("`miss` is load or tree")
    );
    assert!(
        config("sglang-cache-aware:flavor=smg")
            .unwrap_err()
            .contains("smg-cache-aware")
    );
    for spec in [
        "sglang-cache-aware:flavor=vllm-router",
        "sglang-cache-aware:threshold=0.5,flavor=vllm-router",
        "sglang-cache-aware:size=33554432",
        "sglang-cache-aware:miss=tree",
        "sglang-cache-aware:miss=load,flavor=vllm-router",
    ] {
        assert_eq!(spec.parse::<Policy>().unwrap().to_string(), spec);
    }
}

#[test]
fn the_longest_match_over_the_threshold_else_the_smallest_tree() {
    let decisions = |spec: &str| {
        let mut router = router(spec);
        let mut rng = rng(0);
        let idle = running(&[0, 0]);
        [
            (&[1, 2][..], 40),
            (&[1, 2, 5], 50),
            (&[9], 20),
            (&[1, 7, 8], 70),
            (&[1, 7, 8, 6], 160),
        ]
        .map(|(blocks, tokens)| pick(&mut router, blocks, tokens, &idle, &[], 0.0, &mut rng))
    };
    let decision = |replica, predicted| Decision {
        replica,
        predicted: Some(predicted),
    };
    assert_eq!(
        decisions("sglang-cache-aware:miss=tree"),
        [
            // Empty trees: no match, the smallest tree (both empty: the first).
            decision(0, 0),
            // 32 of 50 tokens matched on replica 0: 0.64 > 0.3.
            decision(0, 32),
            // No match: the smaller tree, replica 1's (replica 0 holds three blocks).
            decision(1, 0),
            // 16 of 70 tokens matched on replica 0 (0.23): not enough, the smaller tree
            // (replica 1's one block against three), though replica 0 holds the prefix.
            decision(1, 0),
            // 48 of 160 tokens matched on replica 1 (exactly 0.3) is not over the
            // threshold: the smaller tree, replica 0's three blocks against four.
            decision(0, 16),
        ]
    );
    // Under a threshold of 0.2, the third block's match decides the last two.
    let lower = decisions("sglang-cache-aware:threshold=0.2,miss=tree");
    assert_eq!(lower[3], decision(0, 16));
    assert_eq!(lower[4].replica, 0);
}

fn warm(rng: &mut SmallRng) -> CacheAware {
    let mut router = router("sglang-cache-aware");
    pick_under(&mut router, &[1, 2], 40, &[0, 0], 0.0, rng);
    router
}

#[test]
fn an_imbalanced_fleet_goes_to_the_least_loaded_over_the_match() {
    let mut rng = rng(0);
    // Replica 0 holds the prompt; the loads decide.
    for (loads, expected) in [
        // 68 apart (> 64) and 70 > 1.5 × 2: imbalanced.
        ([70, 2], 1),
        // 64 apart: not over `abs`.
        ([66, 2], 0),
        // 90 apart but 300 ≤ 1.5 × 210: not over `rel`.
        ([300, 210], 0),
        // 110 apart and 300 > 1.5 × 190.
        ([300, 190], 1),
    ] {
        let decision = pick_under(&mut warm(&mut rng), &[1, 2], 40, &loads, 0.0, &mut rng);
        assert_eq!(decision.replica, expected, "{loads:?}");
    }
    // The knobs move the gate: abs=200 keeps [300, 190] on the match.
    let mut loose = router("sglang-cache-aware:abs=200");
    pick_under(&mut loose, &[1, 2], 40, &[0, 0], 0.0, &mut rng);
    let decision = pick_under(&mut loose, &[1, 2], 40, &[300, 190], 0.0, &mut rng);
    assert_eq!(decision.replica, 0);
    // The request the balance sent goes into the least loaded replica's tree.
    let mut router = warm(&mut rng);
    pick_under(&mut router, &[1, 2], 40, &[70, 2], 0.0, &mut rng);
    assert_eq!(router.tree.matched(1, &[1, 2]), 2);
}

#[test]
fn a_hit_goes_to_the_replica_whose_insert_created_the_deepest_matched_unit() {
    // 128 characters a tree: two 16-token units; evicted at 10 s.
    let mut router = router("sglang-cache-aware:evict=10,size=128,miss=tree");
    let mut rng = rng(0);
    let mut route = |blocks: &[u64], tokens, loads: &[u32], now| {
        pick_under(&mut router, blocks, tokens, loads, now, &mut rng)
    };
    // Both trees empty: replica 0 takes block 9.
    assert_eq!(route(&[9], 20, &[0, 0], 0.0).replica, 0);
    // No match: the smaller tree, replica 1's, whose insert creates units 1 and 2.
    assert_eq!(route(&[1, 2], 40, &[0, 0], 0.0).replica, 1);
    // 70 apart: the least loaded, replica 0, which now holds units 1 and 2 too.
    assert_eq!(route(&[1, 2], 40, &[0, 70], 0.0).replica, 0);
    // Both hold the 32 matched tokens of 50 (0.64): the creator, replica 1, not the
    // lowest-numbered holder.
    let hit = route(&[1, 2, 3], 50, &[0, 0], 0.0);
    assert_eq!(
        hit,
        Decision {
            replica: 1,
            predicted: Some(32)
        }
    );
    // A unit nobody holds is forgotten with its creator. Replica 0 takes 7, 8 (trees of
    // three units each: the first), replica 1 takes 5, 6 (the smaller tree); at 10 s each
    // keeps its two most recent units, and nobody holds 1 or 2.
    assert_eq!(route(&[7, 8], 40, &[0, 0], 0.0).replica, 0);
    assert_eq!(route(&[5, 6], 40, &[0, 0], 0.0).replica, 1);
    // Trees of two units each: replica 0 creates 1 and 2 anew; replica 1 gets them
    // through the gate; the hit goes to the new creator, replica 0.
    assert_eq!(route(&[1, 2], 40, &[0, 0], 10.0).replica, 0);
    assert_eq!(route(&[1, 2], 40, &[70, 0], 10.0).replica, 1);
    assert_eq!(
        route(&[1, 2, 4], 50, &[0, 0], 10.0),
        Decision {
            replica: 0,
            predicted: Some(32)
        }
    );
}

#[test]
fn a_creator_that_lost_the_match_hands_it_to_the_lowest_numbered_holder_for_good() {
    let mut rng = rng(0);
    // Four units a tree (size 256), evicted at 10 s.
    let mut router = router("sglang-cache-aware:evict=10,size=256,miss=tree");
    let mut route = |blocks: &[u64], tokens, loads: &[u32], now| {
        pick_under(&mut router, blocks, tokens, loads, now, &mut rng)
    };
    assert_eq!(route(&[9], 20, &[0, 0], 0.0).replica, 0);
    // Replica 1 creates units 1 and 2; replica 0 gets them through the load gate.
    assert_eq!(route(&[1, 2], 40, &[0, 0], 0.0).replica, 1);
    assert_eq!(route(&[1, 2], 40, &[0, 70], 0.0).replica, 0);
    // Replica 1 fills up with four newer units (through the gate), and at 10 s loses
    // 1 and 2, its least recently used; replica 0 (9, 1, 2) keeps them.
    assert_eq!(route(&[3, 4, 5, 6], 80, &[70, 0], 0.0).replica, 1);
    let fallback = route(&[1, 2, 7], 50, &[0, 0], 10.0);
    assert_eq!(
        fallback,
        Decision {
            replica: 0,
            predicted: Some(32)
        }
    );
    // Replica 1 gets 1 and 2 again through the gate, yet unit 2 now names replica 0.
    assert_eq!(route(&[1, 2], 40, &[70, 0], 10.0).replica, 1);
    assert_eq!(route(&[1, 2, 8], 50, &[0, 0], 10.0).replica, 0);
}

#[test]
fn the_tree_is_evicted_every_60_seconds_by_default() {
    let mut router = router("sglang-cache-aware:size=128");
    let mut rng = rng(0);
    let idle = running(&[0, 0]);
    pick(&mut router, &[1, 2, 3], 60, &idle, &[], 0.0, &mut rng);
    let before = pick(&mut router, &[1, 2, 3], 60, &idle, &[], 59.0, &mut rng);
    assert_eq!(before.predicted, Some(48));
    let after = pick(&mut router, &[1, 2, 3], 60, &idle, &[], 60.0, &mut rng);
    assert_eq!(after.predicted, Some(32));
}

#[test]
fn the_tree_forgets_its_least_recently_used_leaves_at_each_eviction() {
    // 128 characters a tree: two 16-token blocks of 4 characters a token.
    let mut router = router("sglang-cache-aware:evict=10,size=128");
    let mut rng = rng(0);
    let idle = running(&[0, 0]);
    pick(&mut router, &[1, 2, 3], 60, &idle, &[], 0.0, &mut rng);
    // Before the eviction the whole prompt is believed held.
    let before = pick(&mut router, &[1, 2, 3], 60, &idle, &[], 9.0, &mut rng);
    assert_eq!(
        before,
        Decision {
            replica: 0,
            predicted: Some(48)
        }
    );
    // At 10 s the leaf goes: two blocks of three are left.
    let after = pick(&mut router, &[1, 2, 3], 60, &idle, &[], 10.0, &mut rng);
    assert_eq!(
        after,
        Decision {
            replica: 0,
            predicted: Some(32)
        }
    );
}

use super::super::testing::{BLOCK, decide, pick, prompt, rng};
use super::super::{Branch, ReplicaSignals};
use super::*;
use crate::cache::ReplicaCache;
use crate::simulate::{CacheSize, Policy, SimEngine};

fn router(spec: &str) -> Scorers {
    match spec.parse::<Policy>().unwrap() {
        Policy::Llmd(config) => Scorers::new(config, 2),
        other => panic!("{other}"),
    }
}

/// `pick` at time 0 on two pods with `counts` requests waiting, no cache consulted.
fn pick_waiting(
    router: &mut Scorers,
    blocks: &[u64],
    tokens: u32,
    counts: [u32; 2],
    rng: &mut SmallRng,
) -> Decision {
    pick(router, blocks, tokens, &waiting(counts), &[], 0.0, rng)
}

fn waiting(counts: [u32; 2]) -> Vec<ReplicaSignals> {
    counts
        .iter()
        .map(|waiting| ReplicaSignals {
            waiting: *waiting,
            ..ReplicaSignals::default()
        })
        .collect()
}

/// 64-character blocks are 16 tokens: one block of the trace each.
#[test]
fn the_branch_is_the_match_when_the_chosen_pod_holds_the_longest_prefix() {
    let mut router = router("llmd-prefix:weights=1/2/2");
    let mut rng = rng(0);
    let mut route = |queued: [u32; 2], forced| {
        decide(
            &mut router,
            &[1, 2, 3, 4],
            64,
            &waiting(queued),
            &[],
            forced,
            &mut rng,
        )
    };
    // No pod holds any of it.
    assert_eq!(route([0, 0], Some(0)).branch, Branch::Miss);
    // Pod 0 holds it: 1 × 1 + 2 + 2 against 0 + 2 + 2.
    let matched = route([0, 0], None);
    assert_eq!(
        (matched.decision.replica, matched.branch),
        (0, Branch::Match)
    );
    // Pod 0's queue is the longest: 1 + 0 + 2 against 0 + 2 + 2, the queue outweighs it.
    let queued = route([1, 0], None);
    assert_eq!((queued.decision.replica, queued.branch), (1, Branch::Gate));
}

#[test]
fn prefix_queue_and_utilisation_scores_are_summed_by_weight() {
    let mut rng = rng(0);
    let outcome = |spec: &str, rng: &mut SmallRng| {
        let mut router = router(spec);
        // No prefix anywhere, replica 0 has a request waiting: queue scores 0 and 1.
        let first = pick_waiting(&mut router, &[1, 2, 3, 4], 64, [1, 0], rng);
        // Replica 1 holds the model's hash and blocks 1, 2 of the five hashes: 3 / 5.
        // Now it has the request waiting: 3 × 0.6 + 2 × 0 + 2 against 0 + 2 × 1 + 2.
        let second = pick_waiting(&mut router, &[1, 2, 9, 10], 64, [0, 1], rng);
        (first, second)
    };
    let (first, second) = outcome("llmd-prefix", &mut rng);
    assert_eq!(
        first,
        Decision {
            replica: 1,
            predicted: Some(0)
        }
    );
    assert_eq!(
        second,
        Decision {
            replica: 0,
            predicted: Some(0)
        }
    );
    // A prefix weight of 5: 5 × 0.6 + 2 = 5 against 4.
    let (_, second) = outcome("llmd-prefix:weights=5/2/2", &mut rng);
    assert_eq!(
        second,
        Decision {
            replica: 1,
            predicted: Some(32)
        }
    );
    // The KV-utilisation scorer: replica 1 holds 8 of 10 blocks for running requests.
    let used = |active: [u64; 2]| -> Vec<ReplicaSignals> {
        active
            .iter()
            .map(|active_blocks| ReplicaSignals {
                active_blocks: *active_blocks,
                capacity_blocks: Some(10),
                ..ReplicaSignals::default()
            })
            .collect()
    };
    let mut light = router("llmd-prefix:weights=1/2/2");
    pick_waiting(&mut light, &[1, 2], 32, [1, 0], &mut rng);
    // Replica 1 holds the whole prompt (1 × 1 + 2 + 2 × 0.2 = 3.4) against an empty
    // replica 0 (0 + 2 + 2 = 4).
    let decision = pick(&mut light, &[1, 2], 32, &used([0, 8]), &[], 0.0, &mut rng);
    assert_eq!(decision.replica, 0);
}

#[test]
fn the_lru_forgets_the_prompt_s_head_first_and_a_short_prompt_has_no_hashes() {
    let mut rng = rng(0);
    // Three entries: the model's hash and block 1 go, blocks 2..4 stay; nothing matches
    // from the head, so the router predicts nothing an engine would serve.
    let mut forgetful = router("llmd-prefix:lru=3");
    pick_waiting(&mut forgetful, &[1, 2, 3, 4], 64, [1, 0], &mut rng);
    assert!(forgetful.index.contains(1, 4) && !forgetful.index.contains(1, 1));
    let decision = pick_waiting(&mut forgetful, &[1, 2, 3, 4], 64, [0, 0], &mut rng);
    assert_eq!(decision.predicted, Some(0));
    // 256 hashed blocks at most: the 257th and later never match.
    let mut short = router("llmd-prefix:blocks=2");
    pick_waiting(&mut short, &[1, 2, 3, 4], 64, [1, 0], &mut rng);
    assert!(short.index.contains(1, 2) && !short.index.contains(1, 3));
    // Under 64 characters (16 tokens: no full block): no hashes, nothing learned.
    let mut tiny = router("llmd-prefix");
    pick_waiting(&mut tiny, &[], 10, [1, 0], &mut rng);
    assert!(!tiny.index.contains(1, MODEL_UNIT));
}

#[test]
fn the_precise_scorer_reads_the_engines_blocks() {
    let engine = SimEngine::Vllm { block: BLOCK };
    let mut warm = engine.cache(CacheSize::Unbounded);
    warm.serve(&prompt(&[1, 2, 3], 49));
    let caches: Vec<ReplicaCache> = vec![engine.cache(CacheSize::Unbounded), warm];
    let mut rng = rng(0);
    // In 16-token scorer blocks, without the no-hit LRU: replica 1's engine holds 3 of 4
    // blocks: 3 × 0.75 + 0 + 2 = 4.25 against 0 + 2 + 2.
    let decision = pick(
        &mut router("llmd-precise:block=16,nohit=0"),
        &[1, 2, 3, 4],
        64,
        &waiting([0, 1]),
        &caches,
        0.0,
        &mut rng,
    );
    assert_eq!(
        decision,
        Decision {
            replica: 1,
            predicted: Some(48)
        }
    );
}

/// Replica 1's engine holding the first `tokens` tokens of blocks 1, 2, … (16 a block);
/// replica 0's nothing.
fn holding(tokens: u32) -> Vec<ReplicaCache> {
    let engine = SimEngine::Vllm { block: BLOCK };
    let mut warm = engine.cache(CacheSize::Unbounded);
    let blocks: Vec<u64> = (1..=u64::from(tokens / BLOCK)).collect();
    warm.serve(&prompt(&blocks, tokens));
    vec![engine.cache(CacheSize::Unbounded), warm]
}

/// `kvblock_scorer.go` `LongestPrefixScorer::Score` over 64-token blocks, divided by the
/// request's full blocks (`absoluteScoredPods`).
#[test]
fn the_precise_score_is_the_held_run_of_full_scorer_blocks_over_the_request_s() {
    let precise = router("llmd-precise");
    let scores = |tokens: u32, held: u32| {
        let blocks: Vec<u64> = (1..=u64::from(tokens.div_ceil(BLOCK))).collect();
        let signals = waiting([0, 0]);
        let caches = holding(held);
        let (scores, held, _) = precise.prefix_scores(&View {
            prompt: &prompt(&blocks, tokens),
            session: "s",
            caches: &caches,
            signals: &signals,
            block_size: BLOCK,
            now: 0.0,
        });
        (scores, held)
    };
    // 100 tokens: one full 64-token block, held in 80 tokens: all of it.
    assert_eq!(scores(100, 80), (vec![0.0, 1.0], vec![0, 64]));
    // 200 tokens: three full blocks; 144 tokens held: two of them.
    assert_eq!(scores(200, 144), (vec![0.0, 2.0 / 3.0], vec![0, 128]));
    // 60 tokens: under one block, nothing to score though 48 tokens are held.
    assert_eq!(scores(60, 48), (vec![0.0, 0.0], vec![0, 0]));
}

/// `no_hit_lru.go`: a cold request ranks the pods that never took one first, then the
/// least recently given one; a warm request leaves the ranking as it was.
#[test]
fn cold_requests_go_round_the_pods_the_no_hit_lru_ranks() {
    let engine = SimEngine::Vllm { block: BLOCK };
    let mut warm = engine.cache(CacheSize::Unbounded);
    warm.serve(&prompt(&[1, 2, 3, 4, 5], 80));
    let caches = vec![
        warm,
        engine.cache(CacheSize::Unbounded),
        engine.cache(CacheSize::Unbounded),
    ];
    let idle: Vec<ReplicaSignals> = vec![ReplicaSignals::default(); 3];
    let Policy::Llmd(config) = "llmd-precise".parse().unwrap() else {
        unreachable!()
    };
    let mut router = Scorers::new(config, 3);
    let mut rng = rng(0);
    let mut route = |blocks: &[u64]| {
        let tokens = blocks.len() as u32 * BLOCK;
        pick(&mut router, blocks, tokens, &idle, &caches, 0.0, &mut rng).replica
    };
    // Nobody holds blocks 10…: cold, to the never-used pods in order.
    assert_eq!(route(&[10, 11, 12, 13]), 0);
    assert_eq!(route(&[20, 21, 22, 23]), 1);
    assert_eq!(route(&[30, 31, 32, 33]), 2);
    // Warm: replica 0's engine serves a 64-token block of the prompt; the no-hit LRU is
    // not touched.
    assert_eq!(route(&[1, 2, 3, 4, 5]), 0);
    // Cold again: the least recently given a cold request, replica 0, then 1.
    assert_eq!(route(&[40, 41, 42, 43]), 0);
    assert_eq!(route(&[50, 51, 52, 53]), 1);
}

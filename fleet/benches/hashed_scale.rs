//! The scale benchmark of `kvlint simulate` on a hashed trace read as it goes
//! ([`StreamedTrace`]): a generated Mooncake trace of `KVLINT_SCALE_REQUESTS` requests (by
//! default 400,000; the design target is 10,000,000, run by hand), simulated at each policy ×
//! capacity point: the fleet on one thread, the file read and parsed on another, a few
//! batches ahead (`StreamedTrace::replay`).
//!
//! The trace is shaped like Mooncake's published one: 512-token blocks, 200 system prompts
//! of 8 blocks, conversations arriving about once a second whose turns, 10 to 110 seconds
//! apart, each add 1 to 3 blocks up to 48, every prompt ending in a partial block of its own;
//! half the conversations carry a `session_id` (each a session in flight until its last
//! line), the other half are lines of their own, as in the published file.
//!
//! - **Time.** Each point is measured against a baseline replay of the same file on equal
//!   terms, run before each point: the trace read as it goes (on its reading thread too), each
//!   prompt's blocks looked up in one hash set and added to it (an unbounded cache that never
//!   evicts). The median of the
//!   replays is the yardstick; every point's ratio to it is gated (the slowest's), so the
//!   target holds on a slower or busier machine. The seconds a point took are reported beside
//!   it against the design target, two minutes a point at 10 million requests (reported, not
//!   gated).
//! - **Memory.** The peak bytes a point allocated beyond what was allocated before it, counted
//!   by a counting global allocator (`peak_alloc`), are reported against what the run must
//!   hold: the blocks its caches hold (the replicas' capacity, or every distinct block for
//!   `ideal`'s unbounded cache), the sessions in flight at most (from the replay), and 8 bytes
//!   a request for the TTFT percentiles, each at a generous size ([`BYTES_PER_BLOCK`],
//!   [`BYTES_PER_SESSION`], [`FIXED_BYTES`]). A run that held the trace (its requests, about
//!   25 blocks each) would need some 200 bytes a request more. The generic policies are gated
//!   on it; a named router also keeps an index of its own, bounded by its own settings
//!   (SGLang's tree by characters, llm-d's LRU by entries, …), which is reported, not gated.
//!
//! `KVLINT_SCALE_POLICIES` (a `--routing` list) keeps only those policies;
//! `KVLINT_SCALE_TRACE` names the file to write (and keep) instead of a temporary one.
#![allow(clippy::print_stdout, clippy::panic)]

use std::collections::{BinaryHeap, HashMap};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use kvlint_fleet::hashed_trace::StreamedTrace;
use kvlint_fleet::{
    Arrival, CacheSize, FleetOptions, Policies, Policy, Setup, SimEngine, simulate_streamed,
};
use peak_alloc::PeakAlloc;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rustc_hash::FxHashSet;

const BLOCK: u32 = 512;
const REPLICAS: usize = 8;
/// Blocks per replica at each point.
const CAPACITIES: [u64; 2] = [4_000, 40_000];
/// Every point may cost at most this many times the baseline replay of the same file.
const MAX_POINT_RATIO: f64 = 30.0;
/// Bytes a cached block may take in the caches and a router's index (an LRU node and a hash
/// table's entry each; measured 105 at 40,000 blocks a replica).
const BYTES_PER_BLOCK: usize = 256;
/// Bytes a session in flight may take: its blocks (at most 48) and its turns, twice.
const BYTES_PER_SESSION: usize = 4096;
/// What any run holds: the file's read buffer, the routers' and replicas' state.
const FIXED_BYTES: usize = 32 << 20;
const TARGET_SECONDS_AT_10M: f64 = 120.0;
/// Prompt tokens a replica prefills per second: the eight replicas keep up with the trace's
/// 20 requests a second of about 14,000 tokens even when nothing is cached, so that queues
/// stay short (an overloaded fleet's queues, and the load signals routers read from them,
/// grow without end).
const PREFILL_TPS: f64 = 40_000.0;

/// The system allocator, counting the bytes allocated now and at the most.
#[global_allocator]
static ALLOCATOR: PeakAlloc = PeakAlloc;

/// Writes the trace of `requests` requests to `path`.
fn generate(path: &Path, requests: usize) {
    let file = std::fs::File::create(path).unwrap_or_else(|error| panic!("{error}"));
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut rng = SmallRng::seed_from_u64(11);
    // Conversations by their next turn's time in ms: (Reverse(time), number).
    let mut due: BinaryHeap<(std::cmp::Reverse<u64>, usize)> = BinaryHeap::new();
    // Per conversation: its full blocks' ids, and whether it names its session.
    let mut conversations: Vec<(Vec<u64>, bool)> = Vec::new();
    let mut next_id = 10_000u64;
    let mut next_arrival = 0u64;
    for _ in 0..requests {
        let arrival_first = due
            .peek()
            .is_none_or(|(std::cmp::Reverse(time), _)| next_arrival <= *time);
        let (time, number) = if arrival_first {
            let system = rng.random_range(0..200u64);
            conversations.push(((system * 8..system * 8 + 8).collect(), rng.random_bool(0.5)));
            let arrived = next_arrival;
            next_arrival += (-rng.random::<f64>().max(1e-12).ln() * 1000.0) as u64;
            (arrived, conversations.len() - 1)
        } else {
            let Some((std::cmp::Reverse(time), number)) = due.pop() else {
                unreachable!()
            };
            (time, number)
        };
        let (full, named) = &mut conversations[number];
        for _ in 0..rng.random_range(1..=3) {
            full.push(next_id);
            next_id += 1;
        }
        let partial = rng.random_range(0..BLOCK);
        let mut ids = full.clone();
        if partial > 0 {
            ids.push(next_id);
            next_id += 1;
        }
        let session = if *named {
            format!("\"session_id\": \"conversation-{number}\", ")
        } else {
            String::new()
        };
        writeln!(
            out,
            "{{{session}\"timestamp\": {time}, \"input_length\": {}, \"output_length\": {}, \"hash_ids\": {ids:?}}}",
            full.len() as u32 * BLOCK + partial,
            rng.random_range(50..800),
        )
        .unwrap_or_else(|error| panic!("{error}"));
        if full.len() < 48 {
            due.push((
                std::cmp::Reverse(time + rng.random_range(10_000..110_000)),
                number,
            ));
        } else {
            full.clear();
            full.shrink_to_fit();
        }
    }
    out.flush().unwrap_or_else(|error| panic!("{error}"));
}

/// The baseline replay: each prompt's leading blocks looked up in one hash set, then added to
/// it. Returns the blocks found, the distinct blocks and the sessions in flight at most.
fn replay_baseline(trace: &StreamedTrace) -> (u64, usize, usize) {
    let mut cached: FxHashSet<u64> = FxHashSet::default();
    let mut sessions: HashMap<u32, Vec<u64>> = HashMap::new();
    let mut found = 0u64;
    let mut in_flight = 0;
    trace
        .replay(|streamed| {
            let mut blocks = sessions
                .remove(&streamed.request.session)
                .unwrap_or_default();
            blocks.truncate(streamed.request.kept_blocks as usize);
            blocks.extend_from_slice(streamed.new_blocks);
            found += blocks
                .iter()
                .take_while(|hash| cached.contains(*hash))
                .count() as u64;
            cached.extend(&blocks);
            if !streamed.last {
                sessions.insert(streamed.request.session, blocks);
                in_flight = in_flight.max(sessions.len());
            }
        })
        .unwrap_or_else(|error| panic!("{error:?}"));
    (found, cached.len(), in_flight)
}

fn main() {
    let requests: usize = std::env::var("KVLINT_SCALE_REQUESTS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(400_000);
    let kept = std::env::var_os("KVLINT_SCALE_TRACE");
    let path = kept.clone().map_or_else(
        || std::env::temp_dir().join(format!("kvlint-scale-{}.jsonl", std::process::id())),
        Into::into,
    );
    let started = Instant::now();
    if !path.exists() || kept.is_none() {
        generate(&path, requests);
    }
    let file_bytes = std::fs::metadata(&path)
        .unwrap_or_else(|error| panic!("{error}"))
        .len();
    let generated = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let trace = StreamedTrace::open(&path, None, None)
        .unwrap_or_else(|error| panic!("{error:?}"))
        .unwrap_or_else(|| panic!("the generated trace is not in time order"));
    println!(
        "hashed-scale: {} requests, {:.2} GB, generated in {generated:.1} s, looked over in {:.1} s",
        trace.requests,
        file_bytes as f64 / 1e9,
        started.elapsed().as_secs_f64(),
    );
    let policies: Vec<Policy> = match std::env::var("KVLINT_SCALE_POLICIES") {
        Ok(list) => {
            list.parse::<Policies>()
                .unwrap_or_else(|error| panic!("{error}"))
                .0
        }
        Err(_) => {
            let mut all = "round-robin,random,least-loaded,session-hash,prefix-aware,ideal"
                .parse::<Policies>()
                .unwrap_or_else(|error| panic!("{error}"))
                .0;
            all.extend(Policy::named());
            all
        }
    };
    let named = Policy::named();
    let mut replays = Vec::new();
    let mut worst: (f64, String) = (0.0, String::new());
    for policy in policies {
        for capacity in CAPACITIES {
            let started = Instant::now();
            let (found, distinct, in_flight) = std::hint::black_box(replay_baseline(&trace));
            replays.push(started.elapsed().as_secs_f64());
            let setup = Setup {
                replicas: REPLICAS,
                cache: CacheSize::Blocks(capacity),
                engine: SimEngine::Vllm { block: BLOCK },
                policy,
                arrival: Arrival::Recorded,
                prefill_tps: PREFILL_TPS,
                decode_tps: None,
                seed: 0,
                per_request: false,
                fleet: FleetOptions {
                    bounds: false,
                    ..FleetOptions::default()
                },
            };
            let before = ALLOCATOR.current_usage();
            ALLOCATOR.reset_peak_usage();
            let started = Instant::now();
            let result =
                simulate_streamed(&trace, &setup).unwrap_or_else(|error| panic!("{error:?}"));
            let seconds = started.elapsed().as_secs_f64();
            let peak = ALLOCATOR.peak_usage().saturating_sub(before);
            let mut sorted = replays.clone();
            sorted.sort_by(f64::total_cmp);
            let yardstick = sorted[sorted.len() / 2];
            let ratio = seconds / yardstick;
            let at_10m = seconds * 10_000_000.0 / trace.requests as f64;
            let cached_blocks = if policy == Policy::Ideal {
                distinct
            } else {
                distinct.min(REPLICAS * capacity as usize)
            };
            let budget = BYTES_PER_BLOCK * cached_blocks
                + BYTES_PER_SESSION * in_flight
                + 8 * trace.requests
                + FIXED_BYTES;
            println!(
                "hashed-scale: {policy} at {capacity} blocks × {REPLICAS}: {seconds:.1} s, {ratio:.1}× the replay \
                 (median {yardstick:.1} s; target < {MAX_POINT_RATIO}×), {at_10m:.0} s at 10 M (design target < {TARGET_SECONDS_AT_10M} s); \
                 peak {:.1} MB beyond the reader's (caches and sessions' budget {:.1} MB: {cached_blocks} blocks cached, {in_flight} sessions in flight at most); \
                 hit rate {:.1}% (an unbounded cache {:.1}%)",
                peak as f64 / 1e6,
                budget as f64 / 1e6,
                100.0 * result.hit_rate,
                100.0 * (found * u64::from(BLOCK)) as f64 / result.prompt_tokens as f64,
            );
            assert!(
                peak < budget || named.contains(&policy),
                "{policy} at {capacity} blocks held {peak} bytes, over the {budget} its caches and sessions in flight need"
            );
            if ratio > worst.0 {
                worst = (ratio, format!("{policy} at {capacity} blocks"));
            }
        }
    }
    println!(
        "hashed-scale: slowest point {}: {:.1}× the replay (target < {MAX_POINT_RATIO}×)",
        worst.1, worst.0
    );
    if kept.is_none() {
        std::fs::remove_file(&path).unwrap_or_else(|error| panic!("{error}"));
    }
    assert!(
        worst.0 < MAX_POINT_RATIO,
        "{} took {:.1}× the baseline replay",
        worst.1,
        worst.0
    );
}

//! The fleet benchmark: a generated workload of 100,000 agent sessions and 2,000,000 requests
//! (ten system prompts shared across sessions, twenty turns each) traced once, then simulated
//! at several routing × cache points.
//!
//! - The trace pass renders every turn with kvlint's renderer, which tokenizes only what a
//!   turn adds: it is compared with tokenizing only the turns' new messages (the bound the
//!   pass should stay near) on equal terms: both on one thread (a rayon pool of one, built
//!   here), on the same sessions, in interleaved rounds, the median round gated. The whole
//!   workload is then traced on every core; its prompt tokens per second and its speed-up
//!   over one thread are reported, not gated.
//! - The trace is written to disk and read back, as `kvlint simulate` does on a second run.
//! - Each simulation point (one thread) is measured against a baseline replay of the same
//!   trace on the same thread, run once before each point: the requests in arrival order,
//!   each prompt's blocks looked up in one hash set and added to it (an unbounded cache that
//!   never evicts). One replay varies by half from run to run (what the allocator holds after
//!   the point before), so the median of the replays is the yardstick. The points: the generic
//!   policies at 20,000 and 200,000 blocks, and every named router ([`Policy::named`]) with its
//!   defaults at 200,000 blocks (one capacity each, to keep the bench's time in CI). Every
//!   point's ratio to the yardstick is gated (the slowest's), so the target holds on a slower
//!   or busier machine; the seconds a point took are reported beside it (the design target,
//!   under a minute on a 2-core machine of the project's kind, is reported, not gated), with
//!   the peak bytes it allocated beyond what was allocated before it (the trace): its caches,
//!   the router's index and the queues, counted by a counting global allocator (`peak_alloc`).
//!
//! `KVLINT_FLEET_SESSIONS` makes the workload smaller (for a quick look);
//! `KVLINT_FLEET_POLICIES` (a `--routing` list) keeps only the points of those policies.
#![allow(clippy::print_stdout, clippy::panic)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kvlint_core::session::SessionFile;
use kvlint_fleet::{
    Arrival, CacheSize, Policies, Policy, Setup, SimEngine, Trace, arrival_order, simulate,
};
use kvlint_render::render::Renderer;
use kvlint_workload::{build_trace, workload_report};
use peak_alloc::PeakAlloc;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rayon::ThreadPoolBuilder;
use rayon::iter::{IntoParallelIterator, ParallelIterator};
use rustc_hash::FxHashSet;

const TURNS: usize = 20;
/// The trace pass on one thread may cost at most this many times tokenizing only each turn's
/// new messages on one thread (it also generates, parses and renders the sessions, and hashes
/// their blocks). A 2-core machine of the project's kind measured 2.3–2.6×, busy.
const MAX_TRACE_RATIO: f64 = 5.0;
const BATCH: usize = 2_000;
/// Every simulation point may cost at most this many times the baseline replay of the same
/// trace (the median of the replays), both on one thread. Round-robin over 8 caches of 200,000
/// blocks, where a session's blocks move to another replica every turn, measured 13.1× on a
/// busy 2-core machine of the project's kind and 14.4–15.4× on an idle one (32.5 s against a
/// median replay of 2.1 s; one replay ranged over 1.8–3.0 s in a run). On a loaded one (median
/// replay 3.0–3.6 s) the named routers measured 7–29× their own replay, the slowest
/// aibrix-prefix at 30.1× the median (108.9 s) and llm-d's approximate scorer at 29.5× before
/// its scorer stopped allocating per hash; the generic points 4–17×.
const MAX_POINT_RATIO: f64 = 35.0;
/// Rounds of the bound and the trace on one thread, alternating, each over the same sessions.
const ROUNDS: usize = 3;
const WORDS: &[&str] = &[
    "read", "the", "file", "test", "fails", "because", "parser", "returns", "error", "line",
    "column", "fixed", "patch", "applied", "run", "again", "passes", "now", "next", "module",
    "function", "call", "value", "missing", "config", "update", "commit", "branch", "review",
    "done",
];

fn sentence(rng: &mut SmallRng, words: usize) -> String {
    (0..words)
        .map(|_| WORDS[rng.random_range(0..WORDS.len())])
        .collect::<Vec<_>>()
        .join(" ")
}

/// One session: a system prompt of ten, then turns that each add a user message and the
/// answer before it. Returns its JSONL and the texts each turn adds.
fn session(index: usize, systems: &[String]) -> (String, Vec<String>) {
    let mut rng = SmallRng::seed_from_u64(index as u64);
    let system = &systems[index % systems.len()];
    let mut messages = vec![serde_json::json!({"role": "system", "content": system})];
    let mut lines = String::new();
    let mut added = vec![system.clone()];
    for turn in 0..TURNS {
        if turn > 0 {
            let answer = sentence(&mut rng, 30);
            added.push(answer.clone());
            messages.push(serde_json::json!({"role": "assistant", "content": answer}));
        }
        let question = format!("Session {index}, step {turn}: {}", sentence(&mut rng, 18));
        added.push(question.clone());
        messages.push(serde_json::json!({"role": "user", "content": question}));
        lines.push_str(&serde_json::json!({"model": "m", "messages": messages}).to_string());
        lines.push('\n');
    }
    (lines, added)
}

/// The baseline replay: every request in arrival order looks its prompt's leading blocks up in
/// one hash set, then adds its prompt's and generated blocks. Returns the blocks found.
fn replay_baseline(trace: &Trace) -> u64 {
    let mut cached: FxHashSet<u64> = FxHashSet::default();
    let mut session_blocks: HashMap<u32, Vec<u64>> = HashMap::new();
    let mut found = 0u64;
    for index in arrival_order(trace) {
        let blocks = session_blocks
            .entry(trace.requests[index].session)
            .or_default();
        trace.next_prompt_blocks(index, blocks);
        found += blocks
            .iter()
            .take_while(|hash| cached.contains(*hash))
            .count() as u64;
        cached.extend(blocks.iter().chain(trace.generated_blocks(index)));
    }
    found
}

/// The system allocator, counting the bytes allocated now and at the most.
#[global_allocator]
static ALLOCATOR: PeakAlloc = PeakAlloc;

fn main() {
    let sessions: usize = std::env::var("KVLINT_FLEET_SESSIONS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(100_000);
    let systems: Vec<String> = (0..10)
        .map(|variant| {
            let mut rng = SmallRng::seed_from_u64(1_000 + variant);
            format!(
                "You are coding agent {variant}. {}",
                sentence(&mut rng, 350)
            )
        })
        .collect();
    let renderer = Renderer::provider();
    let one_thread = ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap_or_else(|error| panic!("{error:?}"));

    // The bound: tokenizing only what each turn adds, nothing else.
    let bound = |sample: usize| {
        let started = Instant::now();
        let mut new_tokens = 0usize;
        for index in 0..sample {
            let (_, added) = session(index, &systems);
            for text in added {
                new_tokens += renderer.tokenizer().encode_uncached(&text).len();
            }
        }
        (started.elapsed(), new_tokens)
    };
    // The trace of the sessions in `range`, their generation and parsing included (on the
    // current pool's threads: one in the rounds below, every core in the whole pass).
    let trace_of = |range: std::ops::Range<usize>| {
        let files: Vec<SessionFile> = range
            .into_par_iter()
            .map(|index| {
                let (jsonl, _) = session(index, &systems);
                SessionFile::parse(format!("session-{index}.jsonl"), Arc::from(jsonl))
                    .unwrap_or_else(|error| panic!("{error:?}"))
            })
            .collect();
        build_trace(&files, &renderer, 16).unwrap_or_else(|error| panic!("{error:?}"))
    };
    // Equal terms: the bound and the trace pass on one thread, over the same sessions.
    let sample = sessions.min(BATCH);
    let mut new_tokens = 0;
    let mut rounds: Vec<(Duration, Duration)> = (0..ROUNDS)
        .map(|_| {
            one_thread.install(|| {
                let bound_time;
                (bound_time, new_tokens) = bound(sample);
                renderer.tokenizer().clear_cache();
                let started = Instant::now();
                std::hint::black_box(trace_of(0..sample));
                (bound_time, started.elapsed())
            })
        })
        .collect();
    let round_ratio =
        |(bound, traced): &(Duration, Duration)| traced.as_secs_f64() / bound.as_secs_f64();
    let every: Vec<String> = rounds
        .iter()
        .map(|round| format!("{:.2}×", round_ratio(round)))
        .collect();
    rounds.sort_by(|a, b| round_ratio(a).total_cmp(&round_ratio(b)));
    let (bound_time, one_thread_time) = rounds[ROUNDS / 2];
    let ratio = round_ratio(&rounds[ROUNDS / 2]);
    println!(
        "fleet: on one thread, {sample} sessions: traced in {:.2} s, their new messages tokenized in {:.2} s: {ratio:.2}× \
         (target < {MAX_TRACE_RATIO}×; {:.0} new tokens per session, generation and parsing included; rounds {})",
        one_thread_time.as_secs_f64(),
        bound_time.as_secs_f64(),
        new_tokens as f64 / sample as f64,
        every.join(" "),
    );
    assert!(
        ratio < MAX_TRACE_RATIO,
        "tracing cost {ratio:.2}× tokenizing only the new messages, both on one thread (target < {MAX_TRACE_RATIO}×)"
    );

    // The trace pass on every core, in batches (the sessions' files are generated as it goes).
    renderer.tokenizer().clear_cache();
    let started = Instant::now();
    let mut trace: Option<Trace> = None;
    for batch in (0..sessions).step_by(BATCH) {
        let traced = trace_of(batch..(batch + BATCH).min(sessions));
        match trace.as_mut() {
            Some(trace) => trace.append(traced),
            None => trace = Some(traced),
        }
    }
    let Some(trace) = trace else { return };
    let pass = started.elapsed().as_secs_f64();
    let prompt_tokens = trace.input_tokens();
    let speed_up = one_thread_time.as_secs_f64() / sample as f64 / (pass / sessions as f64);
    println!(
        "fleet: {} sessions, {} requests, {prompt_tokens} prompt tokens traced in {pass:.1} s on {} threads: {:.1} M prompt tokens/s, \
         {speed_up:.2}× one thread's speed per session (not gated)",
        trace.sessions.len(),
        trace.requests.len(),
        rayon::current_num_threads(),
        prompt_tokens as f64 / pass / 1e6,
    );
    let path = std::env::temp_dir().join(format!("kvlint-fleet-{}.trace", std::process::id()));
    let started = Instant::now();
    kvlint_workload::store::save(&trace, &path).unwrap_or_else(|error| panic!("{error:?}"));
    let saved = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let trace = kvlint_workload::store::load(&path).unwrap_or_else(|error| panic!("{error:?}"));
    let loaded = started.elapsed().as_secs_f64();
    let size = std::fs::metadata(&path).map_or(0, |meta| meta.len());
    std::fs::remove_file(&path).ok();
    println!(
        "fleet: trace file {:.0} MB, written in {saved:.1} s, read back in {loaded:.1} s ({:.0}× faster than tracing)",
        size as f64 / 1e6,
        pass / loaded.max(1e-9)
    );
    let report = workload_report(&trace);
    println!(
        "fleet: prefix-sharing rate {:.1}%, within sessions {:.1}%, across sessions {:.1}%",
        100.0 * report.reuse.prefix_sharing_rate,
        100.0 * report.reuse.within_session_tokens as f64 / prompt_tokens as f64,
        100.0 * report.reuse.cross_session_block_tokens as f64 / prompt_tokens as f64,
    );

    // The generic policies at two capacities, every named router at the larger one.
    let generic = [
        Policy::RoundRobin,
        Policy::SessionHash,
        Policy::PrefixAware { overload: 5.0 },
        Policy::Ideal,
    ];
    let mut grid: Vec<(Policy, CacheSize)> = Vec::new();
    for cache in [CacheSize::Blocks(20_000), CacheSize::Blocks(200_000)] {
        grid.extend(generic.iter().map(|policy| (*policy, cache)));
    }
    grid.extend(
        Policy::named()
            .into_iter()
            .map(|policy| (policy, CacheSize::Blocks(200_000))),
    );
    if let Ok(only) = std::env::var("KVLINT_FLEET_POLICIES") {
        let Policies(only) = only.parse().unwrap_or_else(|error| panic!("{error:?}"));
        grid.retain(|(policy, _)| only.contains(policy));
    }
    let mut points: Vec<(String, f64)> = Vec::new();
    let mut replays: Vec<f64> = Vec::new();
    let all_started = Instant::now();
    for (policy, cache) in grid {
        let setup = Setup {
            replicas: 8,
            cache,
            engine: SimEngine::Vllm { block: 16 },
            policy,
            arrival: Arrival::Closed { concurrency: 512 },
            prefill_tps: 50_000.0,
            decode_tps: Some(50.0),
            seed: 1,
            per_request: false,
            fleet: kvlint_fleet::FleetOptions::default(),
        };
        let started = Instant::now();
        std::hint::black_box(replay_baseline(&trace));
        let replay = started.elapsed().as_secs_f64();
        replays.push(replay);
        let allocated_before = ALLOCATOR.current_usage();
        ALLOCATOR.reset_peak_usage();
        let started = Instant::now();
        let result = simulate(&trace, &setup).unwrap_or_else(|error| panic!("{error:?}"));
        let seconds = started.elapsed().as_secs_f64();
        let peak = ALLOCATOR.peak_usage().saturating_sub(allocated_before);
        points.push((format!("{policy} × {cache}"), seconds));
        println!(
            "fleet: {policy} × {cache}: {seconds:.1} s, {:.1}× the baseline replay before it ({replay:.2} s), \
             peak {:.0} MB allocated beyond the trace; hit {:.1}%, lost to locality {}, evicted {}, TTFT p50 {:.3} s p99 {:.3} s",
            seconds / replay,
            peak as f64 / 1e6,
            100.0 * result.hit_rate,
            result.lost_locality_tokens,
            result.evicted_blocks,
            result.ttft.p50,
            result.ttft.p99,
        );
    }
    println!(
        "fleet: {} simulation points in {:.0} s, baseline replays included",
        points.len(),
        all_started.elapsed().as_secs_f64()
    );
    replays.sort_by(f64::total_cmp);
    let replay = replays[replays.len() / 2];
    let Some((slowest, seconds)) = points
        .into_iter()
        .max_by(|(_, left), (_, right)| left.total_cmp(right))
    else {
        return;
    };
    let ratio = seconds / replay;
    println!(
        "fleet: slowest point {slowest}: {ratio:.1}× the median baseline replay ({replay:.2} s; target < {MAX_POINT_RATIO}×), \
         {seconds:.1} s (design target < 60 s on a 2-core machine, not gated)"
    );
    assert!(
        ratio < MAX_POINT_RATIO,
        "the slowest simulation point, {slowest}, took {ratio:.1}× the median baseline replay (target < {MAX_POINT_RATIO}×)"
    );
}

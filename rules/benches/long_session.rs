//! A long agent session (200 turns growing to about 80k tokens), checked by kvlint's pipeline
//! (`check_session`) and by the baseline that renders and re-tokenizes every turn in full, one
//! after the other, in the same run. Reports the time per session, the ratio (targets: at
//! least 50× in provider mode, 30× in engine mode) and the peak memory the check allocates,
//! parsing included, against the session file's size (target: under 4×). The run fails when a
//! target is missed.
//!
//! `cargo bench -p kvlint-rules --bench long_session` (provider mode, embedded o200k_base);
//! with `KVLINT_BENCH_TOKENIZER=path/tokenizer.json` and `KVLINT_BENCH_TEMPLATE=path.jinja`
//! also engine mode.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::panic
)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::NaiveDateTime;
use kvlint_core::{ChatTemplate, EngineRequest, Renderer, SessionFile, Tokenizer};
use peak_alloc::PeakAlloc;

const TURNS: usize = 200;
const PROVIDER_TARGET_RATIO: f64 = 50.0;
const ENGINE_TARGET_RATIO: f64 = 30.0;
const TARGET_MEMORY_RATIO: f64 = 4.0;

/// The system allocator, counting the bytes allocated now and at the most.
#[global_allocator]
static ALLOCATOR: PeakAlloc = PeakAlloc;

/// Peak bytes allocated while `run` runs, above what was allocated before it.
fn peak_allocated(run: impl FnOnce()) -> usize {
    let before = ALLOCATOR.current_usage();
    ALLOCATOR.reset_peak_usage();
    run();
    ALLOCATOR.peak_usage().saturating_sub(before)
}

/// Rounds of the baseline run once, then kvlint's check a few times. This machine's speed
/// drifts by half over seconds (shared cores): each round's ratio compares runs made at the
/// same time, and the median round is reported, with every round's ratio.
const ROUNDS: usize = 5;
const CHECKS_PER_ROUND: usize = 5;

/// One round: the baseline's time, kvlint's best, and the reuse each found.
struct Round {
    baseline: Duration,
    kvlint: Duration,
    baseline_reused: usize,
    reused: usize,
}

impl Round {
    fn ratio(&self) -> f64 {
        self.baseline.as_secs_f64() / self.kvlint.as_secs_f64()
    }
}

fn timed(run: impl FnOnce() -> usize) -> (Duration, usize) {
    let start = Instant::now();
    let result = std::hint::black_box(run());
    (start.elapsed(), result)
}

fn measure(
    name: &str,
    jsonl: &str,
    session: &SessionFile,
    renderer: &Renderer,
    target_ratio: f64,
) -> bool {
    // Render every turn and tokenize its whole text, as a tool without the chunk cache.
    let baseline = || {
        let mut previous: Vec<u32> = Vec::new();
        let mut reused = 0;
        for turn in session.turns() {
            let turn = turn.unwrap();
            renderer.tokenizer().clear_cache();
            let ids = renderer.render(&turn.request).unwrap().tokens.ids();
            reused += kvlint_core::common_prefix_len(&previous, &ids);
            previous = ids;
        }
        reused
    };
    // Each check starts from an empty encoding cache; loading the tokenizer is not timed.
    let check = || {
        renderer.tokenizer().clear_cache();
        let checked = kvlint_rules::check_session(session, renderer, None).unwrap();
        checked.reused_tokens()
    };
    let mut rounds: Vec<Round> = (0..ROUNDS)
        .map(|_| {
            let (baseline, baseline_reused) = timed(baseline);
            let (kvlint, reused) = (0..CHECKS_PER_ROUND).map(|_| timed(check)).min().unwrap();
            Round {
                baseline,
                kvlint,
                baseline_reused,
                reused,
            }
        })
        .collect();
    rounds.sort_by(|a, b| a.ratio().total_cmp(&b.ratio()));
    let median = &rounds[ROUNDS / 2];
    let every: Vec<String> = rounds
        .iter()
        .map(|round| format!("{:.1}×", round.ratio()))
        .collect();
    println!("{name}: rounds {}", every.join(" "));
    renderer.tokenizer().clear_cache();
    let peak = peak_allocated(|| {
        let session = SessionFile::parse("long.jsonl".into(), Arc::from(jsonl)).unwrap();
        std::hint::black_box(kvlint_rules::check_session(&session, renderer, None).unwrap());
    });
    let memory_ratio = peak as f64 / jsonl.len() as f64;
    let last_turn_tokens = renderer
        .render(&session.turn(TURNS - 1).unwrap().request)
        .unwrap()
        .tokens
        .len();
    let ratio = median.ratio();
    println!(
        "{name}: {TURNS} turns, last turn {last_turn_tokens} tokens; kvlint {:.1} ms per session, full re-tokenization {:.1} ms: {ratio:.1}× (target ≥ {target_ratio}×); peak memory {:.1} MB for a {:.1} MB session file: {memory_ratio:.2}× (target < {TARGET_MEMORY_RATIO}×)",
        median.kvlint.as_secs_f64() * 1000.0,
        median.baseline.as_secs_f64() * 1000.0,
        peak as f64 / 1e6,
        jsonl.len() as f64 / 1e6,
    );
    assert_eq!(
        median.reused, median.baseline_reused,
        "{name}: both ways must find the same reuse"
    );
    ratio >= target_ratio && memory_ratio < TARGET_MEMORY_RATIO
}

fn main() {
    let jsonl = kvlint_fixtures::agent_session_jsonl(TURNS);
    let session = SessionFile::parse("long.jsonl".into(), Arc::from(jsonl.as_str())).unwrap();
    let mut met = measure(
        "provider:o200k_base",
        &jsonl,
        &session,
        &Renderer::provider(),
        PROVIDER_TARGET_RATIO,
    );
    if let (Some(tokenizer), Some(template)) = (
        std::env::var_os("KVLINT_BENCH_TOKENIZER").map(PathBuf::from),
        std::env::var_os("KVLINT_BENCH_TEMPLATE").map(PathBuf::from),
    ) {
        let now =
            NaiveDateTime::parse_from_str("2026-11-29T10:00:00", "%Y-%m-%dT%H:%M:%S").unwrap();
        let engine = Renderer::Engine {
            template: Box::new(ChatTemplate::from_file(&template, now).unwrap()),
            tokenizer: Tokenizer::from_file(&tokenizer).unwrap(),
            add_generation_prompt: true,
            request: EngineRequest::AsSent,
        };
        met &= measure("engine", &jsonl, &session, &engine, ENGINE_TARGET_RATIO);
    }
    if !met {
        println!("performance regression: a target missed");
        std::process::exit(1);
    }
}

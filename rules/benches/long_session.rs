//! A long agent session (200 turns growing to about 80k tokens), checked by kvlint's pipeline
//! (`check_session`) and by the baseline that renders and re-tokenizes every turn in full, one
//! after the other. The gated ratio compares like with like: kvlint on one thread (a rayon
//! pool of one, built here) against the baseline on that same thread, in interleaved rounds,
//! so neither the machine's core count nor what else runs on it moves the target (at least
//! 40× in provider mode, 15× in engine mode). Beside it, not gated: the parallel speed-up,
//! kvlint on every core (a rayon pool of the default size) against kvlint on one thread,
//! measured in the same rounds. Also the peak memory the check allocates on every core,
//! parsing included, against the session file's size (target: under 4×). The run fails when
//! a target is missed.
//!
//! Engine mode also prints, not gated, how close kvlint on one thread comes to the work it
//! cannot avoid, measured in the same rounds on the same thread: the chat template alone
//! rendering each turn's prompt once (from messages already in chat form), and the last
//! prompt, which holds every text of the session, encoded once whole.
//!
//! `cargo bench -p kvlint-rules --bench long_session` (provider mode, embedded o200k_base);
//! with `KVLINT_BENCH_TOKENIZER=path/tokenizer.json` and `KVLINT_BENCH_TEMPLATE=path.jinja`
//! also engine mode. `KVLINT_BENCH_PROFILE=provider` (or `engine`) runs only kvlint's check,
//! once, on one thread, and measures nothing: for a profiler (`valgrind --tool=callgrind`).
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
use kvlint_core::SessionFile;
use kvlint_render::ChatTemplate;
use kvlint_render::EngineRequest;
use kvlint_render::Renderer;
use kvlint_render::Tokenizer;
use kvlint_render::render::chat_view;
use peak_alloc::PeakAlloc;
use rayon::{ThreadPool, ThreadPoolBuilder};

const TURNS: usize = 200;
/// kvlint on one thread against the baseline on one thread. A fresh 2-core machine of the
/// project's kind measured 58× (provider) and 20× (engine) on one thread, idle; the targets
/// leave a quarter or more of that as margin.
const PROVIDER_TARGET_RATIO: f64 = 40.0;
const ENGINE_TARGET_RATIO: f64 = 15.0;
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

/// Rounds of the baseline run once, then kvlint's check on one thread and on every core,
/// alternating, a few times each. A shared machine's speed drifts by half over seconds: each
/// round's figures compare runs made at the same time, and the median round counts.
const ROUNDS: usize = 5;
const CHECKS_PER_ROUND: usize = 5;

/// One round: the baseline's time, the median of kvlint's checks on one thread and on every
/// core, and the reuse each found.
struct Round {
    baseline: Duration,
    one_thread: Duration,
    parallel: Duration,
    baseline_reused: usize,
    reused: usize,
    /// Engine mode: the work kvlint cannot avoid, on one thread.
    lower_bounds: Option<LowerBounds>,
}

/// The least an engine-mode check can do: render each turn's prompt once with the template
/// alone, and encode each text of the session once.
#[derive(Clone, Copy)]
struct LowerBounds {
    /// The template rendering every turn's messages, given in chat form (building them is
    /// not timed), and nothing else.
    render_each_turn_once: Duration,
    /// The last turn's prompt, which holds every earlier text, encoded once whole.
    encode_last_prompt_once: Duration,
}

impl LowerBounds {
    /// In the same rounds as kvlint's check, on the same thread.
    fn measure(session: &SessionFile, renderer: &Renderer) -> Option<Self> {
        let Renderer::Engine {
            template,
            tokenizer,
            add_generation_prompt,
            request: EngineRequest::AsSent,
        } = renderer
        else {
            return None;
        };
        let mut render_each_turn_once = Duration::ZERO;
        let mut last_prompt = String::new();
        for turn in session.turns() {
            let turn = turn.unwrap();
            let (messages, tools) = chat_view(&turn.request);
            let start = Instant::now();
            last_prompt = template
                .render(&messages, tools.as_deref(), *add_generation_prompt)
                .unwrap();
            render_each_turn_once += start.elapsed();
        }
        let (encode_last_prompt_once, _) = timed(|| tokenizer.encode_uncached(&last_prompt).len());
        Some(Self {
            render_each_turn_once,
            encode_last_prompt_once,
        })
    }

    fn both(&self) -> Duration {
        self.render_each_turn_once + self.encode_last_prompt_once
    }
}

impl Round {
    /// The gated figure: the baseline against kvlint, both on one thread.
    fn ratio(&self) -> f64 {
        self.baseline.as_secs_f64() / self.one_thread.as_secs_f64()
    }

    /// kvlint on one thread against kvlint on every core.
    fn speed_up(&self) -> f64 {
        self.one_thread.as_secs_f64() / self.parallel.as_secs_f64()
    }
}

fn timed(run: impl FnOnce() -> usize) -> (Duration, usize) {
    let start = Instant::now();
    let result = std::hint::black_box(run());
    (start.elapsed(), result)
}

fn median<T: Copy>(values: &mut [T], order: impl Fn(&T, &T) -> std::cmp::Ordering) -> T {
    values.sort_by(order);
    values[values.len() / 2]
}

fn milliseconds(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// kvlint's check of the whole session, from an empty encoding cache (loading the tokenizer
/// is not timed); the tokens it found reused.
fn check(session: &SessionFile, renderer: &Renderer) -> usize {
    renderer.tokenizer().clear_cache();
    let checked = kvlint_rules::check_session(session, renderer, None).unwrap();
    checked.reused_tokens()
}

/// Renders every turn and tokenizes its whole text, as a tool without the chunk cache; the
/// tokens each turn shares with the one before, summed.
fn baseline(session: &SessionFile, renderer: &Renderer) -> usize {
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
}

fn measure(
    name: &str,
    jsonl: &str,
    session: &SessionFile,
    renderer: &Renderer,
    one_thread: &ThreadPool,
    every_core: &ThreadPool,
    target_ratio: f64,
) -> bool {
    let mut rounds: Vec<Round> = (0..ROUNDS)
        .map(|_| {
            let (baseline, baseline_reused) =
                one_thread.install(|| timed(|| baseline(session, renderer)));
            let lower_bounds = one_thread.install(|| LowerBounds::measure(session, renderer));
            let (mut alone, mut parallel) = (Vec::new(), Vec::new());
            let mut reused = Vec::new();
            for _ in 0..CHECKS_PER_ROUND {
                let (time, found) = one_thread.install(|| timed(|| check(session, renderer)));
                alone.push(time);
                reused.push(found);
                let (time, found) = every_core.install(|| timed(|| check(session, renderer)));
                parallel.push(time);
                reused.push(found);
            }
            assert!(
                reused.iter().all(|found| *found == reused[0]),
                "{name}: one thread and every core must find the same reuse"
            );
            Round {
                baseline,
                one_thread: median(&mut alone, Ord::cmp),
                parallel: median(&mut parallel, Ord::cmp),
                baseline_reused,
                reused: reused[0],
                lower_bounds,
            }
        })
        .collect();
    let every = |figure: fn(&Round) -> f64| -> String {
        let figures: Vec<String> = rounds
            .iter()
            .map(|round| format!("{:.1}×", figure(round)))
            .collect();
        figures.join(" ")
    };
    println!(
        "{name}: rounds, one thread against the baseline: {}; every core against one thread: {}",
        every(Round::ratio),
        every(Round::speed_up),
    );
    let mut speed_ups: Vec<f64> = rounds.iter().map(Round::speed_up).collect();
    let speed_up = median(&mut speed_ups, f64::total_cmp);
    let mut parallel_times: Vec<Duration> = rounds.iter().map(|round| round.parallel).collect();
    let parallel = median(&mut parallel_times, Ord::cmp);
    rounds.sort_by(|a, b| a.ratio().total_cmp(&b.ratio()));
    let median_round = &rounds[ROUNDS / 2];
    let ratio = median_round.ratio();

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
    let threads = every_core.current_num_threads();
    println!(
        "{name}: {TURNS} turns, last turn {last_turn_tokens} tokens; on one thread kvlint {:.1} ms per session, full re-tokenization {:.1} ms: {ratio:.1}× (target ≥ {target_ratio}×); \
         on {threads} threads kvlint {:.1} ms, {speed_up:.2}× one thread (not gated); peak memory {:.1} MB for a {:.1} MB session file: {memory_ratio:.2}× (target < {TARGET_MEMORY_RATIO}×)",
        milliseconds(median_round.one_thread),
        milliseconds(median_round.baseline),
        milliseconds(parallel),
        peak as f64 / 1e6,
        jsonl.len() as f64 / 1e6,
    );
    if let Some(bounds) = median_round.lower_bounds {
        let times =
            |duration: Duration| median_round.one_thread.as_secs_f64() / duration.as_secs_f64();
        println!(
            "{name}: on one thread, the template alone rendering each turn once {:.1} ms and the last prompt encoded once {:.1} ms: \
             kvlint's {:.1} ms is {:.2}× rendering each turn once, {:.2}× both (not gated)",
            milliseconds(bounds.render_each_turn_once),
            milliseconds(bounds.encode_last_prompt_once),
            milliseconds(median_round.one_thread),
            times(bounds.render_each_turn_once),
            times(bounds.both()),
        );
    }
    assert_eq!(
        median_round.reused, median_round.baseline_reused,
        "{name}: both ways must find the same reuse"
    );
    ratio >= target_ratio && memory_ratio < TARGET_MEMORY_RATIO
}

fn engine_renderer() -> Option<Renderer> {
    let tokenizer = std::env::var_os("KVLINT_BENCH_TOKENIZER").map(PathBuf::from)?;
    let template = std::env::var_os("KVLINT_BENCH_TEMPLATE").map(PathBuf::from)?;
    let now = NaiveDateTime::parse_from_str("2026-11-29T10:00:00", "%Y-%m-%dT%H:%M:%S").unwrap();
    Some(Renderer::Engine {
        template: Box::new(ChatTemplate::from_file(&template, now).unwrap()),
        tokenizer: Tokenizer::from_file(&tokenizer).unwrap(),
        add_generation_prompt: true,
        request: EngineRequest::AsSent,
    })
}

fn main() {
    let jsonl = kvlint_fixtures::agent_session_jsonl(TURNS);
    let session = SessionFile::parse("long.jsonl".into(), Arc::from(jsonl.as_str())).unwrap();
    // Both pools' threads are fresh (not the main thread, whose heap holds the parse's), so
    // the speed-up compares threads with threads.
    let one_thread = ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let every_core = ThreadPoolBuilder::new().build().unwrap();
    if let Some(mode) = std::env::var_os("KVLINT_BENCH_PROFILE") {
        let renderer = match mode.to_str() {
            Some("provider") => Renderer::provider(),
            Some("engine") => engine_renderer()
                .expect("engine mode needs KVLINT_BENCH_TOKENIZER and KVLINT_BENCH_TEMPLATE"),
            _ => panic!("KVLINT_BENCH_PROFILE is `provider` or `engine`"),
        };
        let reused = one_thread.install(|| check(&session, &renderer));
        println!("{mode:?}: {reused} tokens reused");
        return;
    }
    let mut met = measure(
        "provider:o200k_base",
        &jsonl,
        &session,
        &Renderer::provider(),
        &one_thread,
        &every_core,
        PROVIDER_TARGET_RATIO,
    );
    if let Some(engine) = engine_renderer() {
        met &= measure(
            "engine",
            &jsonl,
            &session,
            &engine,
            &one_thread,
            &every_core,
            ENGINE_TARGET_RATIO,
        );
    }
    if !met {
        println!("performance regression: a target missed");
        std::process::exit(1);
    }
}

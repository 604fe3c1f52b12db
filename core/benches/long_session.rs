//! A long agent session (200 turns growing to about 64k tokens), analysed by kvlint and by
//! the baseline that re-tokenizes every turn in full, in the same run. Reports the time per
//! session and the ratio; the target is at least 20×.
//!
//! `cargo bench -p kvlint-core --bench long_session` (provider mode, embedded o200k_base);
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
use kvlint_core::analysis::SessionAnalysis;
use kvlint_core::render::Renderer;
use kvlint_core::session::SessionFile;
use kvlint_core::template::ChatTemplate;
use kvlint_core::tokenize::Tokenizer;
use serde_json::{Value, json};

const TURNS: usize = 200;
const TARGET_RATIO: f64 = 20.0;

/// Deterministic prose: a fixed vocabulary picked by a linear congruential generator.
struct Prose(u64);

impl Prose {
    fn words(&mut self, count: usize) -> String {
        const WORDS: &[&str] = &[
            "the",
            "parser",
            "returns",
            "an",
            "error",
            "when",
            "config",
            "file",
            "is",
            "missing",
            "we",
            "retry",
            "with",
            "backoff",
            "and",
            "log",
            "request_id",
            "tests",
            "pass",
            "after",
            "fix",
            "in",
            "src/lib.rs:42",
            "function",
            "handles",
            "unicode",
            "input",
            "é",
            "→",
            "0.25",
            "1024",
            "tokens",
            "cache",
            "prefix",
        ];
        let mut text = String::new();
        for index in 0..count {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            if index > 0 {
                text.push(if self.0.is_multiple_of(11) { '\n' } else { ' ' });
            }
            text.push_str(WORDS[(self.0 >> 33) as usize % WORDS.len()]);
        }
        text
    }
}

fn session_jsonl() -> String {
    let mut prose = Prose(7);
    let tools: Vec<Value> = (0..6)
        .map(|index| {
            json!({"type": "function", "function": {"name": format!("tool_{index}"), "description": prose.words(40),
                "parameters": {"type": "object", "properties": {"path": {"type": "string", "description": prose.words(12)}}}}})
        })
        .collect();
    let mut messages = vec![
        json!({"role": "system", "content": prose.words(1500)}),
        json!({"role": "user", "content": prose.words(60)}),
    ];
    let mut lines = Vec::with_capacity(TURNS);
    for turn in 0..TURNS {
        lines.push(json!({"model": "gpt-4o", "tools": tools, "messages": messages}).to_string());
        messages.push(json!({"role": "assistant", "content": prose.words(20), "tool_calls": [
            {"id": format!("call_{turn}"), "type": "function", "function": {"name": "tool_1", "arguments": format!("{{\"path\": \"src/{turn}.rs\"}}")}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": format!("call_{turn}"), "content": prose.words(220)}));
    }
    lines.join("\n")
}

/// The best of a few runs.
fn best_of(runs: usize, mut run: impl FnMut() -> usize) -> (Duration, usize) {
    let mut best = Duration::MAX;
    let mut result = 0;
    for _ in 0..runs {
        let start = Instant::now();
        result = std::hint::black_box(run());
        best = best.min(start.elapsed());
    }
    (best, result)
}

fn measure(name: &str, session: &SessionFile, renderer: &Renderer) -> bool {
    // Each run starts from an empty encoding cache; loading the tokenizer is not timed.
    let (kvlint_time, reused) = best_of(3, || {
        renderer.tokenizer().clear_cache();
        let analysis = SessionAnalysis::new(session, renderer).unwrap();
        analysis.reused_tokens()
    });
    let (baseline_time, baseline_reused) = best_of(3, || {
        // Render every turn and tokenize its whole text, as a tool without the chunk cache.
        let mut previous: Vec<u32> = Vec::new();
        let mut reused = 0;
        for turn in &session.turns {
            renderer.tokenizer().clear_cache();
            let ids = renderer.render(&turn.request).unwrap().tokens.ids();
            reused += previous
                .iter()
                .zip(&ids)
                .take_while(|(a, b)| a == b)
                .count();
            previous = ids;
        }
        reused
    });
    let last_turn_tokens = renderer
        .render(&session.turns[TURNS - 1].request)
        .unwrap()
        .tokens
        .len();
    let ratio = baseline_time.as_secs_f64() / kvlint_time.as_secs_f64();
    println!(
        "{name}: {TURNS} turns, last turn {last_turn_tokens} tokens; kvlint {:.1} ms per session, full re-tokenization {:.1} ms: {ratio:.1}× (target ≥ {TARGET_RATIO}×)",
        kvlint_time.as_secs_f64() * 1000.0,
        baseline_time.as_secs_f64() * 1000.0,
    );
    assert_eq!(
        reused, baseline_reused,
        "{name}: both ways must find the same reuse"
    );
    ratio >= TARGET_RATIO
}

fn main() {
    let session = SessionFile::parse("long.jsonl".into(), Arc::from(session_jsonl())).unwrap();
    let mut met = measure("provider:o200k_base", &session, &Renderer::provider());
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
        };
        met &= measure("engine", &session, &engine);
    }
    if !met {
        println!("performance target missed");
        std::process::exit(1);
    }
}

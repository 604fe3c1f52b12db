//! The memory a very long session takes to check, next to the time: a 1,500-turn session of
//! short messages (about 127 MB, every turn resending the whole conversation) and one request
//! of about 100 MB on a single line. Target for both: peak memory under 1 GB, file included
//! (a session's parsed turns are kept only up to a budget, the encoding cache is bounded).
//! Reports the peak resident set (`VmHWM`) and the peak of allocated bytes; fails when either
//! reaches the target.
//!
//! `cargo bench -p kvlint-rules --bench session_memory`
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::panic
)]

use std::fmt::Write as _;
use std::time::Instant;

use kvlint_core::SessionFile;
use kvlint_render::Renderer;
use peak_alloc::PeakAlloc;

const TARGET_BYTES: usize = 1 << 30;

#[global_allocator]
static ALLOCATOR: PeakAlloc = PeakAlloc;

/// Deterministic words, different from one call to the next.
struct Words(usize);

impl Words {
    fn take(&mut self, count: usize) -> String {
        const WORDS: &[&str] = &[
            "read",
            "the",
            "file",
            "then",
            "fix",
            "tests",
            "config",
            "retry",
            "parser",
            "cache",
            "error",
            "log",
            "and",
            "with",
            "é",
            "→",
            "42",
            "src/lib.rs",
        ];
        let mut text = String::new();
        for index in 0..count {
            self.0 = self.0.wrapping_mul(31).wrapping_add(17) % 1_000_003;
            if index > 0 {
                text.push(' ');
            }
            text.push_str(WORDS[self.0 % WORDS.len()]);
        }
        text
    }
}

/// A message as one line of JSON (the words need no escaping).
fn message(role: &str, content: &str) -> String {
    format!(r#"{{"role":"{role}","content":"{content}"}}"#)
}

/// `turns` requests, each resending every message of the one before and adding two.
fn many_turns(turns: usize) -> String {
    let mut words = Words(1);
    let mut messages = message("system", &words.take(200));
    let mut jsonl = String::new();
    for _ in 0..turns {
        messages.push(',');
        messages.push_str(&message("user", &words.take(4)));
        writeln!(jsonl, r#"{{"model":"gpt-4o","messages":[{messages}]}}"#).unwrap();
        messages.push(',');
        messages.push_str(&message("assistant", &words.take(5)));
    }
    jsonl
}

/// One request of `messages` messages of about 5 kB each, on one line.
fn single_line(messages: usize) -> String {
    let mut words = Words(2);
    let all: Vec<String> = (0..messages)
        .map(|index| message(["user", "assistant"][index % 2], &words.take(900)))
        .collect();
    format!(r#"{{"model":"gpt-4o","messages":[{}]}}"#, all.join(","))
}

/// The process's peak resident set since the last reset, from `/proc/self/status`.
fn peak_resident() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kilobytes: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kilobytes * 1024)
}

/// Starts counting the peak resident set from now (Linux: `clear_refs` 5).
fn reset_peak_resident() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Writes the session to a file, drops the text, then reads and checks it as `kvlint check`
/// does, measuring time and peaks. True when both peaks are under the target.
fn measure(name: &str, jsonl: String) -> bool {
    let path =
        std::env::temp_dir().join(format!("kvlint-bench-{}-{name}.jsonl", std::process::id()));
    std::fs::write(&path, &jsonl).unwrap();
    let file_bytes = jsonl.len();
    drop(jsonl);
    let renderer = Renderer::provider();
    reset_peak_resident();
    ALLOCATOR.reset_peak_usage();
    let start = Instant::now();
    let session = SessionFile::read(&path).unwrap();
    let checked = kvlint_rules::check_session(&session, &renderer, None).unwrap();
    let elapsed = start.elapsed();
    let allocated = ALLOCATOR.peak_usage();
    let resident = peak_resident();
    std::fs::remove_file(&path).unwrap();
    let megabytes = |bytes: usize| bytes as f64 / 1e6;
    println!(
        "{name}: {} turns, {:.1} MB file, {} prompt tokens; checked in {:.2} s; peak resident {}, peak allocated {:.0} MB (target < {:.0} MB); {} of {} turns kept parsed",
        checked.turns.len(),
        megabytes(file_bytes),
        checked.prompt_tokens(),
        elapsed.as_secs_f64(),
        resident.map_or("unknown".to_owned(), |bytes| format!(
            "{:.0} MB",
            megabytes(bytes)
        )),
        megabytes(allocated),
        megabytes(TARGET_BYTES),
        session.kept_turns(),
        session.len(),
    );
    allocated < TARGET_BYTES && resident.is_none_or(|bytes| bytes < TARGET_BYTES)
}

fn main() {
    let mut met = measure("1500-turns", many_turns(1500));
    met &= measure("single-line", single_line(21_000));
    if !met {
        println!("memory regression: a target missed");
        std::process::exit(1);
    }
}

//! `kvlint lsp` re-analysing a long session file after an edit near its end: a 200-turn agent
//! session (growing to about 80,000 tokens, 30 MB) is opened, then edited in its last turn
//! again and again; each edit is timed from the change sent to the diagnostics received,
//! through the real server over its pipes. The baseline, in the same run, is what reading
//! the file costs before any analysis: parsing its JSON lines. The target is a median
//! re-analysis under 100 ms.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::panic
)]

#[path = "../tests/lsp_client/mod.rs"]
mod lsp_client;

use std::time::{Duration, Instant};

use lsp_client::Server;
use serde_json::{Value, json};

const TURNS: usize = 200;
const EDITS: usize = 30;
const TARGET: Duration = Duration::from_millis(100);

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let text = kvlint_fixtures::agent_session_jsonl(TURNS);
    let folder = std::env::temp_dir().join(format!("kvlint-lsp-bench-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let path = folder.join("session.jsonl");
    std::fs::write(&path, &text).unwrap();
    let uri = format!("file://{}", path.display());

    let mut client = Server::start();
    let start = Instant::now();
    client.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": uri, "languageId": "jsonl", "version": 0, "text": text}}),
    );
    let opened = client.diagnostics(&uri, 0);
    let first = start.elapsed();
    assert!(
        opened.is_empty(),
        "the generated session has no break: {opened:?}"
    );

    // Each edit rewrites a word early in the last turn (the last line), so the last turn no
    // longer extends the one before: the analysis must find it.
    let last_line = text.rfind('\n').unwrap() + 1;
    let last_word = last_line + text[last_line..].find("prefix").unwrap();
    // As editors send them: the range replaced and its new text, positions in UTF-16 units.
    let line = text[..last_word].matches('\n').count();
    let character: usize = text[last_line..last_word]
        .chars()
        .map(char::len_utf16)
        .sum();
    let mut word = "prefix".to_owned();
    let mut edits = Vec::with_capacity(EDITS);
    for version in 1..=EDITS as i32 {
        let replaced = word.len();
        word = format!("prefix{version}");
        let start = Instant::now();
        client.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": uri, "version": version},
                   "contentChanges": [{
                       "range": {"start": {"line": line, "character": character},
                                 "end": {"line": line, "character": character + replaced}},
                       "text": word}]}),
        );
        let found = client.diagnostics(&uri, version);
        edits.push(start.elapsed());
        assert!(
            !found.is_empty(),
            "an edit of the last turn's history is a break"
        );
    }
    // A client that sends the whole text with every change (full document sync).
    let whole = format!(
        "{}{word}x{}",
        &text[..last_word],
        &text[last_word + "prefix".len()..]
    );
    let start = Instant::now();
    let version = EDITS as i32 + 1;
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": whole}]}),
    );
    assert!(!client.diagnostics(&uri, version).is_empty());
    let whole_text = start.elapsed();
    client.stop();

    let mut parses: Vec<Duration> = (0..5)
        .map(|_| {
            let start = Instant::now();
            for line in text.lines() {
                std::hint::black_box(serde_json::from_str::<Value>(line).unwrap());
            }
            start.elapsed()
        })
        .collect();
    let parse = median(&mut parses);
    let mut sorted = edits.clone();
    let edit = median(&mut sorted);
    let slowest = sorted.last().copied().unwrap_or_default();
    println!(
        "kvlint lsp, {TURNS}-turn session ({:.1} MB): opened in {first:.1?}; re-analysis after an edit near the end: median {edit:.1?}, slowest {slowest:.1?} ({EDITS} edits); parsing the file's JSON alone: {parse:.1?} (re-analysis {:.2}x that); an edit sent as the whole text: {whole_text:.1?}",
        text.len() as f64 / 1e6,
        edit.as_secs_f64() / parse.as_secs_f64()
    );
    std::fs::remove_dir_all(&folder).unwrap();
    assert!(
        edit < TARGET,
        "re-analysis takes {edit:.1?} at the median, over the {TARGET:?} target"
    );
}

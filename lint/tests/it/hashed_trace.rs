//! `kvlint workload --export-trace` and `--hashed-trace`: a workload written as a hashed trace
//! reads back with its block counts and its sharing, an independent reading of the exported
//! file gives the same infinite-cache figures, the published Mooncake sample reads as its
//! format defines it, `kvlint simulate` replays a hashed trace, and bad input is an input
//! error naming the file and the line.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::path::PathBuf;

use serde_json::Value;

use crate::common::kvlint;

fn scratch(name: &str) -> PathBuf {
    let folder = std::env::temp_dir().join(format!("kvlint-hashed-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    folder
}

const CORPUS: &str = "fixtures/corpus/sessions";
const MOONCAKE_SAMPLE: &str = "fixtures/hashed_traces/mooncake-conversation-head.jsonl";

fn workload_json(args: &[&str]) -> Value {
    let mut all = vec!["workload", "--format", "json", "--no-trace-cache"];
    all.extend_from_slice(args);
    let (code, stdout, stderr) = kvlint(&all);
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_str(&stdout).unwrap()
}

fn export(format: &str, output: &std::path::Path) {
    let (code, _, stderr) = kvlint(&[
        "workload",
        CORPUS,
        "--no-trace-cache",
        "--export-trace",
        format,
        "--block-size",
        "16",
        "--output",
        output.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{format}: {stderr}");
}

/// The exported file read by its format's definition alone, as a fleet tool's analyzer reads
/// it: per line, its ids must be `ceil(input_length / 16)`; a line's leading ids that earlier
/// lines sent are what an infinite shared cache serves. Returns the full blocks, the tokens
/// served and the prompt tokens; then the distinct full blocks' ids and the full blocks
/// served.
fn infinite_cache(jsonl: &str) -> ((u64, u64, u64), (u64, u64)) {
    let mut seen: HashSet<u64> = HashSet::new();
    let mut full_seen: HashSet<u64> = HashSet::new();
    let (mut full_blocks, mut served, mut prompt, mut served_blocks) = (0, 0, 0, 0);
    for line in jsonl.lines() {
        let line: Value = serde_json::from_str(line).unwrap();
        let input = line["input_length"].as_u64().unwrap();
        let ids: Vec<u64> = line["hash_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|id| id.as_u64().unwrap())
            .collect();
        assert_eq!(ids.len() as u64, input.div_ceil(16), "{line}");
        full_blocks += input / 16;
        let leading = ids.iter().take_while(|id| seen.contains(id)).count() as u64;
        // A partial block is never served: a leading run ends before it.
        served += leading.min(input / 16) * 16;
        prompt += input;
        // Only full blocks are cached: what a block count and its hits count.
        let full = &ids[..(input / 16) as usize];
        served_blocks += full.iter().take_while(|id| full_seen.contains(id)).count() as u64;
        full_seen.extend(full);
        seen.extend(ids);
    }
    (
        (full_blocks, served, prompt),
        (full_seen.len() as u64, served_blocks),
    )
}

#[test]
fn an_exported_trace_reads_back_as_the_workload() {
    let folder = scratch("round-trip");
    let original = workload_json(&[CORPUS, "--block", "16"]);
    let prompt_tokens = original["prompt_tokens"].as_u64().unwrap();
    let rate = original["reuse"]["prefix_sharing_rate"].as_f64().unwrap();

    // Mooncake: an independent reading gives the workload's infinite-cache sharing.
    let mooncake = folder.join("trace.jsonl");
    export("mooncake", &mooncake);
    let text = std::fs::read_to_string(&mooncake).unwrap();
    assert_eq!(
        text.lines().count() as u64,
        original["requests"].as_u64().unwrap()
    );
    let ((full_blocks, served, prompt), (distinct, served_blocks)) = infinite_cache(&text);
    assert_eq!(prompt, prompt_tokens);
    assert_eq!(served as f64 / prompt as f64, rate);
    assert!(full_blocks > 0 && served > 0, "the corpus shares prefixes");
    // The same in blocks, as a trace analyzer counts them.
    assert_eq!(original["prompt_blocks"], full_blocks);
    assert_eq!(original["distinct_blocks"], distinct);
    assert_eq!(
        original["block_hit_rate"].as_f64().unwrap(),
        served_blocks as f64 / full_blocks as f64
    );

    // Each format read back by kvlint: the same requests, tokens and sharing; the sessions
    // where the format keeps them (LMCache's log has no output lengths).
    for (format, sessions_kept) in [
        ("mooncake", false),
        ("mooncake-agentic", true),
        ("bailian", true),
        ("lmcache", false),
    ] {
        let path = folder.join(format!("{format}.jsonl"));
        export(format, &path);
        let read = workload_json(&[
            "--hashed-trace",
            path.to_str().unwrap(),
            "--hashed-block",
            "16",
        ]);
        assert_eq!(read["block_size"], 16, "{format}");
        assert_eq!(read["requests"], original["requests"], "{format}");
        assert_eq!(read["prompt_tokens"], original["prompt_tokens"], "{format}");
        if format != "lmcache" {
            assert_eq!(read["output_tokens"], original["output_tokens"], "{format}");
        }
        assert_eq!(
            read["reuse"]["prefix_sharing_rate"], original["reuse"]["prefix_sharing_rate"],
            "{format}"
        );
        if sessions_kept {
            assert_eq!(read["sessions"], original["sessions"], "{format}");
            assert_eq!(
                read["reuse"]["within_session_block_tokens"],
                original["reuse"]["within_session_block_tokens"],
                "{format}"
            );
            assert_eq!(
                read["turns_per_session"], original["turns_per_session"],
                "{format}"
            );
        }
    }

    // Claude Code conversations, one file each: sessions and their own sharing come back
    // (ids are numbered within a conversation, so sharing across them does not).
    let weka = folder.join("weka");
    export("weka", &weka);
    assert_eq!(
        std::fs::read_dir(&weka).unwrap().count() as u64,
        original["sessions"].as_u64().unwrap()
    );
    let read = workload_json(&["--hashed-trace", weka.to_str().unwrap()]);
    assert_eq!(read["block_size"], 16);
    assert_eq!(read["sessions"], original["sessions"]);
    assert_eq!(read["prompt_tokens"], original["prompt_tokens"]);
    assert_eq!(
        read["reuse"]["within_session_block_tokens"],
        original["reuse"]["within_session_block_tokens"]
    );
    std::fs::remove_dir_all(&folder).ok();
}

#[test]
fn the_published_mooncake_sample_reads_as_published() {
    let read = workload_json(&["--hashed-trace", MOONCAKE_SAMPLE]);
    // Six lines, each its own conversation, 512-token blocks. Their prompts: 6758 + 7322 +
    // 7236 + 2290 + 6760 + 4834 = 35200 tokens. All start with block 0; nothing else is
    // shared: lines 2 to 6 find their first 512 tokens cached, 2560 of 35200.
    assert_eq!(read["block_size"], 512);
    assert_eq!(read["requests"], 6);
    assert_eq!(read["sessions"], 6);
    assert_eq!(read["prompt_tokens"], 35200);
    assert_eq!(read["output_tokens"], 500 + 490 + 794 + 316 + 3 + 173);
    assert_eq!(
        read["reuse"]["prefix_sharing_rate"].as_f64().unwrap(),
        2560.0 / 35200.0
    );
    // In blocks, as a trace analyzer counts them: full blocks 13 + 14 + 14 + 4 + 13 + 9 = 67
    // (each line's last id is a partial block), 62 distinct (block 0 is every line's first);
    // an infinite shared cache serves lines 2 to 6 their block 0: 5 of 67.
    assert_eq!(read["prompt_blocks"], 67);
    assert_eq!(read["distinct_blocks"], 62);
    assert_eq!(read["block_hit_rate"].as_f64().unwrap(), 5.0 / 67.0);
    // Named, not told: the same.
    let named = workload_json(&[
        "--hashed-trace",
        MOONCAKE_SAMPLE,
        "--hashed-format",
        "mooncake",
    ]);
    assert_eq!(named, read);
    // Blocks of 1024 tokens are derived from those of 512; blocks of 16 cannot be.
    let coarse = workload_json(&["--hashed-trace", MOONCAKE_SAMPLE, "--block", "1024"]);
    assert_eq!(coarse["reuse"]["prefix_sharing_rate"], 0.0);
    let (code, _, stderr) = kvlint(&[
        "simulate",
        "--hashed-trace",
        MOONCAKE_SAMPLE,
        "--cache",
        "unbounded",
        "--prefill-tps",
        "1000",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("blocks of 16 tokens cannot be derived from a trace of 512-token blocks"),
        "{stderr}"
    );
}

#[test]
fn simulate_replays_a_hashed_trace() {
    let folder = scratch("simulate");
    let trace = folder.join("two.jsonl");
    // Ten seconds apart: the second prompt's first two blocks (1024 of its 1536 tokens) are
    // the first prompt whole, cached by then on the one replica.
    std::fs::write(
        &trace,
        "{\"timestamp\": 0, \"input_length\": 1024, \"output_length\": 8, \"hash_ids\": [0, 1]}\n\
         {\"timestamp\": 10000, \"input_length\": 1536, \"output_length\": 8, \"hash_ids\": [0, 1, 2]}\n",
    )
    .unwrap();
    let (code, stdout, stderr) = kvlint(&[
        "simulate",
        "--hashed-trace",
        trace.to_str().unwrap(),
        "--engine",
        "vllm:block=512",
        "--cache",
        "unbounded",
        "--replicas",
        "1",
        "--routing",
        "round-robin",
        "--arrival",
        "recorded",
        "--prefill-tps",
        "1000",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let results: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    assert_eq!(results[0]["prompt_tokens"], 1024 + 1536);
    assert_eq!(results[0]["served_tokens"], 1024);
    std::fs::remove_dir_all(&folder).ok();
}

#[test]
fn simulate_reads_a_trace_in_time_order_as_it_goes_with_the_same_figures() {
    let run = |extra: &[&str]| {
        let mut args = vec![
            "simulate",
            "--hashed-trace",
            MOONCAKE_SAMPLE,
            "--engine",
            "vllm:block=512",
            "--cache",
            "8,unbounded",
            "--replicas",
            "2",
            "--routing",
            "round-robin,session-hash,prefix-aware,sglang-cache-aware,llmd-prefix",
            "--arrival",
            "recorded",
            "--prefill-tps",
            "1000",
            "--format",
            "json",
        ];
        args.extend(extra);
        let (code, stdout, stderr) = kvlint(&args);
        assert_eq!(code, 0, "{stderr}");
        let mut results: Vec<Value> = serde_json::from_str(&stdout).unwrap();
        for result in &mut results {
            result.as_object_mut().unwrap().remove("bounds");
        }
        (results, stderr)
    };
    let (streamed, said) = run(&["--no-bounds"]);
    assert!(
        said.contains(
            "mooncake-conversation-head.jsonl: 6 requests in time order, read as they go"
        ),
        "{said}"
    );
    // With the bounds the trace is read whole: the same figures.
    let (whole, said) = run(&[]);
    assert!(!said.contains("read as they go"), "{said}");
    assert_eq!(streamed, whole);
    assert_eq!(streamed.len(), 10);
    assert!(
        streamed
            .iter()
            .any(|result| result["served_tokens"].as_u64() > Some(0))
    );
}

#[test]
fn a_malformed_line_is_an_input_error_naming_the_file_and_the_line() {
    let folder = scratch("bad");
    let trace = folder.join("bad.jsonl");
    std::fs::write(
        &trace,
        "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [0]}\n\
         {\"timestamp\": 5, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [0, \"x\"]}\n",
    )
    .unwrap();
    // `simulate` reads it whole, then as it goes (a trace in time order, at its recorded
    // times, without the bounds).
    for (command, streamed) in [("workload", false), ("simulate", false), ("simulate", true)] {
        let mut args = vec![command, "--hashed-trace", trace.to_str().unwrap()];
        if command == "simulate" {
            args.extend(["--cache", "10", "--prefill-tps", "1000"]);
        }
        if streamed {
            args.extend([
                "--engine",
                "vllm:block=512",
                "--arrival",
                "recorded",
                "--no-bounds",
            ]);
        }
        let (code, _, stderr) = kvlint(&args);
        assert_eq!(code, 2, "{command}: {stderr}");
        assert!(stderr.contains("bad.jsonl:2"), "{command}: {stderr}");
        assert!(
            stderr.contains("`hash_ids` holds \"x\""),
            "{command}: {stderr}"
        );
    }
    std::fs::remove_dir_all(&folder).ok();
}

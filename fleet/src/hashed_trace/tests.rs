//! The forms checked field by field against a trace small enough to work out by hand from
//! the formats' definitions (the expected lines below were written from them, not printed).
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;

use super::*;
use crate::TraceSession;

/// Blocks of 4 tokens. Session A sends 10 tokens (blocks a1 a2, 2 more) at 100 s, then 13
/// (a1, then b2 b3, 1 more) at 102.5 s, sharing its first 6 tokens with the first; session
/// B sends 8 tokens (a1 a2, the same prefix as A's first) at 101 s.
fn tiny() -> Trace {
    let (a1, a2, b2, b3) = (11, 12, 22, 23);
    let request =
        |session, time, input, output, shared, kept, new: std::ops::Range<u32>| TraceRequest {
            session,
            time: Some(time),
            input_tokens: input,
            output_tokens: output,
            shared_with_previous: shared,
            shared_with_previous_sequence: shared,
            previous_input_tokens: 0,
            kept_blocks: kept,
            generated_blocks: new.end..new.end,
            new_blocks: new,
            finding: None,
        };
    Trace {
        block_size: 4,
        renderer: "tiny".into(),
        sessions: vec![
            TraceSession {
                identity: "a@example.com".into(),
                requests: 0..2,
            },
            TraceSession {
                identity: "b@example.com".into(),
                requests: 2..3,
            },
        ],
        requests: vec![
            request(0, 100.0, 10, 3, 0, 0, 0..2),
            request(0, 102.5, 13, 5, 6, 1, 2..4),
            request(1, 101.0, 8, 0, 0, 0, 4..6),
        ],
        blocks: vec![a1, a2, b2, b3, a1, a2],
        rules: Vec::new(),
    }
}

/// The share of prompt tokens in leading blocks an earlier request sent (in any session): the
/// prefix-sharing rate `kvlint workload` reports.
fn sharing_rate(trace: &Trace) -> f64 {
    let mut sent = HashSet::new();
    let mut shared = 0;
    for index in arrival_order(trace) {
        let blocks = trace.prompt_blocks(index);
        shared += blocks
            .iter()
            .take_while(|block| sent.contains(*block))
            .count();
        sent.extend(blocks);
    }
    (shared as u64 * u64::from(trace.block_size)) as f64 / trace.input_tokens() as f64
}

fn written(format: HashedFormat, block: u32) -> String {
    let mut out = Vec::new();
    export_hashed(&tiny(), format, block, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

// In arrival order A1 (100 s), B1 (101 s), A2 (102.5 s): a1 a2 are ids 0 1 and A1's partial
// block 2; B1 is a1 a2 whole; A2 is a1, b2 b3 (3 4) and its partial block (5).

#[test]
fn mooncake_lines_are_the_published_fields() {
    assert_eq!(
        written(HashedFormat::Mooncake, 4),
        r#"{"timestamp": 0, "input_length": 10, "output_length": 3, "hash_ids": [0, 1, 2]}
{"timestamp": 1000, "input_length": 8, "output_length": 0, "hash_ids": [0, 1]}
{"timestamp": 2500, "input_length": 13, "output_length": 5, "hash_ids": [0, 3, 4, 5]}
"#
    );
}

#[test]
fn mooncake_agentic_lines_carry_the_session_and_the_delay() {
    assert_eq!(
        written(HashedFormat::MooncakeAgentic, 4),
        r#"{"session_id": "session-0", "timestamp": 0, "input_length": 10, "output_length": 3, "hash_ids": [0, 1, 2]}
{"session_id": "session-1", "timestamp": 1000, "input_length": 8, "output_length": 0, "hash_ids": [0, 1]}
{"session_id": "session-0", "delay": 2500, "input_length": 13, "output_length": 5, "hash_ids": [0, 3, 4, 5]}
"#
    );
}

#[test]
fn bailian_lines_link_each_turn_to_its_parent() {
    assert_eq!(
        written(HashedFormat::Bailian, 4),
        r#"{"chat_id": 0, "parent_chat_id": -1, "timestamp": 0, "input_length": 10, "output_length": 3, "type": "text", "turn": 1, "hash_ids": [0, 1, 2]}
{"chat_id": 1, "parent_chat_id": -1, "timestamp": 1, "input_length": 8, "output_length": 0, "type": "text", "turn": 1, "hash_ids": [0, 1]}
{"chat_id": 2, "parent_chat_id": 0, "timestamp": 2.5, "input_length": 13, "output_length": 5, "type": "text", "turn": 2, "hash_ids": [0, 3, 4, 5]}
"#
    );
}

#[test]
fn weka_conversations_number_their_ids_within_each() {
    let lines: Vec<Value> = written(HashedFormat::Weka, 4)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let request = |t: Value, input: u32, output: u32, ids: &[u64]| {
        serde_json::json!({"t": t, "type": "n", "model": "tiny", "in": input, "out": output,
            "hash_ids": ids})
    };
    let conversation = |id: &str, requests: Vec<Value>| {
        serde_json::json!({"id": id, "models": ["tiny"], "block_size": 4,
            "hash_id_scope": "local", "requests": requests})
    };
    assert_eq!(
        lines,
        [
            conversation(
                "session-0",
                vec![
                    request(0.into(), 10, 3, &[0, 1, 2]),
                    request(2.5.into(), 13, 5, &[0, 3, 4, 5]),
                ]
            ),
            conversation("session-1", vec![request(1.into(), 8, 0, &[0, 1])]),
        ]
    );
}

#[test]
fn lmcache_lines_hold_the_full_chunks_alone() {
    // A1's 10 tokens fill 2 chunks of 4, B1's 8 two, A2's 13 three: their partial chunks have
    // no hash.
    assert_eq!(
        written(HashedFormat::Lmcache, 4),
        r#"{"timestamp": 0, "request_id": "request-0", "model_name": "tiny", "chunk_size": 4, "seq_len": 10, "dtypes": [], "shapes": [], "chunk_hashes": ["0x0", "0x1"]}
{"timestamp": 1, "request_id": "request-1", "model_name": "tiny", "chunk_size": 4, "seq_len": 8, "dtypes": [], "shapes": [], "chunk_hashes": ["0x0", "0x1"]}
{"timestamp": 2.5, "request_id": "request-2", "model_name": "tiny", "chunk_size": 4, "seq_len": 13, "dtypes": [], "shapes": [], "chunk_hashes": ["0x0", "0x3", "0x4"]}
"#
    );
}

#[test]
fn a_multiple_of_the_block_is_derived_and_any_other_size_refused() {
    // At 8 tokens: A1 is a2's prefix (id 0) and a partial block (1), B1 the same a2 (0), A2
    // b2's prefix (2) and a partial block (3).
    assert_eq!(
        written(HashedFormat::Mooncake, 8),
        r#"{"timestamp": 0, "input_length": 10, "output_length": 3, "hash_ids": [0, 1]}
{"timestamp": 1000, "input_length": 8, "output_length": 0, "hash_ids": [0]}
{"timestamp": 2500, "input_length": 13, "output_length": 5, "hash_ids": [2, 3]}
"#
    );
    let refused = export_hashed(&tiny(), HashedFormat::Mooncake, 6, &mut Vec::new());
    assert!(matches!(
        refused,
        Err(HashedTraceError::BlockSize {
            trace: 4,
            requested: 6
        })
    ));
}

#[test]
fn read_back_the_blocks_and_the_sharing_are_the_workloads() {
    let original = sharing_rate(&tiny());
    for format in [
        HashedFormat::Mooncake,
        HashedFormat::MooncakeAgentic,
        HashedFormat::Bailian,
        HashedFormat::Lmcache,
    ] {
        let text = written(format, 4);
        let read = read_hashed("tiny.jsonl", &text, None, Some(4)).unwrap();
        // A1 2 full blocks, B1 2, A2 3: 7; B1's 8 tokens and A2's first block (4) were sent
        // before: 12 of 31 prompt tokens.
        let blocks: usize = (0..read.requests.len())
            .map(|index| read.prompt_blocks(index).len())
            .sum();
        assert_eq!(blocks, 7, "{}", format.name());
        assert_eq!(read.input_tokens(), 31);
        assert_eq!(sharing_rate(&read), 12.0 / 31.0, "{}", format.name());
        assert_eq!(sharing_rate(&read), original);
    }
    // Sessions come back where the format keeps them: A's two turns share one block.
    let bailian = read_hashed(
        "tiny.jsonl",
        &written(HashedFormat::Bailian, 4),
        None,
        Some(4),
    )
    .unwrap();
    assert_eq!(bailian.sessions.len(), 2);
    assert_eq!(bailian.requests[1].kept_blocks, 1);
    assert_eq!(bailian.requests[1].shared_with_previous, 4);
    // Claude Code conversations number their ids within each: the blocks come back, the
    // sharing across conversations does not (only A2's first block, 4 of 31 tokens).
    let weka = read_hashed("tiny.jsonl", &written(HashedFormat::Weka, 4), None, None).unwrap();
    assert_eq!(weka.block_size, 4);
    assert_eq!(weka.sessions.len(), 2);
    assert_eq!(weka.blocks.len(), 2 + 2 + 2);
    assert_eq!(sharing_rate(&weka), 4.0 / 31.0);
    // Plain Mooncake lines are each a session of their own, as AIPerf reads them.
    let plain = read_hashed(
        "tiny.jsonl",
        &written(HashedFormat::Mooncake, 4),
        None,
        Some(4),
    );
    assert_eq!(plain.unwrap().sessions.len(), 3);
}

#[test]
fn a_malformed_line_is_named_by_file_and_line() {
    let text = "{\"timestamp\": 0, \"input_length\": 10, \"hash_ids\": [0]}\n\n{\"timestamp\": 1, \"input_length\": \"many\"}\n";
    let error = read_hashed("bad.jsonl", text, None, None).unwrap_err();
    assert_eq!(
        error.to_string(),
        "bad.jsonl:3: `input_length` is missing or not a count of tokens"
    );
    let error =
        read_hashed("bad.jsonl", "{\"input_length\": 10}\n{oops\n", None, None).unwrap_err();
    assert!(
        error.to_string().starts_with("bad.jsonl:2: not JSON"),
        "{error}"
    );
    // More ids than blocks the tokens fill: the block size is not the file's.
    let error = read_hashed(
        "bad.jsonl",
        "{\"input_length\": 20, \"hash_ids\": [0, 1, 2]}\n",
        None,
        Some(16),
    )
    .unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("bad.jsonl:1: 3 hash ids for 20 tokens"),
        "{error}"
    );
}

#[test]
fn coarser_blocks_keep_the_generated_tokens_chain() {
    // Blocks of 2: a 7-token prompt is p1 p2 p3 and one token more; the generated tokens
    // complete g1 (that token and the first generated), g2 and g3. Blocks of 4: tokens 0..4
    // end at p2 (the prompt's one whole block), 4..8 at g1, 8..12 at g3.
    let (p1, p2, p3, g1, g2, g3) = (1, 2, 3, 4, 5, 6);
    let fine = Trace {
        block_size: 2,
        renderer: "tiny".into(),
        sessions: vec![TraceSession {
            identity: "s".into(),
            requests: 0..1,
        }],
        requests: vec![TraceRequest {
            session: 0,
            time: None,
            input_tokens: 7,
            output_tokens: 6,
            shared_with_previous: 0,
            shared_with_previous_sequence: 0,
            previous_input_tokens: 0,
            kept_blocks: 0,
            new_blocks: 0..3,
            generated_blocks: 3..6,
            finding: None,
        }],
        blocks: vec![p1, p2, p3, g1, g2, g3],
        rules: Vec::new(),
    };
    let coarse = rebinned(&fine, 4).unwrap();
    assert_eq!(coarse.block_size, 4);
    assert_eq!(coarse.prompt_blocks(0), [p2]);
    assert_eq!(coarse.generated_blocks(0), [g1, g3]);
}

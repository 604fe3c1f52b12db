//! Cache models against worked numbers, derived by hand from each engine's documented rules
//! (`shared/reference/engines.md`), edge cases included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kvlint_core::cache::{
    BreakpointIssueKind, CacheTurn, Earlier, Engine, anthropic_hit, audit_breakpoints, gemini_hit,
    openai_hit,
};

#[test]
fn openai_caches_from_1024_tokens_in_128_token_steps() {
    for (n, matched, cached) in [
        (1000, 1000, 0), // below the minimum
        (1024, 1023, 0),
        (1024, 1024, 1024),
        (2000, 1151, 1024), // 127 tokens past the minimum: no new step
        (2000, 1152, 1152),
        (5000, 4321, 4224), // 1024 + 25·128
    ] {
        assert_eq!(openai_hit(n, matched), cached, "N={n} matched={matched}");
    }
}

#[test]
fn gemini_caches_a_prefix_once_it_reaches_the_model_minimum() {
    assert_eq!(gemini_hit(3000, 2048), 3000);
    assert_eq!(gemini_hit(2047, 2048), 0);
}

fn blocks(ends: &[usize], breakpoints: &[usize]) -> CacheTurn {
    CacheTurn {
        prompt_tokens: ends.last().copied().unwrap_or(0),
        block_ends: ends.to_vec(),
        breakpoint_blocks: breakpoints.to_vec(),
        ..CacheTurn::default()
    }
}

fn earlier(prompt_tokens: usize, common_prompt: usize, written: &[usize]) -> Earlier {
    Earlier {
        prompt_tokens,
        common_prompt,
        common_sequence: common_prompt,
        written: written.to_vec(),
    }
}

#[test]
fn anthropic_reads_entries_within_20_blocks_and_writes_up_to_the_last_breakpoint() {
    // Turn 1 wrote an entry at its breakpoint, 3,000 tokens; turn 2 shares 3,500 tokens and
    // marks its last block (4,000): it reads 3,000 and writes the 1,000 after.
    let turn = blocks(&[1000, 2000, 3000, 4000], &[3]);
    let prediction = anthropic_hit(&turn, &[earlier(3000, 3500, &[3000])], 1024);
    assert_eq!((prediction.cached, prediction.written), (3000, 1000));

    // The entry is past the shared prefix: nothing read, everything up to the breakpoint written.
    let prediction = anthropic_hit(&turn, &[earlier(3000, 2500, &[3000])], 1024);
    assert_eq!((prediction.cached, prediction.written), (0, 4000));

    // Below the model minimum nothing is written or read.
    let short = blocks(&[300, 800], &[1]);
    let prediction = anthropic_hit(&short, &[earlier(800, 800, &[800])], 1024);
    assert_eq!((prediction.cached, prediction.written), (0, 0));

    // 30 blocks of 100 tokens, breakpoint on the last: the lookback reaches blocks 10..=29,
    // so an entry at the end of block 5 (600 tokens) is not found, one at block 10 (1,100) is.
    let ends: Vec<usize> = (1..=30).map(|block| block * 100).collect();
    let long = blocks(&ends, &[29]);
    assert_eq!(
        anthropic_hit(&long, &[earlier(3000, 3000, &[600])], 512).cached,
        0
    );
    assert_eq!(
        anthropic_hit(&long, &[earlier(3000, 3000, &[1100])], 512).cached,
        1100
    );
}

#[test]
fn a_breakpoint_the_next_turn_never_reads_loses_what_the_engine_has_its_turn_write() {
    // A reminder injected after the newest message each turn carries the last breakpoint;
    // the next turn drops it (anthropics/claude-code#96101). Turn 0: system (2,000, marked),
    // history to 4,000, reminder to 4,100 (marked). Turn 1 keeps 4,000 tokens of it and
    // appends its own reminder, marked, ending at 4,500; turn 2 keeps 4,300 of turn 1.
    let turns = [
        blocks(&[2000, 4000, 4100], &[0, 2]),
        blocks(&[2000, 4000, 4300, 4500], &[0, 3]),
        blocks(&[2000, 4000, 4300, 4600, 4700], &[0, 4]),
    ];
    let engine: Engine = "anthropic:claude-sonnet-4-5".parse().unwrap();
    // Turn 1 reads the system entry turn 0 wrote and writes the rest up to its last
    // breakpoint: 2,500 tokens.
    let turn_1 = engine.predict(&turns[1], &[earlier(4100, 4000, &[2000, 4100])]);
    assert_eq!((turn_1.cached, turn_1.written), (2000, 2500));
    // Turn 0 writes 4,100 tokens; turn 1 reads the 2,000 of its system entry: 2,100 never
    // read.
    let issues = audit_breakpoints(&turns, &[4000, 4300], &[0, turn_1.cached, 2000], 1024);
    let never_read: Vec<(usize, BreakpointIssueKind)> = issues
        .into_iter()
        .map(|issue| (issue.turn, issue.kind))
        .collect();
    assert_eq!(
        never_read,
        vec![
            (
                0,
                BreakpointIssueKind::AfterVolatile {
                    next_turn_diverges_at: 4000,
                    written: 2100
                }
            ),
            // What the engine has turn 1 write, not the 200 tokens past the divergence.
            (
                1,
                BreakpointIssueKind::AfterVolatile {
                    next_turn_diverges_at: 4300,
                    written: 2500
                }
            ),
        ]
    );
}

#[test]
fn openai_breakpoint_models_read_the_furthest_entry_in_the_shared_prefix() {
    let engine: Engine = "openai:gpt-5.6".parse().unwrap();
    let turn = CacheTurn {
        prompt_tokens: 5000,
        block_ends: vec![2000, 4000, 5000],
        breakpoint_blocks: vec![],
        latest_input_end: 4000,
        ..CacheTurn::default()
    };
    // The turn before wrote its implicit breakpoint at 3,000 and shares 3,500 tokens.
    let prediction = engine.predict(&turn, &[earlier(3200, 3500, &[3000])]);
    assert_eq!((prediction.cached, prediction.written), (3000, 1000));
    assert_eq!(engine.writes(&turn), vec![4000]);
}

#[test]
fn deepseek_hits_whole_units_only() {
    let engine = Engine::DeepSeek;
    let turn = CacheTurn {
        prompt_tokens: 900,
        ..CacheTurn::default()
    };
    let unit = |common_sequence: usize| Earlier {
        prompt_tokens: 500,
        common_prompt: common_sequence.min(500),
        common_sequence,
        written: vec![500, 520],
    };
    assert_eq!(engine.predict(&turn, &[unit(600)]).cached, 520); // input and output units match
    assert_eq!(engine.predict(&turn, &[unit(510)]).cached, 500); // the output unit does not
    assert_eq!(engine.predict(&turn, &[unit(499)]).cached, 0); // not even the input unit
}

/// xAI serves the exactly matching leading tokens once they reach the model's minimum (1,024
/// in the table), in 128-token blocks; its prices come from the model's row.
#[test]
fn xai_hits_the_shared_prefix_in_blocks_above_the_minimum() {
    let engine: Engine = "xai:grok-4.3".parse().unwrap();
    let turn = CacheTurn {
        prompt_tokens: 3000,
        ..CacheTurn::default()
    };
    let shared = |tokens: usize| earlier(2000, tokens, &[]);
    assert_eq!(engine.predict(&turn, &[shared(1000)]).cached, 0);
    assert_eq!(engine.predict(&turn, &[shared(1100)]).cached, 1024);
    assert_eq!(engine.predict(&turn, &[shared(2000)]).cached, 1920);
    let figures = engine.figures(&turn).unwrap();
    assert_eq!((figures.input, figures.cached_input), (1.25, 0.20));
    let request = kvlint_core::Request::from_body(
        &serde_json::json!({"model": "grok-4.3", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .unwrap();
    assert_eq!(engine.cache_ttl(&request), None);
}

//! The trace, the reuse figures, the simulation and the export, each against a computation of
//! its own: every prompt rendered whole (no reuse of the turn before) and compared token by
//! token, on the corpus of real agent sessions.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kvlint_core::session::SessionFile;
use kvlint_fleet::{Arrival, CacheSize, Policy, Setup, SimEngine, Trace, chain_hash, simulate};
use kvlint_render::render::Renderer;
use kvlint_workload::export::{Format, dataset_trace, export};
use kvlint_workload::{build_trace, workload_report};

const BLOCK: u32 = 16;

fn corpus() -> Vec<SessionFile> {
    let folder = kvlint_fixtures::repository().join("fixtures/corpus/sessions");
    let mut paths: Vec<_> = std::fs::read_dir(folder)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "jsonl")
        })
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|path| SessionFile::read(path).unwrap())
        .collect()
}

/// Every prompt of every session, rendered on its own: its token ids.
fn whole_prompts(sessions: &[SessionFile], renderer: &Renderer) -> Vec<Vec<Vec<u32>>> {
    sessions
        .iter()
        .map(|session| {
            session
                .turns()
                .map(|turn| {
                    renderer
                        .render(&turn.unwrap().request)
                        .unwrap()
                        .tokens
                        .ids()
                })
                .collect()
        })
        .collect()
}

fn common(left: &[u32], right: &[u32]) -> usize {
    left.iter().zip(right).take_while(|(a, b)| a == b).count()
}

fn blocks_of(ids: &[u32]) -> Vec<u64> {
    let mut last = 0;
    ids.chunks_exact(BLOCK as usize)
        .map(|block| {
            last = chain_hash(last, block);
            last
        })
        .collect()
}

fn traced() -> (Vec<SessionFile>, Renderer, Trace) {
    let sessions = corpus();
    let renderer = Renderer::provider();
    let trace = build_trace(&sessions, &renderer, BLOCK).unwrap();
    (sessions, renderer, trace)
}

#[test]
fn the_trace_is_what_rendering_every_prompt_whole_gives() {
    let (sessions, renderer, trace) = traced();
    let prompts = whole_prompts(&sessions, &renderer);
    assert_eq!(trace.sessions.len(), prompts.len());
    let mut index = 0;
    for session in &prompts {
        for (turn, ids) in session.iter().enumerate() {
            let request = &trace.requests[index];
            assert_eq!(request.input_tokens as usize, ids.len(), "request {index}");
            let shared = if turn == 0 {
                0
            } else {
                common(&session[turn - 1], ids)
            };
            assert_eq!(
                request.shared_with_previous as usize, shared,
                "request {index}"
            );
            assert_eq!(
                trace.prompt_blocks(index),
                blocks_of(ids),
                "request {index}"
            );
            index += 1;
        }
    }
    assert_eq!(index, trace.requests.len());
    assert!(index > 200, "the corpus has {index} requests");
}

#[test]
fn reuse_figures_are_what_comparing_every_pair_of_prompts_gives() {
    let (sessions, renderer, trace) = traced();
    let prompts = whole_prompts(&sessions, &renderer);
    let report = workload_report(&trace);
    let block = BLOCK as usize;
    let (mut total, mut within, mut any) = (0usize, 0usize, 0usize);
    // No request of the corpus has a time: the order is session after session.
    let all: Vec<&Vec<u32>> = prompts.iter().flatten().collect();
    let mut position = 0;
    for session in &prompts {
        for (turn, ids) in session.iter().enumerate() {
            total += ids.len();
            let shared = if turn == 0 {
                0
            } else {
                common(&session[turn - 1], ids)
            };
            within += shared;
            let longest = all[..position]
                .iter()
                .map(|earlier| common(earlier, ids) / block * block)
                .max()
                .unwrap_or(0);
            any += (shared / block * block).max(longest);
            position += 1;
        }
    }
    assert_eq!(report.prompt_tokens as usize, total);
    assert_eq!(report.reuse.within_session_tokens as usize, within);
    let rate = any as f64 / total as f64;
    assert!(
        (report.reuse.prefix_sharing_rate - rate).abs() < 1e-12,
        "{} vs {rate}",
        report.reuse.prefix_sharing_rate
    );
    // The corpus shares system prompts across sessions of one project.
    assert!(report.reuse.cross_session_block_tokens > 0);
    // Fixing the findings can only add reuse.
    assert!(report.ideal.within_session_tokens >= report.reuse.within_session_tokens);
    assert!(!report.finding_costs.is_empty());
}

fn setup(policy: Policy, replicas: usize, cache: CacheSize) -> Setup {
    Setup {
        replicas,
        cache,
        engine: SimEngine::Vllm { block: BLOCK },
        policy,
        arrival: Arrival::Closed { concurrency: 1 },
        prefill_tps: 10_000.0,
        decode_tps: None,
        seed: 7,
        per_request: true,
        fleet: kvlint_fleet::FleetOptions::default(),
    }
}

#[test]
fn round_robin_and_session_hash_serve_what_each_replica_was_sent_before() {
    let (sessions, renderer, trace) = traced();
    let prompts = whole_prompts(&sessions, &renderer);
    let block = BLOCK as usize;
    // One session at a time, unbounded caches: what a replica serves is the longest run of
    // whole blocks it was sent before, never the last token.
    let expected = |replica_of: &dyn Fn(usize, usize) -> usize, replicas: usize| {
        let mut sent: Vec<Vec<&Vec<u32>>> = vec![Vec::new(); replicas];
        let mut served = Vec::new();
        let mut global = 0;
        for (session, turns) in prompts.iter().enumerate() {
            for ids in turns {
                let replica = replica_of(session, global);
                let limit = (ids.len().saturating_sub(1)) / block * block;
                let best = sent[replica]
                    .iter()
                    .map(|earlier| (common(earlier, ids) / block * block).min(limit))
                    .max()
                    .unwrap_or(0);
                served.push(best as u32);
                sent[replica].push(ids);
                global += 1;
            }
        }
        served
    };
    let round_robin =
        simulate(&trace, &setup(Policy::RoundRobin, 3, CacheSize::Unbounded)).unwrap();
    assert_eq!(
        round_robin.served_per_request.unwrap(),
        expected(&|_, request| request % 3, 3)
    );
    let hashed = simulate(&trace, &setup(Policy::SessionHash, 3, CacheSize::Unbounded)).unwrap();
    assert_eq!(hashed.lost_locality_tokens, 0);
    let ideal = simulate(&trace, &setup(Policy::Ideal, 3, CacheSize::Unbounded)).unwrap();
    for result in [&hashed, &ideal] {
        assert_eq!(
            result.served_tokens + result.computed_tokens,
            result.prompt_tokens
        );
    }
    assert!(ideal.served_tokens >= hashed.served_tokens);
    assert!(hashed.served_tokens > round_robin.served_tokens);
    // Round-robin moves sessions: what the previous replica held is lost.
    assert!(round_robin.lost_locality_tokens > 0);
    // A small cache evicts, and serves less.
    let small = simulate(
        &trace,
        &setup(Policy::SessionHash, 3, CacheSize::Blocks(64)),
    )
    .unwrap();
    assert!(small.evicted_blocks > 0);
    assert!(small.served_tokens < hashed.served_tokens);
}

#[test]
fn an_exported_benchmark_shares_what_the_workload_shared() {
    let (_, renderer, trace) = traced();
    let report = workload_report(&trace);
    for format in [
        Format::VllmCustom,
        Format::GuideLlm,
        Format::ShareGpt,
        Format::ChatJsonl,
    ] {
        let mut written = Vec::new();
        let count = export(&trace, renderer.tokenizer(), format, &mut written).unwrap();
        assert_eq!(count, trace.requests.len());
        let text = String::from_utf8(written).unwrap();
        assert!(!text.contains("You are"), "no text of the sessions leaves");
        let measured = dataset_trace("bench", &text, renderer.tokenizer(), BLOCK).unwrap();
        let again = workload_report(&measured);
        assert_eq!(
            again.prompt_tokens,
            report.prompt_tokens,
            "{}",
            format.name()
        );
        let difference = (again.reuse.prefix_sharing_rate - report.reuse.prefix_sharing_rate).abs();
        assert!(
            difference < 1e-12,
            "{}: {} vs {}",
            format.name(),
            again.reuse.prefix_sharing_rate,
            report.reuse.prefix_sharing_rate
        );
    }
    // A synthetic benchmark of one prompt copied 500 times shares almost all of it: far more
    // than the sessions do, which is what makes such a benchmark overstate capacity.
    let prompt = "Summarize the quarterly report in three bullet points, one line each. ".repeat(8);
    let copies: String = (0..500)
        .map(|_| format!("{{\"prompt\": \"{prompt}\"}}\n"))
        .collect();
    let synthetic =
        workload_report(&dataset_trace("copies", &copies, renderer.tokenizer(), BLOCK).unwrap());
    assert_eq!(synthetic.requests, 500);
    assert!(
        synthetic.reuse.prefix_sharing_rate > 0.9,
        "{}",
        synthetic.reuse.prefix_sharing_rate
    );
    assert!(synthetic.reuse.prefix_sharing_rate > report.reuse.prefix_sharing_rate);
}

#[test]
fn a_trace_read_back_from_disk_is_the_trace_written() {
    let (_, _, trace) = traced();
    let folder = std::env::temp_dir().join(format!("kvlint-trace-{}", std::process::id()));
    let path = folder.join("corpus.trace");
    kvlint_workload::store::save(&trace, &path).unwrap();
    assert_eq!(kvlint_workload::store::load(&path).unwrap(), trace);
    // Cut anywhere: an error, never a panic.
    let bytes = std::fs::read(&path).unwrap();
    for cut in [0, 7, 8, 20, bytes.len() / 2, bytes.len() - 1] {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        assert!(kvlint_workload::store::load(&path).is_err(), "cut at {cut}");
    }
    std::fs::remove_dir_all(&folder).ok();
}

//! # kvlint-fleet
//!
//! What a fleet of engines keeps of a workload: the workload as block hashes, the caches each
//! engine keeps of them, and the routers that send each request to a replica. It sees block
//! hashes and token counts, never tokens or text: its dependencies hold that (no renderer, no
//! tokenizer, no session reader can be reached from here); `kvlint-workload` renders sessions
//! into its [`Trace`].
//!
//! 1. [`Trace`]: per request its session, time, lengths, and prompt as a chain of block hashes
//!    (the blocks it adds to its session's previous request), built by every producer with
//!    one [`TraceBuilder`] (sessions, benchmark datasets, a log's rows, hashed traces).
//! 2. [`hashed_trace`] writes and reads the hashed traces fleet tools exchange (Mooncake,
//!    Qwen-Bailian, AIPerf's Claude Code conversations, LMCache's, Weka's), whole or, for a
//!    Mooncake file in time order, as it goes ([`hashed_trace::StreamedTrace`]).
//! 3. [`cache`]: each engine's prefix cache over block hashes (vLLM's block pool, SGLang's
//!    radix tree, llama.cpp's slots and prompt cache).
//! 4. [`simulate`] replays a trace through N replicas under a routing [`Policy`], with a
//!    queueing model of prefill for time to first token, the two bounds every run reports,
//!    sweeps, the ranking of policies ([`rank`]) and the replay beside a fleet's recorded
//!    decisions ([`calibrate`]).
//!
//! ```
//! use kvlint_fleet::{Blocks, NewRequest, TraceBuilder};
//!
//! // Two turns of one session on blocks of 2 tokens: the second keeps the first block.
//! let mut builder = TraceBuilder::new(2, "example");
//! let session = builder.open("session-1", 0);
//! let turn = |kept_blocks, prompt: &'static [u32]| NewRequest {
//!     time: None,
//!     input_tokens: (kept_blocks * 2 + prompt.len()) as u32,
//!     output_tokens: 0,
//!     shared_with_previous: (kept_blocks * 2) as u32,
//!     shared_with_previous_sequence: (kept_blocks * 2) as u32,
//!     kept_blocks,
//!     blocks: Blocks::Tokens { prompt, generated: &[] },
//!     finding: None,
//! };
//! builder.push(session, &turn(0, &[1, 2, 3, 4]));
//! builder.push(session, &turn(1, &[5, 6]));
//! let trace = builder.finish();
//! assert_eq!(trace.prompt_blocks(1)[0], trace.prompt_blocks(0)[0]);
//! assert_ne!(trace.prompt_blocks(1)[1], trace.prompt_blocks(0)[1]);
//! ```

pub mod cache;
mod error;
pub mod hashed_trace;
mod recency;
mod simulate;
mod stats;
mod trace;

pub use error::{SpecError, StreamedRunError};
pub use simulate::{
    Agreement, AgreementSummary, Branch, CalibrateError, CalibratedRequest, Calibration,
    RecordedRequest, ServedComparison, calibrate,
};
pub use simulate::{
    AibrixConfig, Arrival, Belief, Bounds, Busiest, CacheSize, DynamoConfig, DynamoCost,
    FleetOptions, Knob, LLAMACPP_TRACE_BLOCK, Latency, LlmdConfig, LlmdIndex, Loss, POLICIES,
    Policies, Policy, PolicyKnobs, Ranked, Ranking, RayConfig, ReplicaLoad, ServedCause, Setup,
    SglangConfig, SglangIndex, SglangMiss, SimEngine, SimulationResult, SmgConfig, SmgMiss,
    TailCause, rank, routing_help, simulate, simulate_streamed, streamable,
};
pub use simulate::{Along, KNEE_GAIN, SweepGrid, SweepRow, sweep_grid};
pub use stats::Distribution;
pub use trace::{
    Blocks, NewRequest, SessionChain, Trace, TraceBuilder, TraceRequest, TraceSession,
    arrival_order, chain_hash, range,
};

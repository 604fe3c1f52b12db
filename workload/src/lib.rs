//! # kvlint-workload
//!
//! What a workload of agent sessions lets an engine reuse, and what a fleet keeps of it.
//!
//! 1. [`build_trace`] renders every turn of the sessions with kvlint's renderer (tokenizing
//!    only what a turn does not send again) into a [`Trace`]: per request its session, time,
//!    lengths, and prompt as a chain of block hashes (the blocks it adds to its session's
//!    previous request). [`store`] keeps traces on disk, keyed by the inputs, the renderer and
//!    the block size, so that every later run on the same sessions skips the rendering.
//! 2. [`workload_report`] measures the reuse the workload creates: within a session, across
//!    sessions, the prefix-sharing rate, the distributions of its lengths and gaps, and the
//!    same reuse with the application's own findings fixed.
//! 3. [`simulate`] replays the trace through N replicas whose caches are modelled on their
//!    engine ([`cache`]: vLLM's block pool, SGLang's radix tree, llama.cpp's slots and prompt
//!    cache) under a routing [`Policy`], with a queueing model of prefill for time to first
//!    token.
//! 4. [`rows`] splits that work for a log too large for one machine: the map step traces a
//!    batch of sessions into one self-contained row per request (Ray, Spark), the reduce step
//!    joins any set of rows back into the trace of step 1.
//! 5. [`export`] writes a benchmark dataset of the workload's shape with random text;
//!    [`hashed_trace`] writes and reads the hashed traces fleet tools exchange (Mooncake,
//!    Qwen-Bailian, AIPerf's Claude Code conversations): block ids, no text.
//!
//! ```
//! use std::sync::Arc;
//! use kvlint_core::{Renderer, SessionFile};
//! use kvlint_workload::{build_trace, workload_report};
//!
//! let turn = |history: &str| format!(
//!     r#"{{"messages":[{{"role":"system","content":"You are a careful coding agent."}}{history}]}}"#
//! );
//! let jsonl = [
//!     turn(r#",{"role":"user","content":"Fix the test."}"#),
//!     turn(r#",{"role":"user","content":"Fix the test."},{"role":"assistant","content":"Done."},{"role":"user","content":"Thanks."}"#),
//! ]
//! .join("\n");
//! let session = SessionFile::parse("s.jsonl".into(), Arc::from(jsonl)).unwrap();
//! let trace = build_trace(&[session], &Renderer::provider(), 4).unwrap();
//! let report = workload_report(&trace);
//! assert_eq!(report.requests, 2);
//! // The second turn resends the first whole.
//! let first = u64::from(trace.requests[0].input_tokens);
//! assert!(report.reuse.within_session_tokens >= first - 3);
//! ```

pub mod cache;
mod error;
pub mod export;
pub mod hashed_trace;
pub mod html;
mod recency;
mod report;
pub mod rows;
mod simulate;
mod stats;
pub mod store;
mod trace;

pub use error::{SpecError, StreamedRunError, TraceFileError};
pub use report::{FindingCost, Reuse, WorkloadReport, arrival_order, workload_report};
pub use simulate::{
    Agreement, AgreementSummary, Branch, CalibrateError, CalibratedRequest, Calibration,
    RecordedRequest, ServedComparison, calibrate, recorded_requests,
};
pub use simulate::{
    AibrixConfig, Arrival, Belief, Bounds, CacheSize, DynamoConfig, DynamoCost, FleetOptions,
    LLAMACPP_TRACE_BLOCK, Latency, LlmdConfig, LlmdIndex, Policies, Policy, Ranked, Ranking,
    RayConfig, ReplicaLoad, Setup, SglangConfig, SglangIndex, SglangMiss, SimEngine,
    SimulationResult, SmgConfig, SmgMiss, rank, simulate, simulate_streamed,
};
pub use simulate::{Along, KNEE_GAIN, SweepGrid, SweepRow, sweep_grid};
pub use stats::Distribution;
pub use trace::{Trace, TraceRequest, TraceSession, build_trace, chain_hash, session_identity};

//! # kvlint-workload
//!
//! What a workload of agent sessions lets an engine reuse. The fleet that serves it (its
//! caches, routers and simulation) is `kvlint-fleet`'s, which sees only the block hashes this
//! crate makes of the sessions.
//!
//! 1. [`build_trace`] renders every turn of the sessions with kvlint's renderer (tokenizing
//!    only what a turn does not send again) into a [`kvlint_fleet::Trace`]: per request its
//!    session, time, lengths, and prompt as a chain of block hashes (the blocks it adds to its
//!    session's previous request). [`store`] keeps traces on disk, keyed by the inputs, the
//!    renderer and the block size, so that every later run on the same sessions skips the
//!    rendering.
//! 2. [`workload_report`] measures the reuse the workload creates: within a session, across
//!    sessions, the prefix-sharing rate, the distributions of its lengths and gaps, and the
//!    same reuse with the application's own findings fixed; [`html`] draws it, and a
//!    simulation's results, as pages.
//! 3. [`rows`] splits that work for a log too large for one machine: the map step traces a
//!    batch of sessions into one self-contained row per request (Ray, Spark), the reduce step
//!    joins any set of rows back into the trace of step 1.
//! 4. [`export`] writes a benchmark dataset of the workload's shape with random text, and
//!    reads one back into a trace; [`recorded_requests`] reads what a recording of
//!    `kvlint proxy --record` says each request was served, for `kvlint_fleet::calibrate`.
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

mod assemble;
mod error;
pub mod export;
pub mod html;
mod recorded;
mod report;
pub mod rows;
pub mod store;
mod trace;
pub mod words;

pub use assemble::{
    AssembleError, Assembled, InputFile, LoggedSession, MappedRow, TraceSetup, WorkloadInputs,
    failed_row, joined,
};
pub use error::TraceFileError;
pub use recorded::{RecordingError, recorded_requests};
pub use report::{
    FindingCost, HostedCache, MissDollars, Misses, Prices, Reuse, WorkloadReport, workload_report,
    workload_report_on,
};
pub use trace::{build_trace, session_identity};

//! kvlint's command-line and live integration tests, in one test crate: each file of
//! `lint/tests/` was a crate of its own, compiled and linked on its own (22 binaries; with the
//! unit tests' and `bad_inputs`', 25 executables and 368 MB on disk, now 4 and 126 MB), on a
//! machine with two cores. One module per former file; `common` and `lsp_client` (shared with
//! `lint/benches/lsp.rs`) stay where they were.
//!
//! `lint/tests/bad_inputs.rs` stays a binary of its own: it holds each case to 4 GB through
//! `getrusage(RUSAGE_CHILDREN)`, the largest peak of all the process's children, which the
//! children of other tests (llama-server, vLLM, kvlint runs) would raise.

// Each module allows what it uses; these cover `common` and `lsp_client`, as the crate roots
// that included them did.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../common/mod.rs"]
mod common;
#[path = "../lsp_client/mod.rs"]
mod lsp_client;

mod agents;
mod architecture;
mod cli;
mod config;
mod corpus;
mod engine_mode;
mod formats;
mod hashed_trace;
mod import;
mod inputs;
mod live_calibrate;
mod live_fleet;
mod live_llamacpp;
mod live_proxy;
mod live_routers;
mod live_simulate;
mod live_vllm;
mod logs;
mod lsp;
mod misses;
mod otel;
mod pre_commit;
mod probe_faults;
mod render;
mod render_engines;
mod reported_usage;
mod reports_html;
mod secrets;
mod simulate;
mod template;
mod workload;

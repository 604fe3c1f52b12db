//! The errors of the workload library.

use std::path::PathBuf;

/// A trace file of the on-disk cache that cannot be read or written.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("trace cache {path}: {reason}")]
#[diagnostic(
    code(kvlint::workload::trace_cache),
    help("the cache is rebuilt when its file is removed")
)]
pub struct TraceFileError {
    pub path: PathBuf,
    pub reason: String,
}

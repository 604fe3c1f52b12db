//! The errors of the fleet library.

/// A simulation setting that cannot be read (`--engine`, `--cache`, `--routing`,
/// `--arrival`), or that does not fit the workload.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("`{spec}`: {reason}")]
#[diagnostic(code(kvlint::simulate::setting))]
pub struct SpecError {
    pub spec: String,
    pub reason: String,
}

impl From<kvlint_protocol::SpecError> for SpecError {
    fn from(error: kvlint_protocol::SpecError) -> Self {
        Self {
            spec: error.spec,
            reason: error.reason,
        }
    }
}

impl SpecError {
    pub fn new(spec: &str, reason: impl Into<String>) -> Self {
        Self {
            spec: spec.to_owned(),
            reason: reason.into(),
        }
    }
}

/// A simulation over a trace read as it goes that cannot run: a setting it does not allow,
/// or a line it cannot read.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum StreamedRunError {
    /// A setting that needs the trace held whole, or another block size than the trace's.
    #[error("{setting}: {reason}")]
    #[diagnostic(
        code(kvlint::simulate::streamed),
        help("read the trace whole (`read_hashed`) for this setting")
    )]
    Setting {
        setting: String,
        reason: &'static str,
    },
    #[error(transparent)]
    #[diagnostic(transparent)]
    Trace(#[from] crate::hashed_trace::HashedTraceError),
}

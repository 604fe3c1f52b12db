//! One file per command. Each has its arguments (`Args`) and a `run` that returns the
//! [`Outcome`]: what to print and the exit code.

pub mod check;
pub mod diff;
#[cfg(feature = "recordings")]
pub mod import;
pub mod models;
pub mod probe;
pub mod proxy;
pub mod render;
pub mod rule;
pub mod simulate;
pub mod template;
pub mod workload;

use kvlint_protocol::EngineName;
use kvlint_request::diagnostic::Severity;
use miette::IntoDiagnostic;

use crate::emit::{Output, OutputFormat, Terminal, emit};
use crate::workspace::config::{Config, Discovery};

/// Exit code of a run with error findings (0 is clean).
pub const EXIT_FINDINGS: u8 = 1;
/// Exit code of a usage or input error.
pub const EXIT_INPUT: u8 = 2;

/// What a command prints and how it exits.
#[derive(Debug)]
pub struct Outcome {
    pub output: String,
    pub exit_code: u8,
}

impl Outcome {
    /// Emits a command's output in `format`; exit code 2 when inputs could not be read, 1
    /// when findings are errors, else 0.
    fn emitted(
        format: OutputFormat,
        output: &Output<'_>,
        terminal: Terminal,
        input_errors: bool,
        error_findings: bool,
    ) -> miette::Result<Self> {
        Ok(Self {
            output: emit(format, output, terminal)?,
            exit_code: if input_errors {
                EXIT_INPUT
            } else if error_findings {
                EXIT_FINDINGS
            } else {
                0
            },
        })
    }
}

/// Whether any of the findings is an error.
fn has_errors<'a>(
    findings: impl IntoIterator<Item = &'a kvlint_request::diagnostic::Diagnostic>,
) -> bool {
    findings
        .into_iter()
        .any(|finding| finding.severity == Severity::Error)
}

/// The servers `probe` and `proxy` talk to (`--engine-kind`): the engines, and the hosted APIs
/// whose usage reports cached tokens (OpenAI's, Anthropic's, xAI's).
pub const SERVER_KINDS: [EngineName; 6] = [
    EngineName::LlamaCpp,
    EngineName::Vllm,
    EngineName::Sglang,
    EngineName::OpenAi,
    EngineName::Anthropic,
    EngineName::Xai,
];

/// The argument parser of an engine among `allowed`, by its name
/// ([`kvlint_protocol::engine`]).
pub fn engine_name(
    allowed: &'static [EngineName],
) -> impl clap::builder::TypedValueParser<Value = EngineName> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(allowed.iter().map(|engine| engine.as_str())).try_map(
        |name| EngineName::from_name(&name).ok_or_else(|| format!("unknown engine `{name}`")),
    )
}

/// The configuration that applies in the current folder: the defaults of a command's flags.
pub fn current_config(configs: &mut Discovery) -> miette::Result<Option<Config>> {
    let here = std::env::current_dir().into_diagnostic()?;
    configs.for_folder(&here).map_err(miette::Report::new)
}

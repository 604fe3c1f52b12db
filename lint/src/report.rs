//! The report of a run: plain data, built once, read by every emitter.
//!
//! Its JSON form is a contract (`version` 1): fields may be added, never renamed or removed.

use std::sync::Arc;

use kvlint_core::analysis::{SessionAnalysis, TurnDiff};
use kvlint_core::diagnostic::{Diagnostic, Severity};
use kvlint_core::error::InputError;
use kvlint_core::render::Renderer;
use kvlint_core::session::SessionFile;
use serde::Serialize;

pub const REPORT_VERSION: u32 = 1;

#[derive(Debug, Serialize)]
pub struct Report {
    pub version: u32,
    pub sessions: Vec<SessionReport>,
    /// Files that could not be analysed; the rest of the run still is.
    pub errors: Vec<ErrorReport>,
    #[serde(skip)]
    pub input_errors: Vec<InputError>,
}

#[derive(Debug, Serialize)]
pub struct SessionReport {
    pub path: String,
    /// The request format of the session's turns (`mixed` when they differ).
    pub format: String,
    pub renderer: String,
    /// Token counts come from an encoding other than the provider's own.
    pub approximate: bool,
    pub turns: Vec<TurnDiff>,
    pub findings: Vec<Diagnostic>,
    pub summary: SessionSummary,
    #[serde(skip)]
    pub source: Arc<str>,
}

#[derive(Debug, Serialize)]
pub struct SessionSummary {
    pub turns: usize,
    pub prompt_tokens: usize,
    pub reused_tokens: usize,
    /// Reused over prompt tokens of all turns after the first.
    pub reuse_ratio: f64,
    pub errors: usize,
    pub warnings: usize,
    pub infos: usize,
}

#[derive(Debug, Serialize)]
pub struct ErrorReport {
    pub path: String,
    pub message: String,
}

impl Report {
    pub fn new() -> Self {
        Self {
            version: REPORT_VERSION,
            sessions: Vec::new(),
            errors: Vec::new(),
            input_errors: Vec::new(),
        }
    }

    pub fn add_error(&mut self, error: InputError) {
        let mut message = error.to_string();
        let mut cause = std::error::Error::source(&error);
        while let Some(inner) = cause {
            message.push_str(": ");
            message.push_str(&inner.to_string());
            cause = inner.source();
        }
        self.errors.push(ErrorReport {
            path: error.path().to_owned(),
            message,
        });
        self.input_errors.push(error);
    }

    pub fn count(&self, severity: Severity) -> usize {
        self.sessions
            .iter()
            .flat_map(|session| &session.findings)
            .filter(|finding| finding.severity == severity)
            .count()
    }
}

impl SessionReport {
    pub fn new(session: &SessionFile, renderer: &Renderer) -> Result<Self, InputError> {
        let analysis = SessionAnalysis::new(session, renderer)?;
        let findings: Vec<Diagnostic> = analysis
            .broken_pairs()
            .map(|pair| kvlint_rules::diagnose(&pair))
            .collect();
        let formats: Vec<_> = session
            .turns
            .iter()
            .map(|turn| turn.request.format)
            .collect();
        let format = match formats.first() {
            Some(first) if formats.iter().all(|format| format == first) => first.name().to_owned(),
            Some(_) => "mixed".to_owned(),
            None => "empty".to_owned(),
        };
        let approximate = formats
            .iter()
            .any(|format| renderer.is_approximate(*format));
        let count = |severity| {
            findings
                .iter()
                .filter(|finding| finding.severity == severity)
                .count()
        };
        let later_prompt_tokens: usize = analysis
            .turns
            .iter()
            .skip(1)
            .map(|turn| turn.prompt_tokens)
            .sum();
        let reused_tokens = analysis.reused_tokens();
        let summary = SessionSummary {
            turns: analysis.turns.len(),
            prompt_tokens: analysis.prompt_tokens(),
            reused_tokens,
            reuse_ratio: if later_prompt_tokens == 0 {
                0.0
            } else {
                (reused_tokens as f64 / later_prompt_tokens as f64 * 1000.0).round() / 1000.0
            },
            errors: count(Severity::Error),
            warnings: count(Severity::Warning),
            infos: count(Severity::Info),
        };
        Ok(Self {
            path: session.path.clone(),
            format,
            renderer: renderer.name(),
            approximate,
            turns: analysis.turns,
            findings,
            summary,
            source: Arc::clone(&session.text),
        })
    }
}

//! What `kvlint template` prints: each template's findings and notes.

use kvlint_request::diagnostic::Diagnostic;
use serde::Serialize;

use super::{CheckedFile, ErrorReport};

#[derive(Debug, Serialize)]
pub struct TemplateReport {
    pub version: u32,
    pub templates: Vec<TemplateResult>,
    pub errors: Vec<ErrorReport>,
}

#[derive(Debug, Serialize)]
pub struct TemplateResult {
    pub path: String,
    /// `chat` for a model's chat template, `prompt` for an application prompt template.
    pub kind: &'static str,
    pub findings: Vec<Diagnostic>,
    /// How a chat template was rendered where it is not what an engine does with the
    /// model's own files: placeholder special tokens, parts of the conversation it refuses.
    pub notes: Vec<String>,
    #[serde(skip)]
    pub source: String,
}

impl TemplateReport {
    /// One line per note of each template: `note: PATH: NOTE`.
    /// The templates as the file-based emitters read them: a template's turns are those of the
    /// built-in conversation, up to the last one with a finding.
    pub fn checked_files(&self) -> Vec<CheckedFile<'_>> {
        self.templates
            .iter()
            .map(|template| CheckedFile {
                path: &template.path,
                turns: template
                    .findings
                    .iter()
                    .map(|finding| finding.turn + 1)
                    .max()
                    .unwrap_or(1),
                findings: &template.findings,
            })
            .collect()
    }
}

//! Findings as LSP diagnostics: pushed (`textDocument/publishDiagnostics`) to clients that do
//! not pull, pulled (`textDocument/diagnostic`) by clients that do.

use kvlint_request::diagnostic::Severity;
use lsp_server::Notification;
use lsp_types::notification::{Notification as _, PublishDiagnostics};
use lsp_types::{
    CodeDescription, Diagnostic, DiagnosticRelatedInformation, DiagnosticSeverity,
    DocumentDiagnosticParams, DocumentDiagnosticReport, DocumentDiagnosticReportResult,
    FullDocumentDiagnosticReport, Location, NumberOrString, PublishDiagnosticsParams,
    RelatedFullDocumentDiagnosticReport, RelatedUnchangedDocumentDiagnosticReport,
    UnchangedDocumentDiagnosticReport, Uri,
};

use super::Server;
use super::document::{Analysis, Document, Placed};

impl Server {
    /// Pushes the diagnostics of every document changed since they were last pushed.
    pub(super) fn publish_changed(&mut self) {
        let changed: Vec<String> = self
            .documents
            .iter()
            .filter(|(_, document)| document.analysis.is_none())
            .map(|(uri, _)| uri.clone())
            .collect();
        for uri in changed {
            let Some((_, analysis)) = self.analysis(&uri) else {
                continue;
            };
            let (Some(document), Ok(parsed)) = (self.documents.get(&uri), uri.parse::<Uri>())
            else {
                continue;
            };
            let diagnostics = diagnostics(document, &analysis, &parsed);
            let version = document.version;
            self.publish(parsed, diagnostics, Some(version));
        }
    }

    pub(super) fn publish(&self, uri: Uri, diagnostics: Vec<Diagnostic>, version: Option<i32>) {
        self.send(
            Notification::new(
                PublishDiagnostics::METHOD.to_owned(),
                PublishDiagnosticsParams {
                    uri,
                    diagnostics,
                    version,
                },
            )
            .into(),
        );
    }

    pub(super) fn pulled(
        &mut self,
        params: &DocumentDiagnosticParams,
    ) -> DocumentDiagnosticReportResult {
        let uri = &params.text_document.uri;
        let report = match self.analysis(uri.as_str()) {
            Some((generation, _))
                if params.previous_result_id.as_deref() == Some(&generation.to_string()) =>
            {
                DocumentDiagnosticReport::Unchanged(RelatedUnchangedDocumentDiagnosticReport {
                    related_documents: None,
                    unchanged_document_diagnostic_report: UnchangedDocumentDiagnosticReport {
                        result_id: generation.to_string(),
                    },
                })
            }
            found => {
                let (result_id, items) = match (&found, self.documents.get(uri.as_str())) {
                    (Some((generation, analysis)), Some(document)) => (
                        Some(generation.to_string()),
                        diagnostics(document, analysis, uri),
                    ),
                    // Not open: nothing to say of it.
                    _ => (None, Vec::new()),
                };
                DocumentDiagnosticReport::Full(RelatedFullDocumentDiagnosticReport {
                    related_documents: None,
                    full_document_diagnostic_report: FullDocumentDiagnosticReport {
                        result_id,
                        items,
                    },
                })
            }
        };
        DocumentDiagnosticReportResult::Report(report)
    }
}

/// Every diagnostic of a document: its findings, then what kept it from being analysed.
fn diagnostics(document: &Document, analysis: &Analysis, uri: &Uri) -> Vec<Diagnostic> {
    let problems = analysis.problems.iter().map(|problem| Diagnostic {
        range: document.lines.range(&document.text, &problem.range),
        severity: Some(DiagnosticSeverity::ERROR),
        source: Some("kvlint".to_owned()),
        message: problem.message.clone(),
        ..Diagnostic::default()
    });
    analysis
        .findings
        .iter()
        .map(|placed| diagnostic(document, placed, uri))
        .chain(problems)
        .collect()
}

pub(super) fn diagnostic(document: &Document, placed: &Placed, uri: &Uri) -> Diagnostic {
    let finding = &placed.finding;
    let related = placed.previous_change.as_ref().map(|changed| {
        vec![DiagnosticRelatedInformation {
            location: Location {
                uri: uri.clone(),
                range: document.lines.range(&document.text, changed),
            },
            message: format!(
                "turn {}: what turn {} changed, as the cache holds it",
                finding.previous_turn(),
                finding.turn
            ),
        }]
    });
    Diagnostic {
        range: document.lines.range(&document.text, &placed.range),
        severity: Some(match finding.severity {
            Severity::Error => DiagnosticSeverity::ERROR,
            Severity::Warning => DiagnosticSeverity::WARNING,
            Severity::Info => DiagnosticSeverity::INFORMATION,
        }),
        code: Some(NumberOrString::String(finding.code.to_owned())),
        code_description: kvlint_rules::rule(finding.rule)
            .and_then(|rule| rule.meta().url().parse().ok())
            .map(|href| CodeDescription { href }),
        source: Some("kvlint".to_owned()),
        message: format!("{} ({})", finding.message, finding.rule),
        related_information: related,
        tags: None,
        data: Some(serde_json::json!({ "rule": finding.rule })),
    }
}

//! The fixes of [`super::actions`] as the client's code actions, one per title.

use std::collections::HashMap;

use lsp_types::{
    CodeAction, CodeActionKind, CodeActionOrCommand, TextDocumentIdentifier, TextEdit,
    WorkspaceEdit,
};

use super::diagnostics::diagnostic;
use super::{Server, actions};

impl Server {
    pub(super) fn code_actions(&mut self, params: &ActionsAsked) -> Vec<CodeActionOrCommand> {
        let uri = &params.text_document.uri;
        let Some((_, analysis)) = self.analysis(uri.as_str()) else {
            return Vec::new();
        };
        let Some(document) = self.documents.get(uri.as_str()) else {
            return Vec::new();
        };
        let config = self.configs.for_file(&document.path).ok().flatten();
        let start = document.lines.offset(&document.text, params.range.start);
        let end = document.lines.offset(&document.text, params.range.end);
        let sessions = actions::Sessions::of(document);
        let mut actions: Vec<CodeActionOrCommand> = Vec::new();
        for placed in analysis
            .findings
            .iter()
            .filter(|placed| placed.range.start <= end && start <= placed.range.end)
        {
            for fix in actions::fixes(document, &analysis, placed, config.as_ref(), &sessions) {
                let duplicate = actions.iter().any(|action| {
                    matches!(action, CodeActionOrCommand::CodeAction(action) if action.title == fix.title)
                });
                if duplicate {
                    continue;
                }
                let edits = fix
                    .edits
                    .iter()
                    .map(|(range, new_text)| TextEdit {
                        range: document.lines.range(&document.text, range),
                        new_text: new_text.clone(),
                    })
                    .collect();
                actions.push(CodeActionOrCommand::CodeAction(CodeAction {
                    title: fix.title,
                    kind: Some(CodeActionKind::QUICKFIX),
                    diagnostics: Some(vec![diagnostic(document, placed, uri)]),
                    edit: Some(WorkspaceEdit {
                        changes: Some(HashMap::from([(uri.clone(), edits)])),
                        ..WorkspaceEdit::default()
                    }),
                    is_preferred: Some(fix.preferred),
                    ..CodeAction::default()
                }));
            }
        }
        actions
    }
}

/// What a `textDocument/codeAction` request asks that the server reads: the fixes come from
/// the server's own findings, so the context's diagnostics (which clients send in varied
/// shapes, Neovim 0.7 without their ranges) are not read.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ActionsAsked {
    text_document: TextDocumentIdentifier,
    range: lsp_types::Range,
}

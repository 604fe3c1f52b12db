//! Hover over a finding: the rule, the tokens lost, the diverging token windows of both
//! turns, the help and the documentation's link.

use lsp_types::{Hover, HoverContents, HoverParams, MarkupContent, MarkupKind};

use super::Server;
use super::document::Placed;

impl Server {
    pub(super) fn hover(&mut self, params: &HoverParams) -> Option<Hover> {
        let uri = params
            .text_document_position_params
            .text_document
            .uri
            .as_str();
        let (_, analysis) = self.analysis(uri)?;
        let document = self.documents.get(uri)?;
        let offset = document.lines.offset(
            &document.text,
            params.text_document_position_params.position,
        );
        let hits: Vec<&Placed> = analysis
            .findings
            .iter()
            .filter(|placed| placed.range.start <= offset && offset <= placed.range.end)
            .collect();
        let first = hits.first()?;
        let text = hits
            .iter()
            .map(|placed| hover_text(placed))
            .collect::<Vec<_>>()
            .join("\n\n---\n\n");
        Some(Hover {
            contents: HoverContents::Markup(MarkupContent {
                kind: if self.client.markdown {
                    MarkupKind::Markdown
                } else {
                    MarkupKind::PlainText
                },
                value: text,
            }),
            range: Some(document.lines.range(&document.text, &first.range)),
        })
    }
}

/// What hovering over a finding shows: the rule, the tokens lost, the diverging token
/// windows of the turn before and this one, the help and the documentation's link.
fn hover_text(placed: &Placed) -> String {
    let finding = &placed.finding;
    let mut text = format!(
        "**{} {}** ({})",
        finding.code,
        finding.rule,
        finding.severity.as_str()
    );
    if finding.tokens_lost > 0 {
        text.push_str(&format!(": {} tokens lost", finding.tokens_lost));
    }
    text.push_str(&format!("\n\n{}", finding.message));
    if !finding.previous_window.is_empty() || !finding.current_window.is_empty() {
        text.push_str(&format!(
            "\n\nturn {} (cached):\n{}\nturn {} (sent):\n{}",
            finding.previous_turn(),
            fenced(&finding.previous_window),
            finding.turn,
            fenced(&finding.current_window)
        ));
    }
    if !finding.help.is_empty() {
        text.push_str(&format!("\n\nhelp: {}", finding.help));
    }
    if let Some(rule) = kvlint_rules::rule(finding.rule) {
        text.push_str(&format!(
            "\n\n[{} documentation]({})",
            rule.meta().name,
            rule.meta().url()
        ));
    }
    text
}

/// `text` in a fenced block whose fence is longer than any run of backticks in it.
fn fenced(text: &str) -> String {
    let longest = text
        .split(|character| character != '`')
        .map(str::len)
        .max()
        .unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}text\n{text}\n{fence}")
}

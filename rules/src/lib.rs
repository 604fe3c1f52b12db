//! # kvlint-rules
//!
//! The rule catalog. Each rule lives in its own file under `rules/`, with its documentation
//! in its doc comment (sections *What it does*, *Why is this bad?*, *Example*, *Use instead*)
//! and its fixtures in `fixtures/rules/<name>/`.
//!
//! A rule sees a [`TurnPair`] — two consecutive turns where the later one does not extend
//! the earlier — and says whether the break is its pattern. [`diagnose`] asks the rules in
//! [`RULES`] order, most specific first; `prefix-edit` takes whatever no other rule names.
//! Severity follows cost, not the rule: a break that makes the engine recompute content the
//! earlier turn had cached is an error; a dropped per-turn tail is info.

use kvlint_core::analysis::TurnPair;
use kvlint_core::diagnostic::{Diagnostic, Severity};
use kvlint_core::prompt_template::{VolatilePlacement, Volatility};
use kvlint_core::template_check::{TemplateBreak, TemplateBreakKind};

mod rules;
pub mod volatile;

pub use rules::*;

/// What a rule is: its name, code, summary and documentation.
#[derive(Debug)]
pub struct RuleMeta {
    /// Kebab-case, names the pattern: `volatile-timestamp`.
    pub name: &'static str,
    /// Stable code: `KV101`.
    pub code: &'static str,
    pub summary: &'static str,
    /// The rule's doc comment, Markdown.
    pub docs: &'static str,
}

impl RuleMeta {
    /// The rule's documentation as Markdown (doc comments arrive with a leading space).
    pub fn documentation(&self) -> String {
        self.docs
            .lines()
            .map(|line| line.strip_prefix(' ').unwrap_or(line))
            .collect::<Vec<_>>()
            .join("\n")
            + "\n"
    }
}

/// Why a pair broke, in a rule's words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub message: String,
    pub help: String,
}

/// A rule of the catalog.
pub trait Rule: Sync {
    fn meta(&self) -> &'static RuleMeta;

    /// Returns a finding when the pair's first divergence is this rule's pattern.
    fn check(&self, pair: &TurnPair<'_>) -> Option<Finding>;
}

/// Declares a rule's unit struct and its metadata from its doc comment.
macro_rules! declare_rule {
    (
        $(#[doc = $doc:literal])+
        $vis:vis struct $rule:ident {
            name: $name:literal,
            code: $code:literal,
            summary: $summary:literal $(,)?
        }
    ) => {
        $(#[doc = $doc])+
        #[derive(Debug, Default, Clone, Copy)]
        $vis struct $rule;

        impl $rule {
            pub const META: $crate::RuleMeta = $crate::RuleMeta {
                name: $name,
                code: $code,
                summary: $summary,
                docs: concat!($($doc, "\n"),+),
            };
        }
    };
}
pub(crate) use declare_rule;

/// Every rule, in the order they are asked: the most specific first.
pub static RULES: &[&dyn Rule] = &[
    &ToolOrder,
    &ToolSetChange,
    &JsonReserialized,
    &VolatileTimestamp,
    &VolatileId,
    &VolatileCounter,
    &HistoryRewrite,
    &PrefixEdit,
    &CacheBreakpoint,
    &GenerationPrompt,
    &ToolsInSystem,
];

/// Looks a rule up by name (`volatile-timestamp`) or code (`KV101`).
pub fn rule(name_or_code: &str) -> Option<&'static dyn Rule> {
    RULES.iter().copied().find(|rule| {
        let meta = rule.meta();
        meta.name == name_or_code || meta.code.eq_ignore_ascii_case(name_or_code)
    })
}

/// Names the break of a pair as a diagnostic.
pub fn diagnose(pair: &TurnPair<'_>) -> Diagnostic {
    let (meta, finding) = RULES
        .iter()
        .find_map(|rule| rule.check(pair).map(|finding| (rule.meta(), finding)))
        .unwrap_or_else(|| (PrefixEdit.meta(), PrefixEdit::describe(pair)));
    let severity = if pair.recomputes_kept_content() {
        Severity::Error
    } else {
        Severity::Info
    };
    let tokens_lost = pair.tokens_lost();
    let message = match severity {
        Severity::Error => format!(
            "{}: {tokens_lost} cached tokens recomputed",
            finding.message
        ),
        _ => format!(
            "{}: a per-turn tail of {tokens_lost} tokens that the next turn drops",
            finding.message
        ),
    };
    let divergence = pair.divergence;
    Diagnostic {
        rule: meta.name,
        code: meta.code,
        severity,
        turn: pair.index,
        part: divergence.part.clone(),
        message,
        tokens_lost,
        span: divergence.span,
        help: finding.help,
        previous_window: divergence.previous_window.clone(),
        current_window: divergence.current_window.clone(),
    }
}

/// Names a volatile variable an application prompt template places before stable text.
pub fn diagnose_placement(placement: &VolatilePlacement, text: &str) -> Diagnostic {
    let meta = match placement.volatility {
        Volatility::Timestamp => &VolatileTimestamp::META,
        Volatility::Id => &VolatileId::META,
        Volatility::Counter | Volatility::Configured => &VolatileCounter::META,
    };
    let end = kvlint_core::locate::LineColumn::of_offset(text, placement.offset + placement.len);
    Diagnostic {
        rule: meta.name,
        code: meta.code,
        severity: Severity::Error,
        turn: 0,
        part: kvlint_core::path::PartPath::root().key("template"),
        message: format!(
            "`{}` changes every turn and renders before {} tokens of stable text, which no turn can reuse",
            placement.variable, placement.stable_tokens_after
        ),
        tokens_lost: placement.stable_tokens_after,
        span: Some(kvlint_core::diagnostic::Span {
            line: placement.line,
            column: placement.column,
            end_line: end.line,
            end_column: end.column,
            offset: placement.offset,
            len: placement.len,
        }),
        help: format!(
            "move `{}` after the stable text: to the end of the template, or into the newest message",
            placement.variable
        ),
        previous_window: String::new(),
        current_window: String::new(),
    }
}

/// Names a break the chat-template check found.
pub fn diagnose_template(found: &TemplateBreak) -> Diagnostic {
    use TemplateBreakKind::{
        DateInjected, DateVariable, GenerationPromptNotReproduced, HistoryChanged,
        ReasoningDropped, SystemPromptMoved, ToolsInSystemBlock,
    };
    let (meta, severity, message, help) = match found.kind {
        DateInjected => (
            &VolatileTimestamp::META,
            Severity::Error,
            "the template renders today's date (`strftime_now`): the whole prompt changes at midnight",
            "pass a fixed date in chat_template_kwargs, or use a template without the date",
        ),
        DateVariable => (
            &VolatileTimestamp::META,
            Severity::Warning,
            "the template renders a `date_string` variable in the system header: a server that passes today's date breaks the prefix daily",
            "pass a fixed date_string in chat_template_kwargs, or none",
        ),
        ReasoningDropped => (
            &HistoryRewrite::META,
            Severity::Error,
            "the template drops the reasoning of earlier assistant turns once a new turn exists: history is rewritten every turn",
            "keep reasoning in history (a template option such as preserve_thinking, or a custom template)",
        ),
        SystemPromptMoved => (
            &HistoryRewrite::META,
            Severity::Error,
            "the template moves the system prompt as turns are added (into the newest user message): every turn rewrites history",
            "use a template that renders the system prompt once, at the start",
        ),
        HistoryChanged => (
            &HistoryRewrite::META,
            Severity::Error,
            "the template renders earlier turns differently once a new turn exists",
            "use a template whose rendering of a turn does not depend on later turns",
        ),
        GenerationPromptNotReproduced => (
            &GenerationPrompt::META,
            Severity::Warning,
            "the generation prompt is not rendered the same way once the answer is history: the engine's cached answer is not reused",
            "render history the way the model generated it, or accept one more prefill of each answer",
        ),
        ToolsInSystemBlock => (
            &ToolsInSystem::META,
            Severity::Info,
            "tools render inside the system block: any tool change shifts everything after it",
            "keep the tool list fixed for the session",
        ),
    };
    Diagnostic {
        rule: meta.name,
        code: meta.code,
        severity,
        turn: found.turn,
        part: kvlint_core::path::PartPath::root().key("template"),
        message: message.to_owned(),
        tokens_lost: 0,
        span: None,
        help: help.to_owned(),
        previous_window: found.before.clone(),
        current_window: found.after.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_documents_every_section() {
        for rule in RULES {
            let meta = rule.meta();
            for section in [
                "## What it does",
                "## Why is this bad?",
                "## Example",
                "## Use instead",
            ] {
                assert!(meta.docs.contains(section), "{} lacks {section}", meta.name);
            }
            assert!(meta.code.starts_with("KV"), "{}", meta.code);
        }
    }

    #[test]
    fn names_and_codes_are_unique() {
        let mut names: Vec<_> = RULES.iter().map(|rule| rule.meta().name).collect();
        let mut codes: Vec<_> = RULES.iter().map(|rule| rule.meta().code).collect();
        names.sort_unstable();
        codes.sort_unstable();
        names.dedup();
        codes.dedup();
        assert_eq!(names.len(), RULES.len());
        assert_eq!(codes.len(), RULES.len());
        assert_eq!(
            rule("kv101").map(|rule| rule.meta().name),
            Some("volatile-timestamp")
        );
    }
}

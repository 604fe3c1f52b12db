
use kvlint_request::diagnostic::Severity;
use kvlint_render::template_check::TemplateBreakKind;

use crate::{Finding, Rule, RuleInput, RuleMeta, declare_rule};

declare_rule! {
    /// ## What it does
    /// Notes chat templates (with `kvlint template`) that render the tool definitions inside
    /// the system block, before or after the system prompt.
    ///
    /// ## Why is this bad?
    /// It is not a bug, but it makes tools part of the head of every prompt: adding,
    /// removing or reordering one tool changes the prompt from the system block on, and the
    /// whole conversation is recomputed.
    ///
    /// ## Example
    /// ```jinja
    /// {{- '<|im_start|>system\n' + system + '\n\n# Tools\n' }}{% for tool in tools %}{{ tool | tojson }}{% endfor %}
    /// ```
    ///
    /// ## Use instead
    /// Fix the tool list for the whole session (sorted, complete from the first turn), so the
    /// system block never changes.
    pub struct ToolsInSystem {
        name: "tools-in-system",
        code: "KV204",
        summary: "the chat template renders tools inside the system block",
    }
}

impl Rule for ToolsInSystem {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    /// Found by the template check, not in a pair of recorded turns.
    fn check(&self, input: &RuleInput<'_>) -> Option<Finding> {
        let RuleInput::TemplateBreak(found) = *input else {
            return None;
        };
        (found.kind == TemplateBreakKind::ToolsInSystemBlock).then(|| {
            Finding::new(
                Severity::Info,
                "tools render inside the system block: any tool change shifts everything after it",
                "keep the tool list fixed for the session",
            )
        })
    }
}

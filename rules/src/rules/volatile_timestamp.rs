
use kvlint_core::diagnostic::Severity;
use kvlint_core::prompt_template::Volatility;
use kvlint_core::template_check::TemplateBreakKind;

use crate::volatile::{VolatileClass, placement_finding};
use crate::{Finding, Rule, RuleInput, RuleMeta, declare_rule};

declare_rule! {
    /// ## What it does
    /// Finds a time, date or epoch that changes between turns inside content the next turn
    /// sends again: the system prompt, a tool description, an earlier message.
    ///
    /// ## Why is this bad?
    /// The cache serves only an exact token prefix. A clock in the system prompt changes
    /// every turn (to the second) or every day (at midnight), and everything after it, the
    /// whole conversation, is recomputed: on long agent contexts a first token in a minute
    /// instead of a second, and a bill many times higher.
    ///
    /// ## Example
    /// ```python
    /// system = f"You are a coding agent. Current time: {datetime.now().isoformat()}\n" + RULES
    /// ```
    ///
    /// ## Use instead
    /// Keep the system prompt free of the clock. If the model needs the time, put it at the
    /// end of the newest user message (a per-turn tail the next turn drops), or round it to
    /// what the task needs (the date, fixed for the session):
    /// ```python
    /// messages[-1]["content"] += f"\n\n<env>time: {datetime.now():%H:%M}</env>"
    /// ```
    pub struct VolatileTimestamp {
        name: "volatile-timestamp",
        code: "KV101",
        summary: "a time or date that changes every turn sits inside the cached prefix",
    }
}

impl Rule for VolatileTimestamp {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check(&self, input: &RuleInput<'_>) -> Option<Finding> {
        match *input {
            RuleInput::TurnPair(pair) => VolatileClass::Timestamp
                .explains(pair)
                .then(|| Finding::of_pair(pair, &format!("a timestamp changes in `{}`", pair.divergence.part), "keep times out of the system prompt and history; send the time at the end of the newest message, or fix it for the session")),
            RuleInput::Placement { placement, .. }
                if matches!(placement.volatility, Volatility::Timestamp) =>
            {
                Some(placement_finding(placement))
            }
            RuleInput::TemplateBreak(found) => match found.kind {
                TemplateBreakKind::DateInjected => Some(Finding::new(
                    Severity::Error,
                    "the template renders today's date (`strftime_now`): the whole prompt changes at midnight",
                    "pass a fixed date in chat_template_kwargs, or use a template without the date",
                )),
                TemplateBreakKind::DateVariable => Some(Finding::new(
                    Severity::Warning,
                    "the template renders a `date_string` variable in the system header: a server that passes today's date breaks the prefix daily",
                    "pass a fixed date_string in chat_template_kwargs, or none",
                )),
                _ => None,
            },
            _ => None,
        }
    }
}


use kvlint_request::diagnostic::Severity;
use kvlint_core::prompt_template::Volatility;
use kvlint_render::template_check::{BreakCondition, TemplateBreak, TemplateBreakKind};

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
            RuleInput::TemplateBreak(found) => template_clock(found),
            _ => None,
        }
    }
}

/// The clock of a chat template: `strftime_now` or a date variable in the prompt.
fn template_clock(found: &TemplateBreak) -> Option<Finding> {
    let expression = found
        .site
        .as_ref()
        .map_or("strftime_now", |site| site.expression.as_str());
    let what = match found.kind {
        TemplateBreakKind::DateInjected => format!("today's date (`{expression}`)"),
        TemplateBreakKind::TimeInjected => format!("the time of day (`{expression}`)"),
        TemplateBreakKind::DateVariable => {
            let variable = found.variable.as_deref().unwrap_or("date_string");
            return Some(Finding::new(
                Severity::Warning,
                format!("the template renders a `{variable}` variable in the prompt: a server that passes today's date (or the time) breaks the prefix daily"),
                format!("pass a fixed `{variable}` in chat_template_kwargs, or none"),
            ));
        }
        _ => return None,
    };
    let changes = if found.kind == TemplateBreakKind::TimeInjected {
        "every request's prompt differs from there on, and nothing after it is ever reused"
    } else {
        "the prompt from there on changes at midnight"
    };
    let (severity, message) = match found.condition {
        None => (
            Severity::Error,
            format!("the template renders {what}: {changes}"),
        ),
        Some(condition @ BreakCondition::NoSystemMessage) => (
            Severity::Warning,
            format!("{condition}, the template renders {what} in its default system prompt: {changes}"),
        ),
    };
    let help = match (&found.variable, found.condition) {
        (Some(variable), _) => format!(
            "pass a fixed `{variable}` in chat_template_kwargs (the template then leaves the clock out), or use a template without it"
        ),
        (None, Some(BreakCondition::NoSystemMessage)) => {
            "send a system message: the template renders the clock only in its default one".to_owned()
        }
        (None, None) => "the template calls strftime_now itself and no variable overrides it: edit the template to drop the clock, or to render it after the conversation".to_owned(),
    };
    Some(Finding::new(severity, message, help))
}

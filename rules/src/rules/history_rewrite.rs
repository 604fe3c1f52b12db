use kvlint_request::diagnostic::Severity;
use kvlint_request::request::PartKind;
use kvlint_render::template_check::TemplateBreakKind;

use crate::{Finding, Rule, RuleInput, RuleMeta, TurnPair, declare_rule};

declare_rule! {
    /// ## What it does
    /// Finds an earlier message that is not sent again exactly as before: edited, dropped,
    /// truncated, whitespace- or Unicode-normalized, or with its reasoning removed; and a
    /// session compacted (its history replaced by a summary, its end kept), as the grouping
    /// of a recording reads it.
    ///
    /// ## Why is this bad?
    /// The conversation is the longest part of an agent's prompt. Rewriting message 5 of 80
    /// makes the engine recompute messages 5 to 80 on this turn. Agents do it to save
    /// tokens (pruning old tool output, a sliding window that drops one message per turn),
    /// by accident (stripping whitespace, normalizing Unicode when re-loading history), or
    /// through a chat template that drops earlier reasoning.
    ///
    /// ## Example
    /// ```python
    /// for m in messages[:-4]:
    ///     if m["role"] == "tool":
    ///         m["content"] = "(output omitted)"     # rewrites old history every turn
    /// ```
    ///
    /// ## Use instead
    /// Treat history as append-only. Compact rarely and in large steps (drop half the
    /// history once, not one message per turn), so the cost is paid once.
    pub struct HistoryRewrite {
        name: "history-rewrite",
        code: "KV301",
        summary: "an earlier message was edited, dropped or truncated",
    }
}

impl Rule for HistoryRewrite {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check(&self, input: &RuleInput<'_>) -> Option<Finding> {
        let (message, help) = match *input {
            RuleInput::TurnPair(pair) => return rewritten_history(pair),
            RuleInput::Compaction(pair) => {
                return Some(Finding::of_pair(
                    pair,
                    "the session was compacted: its history replaced by a summary",
                    "compact rarely and in large steps so the cost is paid once, and put the summary after what stays (tools, system prompt) so that those stay cached",
                ));
            }
            RuleInput::TemplateBreak(found) => match found.kind {
                TemplateBreakKind::ReasoningDropped => (
                    "the template drops the reasoning of earlier assistant turns once a new turn exists: history is rewritten every turn",
                    "keep reasoning in history (a template option such as preserve_thinking, or a custom template)",
                ),
                TemplateBreakKind::SystemPromptMoved => (
                    "the template moves the system prompt as turns are added (into the newest user message): every turn rewrites history",
                    "use a template that renders the system prompt once, at the start",
                ),
                TemplateBreakKind::HistoryChanged => (
                    "the template renders earlier turns differently once a new turn exists",
                    "use a template whose rendering of a turn does not depend on later turns",
                ),
                _ => return None,
            },
            _ => return None,
        };
        Some(Finding::new(Severity::Error, message, help))
    }
}

/// A message of the earlier turn's history that this turn drops, moves or changes.
fn rewritten_history(pair: &TurnPair<'_>) -> Option<Finding> {
        let previous_part = pair.previous_part()?;
        let index = previous_part.message?;
        let previous = pair.previous;
        let current = pair.current;
        let message = previous.messages.get(index)?;
        // The system prompt as the first message is the head of the prompt, not history.
        if index == 0 && message.role.is_instructions() {
            return None;
        }
        // The newest message rewritten while the conversation does not move on is a prompt
        // being rebuilt (independent requests), not history.
        if index + 1 == previous.messages.len() && current.messages.len() <= previous.messages.len()
        {
            return None;
        }
        let path = &message.path;
        let same_at = |offset: usize| {
            current
                .message_value(index + offset)
                .zip(previous.message_value(index))
                .is_some_and(|(after, before)| after == before)
        };
        let how = if previous
            .message_value(index + 1)
            .is_some_and(|next| current.message_value(index) == Some(next))
        {
            format!("`{path}` was dropped")
        } else if same_at(1) {
            format!("a message was inserted before `{path}`")
        } else if previous_part.kind == PartKind::Reasoning
            && pair
                .current_part()
                .is_none_or(|part| part.kind != PartKind::Reasoning)
        {
            format!("the reasoning of `{path}` was removed")
        } else if let Some(change) = pair.change() {
            let squash = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
            let ascii = |text: &str| text.chars().filter(char::is_ascii).collect::<String>();
            if squash(change.previous_text) == squash(change.current_text) {
                format!("whitespace in `{}` was changed", pair.divergence.part)
            } else if ascii(change.previous_text) == ascii(change.current_text) {
                format!("Unicode in `{}` was normalized", pair.divergence.part)
            } else if change.after.is_empty()
                || change.previous_text.len() > change.current_text.len() * 2
            {
                format!("`{}` was truncated", pair.divergence.part)
            } else {
                format!("`{}` was edited", pair.divergence.part)
            }
        } else {
            format!("`{path}` was changed")
        };
        Some(Finding::of_pair(pair, &format!("history rewritten: {how}"), "treat history as append-only; compact rarely and in large steps so the cost is paid once"))
}

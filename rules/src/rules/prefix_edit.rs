
use crate::{Finding, Rule, RuleInput, RuleMeta, declare_rule};

declare_rule! {
    /// ## What it does
    /// Names any other change inside the part of the prompt the earlier turn had cached:
    /// a reworded system prompt, a memory or instructions block rewritten, a setting such as
    /// `tool_choice` or `response_format` changed.
    ///
    /// ## Why is this bad?
    /// Everything after the first changed token is recomputed. A system prompt that embeds
    /// live state (a memory block, a git status, a file listing) changes whenever that
    /// state does, and each change costs a full prefill of the conversation.
    ///
    /// ## Example
    /// ```python
    /// system = BASE_PROMPT + "\n## Memory\n" + memory.render()   # rewritten as memory grows
    /// ```
    ///
    /// ## Use instead
    /// Keep the head of the prompt fixed for the session. Send changing state as a new
    /// message appended to the conversation, or at the end of the newest message.
    pub struct PrefixEdit {
        name: "prefix-edit",
        code: "KV401",
        summary: "content inside the cached prefix changed",
    }
}

impl Rule for PrefixEdit {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check(&self, input: &RuleInput<'_>) -> Option<Finding> {
        let RuleInput::TurnPair(pair) = *input else {
            return None;
        };
        Some(Finding::of_pair(
            pair,
            &format!("`{}` changed", pair.divergence.part),
            "keep the head of the prompt fixed for the session; send changing state as a new message at the end",
        ))
    }
}

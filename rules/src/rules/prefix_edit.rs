use kvlint_core::analysis::TurnPair;

use crate::{Finding, Rule, RuleMeta, declare_rule};

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

impl PrefixEdit {
    /// Describes the change; `prefix-edit` names every break no other rule names.
    pub fn describe(pair: &TurnPair<'_>) -> Finding {
        Finding {
            message: format!("`{}` changed", pair.divergence.part),
            help: "keep the head of the prompt fixed for the session; send changing state as a new message at the end".into(),
        }
    }
}

impl Rule for PrefixEdit {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check(&self, pair: &TurnPair<'_>) -> Option<Finding> {
        Some(Self::describe(pair))
    }
}

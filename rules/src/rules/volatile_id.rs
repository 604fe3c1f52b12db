
use kvlint_request::diagnostic::Severity;
use kvlint_core::prompt_template::{VolatilePlacement, Volatility};

use crate::volatile::{VolatileClass, placement_finding};
use crate::{Finding, Rule, RuleInput, RuleMeta, declare_rule};

declare_rule! {
    /// ## What it does
    /// Finds an identifier that changes between turns inside content the next turn sends
    /// again: a UUID, a request or session id, a hex or base64 nonce, a sandbox id.
    ///
    /// ## Why is this bad?
    /// A fresh id near the top of the prompt makes every turn's prompt new from that point:
    /// nothing after it is served from cache. Ids that change on reconnect or restart break
    /// the cache for every session at once.
    ///
    /// ## Example
    /// ```python
    /// system = f"Session: {uuid.uuid4()}\n" + INSTRUCTIONS
    /// ```
    ///
    /// In an application prompt template (`kvlint template`), a value that is fixed for a
    /// session but differs between sessions or users (`session_id`, `user_id`,
    /// `conversation_id`) before the shared instructions is a warning: it costs nothing
    /// within a session, but every new session prefills the whole prompt again, and no
    /// session or user reuses another's cache.
    ///
    /// ## Use instead
    /// Send request ids in headers or metadata, not in the prompt. An id the model must see
    /// goes at the end of the newest message, or stays fixed for the whole session. Put
    /// per-session values after the instructions every session shares.
    pub struct VolatileId {
        name: "volatile-id",
        code: "KV102",
        summary: "an id or nonce that changes every turn sits inside the cached prefix",
    }
}

impl Rule for VolatileId {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check(&self, input: &RuleInput<'_>) -> Option<Finding> {
        match *input {
            RuleInput::TurnPair(pair) => VolatileClass::Id
                .explains(pair)
                .then(|| Finding::of_pair(pair, &format!("an id changes in `{}`", pair.divergence.part), "move request and session ids to headers or metadata; an id the model needs goes at the end of the newest message")),
            RuleInput::Placement { placement, .. }
                if matches!(placement.volatility, Volatility::Id) =>
            {
                Some(placement_finding(placement))
            }
            RuleInput::Placement { placement, .. }
                if matches!(placement.volatility, Volatility::PerSession) =>
            {
                Some(per_session_finding(placement))
            }
            _ => None,
        }
    }
}

/// A per-session value of a prompt template before shared instructions.
fn per_session_finding(placement: &VolatilePlacement) -> Finding {
    let variable = &placement.variable;
    Finding::new(
        Severity::Warning,
        format!(
            "`{variable}` differs per session and renders before {} tokens of shared instructions: free within a session, but every new session prefills them again (no reuse across sessions or users)",
            placement.stable_tokens_after
        ),
        format!(
            "move `{variable}` after the shared instructions (the end of the template, or the first user message), so that every session reuses their cache"
        ),
    )
    .with_tokens_lost(placement.stable_tokens_after)
}

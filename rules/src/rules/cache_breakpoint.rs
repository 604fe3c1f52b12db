use kvlint_core::cache::{
    ANTHROPIC_LOOKBACK_BLOCKS, ANTHROPIC_MAX_BREAKPOINTS, BreakpointIssue, BreakpointIssueKind,
};
use kvlint_request::diagnostic::Severity;

use crate::{Finding, Rule, RuleInput, RuleMeta, declare_rule};

declare_rule! {
    /// ## What it does
    /// Audits Anthropic `cache_control` breakpoints (with `--engine anthropic`): more than 4
    /// in a request; a breakpoint whose prefix is shorter than the model caches; a breakpoint
    /// placed after content that the next turn changes; a breakpoint the next turn can only
    /// reach with a lookback beyond 20 blocks; a breakpoint the next turn never reads.
    ///
    /// ## Why is this bad?
    /// Anthropic caches only at breakpoints, in the order tools → system → messages. A request
    /// with a fifth breakpoint is rejected. A prefix under the model minimum (1,024 to 4,096
    /// tokens) is silently not cached. A breakpoint after a timestamp, a changing memory
    /// block or a reminder injected every turn (a trailing `system` message) pays the
    /// cache-write price every turn for an entry nobody reads: the tokens lost are the ones
    /// the engine model has the turn write up to the breakpoint. A breakpoint
    /// looks at most 20 blocks back for an earlier entry, so an agent turn that adds more
    /// than 20 blocks misses unless it sets an intermediate breakpoint.
    ///
    /// ## Example
    /// ```python
    /// system = [{"type": "text", "text": f"{RULES}\nNow: {now}", "cache_control": {"type": "ephemeral"}}]
    /// ```
    ///
    /// ## Use instead
    /// Put breakpoints on the last stable block (the last tool, the end of the static system
    /// prompt) and on the newest message; keep volatile content after them; use at most 4;
    /// add an intermediate breakpoint when a turn appends more than 20 blocks.
    pub struct CacheBreakpoint {
        name: "cache-breakpoint",
        code: "KV501",
        summary: "a cache breakpoint that is rejected, never written or never read",
    }
}

impl CacheBreakpoint {
    /// The finding for an audited breakpoint.
    fn finding(issue: &BreakpointIssue) -> Finding {
        let (severity, message, tokens_lost, help) = match &issue.kind {
            BreakpointIssueKind::TooMany { count } => (
                Severity::Error,
                format!(
                    "{count} cache breakpoints; the API rejects more than {ANTHROPIC_MAX_BREAKPOINTS}"
                ),
                0,
                "keep breakpoints on the last tool, the end of the stable system prompt and the newest message",
            ),
            BreakpointIssueKind::BelowMinimum { minimum } => (
                Severity::Warning,
                format!(
                    "the prefix up to this breakpoint is {} tokens, below the model's minimum of {minimum}: it is never cached",
                    issue.position
                ),
                0,
                "move the breakpoint later, past the model's minimum cacheable length",
            ),
            BreakpointIssueKind::AfterVolatile {
                next_turn_diverges_at,
                written,
            } => (
                Severity::Warning,
                format!(
                    "the next turn changes the prompt at token {next_turn_diverges_at}, before this breakpoint at {}: what this turn writes to the cache up to it, {written} tokens, is never read",
                    issue.position
                ),
                *written,
                "put the breakpoint before content that changes from turn to turn, and the changing content after it",
            ),
            BreakpointIssueKind::BeyondLookback { blocks } => (
                Severity::Warning,
                format!(
                    "the next turn's nearest breakpoint is {blocks} blocks later; lookback stops at {ANTHROPIC_LOOKBACK_BLOCKS}, so this entry is not found"
                ),
                issue.position,
                "add an intermediate breakpoint so that no turn appends more than 20 blocks between two",
            ),
            BreakpointIssueKind::Unread => (
                Severity::Info,
                "the next turn has no breakpoint at or after this one: this entry is not read"
                    .to_owned(),
                issue.position,
                "keep a breakpoint on the newest message every turn (or use the automatic top-level cache_control)",
            ),
        };
        Finding::new(severity, message, help).with_tokens_lost(tokens_lost)
    }
}

impl Rule for CacheBreakpoint {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    /// Breakpoints are audited per turn (with `--engine anthropic`), not per broken pair.
    fn check(&self, input: &RuleInput<'_>) -> Option<Finding> {
        let RuleInput::Breakpoint { issue, .. } = *input else {
            return None;
        };
        Some(Self::finding(issue))
    }
}

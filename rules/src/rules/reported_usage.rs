use kvlint_core::cache::{UsageIssue, UsageIssueKind};
use kvlint_request::diagnostic::Severity;

use crate::{Finding, Rule, RuleInput, RuleMeta, declare_rule};

declare_rule! {
    /// ## What it does
    /// Compares, turn by turn and offline, what the recorded responses of a session say was
    /// served from cache (their `usage`) with what kvlint predicts for the engine given with
    /// `--engine`, and names the disagreements: a prompt that extends an earlier one in full,
    /// where the engine should read the cache, but nothing was read; cache writes that no
    /// later turn reads; reads larger than the prompt.
    ///
    /// ## Why is this bad?
    /// When the prefix was intact and still nothing was read, the cause is not in the prompt:
    /// the prompt is under the model's minimum, the entry expired between turns (hosted APIs
    /// keep it about five minutes), or another replica served the turn (a router without
    /// prefix affinity, a fleet without a shared cache). Each makes a long agent turn pay a
    /// full prefill. A cache write nobody reads costs the write premium for nothing; a read
    /// larger than the prompt means the recorded usage is not this request's.
    ///
    /// ## Example
    /// ```text
    /// turn 7: the prompt extends turn 6 in full (41,230 tokens predicted from cache), the
    /// response reports cached_tokens: 0
    /// ```
    ///
    /// ## Use instead
    /// Route a session's turns to the replica that holds its prefix (a session or prefix key);
    /// keep turns within the cache's lifetime or extend it (Anthropic's 1-hour TTL); put cache
    /// breakpoints where later turns read them.
    pub struct ReportedUsage {
        name: "reported-usage",
        code: "KV502",
        summary: "the recorded usage disagrees with the cache the prompt should get",
    }
}

impl ReportedUsage {
    fn finding(issue: &UsageIssue) -> Finding {
        match &issue.kind {
            UsageIssueKind::PredictedButUnread {
                predicted,
                minimum: Some(minimum),
            } => Finding::new(
                Severity::Info,
                format!(
                    "{predicted} tokens of the prompt are an earlier prompt's, predicted from cache, but nothing was read: the prompt is under the model's minimum of {minimum} tokens"
                ),
                "nothing to fix in the prompt: a prompt this short is not cached",
            ),
            UsageIssueKind::PredictedButUnread { predicted, .. } => Finding::new(
                Severity::Warning,
                format!(
                    "{predicted} tokens of the prompt are an earlier prompt's, predicted from cache, but the response reports nothing read: the entry expired, or another replica served the turn"
                ),
                "route a session's turns to the replica that holds its prefix, and keep turns within the cache's lifetime",
            )
            .with_tokens_lost(*predicted),
            UsageIssueKind::WrittenNeverRead { written } => Finding::new(
                Severity::Warning,
                format!(
                    "{written} tokens written to the cache that no later turn of the session reads"
                ),
                "put cache breakpoints where later turns read them, and keep what precedes them stable",
            ),
            UsageIssueKind::ReadExceedsPrompt { cached, prompt } => Finding::new(
                Severity::Warning,
                format!(
                    "the response reports {cached} tokens read from the cache for a prompt of {prompt}: the usage is not this request's"
                ),
                "check that the recording pairs each request with its own response",
            ),
        }
    }
}

impl Rule for ReportedUsage {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    /// Recorded usage is compared per turn (with `--engine` and recorded responses), not per
    /// broken pair.
    fn check(&self, input: &RuleInput<'_>) -> Option<Finding> {
        let RuleInput::Reported { issue, .. } = *input else {
            return None;
        };
        Some(Self::finding(issue))
    }
}

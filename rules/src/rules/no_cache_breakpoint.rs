use kvlint_core::cache::SessionIssue;
use kvlint_request::diagnostic::Severity;

use crate::{Finding, Rule, RuleInput, RuleMeta, declare_rule};

declare_rule! {
    /// ## What it does
    /// With `--engine anthropic`, or without `--engine` when the input shows Anthropic (a
    /// recording's requests sent to `api.anthropic.com`, or a session file of Anthropic Messages
    /// bodies; the report names the provider implied and from what): finds a session none of whose
    /// requests carries `cache_control` (no marked block, no top-level automatic breakpoint) while
    /// its turns share a prefix at least as long as the model's minimum cacheable length. The
    /// tokens lost are the ones each turn repeats from the turn before.
    ///
    /// ## Why is this bad?
    /// Anthropic caches only at breakpoints: without one, nothing is ever written or read,
    /// and every turn pays the full input price for the whole prompt, however stable it is.
    /// It often happens when a framework is asked for caching and the option never reaches
    /// the wire: the AI SDK's `cacheControl` provider option dropped before the request was
    /// sent (vercel/ai#5883, #12743), a client that sends no `cache_control` at all
    /// (VicBilibily/GCMP#33).
    ///
    /// ## Example
    /// ```json
    /// {"model": "claude-sonnet-4-5", "system": [{"type": "text", "text": "…4,000 tokens of policy…"}],
    ///  "messages": [{"role": "user", "content": "Cancel order NW-48213"}]}
    /// ```
    ///
    /// ## Use instead
    /// Mark the last stable block (the end of the system prompt) and the newest message with
    /// `"cache_control": {"type": "ephemeral"}`, or set the top-level `cache_control` for
    /// automatic caching; then check the recorded body, not the code, for the marker.
    pub struct NoCacheBreakpoint {
        name: "no-cache-breakpoint",
        code: "KV503",
        summary: "Anthropic requests that never mark a cache breakpoint: nothing is cached",
    }
}

impl Rule for NoCacheBreakpoint {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    /// Sessions are audited as a whole (under Anthropic, chosen or implied), not per broken pair.
    fn check(&self, input: &RuleInput<'_>) -> Option<Finding> {
        let RuleInput::Session {
            issue:
                SessionIssue::NoBreakpoint {
                    repeated_tokens,
                    longest_prefix,
                    minimum,
                },
            ..
        } = *input
        else {
            return None;
        };
        Some(
            Finding::new(
                Severity::Warning,
                format!(
                    "no request of this session carries `cache_control`: Anthropic caches nothing, while its turns repeat {repeated_tokens} tokens of the turn before (up to {longest_prefix} at a time; the model caches from {minimum})"
                ),
                "mark the end of the stable system prompt and the newest message with `cache_control` (or set it at the top level); if a framework option asks for caching, check that the body sent carries it",
            )
            .with_tokens_lost(*repeated_tokens),
        )
    }
}

use kvlint_core::cache::SessionIssue;
use kvlint_request::diagnostic::Severity;

use crate::{Finding, Rule, RuleInput, RuleMeta, declare_rule};

declare_rule! {
    /// ## What it does
    /// With a hosted API's `--engine` (`openai`, `anthropic`, `gemini`, `deepseek`), or without
    /// `--engine` when the input shows the API (a recording's requests sent to its host, a session
    /// file of Anthropic Messages bodies; an OpenAI-format file implies no provider; the report
    /// names the one implied and from what): finds a session every prompt of which is shorter than
    /// the model's minimum cacheable length (per provider and model, from `core/data/models.toml`:
    /// OpenAI 1,024 tokens; Anthropic 1,024 to 4,096 by model). One finding per session.
    ///
    /// ## Why is this bad?
    /// Below the minimum the provider caches nothing and says nothing: no error, no write, no
    /// read, however stable the prompt ("Shorter prompts cannot be cached, even if marked
    /// with `cache_control`", Anthropic's prompt caching docs). A `cache_control` marker on a
    /// 600-token system prompt is a no-op (2anki/2anki.net#4188, bug-ops/zeph#1083).
    ///
    /// ## Example
    /// ```json
    /// {"model": "claude-haiku-4-5", "system": [{"type": "text", "text": "…600 tokens…", "cache_control": {"type": "ephemeral"}}], …}
    /// ```
    ///
    /// ## Use instead
    /// Expect no cache discount for such calls, or put enough stable content (instructions,
    /// tools, shared documents) ahead of the changing part for the shared head to reach the
    /// minimum.
    pub struct BelowCacheMinimum {
        name: "below-cache-minimum",
        code: "KV505",
        summary: "every prompt is shorter than the model caches: nothing is cached",
    }
}

impl Rule for BelowCacheMinimum {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    /// Sessions are audited as a whole (under a hosted API, chosen or implied), not per pair.
    fn check(&self, input: &RuleInput<'_>) -> Option<Finding> {
        let RuleInput::Session {
            issue:
                SessionIssue::BelowMinimum {
                    longest_prompt,
                    minimum,
                },
            ..
        } = *input
        else {
            return None;
        };
        Some(Finding::new(
            Severity::Info,
            format!(
                "every prompt of this session is shorter than {minimum} tokens, the model's minimum cacheable length (the longest is {longest_prompt}): nothing is cached, however stable the prompt"
            ),
            "expect no cache discount here, or put enough stable content ahead of the changing part for the shared head to reach the minimum",
        ))
    }
}

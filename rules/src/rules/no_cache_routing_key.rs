use kvlint_core::cache::SessionIssue;
use kvlint_request::diagnostic::Severity;

use crate::{Finding, Rule, RuleInput, RuleMeta, declare_rule};

declare_rule! {
    /// ## What it does
    /// With `--engine openai`, or without `--engine` for a recording whose requests were sent to
    /// `api.openai.com` (the report names the provider implied and from what; an OpenAI body alone
    /// implies nothing, as vLLM, SGLang and llama.cpp serve the same API): finds a session none of
    /// whose requests sends a cache routing key (`prompt_cache_key`, or `user`, the field it
    /// replaces) while its turns share a prefix at least as long as the minimum cacheable length.
    /// Silent for every other engine: they do not route by such a key.
    ///
    /// ## Why is this bad?
    /// OpenAI routes a request to a machine by a hash of the prompt's first tokens, combined
    /// with `prompt_cache_key` when one is sent ("Cache Routing",
    /// https://developers.openai.com/api/docs/guides/prompt-caching). Without a key, turns
    /// that share a long prefix can reach machines that do not hold it and pay the full input
    /// price for all of it again. Reported costs: identical-prefix runs cached on 3 of 16 and
    /// 2 of 17 (langgenius/mosoo-agent-driver#82); 0.085 % of input tokens cached without
    /// routing affinity against 99.4 % with it on one OpenAI-compatible backend
    /// (vectorize-io/hindsight#3271).
    ///
    /// ## Example
    /// ```json
    /// {"model": "gpt-4.1", "messages": [{"role": "system", "content": "…3,000 tokens…"}, …]}
    /// ```
    ///
    /// ## Use instead
    /// Send a stable `prompt_cache_key` per session (or per group of sessions sharing a
    /// prefix, under about 15 requests a minute each), as Codex sends its conversation id.
    pub struct NoCacheRoutingKey {
        name: "no-cache-routing-key",
        code: "KV504",
        summary: "OpenAI requests that share a long prefix but send no prompt_cache_key",
    }
}

impl Rule for NoCacheRoutingKey {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    /// Sessions are audited as a whole (under OpenAI, chosen or implied), not per broken pair.
    fn check(&self, input: &RuleInput<'_>) -> Option<Finding> {
        let RuleInput::Session {
            issue: SessionIssue::NoCacheRoutingKey { longest_prefix },
            ..
        } = *input
        else {
            return None;
        };
        Some(Finding::new(
            Severity::Info,
            format!(
                "no request of this session sends `prompt_cache_key` (nor `user`): OpenAI routes each turn by a hash of its first tokens alone, so a turn can reach a machine that does not hold the {longest_prefix}-token prefix it shares with the turn before and pay for all of it again (one deployment measured 0.085% of input tokens cached without routing affinity, 99.4% with it)"
            ),
            "send a stable `prompt_cache_key` per session, such as the conversation id",
        ))
    }
}

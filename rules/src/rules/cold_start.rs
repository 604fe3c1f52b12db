use kvlint_core::cache::{ColdCause, ColdStartIssue};
use kvlint_request::diagnostic::Severity;

use crate::words::duration;
use crate::{Finding, Rule, RuleInput, RuleMeta, declare_rule};

declare_rule! {
    /// ## What it does
    /// Reads the sessions of one recording together (`kvlint check --engine` with a hosted
    /// API) and finds the sessions and
    /// sub-agents whose first request shares a long prefix with an earlier session's (the
    /// same model, tools and system prompt) yet starts cold: no cache entry covers that prefix
    /// (Anthropic writes entries only at `cache_control` breakpoints, and a request reads one
    /// only at a breakpoint or up to 20 blocks after it), or the entry the earlier session left
    /// had expired when this one started. Reported at the session's first request, with the
    /// tokens written again and what that cost in dollars.
    ///
    /// ## Why is this bad?
    /// Not every miss is an edit. An application that starts a session per user, a
    /// supervisor that spawns sub-agents, a retry loop that starts over: each sends the same
    /// tools and instructions first. Read from cache they cost a tenth of the input price;
    /// written again they cost the full price, or more with a write fee, on every session.
    ///
    /// ## Example
    /// ```text
    /// session 3 shares its first 9,800 tokens (up to system[0]) with session 2, but no
    /// cache breakpoint ends there: all 9,800 are written again
    /// ```
    ///
    /// ## Use instead
    /// Put a breakpoint at the end of the prefix the sessions share (Anthropic
    /// `"cache_control": {"type": "ephemeral"}` on that block; OpenAI GPT-5.6 and later
    /// `prompt_cache_breakpoint`), so every session and sub-agent reads it. Where sessions
    /// start further apart than the cache keeps a prefix, ask for a longer lifetime (`ttl:
    /// "1h"`) when the sessions it serves pay for the dearer writes, or keep the shared prefix
    /// warm with a small request shortly before it expires.
    pub struct ColdStart {
        name: "cold-start",
        code: "KV508",
        summary: "a session starts cold on a prefix an earlier session sent",
    }
}

impl ColdStart {
    fn finding(issue: &ColdStartIssue) -> Finding {
        let who = if issue.while_running {
            format!("started while session {} was running (a sub-agent or a parallel session)", issue.shared_with + 1)
        } else {
            format!("started after session {}", issue.shared_with + 1)
        };
        let dollars = issue
            .dollars
            .map_or(String::new(), |dollars| format!(", ${dollars:.4} more"));
        let breakpoint = format!(
            "put a cache breakpoint on `{}`, the last block the sessions share, so that every session and sub-agent reads it",
            issue.block
        );
        let (why, help) = match &issue.cause {
            ColdCause::NoEntry => (
                format!("no cache entry ends within reach of it ({} of them served)", issue.cached),
                breakpoint,
            ),
            ColdCause::Expired { gap, lifetime } => {
                let keep_alive = (lifetime.as_secs_f64() - 30.0).max(60.0);
                let mut help = format!(
                    "a longer lifetime (Anthropic `ttl: \"1h\"`, OpenAI `prompt_cache_options.ttl: \"12h\"`) when the sessions it serves pay for the dearer writes, or a request every {} that keeps the shared prefix warm",
                    duration(keep_alive)
                );
                if issue.entry_missing {
                    help = format!("{help}; and {breakpoint}");
                }
                (
                    format!(
                        "the entry expired: {} after its last use, the cache keeps it {}",
                        duration(*gap),
                        duration(lifetime.as_secs_f64())
                    ),
                    help,
                )
            }
        };
        Finding::new(
            Severity::Warning,
            format!(
                "this session {who} and shares its first {} prompt tokens (up to `{}`), but {why}: {} tokens written again instead of read{dollars}",
                issue.shared_tokens,
                issue.block,
                issue.tokens()
            ),
            help,
        )
        .with_tokens_lost(issue.tokens())
    }
}

impl Rule for ColdStart {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    /// Asked for each session of a recording that starts cold.
    fn check(&self, input: &RuleInput<'_>) -> Option<Finding> {
        let RuleInput::Cold { issue, .. } = *input else {
            return None;
        };
        Some(Self::finding(issue))
    }
}

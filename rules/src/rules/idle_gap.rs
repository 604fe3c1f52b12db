use kvlint_core::cache::{IdleFixes, IdleIssue};
use kvlint_request::diagnostic::Severity;

use crate::words::duration;
use crate::{Finding, Rule, RuleInput, RuleMeta, declare_rule};

declare_rule! {
    /// ## What it does
    /// Reads the recorded times of a session's turns (`kvlint check --engine` with a hosted
    /// API) and finds the turns sent longer after the turn before than the API keeps a prefix:
    /// Anthropic 5 minutes unless a breakpoint asks `ttl: "1h"`, OpenAI 30 minutes from
    /// GPT-5.6 on (`prompt_cache_options.ttl: "12h"` for longer) and 5 to 10 before. The
    /// prefix such a turn would have read is written again. Reported once per session, at the
    /// first such turn, with the tokens and dollars all of them cost and the gaps.
    ///
    /// ## Why is this bad?
    /// Not every miss is an edit. A user who reads an answer for six minutes, a tool that
    /// runs for ten, a sub-agent that waits on another: each gap past the lifetime turns the
    /// next turn into a full write of the conversation. In one published month of Claude Code
    /// use, idle gaps were two thirds of the avoidable miss cost.
    ///
    /// ## Example
    /// ```text
    /// turn 7 comes 6 min 40 s after turn 6: Anthropic kept the 48,000-token prefix 5 minutes
    /// ```
    ///
    /// ## Use instead
    /// Where gaps longer than the default lifetime are common, ask for a longer one (Anthropic
    /// `"cache_control": {"type": "ephemeral", "ttl": "1h"}`, writes at 2× the input price
    /// instead of 1.25×; OpenAI `prompt_cache_options.ttl: "12h"`, writes at 2.5×), when the
    /// gaps it covers cost more than the dearer writes; or keep the prefix warm with a small
    /// request shortly before the lifetime ends while the session waits, on the gaps short
    /// enough that its reads cost less than the write they avoid. The finding prices both
    /// over the session: what each saves, what it costs, and whether it pays.
    pub struct IdleGap {
        name: "idle-gap",
        code: "KV507",
        summary: "turns come after the cache's lifetime: the prefix is written again",
    }
}

impl IdleGap {
    fn finding(issue: &IdleIssue) -> Finding {
        let lifetime = duration(issue.lifetime.as_secs_f64());
        let others = match issue.turns {
            1 => String::new(),
            2 => " and 1 later turn".to_owned(),
            count => format!(" and {} later turns", count - 1),
        };
        let dollars = issue
            .dollars
            .map_or(String::new(), |dollars| format!(", ${dollars:.2} more"));
        let help = match &issue.fixes {
            Some(fixes) => priced_help(fixes),
            None => {
                let keep_alive = (issue.lifetime.as_secs_f64() - 30.0).max(60.0);
                format!(
                    "a longer lifetime (Anthropic `ttl: \"1h\"`, OpenAI `prompt_cache_options.ttl: \"12h\"`) serves such gaps at a dearer write; or keep the prefix warm with a request every {} while the session waits",
                    duration(keep_alive)
                )
            }
        };
        Finding::new(
            Severity::Warning,
            format!(
                "turn {}{others} came after the cache's {lifetime} lifetime (longest gap {}): {} prompt tokens written again instead of read{dollars}",
                issue.turn,
                duration(issue.longest_gap),
                issue.tokens
            ),
            help,
        )
        .with_tokens_lost(issue.tokens)
    }
}

/// The fixes with what each saves and costs over the session, and which pays.
fn priced_help(fixes: &IdleFixes) -> String {
    let keep = &fixes.keep_alive;
    let verdict = |saved: f64, cost: f64| if saved > cost { "pays for itself" } else { "does not pay" };
    let mut help = format!(
        "a request every {} while a session waits keeps the prefix warm; it pays on gaps up to {} ({} of these): ${:.4} saved for ${:.4} of reads",
        duration(keep.interval.as_secs_f64()),
        duration(keep.up_to_gap),
        keep.gaps,
        keep.saved,
        keep.cost
    );
    if let Some(longer) = &fixes.longer {
        let ttl = if longer.lifetime.as_secs() >= 12 * 3600 {
            "OpenAI `prompt_cache_options.ttl: \"12h\"`"
        } else {
            "Anthropic `\"ttl\": \"1h\"`"
        };
        help = format!(
            "{help}; a {} lifetime ({ttl}) would serve {} of these gaps, ${:.4} saved for ${:.4} more on every write of the session: it {}",
            duration(longer.lifetime.as_secs_f64()),
            longer.gaps,
            longer.saved,
            longer.extra,
            verdict(longer.saved, longer.extra)
        );
    }
    help
}

impl Rule for IdleGap {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    /// Asked once per session checked with a hosted API's `--engine` and recorded times.
    fn check(&self, input: &RuleInput<'_>) -> Option<Finding> {
        let RuleInput::Idle { issue, .. } = *input else {
            return None;
        };
        Some(Self::finding(issue))
    }
}

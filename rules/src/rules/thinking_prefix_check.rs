use kvlint_protocol::thinking::{BINDING_CONTROLS_BETA, ENFORCED_FOR_ACCOUNTS_FROM};
use kvlint_request::diagnostic::Severity;

use crate::thinking::{Enforcement, ThinkingCause, ThinkingIssue, ThinkingOutcome};
use crate::{Finding, Rule, RuleInput, RuleMeta, declare_rule};

declare_rule! {
    /// ## What it does
    /// Runs Anthropic's prefix check on the `thinking` and `redacted_thinking` blocks a
    /// request sends back to a model that checks them (Claude Fable 5.1 and 5.2, Mythos 5.1
    /// and 5.2, Opus 5.5, Sonnet 5.5, Haiku 5.5), against the turn before, and says what the
    /// API will do: refuse the request with a 400, or drop the block and every later thinking
    /// block. It names the first failing block and what invalidated it: `system`, a tool, an
    /// earlier message and the place in it, a block left out, moved or put back, a tampered
    /// signature, or a model that cannot read the block.
    ///
    /// A block's prefix is the top-level `system`, `tools` and the messages before it, as
    /// they were when the block was produced. Values are compared, not their formatting or
    /// key order; `cache_control` markers, parameters such as `effort` or `max_tokens`, a tool
    /// added with `defer_loading`, and thinking blocks removed from the start or the end of
    /// the history are not edits.
    ///
    /// The same for the reasoning items a Responses request sends back to GPT-6.2 or a later
    /// model, which the API drops (the request succeeds) after a prefix edit (earlier input
    /// items, `tools`, `text.format`), a downgrade to an earlier model, or a change of end
    /// user.
    ///
    /// The check is enforced by default for accounts created on or after 2026-08-31, on every
    /// account for Fable 5.2 and Mythos 5.2, and on any request that sets
    /// `thinking.block_binding.prefix_mismatch_behavior`. The account's date is not in the
    /// request: set `anthropic-account-created = "YYYY-MM-DD"` in `kvlint.toml`; without it
    /// the finding says it assumed a new account. On an older account a failing request is
    /// let through, which the finding says (info), as newer accounts refuse it.
    ///
    /// ## Why is this bad?
    /// On these models a prefix break no longer only costs a cache miss: the request fails
    /// ("Invalid `signature` in `thinking` block. The block is bound to a different
    /// conversation"), or, with `drop_block`, the model loses its earlier reasoning and
    /// spends tokens redoing it. Agent harnesses and gateways that edit history, inject
    /// per-turn reminders into earlier turns or rebuild the system prompt hit it on their
    /// first long session.
    ///
    /// ## Example
    /// ```python
    /// system = f"Today is {today}. You are a coding agent."   # rebuilt each turn
    /// client.messages.create(model="claude-opus-5-5", system=system,
    ///                        thinking={"type": "enabled"}, messages=history)
    /// ```
    ///
    /// ## Use instead
    /// Keep `system`, `tools` and earlier messages exactly as sent. Append an update as a
    /// `role: "system"` message or put it in the newest user turn; leave turn-scoped reminders
    /// where they were; send each thinking block back exactly as returned, in order. Where a
    /// break is intended, set `thinking.block_binding.prefix_mismatch_behavior: "drop_block"`
    /// (with the `thinking-binding-controls-2026-08-01` beta header) so the request succeeds
    /// without the invalid blocks.
    pub struct ThinkingPrefixCheck {
        name: "thinking-prefix-check",
        code: "KV303",
        summary: "returned thinking blocks or reasoning items fail the API's prefix check: the request is refused or loses them",
    }
}

impl ThinkingPrefixCheck {
    fn finding(issue: &ThinkingIssue) -> Finding {
        let block = &issue.block;
        let item = issue.item;
        let later = match issue.failing_blocks.saturating_sub(1) {
            0 => String::new(),
            1 => format!(" and the {item} after it"),
            count => format!(" and the {count} {item}s after it"),
        };
        let fail = if issue.failing_blocks > 1 { "fail" } else { "fails" };
        let why = cause_words(&issue.cause);
        match issue.outcome {
            ThinkingOutcome::Refused(enforcement) => {
                let assumed = match enforcement {
                    Enforcement::AssumedNewAccount => format!(
                        "; assuming an account created on or after {ENFORCED_FOR_ACCOUNTS_FROM}, where the check is on by default"
                    ),
                    Enforcement::EveryAccount => "; on every account".to_owned(),
                    Enforcement::NewAccount => format!(
                        "; on an account created on or after {ENFORCED_FOR_ACCOUNTS_FROM}"
                    ),
                    Enforcement::Always => String::new(),
                };
                Finding::new(
                    Severity::Error,
                    format!(
                        "{} refuses this request (400): {item} `{block}`{later} {fail} the prefix check: {why}{assumed}",
                        issue.model
                    ),
                    help(issue),
                )
            }
            ThinkingOutcome::Dropped => Finding::new(
                Severity::Warning,
                format!(
                    "{} drops {item} `{block}`{later} ({} tokens of earlier reasoning): {why}",
                    issue.model, issue.failing_tokens
                ),
                help(issue),
            )
            .with_tokens_lost(issue.failing_tokens),
            ThinkingOutcome::Allowed => Finding::new(
                Severity::Info,
                format!(
                    "{} lets this request through on an account created before {ENFORCED_FOR_ACCOUNTS_FROM}, and refuses it (400) on newer ones: {item} `{block}`{later} {fail} the prefix check: {why}",
                    issue.model
                ),
                help(issue),
            ),
        }
    }
}

/// What invalidated the block, in words.
fn cause_words(cause: &ThinkingCause) -> String {
    match cause {
        ThinkingCause::System => "`system` changed since it was produced".to_owned(),
        ThinkingCause::Tool { name } => format!("tool `{name}` changed since it was produced"),
        ThinkingCause::Message { place } => {
            format!("`{place}` changed since it was produced")
        }
        ThinkingCause::BlockLeftOut => {
            "a thinking block before it was left out, between others".to_owned()
        }
        ThinkingCause::BlockMoved => "it is sent in another order than it was produced".to_owned(),
        ThinkingCause::BlockPutBack => {
            "it is not among the blocks the turn before sent back (removed, then put back)"
                .to_owned()
        }
        ThinkingCause::Tampered => {
            "its signature belongs to a block with other content (tampered or re-signed); `prefix_mismatch_behavior` does not apply".to_owned()
        }
        ThinkingCause::Unreadable { producer } => {
            format!("it was produced by {producer}, whose thinking blocks this model does not read (dropped without an error)")
        }
        ThinkingCause::Downgrade { from } => {
            format!("the turn before ran on {from}, a later model: a downgrade")
        }
        ThinkingCause::EndUserChanged => {
            "the end user (`user`, `safety_identifier`) is another than the turn before's".to_owned()
        }
    }
}

/// The documented fix for each cause.
fn help(issue: &ThinkingIssue) -> String {
    let cause = &issue.cause;
    if issue.item == "reasoning item" {
        return match cause {
            ThinkingCause::Downgrade { .. } => {
                "keep a conversation on one model; start a new conversation to switch to an earlier one".to_owned()
            }
            ThinkingCause::EndUserChanged => {
                "send the same `user` and `safety_identifier` for every turn of a conversation".to_owned()
            }
            _ => {
                "keep `tools`, `text.format` and the earlier input items exactly as sent; put a turn's new directions in `instructions` (from GPT-6.2 on they do not change the prefix) or the newest message".to_owned()
            }
        };
    }
    let or_drop = format!(
        "; or set `thinking.block_binding.prefix_mismatch_behavior: \"drop_block\"` (beta `{BINDING_CONTROLS_BETA}`) so the request succeeds without the invalid blocks"
    );
    match cause {
        ThinkingCause::System => format!(
            "leave `system` as sent: append a `role: \"system\"` message or put the update in the newest user turn{or_drop}"
        ),
        ThinkingCause::Tool { .. } => format!(
            "keep `tools` as sent: add a new tool with `defer_loading: true`{or_drop}"
        ),
        ThinkingCause::Message { .. } => format!(
            "send earlier messages back exactly as sent: leave turn-scoped reminders where they were and do not re-render the first user message{or_drop}"
        ),
        ThinkingCause::BlockLeftOut | ThinkingCause::BlockMoved | ThinkingCause::BlockPutBack => {
            format!(
                "send thinking blocks back in the order returned; remove them only from the start or the end of the history, and never put one back{or_drop}"
            )
        }
        ThinkingCause::Tampered => {
            "send each thinking block back exactly as the API returned it, its text and signature together".to_owned()
        }
        ThinkingCause::Unreadable { .. } => {
            "keep a session on one model, or leave the other model's thinking blocks out when switching".to_owned()
        }
        ThinkingCause::Downgrade { .. } | ThinkingCause::EndUserChanged => String::new(),
    }
}

impl Rule for ThinkingPrefixCheck {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    /// Asked about each turn that sends thinking blocks back, beside the pair's cache break.
    fn check(&self, input: &RuleInput<'_>) -> Option<Finding> {
        let RuleInput::Thinking { issue, .. } = *input else {
            return None;
        };
        Some(Self::finding(issue))
    }
}

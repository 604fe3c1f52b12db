//! Anthropic's preserved thinking: which models check the prefix of a `thinking` or
//! `redacted_thinking` block sent back to them, when the check is enforced, what a request
//! asks to happen to a block that fails it, and which models read which models' blocks.
//!
//! As documented on platform.claude.com (read 2026-12-07):
//! `docs/en/build-with-claude/preserved-thinking`, its `prefix-checks` page (the table "What
//! counts as an edit"), `…/fix-bound-to-a-different-conversation`, and
//! `docs/en/models/fable-5-2/whats-new-fable-5-2`; Amazon Bedrock's
//! `claude-messages-thinking-block-binding` page for Claude Haiku 5.5's blocks.
//!
//! "The top-level `system` prompt, `tools`, and `messages` before the block are its prefix. If
//! the prefix differs from what you sent when the block was produced, that block and every
//! later thinking block are invalid." A request that sends back an invalid block is refused
//! with a 400 (`prefix_mismatch_behavior: "error"`, the default), or the block and every later
//! thinking block are dropped (`"drop_block"`). "The API enforces the prefix check by default
//! for accounts created on or after August 31, 2026, 00:00 UTC. On older accounts, it enforces
//! the prefix check only on requests that set
//! `thinking.block_binding.prefix_mismatch_behavior`." On Claude Fable 5.2 and Claude Mythos
//! 5.2 it applies to every account.

use serde_json::Value;

/// Accounts created on or after this day (00:00 UTC) have the prefix check enforced by
/// default.
pub const ENFORCED_FOR_ACCOUNTS_FROM: &str = "2026-08-31";

/// The `anthropic-beta` value that `prefix_mismatch_behavior` and the response's
/// `input_transformations` need.
pub const BINDING_CONTROLS_BETA: &str = "thinking-binding-controls-2026-08-01";

/// The models whose blocks carry a binding, by the model-name prefix they are called by,
/// longest first so that `claude-fable-5-2` is not read as `claude-fable-5`.
const CHECKING_MODELS: [(&str, ThinkingModel); 7] = [
    ("claude-fable-5-2", ThinkingModel::Fable52),
    ("claude-mythos-5-2", ThinkingModel::Mythos52),
    ("claude-fable-5-1", ThinkingModel::Fable51),
    ("claude-mythos-5-1", ThinkingModel::Mythos51),
    ("claude-opus-5-5", ThinkingModel::Opus55),
    ("claude-sonnet-5-5", ThinkingModel::Sonnet55),
    ("claude-haiku-5-5", ThinkingModel::Haiku55),
];

/// A model that runs the prefix check on the thinking blocks sent back to it (the
/// prefix-checks page's supported models).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThinkingModel {
    Fable52,
    Mythos52,
    Fable51,
    /// The preserved-thinking page of 2026-09-26 said Mythos 5.1 records the binding without
    /// checking it; the Fable 5.2 page (November 2026) lists it among the models that refuse.
    /// The later page is followed.
    Mythos51,
    Opus55,
    Sonnet55,
    Haiku55,
}

impl ThinkingModel {
    /// The checking model a request's `model` names (a dated id such as
    /// `claude-opus-5-5-20260922` included).
    pub fn of(model: &str) -> Option<Self> {
        CHECKING_MODELS
            .iter()
            .find(|(prefix, _)| model.starts_with(prefix))
            .map(|(_, checking)| *checking)
    }

    /// Whether the check is enforced whatever the account's creation date.
    pub fn enforced_on_every_account(self) -> bool {
        matches!(self, Self::Fable52 | Self::Mythos52)
    }
}

/// Whether a model reads a thinking block another model produced, where the documentation
/// says: `Some(false)` when the block is dropped from the request without an error,
/// `Some(true)` when it is read, `None` when the documentation does not say.
pub fn reads_blocks_of(reader: &str, producer: &str) -> Option<bool> {
    let family = |model: &str| {
        ["fable", "mythos", "opus", "sonnet", "haiku"]
            .into_iter()
            .find(|family| model.starts_with(&format!("claude-{family}")))
    };
    if same_model(reader, producer) {
        return Some(true);
    }
    let reader_model = ThinkingModel::of(reader);
    let producer_model = ThinkingModel::of(producer);
    // "Only Claude Fable 5.2 and Claude Mythos 5.2 read Claude Fable 5.2 thinking blocks."
    if producer_model == Some(ThinkingModel::Fable52) {
        return Some(matches!(
            reader_model,
            Some(ThinkingModel::Fable52 | ThinkingModel::Mythos52)
        ));
    }
    // Haiku 5.5's blocks "replay unchanged on other models"; another model's block replayed
    // on Haiku 5.5 "is dropped as model_binding_mismatch" (Bedrock).
    if producer_model == Some(ThinkingModel::Haiku55) {
        return Some(true);
    }
    if reader_model == Some(ThinkingModel::Haiku55) {
        return Some(false);
    }
    match reader_model {
        // "Claude Fable 5.1 reads blocks from Claude Opus 5 and, on the Claude API, from
        // Claude Opus 5.5."
        Some(ThinkingModel::Fable51) if producer.starts_with("claude-opus-5") => Some(true),
        // "Claude Opus 5.5 reads thinking blocks from Claude Opus 5 and earlier Opus, Sonnet,
        // and Haiku models, but not from Claude Fable or Claude Mythos models."
        Some(ThinkingModel::Opus55) => match family(producer) {
            Some("fable" | "mythos") => Some(false),
            Some("opus" | "sonnet" | "haiku") => Some(true),
            _ => None,
        },
        // "neither Claude Opus 5 nor Claude Opus 5.5 reads blocks from Claude Fable 5.1."
        _ if reader.starts_with("claude-opus-5")
            && producer_model == Some(ThinkingModel::Fable51) =>
        {
            Some(false)
        }
        _ => None,
    }
}

/// Two model names for one model: equal, or one a dated id of the other.
fn same_model(one: &str, other: &str) -> bool {
    let named = |model: &str| {
        CHECKING_MODELS
            .iter()
            .find(|(prefix, _)| model.starts_with(prefix))
            .map(|(prefix, _)| *prefix)
    };
    match (named(one), named(other)) {
        (Some(one), Some(other)) => one == other,
        _ => one == other,
    }
}

/// What a request asks the API to do with a thinking block that fails the prefix check
/// (`thinking.block_binding.prefix_mismatch_behavior`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MismatchBehavior {
    /// `"error"`, the default: the request is refused with a 400 naming the first failing
    /// block.
    Error,
    /// `"drop_block"`: the failing block and every later thinking block are dropped, and the
    /// request succeeds (listed in the response's `input_transformations`).
    DropBlock,
}

impl MismatchBehavior {
    /// What the body sets, `None` when it sets nothing (or a value the API does not define).
    pub fn requested(body: &Value) -> Option<Self> {
        match body
            .pointer("/thinking/block_binding/prefix_mismatch_behavior")?
            .as_str()?
        {
            "error" => Some(Self::Error),
            "drop_block" => Some(Self::DropBlock),
            _ => None,
        }
    }
}

/// Whether a content block is one the prefix check binds: `thinking` or `redacted_thinking`.
pub fn is_thinking_block(block: &Value) -> bool {
    matches!(
        block.get("type").and_then(Value::as_str),
        Some("thinking" | "redacted_thinking")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checking_models_are_told_by_their_longest_prefix() {
        assert_eq!(
            ThinkingModel::of("claude-fable-5-2-20261109"),
            Some(ThinkingModel::Fable52)
        );
        assert_eq!(
            ThinkingModel::of("claude-fable-5-1"),
            Some(ThinkingModel::Fable51)
        );
        assert_eq!(ThinkingModel::of("claude-fable-5"), None);
        assert_eq!(ThinkingModel::of("claude-sonnet-4-5"), None);
        assert!(ThinkingModel::Mythos52.enforced_on_every_account());
        assert!(!ThinkingModel::Opus55.enforced_on_every_account());
    }

    #[test]
    fn which_model_reads_which_blocks_is_as_documented() {
        assert_eq!(
            reads_blocks_of("claude-mythos-5-2", "claude-fable-5-2"),
            Some(true)
        );
        assert_eq!(
            reads_blocks_of("claude-opus-5-5", "claude-fable-5-2"),
            Some(false)
        );
        assert_eq!(
            reads_blocks_of("claude-fable-5-1", "claude-opus-5-5"),
            Some(true)
        );
        assert_eq!(
            reads_blocks_of("claude-opus-5-5", "claude-fable-5-1"),
            Some(false)
        );
        assert_eq!(
            reads_blocks_of("claude-opus-5", "claude-fable-5-1"),
            Some(false)
        );
        assert_eq!(
            reads_blocks_of("claude-opus-5-5", "claude-sonnet-4-5"),
            Some(true)
        );
        assert_eq!(
            reads_blocks_of("claude-sonnet-5-5", "claude-haiku-5-5"),
            Some(true)
        );
        assert_eq!(
            reads_blocks_of("claude-haiku-5-5", "claude-sonnet-5-5"),
            Some(false)
        );
        assert_eq!(
            reads_blocks_of("claude-opus-5-5-20260922", "claude-opus-5-5"),
            Some(true)
        );
        assert_eq!(
            reads_blocks_of("claude-sonnet-5-5", "claude-opus-5-5"),
            None
        );
    }

    #[test]
    fn the_requested_behaviour_is_read_from_the_body() {
        let body = |value: &str| {
            serde_json::json!({"thinking": {"type": "enabled",
                "block_binding": {"prefix_mismatch_behavior": value}}})
        };
        assert_eq!(
            MismatchBehavior::requested(&body("drop_block")),
            Some(MismatchBehavior::DropBlock)
        );
        assert_eq!(
            MismatchBehavior::requested(&body("error")),
            Some(MismatchBehavior::Error)
        );
        assert_eq!(MismatchBehavior::requested(&body("other")), None);
        assert_eq!(MismatchBehavior::requested(&serde_json::json!({})), None);
    }
}

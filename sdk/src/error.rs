//! What the conversation refuses, and why.

use thiserror::Error;

use crate::conversation::PrefixChange;

/// An input the conversation refuses: one the provider would reject, a body or response it
/// cannot read, or (in strict mode) a change that would break the cached prefix.
#[derive(Clone, Debug, PartialEq, Error, miette::Diagnostic)]
pub enum ConversationError {
    /// An empty text: Anthropic rejects empty text blocks, and it says nothing.
    #[error("empty {role} message: Anthropic rejects empty text blocks")]
    #[diagnostic(
        code(kvlint_sdk::empty),
        help("skip the message, or send what it was meant to say")
    )]
    Empty { role: &'static str },

    /// A tool call whose arguments are not a JSON object.
    #[error(
        "tool call `{call_id}`: the arguments are not a JSON object ({reason}): Anthropic rejects a `tool_use` whose `input` is not an object, and vLLM parses them before rendering (400)"
    )]
    #[diagnostic(
        code(kvlint_sdk::tool_arguments),
        help("repair the model's arguments, or answer the call with an error result")
    )]
    ToolArguments { call_id: String, reason: String },

    /// A tool result for a call no assistant message in history made.
    #[error("tool result for `{call_id}`: no assistant message in history made that call")]
    #[diagnostic(
        code(kvlint_sdk::unknown_call),
        help(
            "every API rejects a tool result without its call; append the assistant message with the call first"
        )
    )]
    UnknownToolCall { call_id: String },

    /// An assistant message first in history.
    #[error(
        "history would start with an assistant message: Anthropic and Bedrock require a user message first"
    )]
    #[diagnostic(code(kvlint_sdk::assistant_first))]
    AssistantFirst,

    /// Strict mode: a change to a tier after the prefix was sent.
    #[error(
        "{change} after the first request: strict mode refuses it (it would recompute {lost_blocks} cached block(s)); the prefix changes only at a compaction, which can fold in a summary"
    )]
    #[diagnostic(
        code(kvlint_sdk::committed_tier),
        help(
            "add it before the first request, put per-turn values in `add_turn_context`, or fold a summary into the prefix when compacting (`Conversation::compact_with_summary`)"
        )
    )]
    CommittedTier {
        change: PrefixChange,
        lost_blocks: usize,
    },

    /// Strict mode: a volatile value in a tier that is cached across turns.
    #[error(
        "{tier} tier: {class} `{value}` changes from request to request and breaks the cache after it ({rule})"
    )]
    #[diagnostic(
        code(kvlint_sdk::volatile),
        help("put per-turn values in `add_turn_context`, which goes last")
    )]
    Volatile {
        tier: &'static str,
        class: &'static str,
        value: String,
        rule: &'static str,
    },

    /// A body or response that is not one of the three APIs' shapes.
    #[error("`{path}`: {message}")]
    #[diagnostic(code(kvlint_sdk::body))]
    Body { path: String, message: String },
}

impl ConversationError {
    pub(crate) fn body(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Body {
            path: path.into(),
            message: message.into(),
        }
    }
}

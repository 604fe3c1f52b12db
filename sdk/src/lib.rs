//! # kvlint-sdk

mod adapters;
pub mod canonical;
mod conversation;
mod fingerprint;
mod guard;
mod tool;

pub use adapters::{ANTHROPIC_DEFAULT_MAX_TOKENS, RenderError};
pub use conversation::{CacheBreak, Conversation, HistoryWindow, Message, PrefixChange, Role};
pub use fingerprint::{PrefixFingerprint, ROUTING_KEY_HEADER, SGLANG_ROUTING_KEY_HEADER};
pub use guard::{Guard, GuardCounters, GuardError, GuardMode};
pub use tool::{Tool, ToolCall, ToolDefinitionError};

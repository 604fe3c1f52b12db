//! The protocol facts kvlint reads requests by, each with one owner: every crate of the
//! workspace, the SDK without its features, the proxy, the workload crate and the language
//! bindings (Python through its native module) call these and restate none of them.
//!
//! - [`format`]: which API a request body is written for ([`BodyFormat::detect`]).
//! - [`endpoint`]: which HTTP paths carry a prompt, and which recorded calls take none.
//! - [`key`]: the session key and the routing key a request carries, each precedence written
//!   once as a table ([`key::SESSION_KEY`], [`key::ROUTING_KEY`]), and the routing headers.
//! - [`grouping`]: which session a request belongs to, the one grouping of recordings and
//!   of the proxy's live traffic.
//! - [`engine`]: the engines and APIs by name ([`EngineName`]) and the one reader of their
//!   specs (`vllm:block=16`, `llamacpp:slots=4`, `anthropic:MODEL`).
//! - [`chain`]: the prefix hash chain over a prompt's blocks and the routing key derived from
//!   its head, which the SDK sends and `kvlint probe` derives for recorded requests.
//! - [`common_prefix`]: how far two sequences agree from the start.
//! - [`openai`]: what the Responses API does differently from GPT-6.2 on (`instructions`
//!   after `input`, reasoning items dropped after prefix edits).
//! - [`thinking`]: Anthropic's preserved thinking: which models check a returned thinking
//!   block's prefix, when it is enforced, and which models read which models' blocks.
//! - Anthropic's breakpoint rules ([`ANTHROPIC_LOOKBACK_BLOCKS`], [`ANTHROPIC_MAX_BREAKPOINTS`]).
//!
//! It depends on serde_json and blake3 alone, so that anything that embeds kvlint (a wasm or
//! Node build, the SDK without its analysis) compiles it in seconds.
//!
//! ```
//! use kvlint_protocol::{BodyFormat, key::Carried};
//! use serde_json::json;
//!
//! let body = json!({"model": "m", "input": "hi", "prompt_cache_key": "session-7"});
//! assert_eq!(BodyFormat::detect(body.as_object().unwrap()), Some(BodyFormat::OpenAiResponses));
//! assert_eq!(Carried::body(&body).session_key().as_deref(), Some("session-7"));
//! ```

pub mod chain;
pub mod common_prefix;
pub mod endpoint;
pub mod engine;
pub mod format;
pub mod grouping;
pub mod key;
pub mod openai;
pub mod thinking;

pub use chain::{PrefixChain, PrefixTier, routing_key};
pub use common_prefix::{common_prefix_len, common_slice_prefix_len};
pub use engine::{EngineName, Spec, SpecError};
pub use format::BodyFormat;
pub use key::{ROUTING_KEY_HEADER, SGLANG_ROUTING_KEY_HEADER};

/// Anthropic: a breakpoint looks for an entry at most this many blocks back.
pub const ANTHROPIC_LOOKBACK_BLOCKS: usize = 20;
/// Anthropic: at most this many breakpoints in a request.
pub const ANTHROPIC_MAX_BREAKPOINTS: usize = 4;

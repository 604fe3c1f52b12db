//! The routing key: one name for a session's stable prefix, which a gateway hashes on to send
//! every request of the session to the replica whose cache holds that prefix.
//!
//! The key is the head of a hash chain over the prompt's blocks in render order. The SDK
//! feeds the chain its conversation's tiers (tools, static, session) and sends the key as
//! OpenAI's `prompt_cache_key` and in the routing headers; `kvlint probe` reads a recorded
//! request's `prompt_cache_key` and, for a request that has none, feeds the same chain the
//! recorded request's head ([`request_routing_key`]).
//!
//! ```
//! use kvlint_core::routing::{PrefixTier, routing_key};
//!
//! let tools = r#"{"description":"Read a file.","name":"read_file","parameters":{}}"#;
//! let first = routing_key([(PrefixTier::Tool, tools), (PrefixTier::Static, "Be terse.")]);
//! let second = routing_key([(PrefixTier::Tool, tools), (PrefixTier::Static, "Be verbose.")]);
//! assert_eq!(first.len(), 32);
//! assert_ne!(first, second);
//! ```

use serde_json::Value;

use crate::request::{PartKind, Request};

/// The header a gateway or load balancer reads to send a session to the replica that holds
/// its prefix (kvlint's own name; configure your gateway's sticky routing on it).
pub const ROUTING_KEY_HEADER: &str = "x-kvlint-routing-key";

/// The header the SGLang Model Gateway (SMG, formerly the SGLang router) reads as the routing
/// key of its `consistent_hashing` policy: requests with the same key go to the same worker.
pub const SGLANG_ROUTING_KEY_HEADER: &str = "X-SMG-Routing-Key";

/// Hex characters of a chain hash kept in the routing key: 128 bits, enough that two
/// sessions never share a key by chance, short enough for a header and `prompt_cache_key`.
const ROUTING_KEY_LENGTH: usize = 32;

/// The chain's starting value; a new version of the chain changes it, so that keys of
/// different derivations never collide.
const CHAIN_SEED: &[u8] = b"kvlint-prefix-v1";

/// The tier a block of the prefix belongs to. It is hashed with the block, so equal text in
/// different tiers (a tool's JSON and a system block that quotes it) makes different chains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrefixTier {
    /// A tool definition.
    Tool,
    /// Instructions that hold across sessions.
    Static,
    /// Content stable for one session (user profile, memory).
    Session,
    /// A history message.
    Message,
}

impl PrefixTier {
    fn as_str(self) -> &'static str {
        match self {
            Self::Tool => "tool",
            Self::Static => "static",
            Self::Session => "session",
            Self::Message => "message",
        }
    }
}

/// A running blake3 hash chain over a prompt's blocks: each link hashes the previous link,
/// the block's tier and its content, so two prompts share their first `k` links exactly when
/// they share their first `k` blocks.
#[derive(Clone, Debug)]
pub struct PrefixChain {
    last: blake3::Hash,
    links: Vec<String>,
}

impl Default for PrefixChain {
    fn default() -> Self {
        Self::new()
    }
}

impl PrefixChain {
    pub fn new() -> Self {
        Self {
            last: blake3::hash(CHAIN_SEED),
            links: Vec::new(),
        }
    }

    /// Adds the next block of the prompt.
    pub fn push(&mut self, tier: PrefixTier, content: &str) {
        let mut hasher = blake3::Hasher::new();
        hasher.update(self.last.as_bytes());
        hasher.update(tier.as_str().as_bytes());
        // The separator keeps a tier name and content that starts with letters apart.
        hasher.update(&[0]);
        hasher.update(content.as_bytes());
        self.last = hasher.finalize();
        self.links.push(self.last.to_hex().to_string());
    }

    /// The routing key of the blocks pushed so far.
    pub fn routing_key(&self) -> String {
        self.last.to_hex()[..ROUTING_KEY_LENGTH].to_owned()
    }

    /// Each link of the chain (hex), one per block pushed, oldest first.
    pub fn links(&self) -> &[String] {
        &self.links
    }

    pub fn into_links(self) -> Vec<String> {
        self.links
    }
}

/// The routing key of a prompt whose stable head is `head`: its blocks in render order, each
/// with its tier.
pub fn routing_key<'a>(head: impl IntoIterator<Item = (PrefixTier, &'a str)>) -> String {
    let mut chain = PrefixChain::new();
    for (tier, content) in head {
        chain.push(tier, content);
    }
    chain.routing_key()
}

/// The routing key of a recorded request: its `prompt_cache_key` (the SDK sets it to the
/// conversation's key), else [`routing_key`] over the request's head.
///
/// The head of a recorded request is what every later turn of its session sends again
/// unchanged: the tool definitions, the system text outside the messages (Anthropic's
/// `system`, the Responses `instructions`) and the first message (a system prompt, or the
/// opening user message when there is none). Settings such as `tool_choice` are left out: an
/// agent may change them between turns, and the key must not move with them.
pub fn request_routing_key(request: &Request) -> String {
    if let Some(key) = request.body.get("prompt_cache_key").and_then(Value::as_str) {
        return key.to_owned();
    }
    let head = request
        .parts
        .iter()
        .filter(|part| !part.kind.is_structural())
        .filter_map(|part| match (part.kind, part.message) {
            (PartKind::Tool, _) => Some((PrefixTier::Tool, &*part.text)),
            (PartKind::System, None) | (_, Some(0)) => Some((PrefixTier::Static, &*part.text)),
            _ => None,
        });
    routing_key(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(body: Value) -> Request {
        Request::from_body(&body).unwrap()
    }

    #[test]
    fn the_chain_is_the_one_the_sdk_has_always_sent() {
        // Keys already sent as `prompt_cache_key` stay the same: a gateway keeps its routes.
        assert_eq!(routing_key([]), "f41d3139d3dbc8cd1eeeb0aaf86698c7");
        let tool = r#"{"description":"Read a file.","name":"read_file","parameters":{"properties":{"path":{"type":"string"}},"type":"object"}}"#;
        let head = [
            (PrefixTier::Tool, tool),
            (PrefixTier::Static, "You are a coding agent."),
            (PrefixTier::Session, "memory\0Ada prefers Rust"),
        ];
        assert_eq!(routing_key(head), "f4ea102cf08995b12f235e7609b39dd9");
    }

    #[test]
    fn a_recorded_prompt_cache_key_is_the_routing_key() {
        let body = serde_json::json!({
            "model": "m",
            "prompt_cache_key": "session-7",
            "messages": [{"role": "user", "content": "hi"}],
        });
        assert_eq!(request_routing_key(&request(body)), "session-7");
    }

    #[test]
    fn a_recorded_key_holds_for_the_session_and_ignores_settings() {
        let first = serde_json::json!({
            "model": "m",
            "tools": [{"type": "function", "function": {"name": "read_file", "parameters": {}}}],
            "messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"}],
        });
        let mut later = first.clone();
        later["tool_choice"] = serde_json::json!("required");
        later["messages"].as_array_mut().unwrap().extend([
            serde_json::json!({"role": "assistant", "content": "hello"}),
            serde_json::json!({"role": "user", "content": "bye"}),
        ]);
        assert_eq!(
            request_routing_key(&request(first.clone())),
            request_routing_key(&request(later))
        );
        let mut other = first.clone();
        other["messages"][0]["content"] = serde_json::json!("Be verbose.");
        assert_ne!(
            request_routing_key(&request(first)),
            request_routing_key(&request(other))
        );
    }
}

//! The prefix hash chain: a blake3 chain over a prompt's blocks in render order, and the
//! routing key derived from its head.
//!
//! ```
//! use kvlint_protocol::chain::{PrefixTier, routing_key};
//!
//! let tools = r#"{"description":"Read a file.","name":"read_file","parameters":{}}"#;
//! let first = routing_key([(PrefixTier::Tool, tools), (PrefixTier::Static, "Be terse.")]);
//! let second = routing_key([(PrefixTier::Tool, tools), (PrefixTier::Static, "Be verbose.")]);
//! assert_eq!(first.len(), 32);
//! assert_ne!(first, second);
//! ```

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

#[cfg(test)]
mod tests {
    use super::*;

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
}

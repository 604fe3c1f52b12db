//! Prefix identity: a hash chain over the prompt's blocks, and the routing key derived from it.
//! The chain, the key and the headers are [`kvlint_protocol`]'s, which `kvlint probe` derives
//! the same way.

use kvlint_protocol::{PrefixChain, PrefixTier};
pub use kvlint_protocol::{ROUTING_KEY_HEADER, SGLANG_ROUTING_KEY_HEADER};

use crate::conversation::Conversation;

/// The identity of a conversation's stable prefix.
///
/// `blocks[i]` is the blake3 hash of block `i` chained with `blocks[i − 1]`, over the blocks
/// in render order: each tool (canonical JSON), each static block, each session block, each
/// history message (the turn tier is not part of the prefix). Two prompts share their first
/// `k` blocks exactly when their first `k` hashes are equal, so a router can match partial
/// prefixes by comparing hashes from the start.
///
/// `key` is the chain hash after the tools and the static tier, shortened: the part of the
/// prompt every session shares and every compaction keeps, so that a session stays on the
/// replica that holds it, also across compactions (it changes only when a compaction applies
/// a new tool or static block).
///
/// ```
/// use kvlint_sdk::Conversation;
///
/// let mut conversation = Conversation::new();
/// conversation.add_static("You are a coding agent.").add_session("user", "Ada, prefers Rust");
/// conversation.push_user("Fix the failing test.");
/// let first = conversation.fingerprint();
/// conversation.push_assistant("Looking at it.", []).push_user("Thanks");
/// let second = conversation.fingerprint();
/// assert_eq!(first.key, second.key);
/// assert_eq!(second.common_blocks(&first), first.blocks.len());
/// assert_eq!(second.blocks.len(), first.blocks.len() + 2);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrefixFingerprint {
    /// Chained blake3 hashes (hex), one per block.
    pub blocks: Vec<String>,
    /// The routing key: sent as OpenAI's `prompt_cache_key` and in the routing headers.
    pub key: String,
}

impl PrefixFingerprint {
    pub(crate) fn of(conversation: &Conversation) -> Self {
        let mut chain = PrefixChain::new();
        for tool in conversation.tools.values() {
            chain.push(PrefixTier::Tool, &tool.canonical_text());
        }
        for text in &conversation.static_blocks {
            chain.push(PrefixTier::Static, text);
        }
        let key = chain.routing_key();
        for (key, text) in &conversation.session_blocks {
            chain.push(PrefixTier::Session, &format!("{key}\0{text}"));
        }
        for message in &conversation.history {
            chain.push(PrefixTier::Message, &message.canonical_text());
        }
        Self {
            blocks: chain.into_links(),
            key,
        }
    }

    /// How many leading blocks two fingerprints share.
    pub fn common_blocks(&self, other: &Self) -> usize {
        self.blocks
            .iter()
            .zip(&other.blocks)
            .take_while(|(a, b)| a == b)
            .count()
    }
}

impl Conversation {
    /// The routing headers: `x-kvlint-routing-key` for gateways and `X-SMG-Routing-Key` for
    /// SGLang's gateway, both carrying [`Conversation::routing_key`].
    pub fn routing_headers(&self) -> [(&'static str, String); 2] {
        let key = self.routing_key();
        [
            (ROUTING_KEY_HEADER, key.clone()),
            (SGLANG_ROUTING_KEY_HEADER, key),
        ]
    }
}

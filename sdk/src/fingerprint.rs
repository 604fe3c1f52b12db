//! Prefix identity: a hash chain over the prompt's blocks, and the routing key derived from it.

use crate::conversation::Conversation;

/// The header a gateway or load balancer reads to send a session to the replica that holds
/// its prefix (kvlint's own name; configure your gateway's sticky routing on it).
pub const ROUTING_KEY_HEADER: &str = "x-kvlint-routing-key";

/// The header the SGLang Model Gateway (SMG, formerly the SGLang router) reads as the routing
/// key of its `consistent_hashing` policy: requests with the same key go to the same worker.
pub const SGLANG_ROUTING_KEY_HEADER: &str = "X-SMG-Routing-Key";

/// Hex characters of a chain hash kept in the routing key.
const ROUTING_KEY_LENGTH: usize = 32;

/// The identity of a conversation's stable prefix.
///
/// `blocks[i]` is the blake3 hash of block `i` chained with `blocks[i − 1]`, over the blocks
/// in render order: each tool (canonical JSON), each static block, each session block, each
/// history message (the turn tier is not part of the prefix). Two prompts share their first
/// `k` blocks exactly when their first `k` hashes are equal, so a router can match partial
/// prefixes by comparing hashes from the start.
///
/// `key` is the chain hash after the session tier, shortened: equal for every turn of a
/// session (it changes only with an explicit compaction), different between sessions whose
/// session blocks differ.
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
        let mut chain = Chain {
            last: blake3::hash(b"kvlint-prefix-v1"),
            blocks: Vec::new(),
        };
        for tool in conversation.tools.values() {
            chain.push("tool", &tool.canonical_text());
        }
        for text in &conversation.static_blocks {
            chain.push("static", text);
        }
        for (key, text) in &conversation.session_blocks {
            chain.push("session", &format!("{key}\0{text}"));
        }
        let key = chain.last.to_hex()[..ROUTING_KEY_LENGTH].to_owned();
        for message in &conversation.history {
            chain.push("message", &message.canonical_text());
        }
        let blocks = chain.blocks;
        Self { blocks, key }
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

/// The running hash chain.
struct Chain {
    last: blake3::Hash,
    blocks: Vec<String>,
}

impl Chain {
    fn push(&mut self, tier: &str, content: &str) {
        let mut hasher = blake3::Hasher::new();
        hasher.update(self.last.as_bytes());
        hasher.update(tier.as_bytes());
        hasher.update(&[0]);
        hasher.update(content.as_bytes());
        self.last = hasher.finalize();
        self.blocks.push(self.last.to_hex().to_string());
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

//! Where a request finds the sessions it may join without being compared with every session
//! seen: the sessions by how their last conversation opens (a continuation, a rewrite, a retry
//! opens as the session does), by what a one-message conversation would be without a per-turn
//! tail, and by the user messages it ends with (where a compaction starts). Every hash holds
//! the session's key, so a session is found only under its own.

use std::collections::{BTreeSet, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::Value;

use super::conversation::is_user;

/// Sessions by hash, each set in the order the sessions were first seen.
#[derive(Clone, Debug, Default)]
pub(super) struct Index(HashMap<u64, BTreeSet<usize>>);

impl Index {
    pub(super) fn insert(&mut self, session: usize, hashes: &[u64]) {
        for hash in hashes {
            self.0.entry(*hash).or_default().insert(session);
        }
    }

    pub(super) fn remove(&mut self, session: usize, hashes: &[u64]) {
        for hash in hashes {
            if let Some(sessions) = self.0.get_mut(hash) {
                sessions.remove(&session);
                if sessions.is_empty() {
                    self.0.remove(hash);
                }
            }
        }
    }

    /// The sessions under `hash`, the earliest first.
    pub(super) fn get(&self, hash: u64) -> impl DoubleEndedIterator<Item = usize> + '_ {
        self.0.get(&hash).into_iter().flatten().copied()
    }
}

/// The hashes a session's last conversation is found by, in each index.
#[derive(Clone, Debug, Default)]
pub(super) struct Entries {
    pub(super) opening: [u64; 1],
    pub(super) tails: Vec<u64>,
    pub(super) ends: Vec<u64>,
}

impl Entries {
    pub(super) fn of(key: u64, conversation: &[Value]) -> Self {
        Self {
            opening: [opening(key, conversation)],
            tails: tails(key, conversation),
            ends: ending_users(key, conversation),
        }
    }
}

/// The hash of a session's key, which every other hash holds.
pub(super) fn key_hash(key: &impl Hash) -> u64 {
    let mut hasher = DefaultHasher::new();
    key.hash(&mut hasher);
    hasher.finish()
}

fn hash_of(key: u64, what: impl Hash) -> u64 {
    let mut hasher = DefaultHasher::new();
    key.hash(&mut hasher);
    what.hash(&mut hasher);
    hasher.finish()
}

fn item_hash(key: u64, item: &Value) -> u64 {
    hash_of(key, item.to_string())
}

/// How a conversation opens: its first item (an empty one opens as every conversation does:
/// the sessions under this hash are every request's candidates).
pub(super) fn opening(key: u64, conversation: &[Value]) -> u64 {
    match conversation.first() {
        Some(first) => item_hash(key, first),
        None => hash_of(key, ()),
    }
}

/// A message's role and text, when its content is text.
fn role_and_text(item: &Value) -> Option<(&str, &str)> {
    Some((item.get("role")?.as_str()?, item.get("content")?.as_str()?))
}

/// Per-turn tails are short: the message cut at one of its last whitespace runs.
const TAIL_CUTS: usize = 8;

/// For a conversation of one text message: what its message would be without a per-turn
/// tail a client drops the turn after (its text cut at the start of one of its last
/// whitespace runs), as [`kept`] hashes a continuation's first message.
fn tails(key: u64, conversation: &[Value]) -> Vec<u64> {
    let [only] = conversation else {
        return Vec::new();
    };
    let Some((role, text)) = role_and_text(only) else {
        return Vec::new();
    };
    let bytes = text.as_bytes();
    (1..bytes.len())
        .rev()
        .filter(|&at| bytes[at].is_ascii_whitespace() && !bytes[at - 1].is_ascii_whitespace())
        .take(TAIL_CUTS)
        .map(|at| hash_of(key, (role, &text[..at])))
        .collect()
}

/// How a conversation's first message is looked up among the [`tails`]: its role and text.
pub(super) fn kept(key: u64, conversation: &[Value]) -> Option<u64> {
    let (role, text) = role_and_text(conversation.first()?)?;
    Some(hash_of(key, (role, text)))
}

/// Items from the end of a conversation among which a compaction's kept end starts.
const KEPT_END: usize = 4;

/// The user messages a compaction of `conversation` may keep first: those among its last
/// items.
fn ending_users(key: u64, conversation: &[Value]) -> Vec<u64> {
    let start = conversation.len().saturating_sub(KEPT_END);
    conversation[start..]
        .iter()
        .filter(|item| is_user(item))
        .map(|item| item_hash(key, item))
        .collect()
}

/// The user messages a compacted conversation may start with (after at most one new item),
/// as [`Entries::ends`] hashes them.
pub(super) fn opening_users(key: u64, conversation: &[Value]) -> Vec<u64> {
    conversation
        .iter()
        .take(2)
        .filter(|item| is_user(item))
        .map(|item| item_hash(key, item))
        .collect()
}

//! Where a request finds the sessions it may join without being compared with every session
//! seen: the sessions by how their last conversation opens (a continuation, a rewrite, a retry
//! opens as the session does), by what a one-message conversation would be without a per-turn
//! tail, and by the user messages it ends with (where a compaction starts). Every hash holds
//! the session's key, so a session is found only under its own.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

use serde_json::Value;

use super::conversation::is_user;

/// Sessions by hash, each hash's in the order the sessions were first seen.
#[derive(Clone, Debug, Default)]
pub(super) struct Index(HashMap<u64, Sessions, BuildHasherDefault<Passed>>);

/// The map's hasher: its keys are hashes already.
#[derive(Clone, Copy, Debug, Default)]
struct Passed(u64);

impl Hasher for Passed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*byte);
        }
    }

    fn write_u64(&mut self, hash: u64) {
        self.0 = hash;
    }
}

/// The sessions under one hash, ascending: most hashes name one session, held inline.
#[derive(Clone, Debug)]
enum Sessions {
    One(usize),
    Many(Vec<usize>),
}

impl Sessions {
    fn as_slice(&self) -> &[usize] {
        match self {
            Self::One(session) => std::slice::from_ref(session),
            Self::Many(sessions) => sessions,
        }
    }
}

impl Index {
    pub(super) fn insert(&mut self, session: usize, hashes: &[u64]) {
        for hash in hashes {
            match self.0.get_mut(hash) {
                None => {
                    self.0.insert(*hash, Sessions::One(session));
                }
                Some(Sessions::One(one)) if *one == session => {}
                Some(Sessions::One(one)) => {
                    let mut both = vec![*one, session];
                    both.sort_unstable();
                    self.0.insert(*hash, Sessions::Many(both));
                }
                Some(Sessions::Many(many)) => {
                    if let Err(at) = many.binary_search(&session) {
                        many.insert(at, session);
                    }
                }
            }
        }
    }

    pub(super) fn remove(&mut self, session: usize, hashes: &[u64]) {
        for hash in hashes {
            let emptied = match self.0.get_mut(hash) {
                Some(Sessions::One(one)) => *one == session,
                Some(Sessions::Many(many)) => {
                    if let Ok(at) = many.binary_search(&session) {
                        many.remove(at);
                    }
                    many.is_empty()
                }
                None => false,
            };
            if emptied {
                self.0.remove(hash);
            }
        }
    }

    /// The sessions under `hash`, the earliest first.
    pub(super) fn get(&self, hash: u64) -> impl DoubleEndedIterator<Item = usize> + '_ {
        self.0
            .get(&hash)
            .map_or(&[][..], Sessions::as_slice)
            .iter()
            .copied()
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
    /// Each index with the hashes these entries put in it.
    pub(super) fn by_index(&self) -> [&[u64]; 3] {
        [&self.opening, &self.tails, &self.ends]
    }

    pub(super) fn of(key: u64, conversation: &[Value]) -> Self {
        Self {
            opening: [opening(key, conversation)],
            tails: tails(key, conversation),
            ends: ending_users(key, conversation),
        }
    }
}

/// FNV-1a, 64 bits: the indexes hash short texts, many per request, and need no defence
/// against chosen collisions (a candidate found is compared whole before it is joined).
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// The hash of a session's key, which every other hash holds.
pub(super) fn key_hash(key: &impl Hash) -> u64 {
    let mut hasher = Fnv::new();
    key.hash(&mut hasher);
    hasher.finish()
}

fn hash_of(key: u64, what: impl Hash) -> u64 {
    let mut hasher = Fnv::new();
    key.hash(&mut hasher);
    what.hash(&mut hasher);
    hasher.finish()
}

fn item_hash(key: u64, item: &Value) -> u64 {
    let mut hasher = Fnv::new();
    key.hash(&mut hasher);
    hash_value(item, &mut hasher);
    hasher.finish()
}

/// Hashes a JSON value as it is (no text written out): equal values hash alike, an object's
/// keys in any order.
fn hash_value(value: &Value, hasher: &mut Fnv) {
    match value {
        Value::Null => 0u8.hash(hasher),
        Value::Bool(flag) => (1u8, flag).hash(hasher),
        Value::Number(number) => (2u8, number.to_string()).hash(hasher),
        Value::String(text) => (3u8, text).hash(hasher),
        Value::Array(items) => {
            (4u8, items.len()).hash(hasher);
            for item in items {
                hash_value(item, hasher);
            }
        }
        // In any key order, as objects compare.
        Value::Object(object) => {
            let entries = object.iter().fold(0u64, |sum, (key, item)| {
                let mut entry = Fnv::new();
                key.hash(&mut entry);
                hash_value(item, &mut entry);
                sum.wrapping_add(entry.finish())
            });
            (5u8, object.len(), entries).hash(hasher);
        }
    }
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

/// Where a one-message conversation's text is cut for [`tails`]: at each power of two from 4
/// bytes (back to a character's start), so that any shorter start of it is found by the
/// longest cut it covers.
fn cuts(length: usize) -> impl Iterator<Item = usize> {
    std::iter::successors(Some(4usize), |cut| cut.checked_mul(2))
        .take_while(move |cut| *cut <= length)
}

/// `text` up to `cut` bytes, back to a character's start.
fn up_to(text: &str, cut: usize) -> &str {
    let end = (0..=cut.min(text.len()))
        .rev()
        .find(|at| text.is_char_boundary(*at))
        .unwrap_or(0);
    &text[..end]
}

/// For a conversation of one text message: its role and text cut at each of [`cuts`], so that
/// a next request whose first message is that text without the per-turn tail a client drops
/// the turn after is found by [`kept`] (the candidates it gives are then compared whole).
fn tails(key: u64, conversation: &[Value]) -> Vec<u64> {
    let [only] = conversation else {
        return Vec::new();
    };
    let Some((role, text)) = role_and_text(only) else {
        return Vec::new();
    };
    // A kept start is shorter than the text.
    cuts(text.len().saturating_sub(1))
        .map(|cut| hash_of(key, (role, up_to(text, cut))))
        .collect()
}

/// How a conversation's first message is looked up among the [`tails`]: its role and its text
/// at the longest cut it covers.
pub(super) fn kept(key: u64, conversation: &[Value]) -> Option<u64> {
    let (role, text) = role_and_text(conversation.first()?)?;
    let cut = cuts(text.len()).last()?;
    Some(hash_of(key, (role, up_to(text, cut))))
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

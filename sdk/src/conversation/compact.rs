//! Compaction: the one way history loses messages and the prefix takes the changes that
//! waited, and the history window that compacts in steps.

use serde::{Deserialize, Serialize};

use super::{Conversation, Message, PrefixChange, Role};
use crate::canonical::nfc;

/// What an explicit compaction cost: the only way history loses messages.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CacheBreak {
    /// Messages dropped from the start of history.
    pub dropped_messages: usize,
    /// Messages kept.
    pub kept_messages: usize,
    /// Messages kept beyond the `keep_last` asked for: the cut moved back to the last user
    /// message, because no user message followed it and a history that starts with the
    /// assistant is rejected (Anthropic, Bedrock).
    #[serde(default)]
    pub kept_beyond_asked: usize,
    /// Blocks of the previous [`PrefixFingerprint`] that are still the start of the prompt:
    /// the part of the prefix a cache still holds.
    pub reused_blocks: usize,
    /// Blocks of the previous fingerprint that are no longer a prefix: recomputed next turn.
    pub lost_blocks: usize,
    /// Tier changes that waited for this compaction and are now in the prefix.
    pub applied_changes: Vec<PrefixChange>,
}

impl CacheBreak {
    /// Whether the compaction changed nothing (the next turn still extends the previous one).
    pub fn is_empty(&self) -> bool {
        self.lost_blocks == 0
    }
}

/// A history window with hysteresis: nothing is dropped until history holds more than
/// `max_messages`, then it is cut down to `keep_messages` in one step. The cache breaks once
/// per `max_messages − keep_messages` messages, not every turn as a sliding window does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryWindow {
    pub max_messages: usize,
    pub keep_messages: usize,
}

impl HistoryWindow {
    /// A window of at most `max_messages`, cut down to `keep_messages` (at most
    /// `max_messages`; keep it well below for large steps).
    pub fn new(max_messages: usize, keep_messages: usize) -> Self {
        Self {
            max_messages,
            keep_messages: keep_messages.min(max_messages),
        }
    }
}

/// The session block [`Conversation::compact_with_summary`] folds a summary into.
pub const SUMMARY_SESSION_KEY: &str = "summary";

impl Conversation {
    /// Drops all but the last `keep_last` messages and applies the pending tier changes: the
    /// one way to edit what a cache holds. Returns what the break costs.
    ///
    /// The cut is moved forward to the next user message, or back to the one before when none
    /// follows: history starts with a user message (Anthropic and Bedrock reject one that
    /// starts with the assistant; [`CacheBreak::kept_beyond_asked`] counts what that kept
    /// more) and no tool result loses its call. When messages are
    /// dropped, the session tier takes its latest values (the notes that carried updates may
    /// be gone).
    pub fn compact(&mut self, keep_last: usize) -> CacheBreak {
        self.compact_folding(keep_last, false)
    }

    /// [`Conversation::compact`], folding `summary` (of the messages it drops) into the
    /// prefix: the session block [`SUMMARY_SESSION_KEY`] takes it, with the other changes
    /// that waited, in the one break the compaction makes. No warning and, in strict mode, no
    /// error: a compaction is the place for a prefix change. The summary is stable until the
    /// next compaction, so it is not checked for volatile values.
    ///
    /// ```
    /// use kvlint_sdk::{Conversation, SUMMARY_SESSION_KEY};
    ///
    /// let mut conversation = Conversation::strict();
    /// conversation.add_static("Be terse.").push_user("Plan the trip.").push_assistant("Rome, then Naples.", []);
    /// conversation.push_user("And then?");
    /// conversation.to_openai_chat("gpt-4.1");
    /// let cache_break = conversation.compact_with_summary(1, "The user plans a trip: Rome, then Naples.");
    /// assert_eq!(cache_break.dropped_messages, 2);
    /// assert_eq!(cache_break.reused_blocks, 1); // the static block is still cached
    /// let body = conversation.to_openai_chat("gpt-4.1");
    /// assert_eq!(body["messages"][1]["content"], "The user plans a trip: Rome, then Naples.");
    /// # assert_eq!(SUMMARY_SESSION_KEY, "summary");
    /// ```
    pub fn compact_with_summary(
        &mut self,
        keep_last: usize,
        summary: impl AsRef<str>,
    ) -> CacheBreak {
        self.session_latest
            .insert(SUMMARY_SESSION_KEY.to_owned(), nfc(summary.as_ref()));
        self.compact_folding(keep_last, true)
    }

    /// Compacts; `fold` applies the session tier's latest values even when nothing is dropped.
    fn compact_folding(&mut self, keep_last: usize, fold: bool) -> CacheBreak {
        let before = self.fingerprint();
        let naive_cut = self.history.len().saturating_sub(keep_last);
        let is_user = |message: &Message| message.role == Role::User;
        let cut = if naive_cut == 0 {
            0
        } else {
            let next_user = self.history[naive_cut..].iter().position(is_user);
            next_user
                .map(|offset| naive_cut + offset)
                .or_else(|| self.history[..naive_cut].iter().rposition(is_user))
                .unwrap_or(0)
        };
        self.history.drain(..cut);
        let mut applied_changes = self.pending_changes();
        if !fold && cut == 0 && self.pending_tools.is_empty() && self.pending_static.is_empty() {
            // Nothing dropped and no prefix change: the notes in history still carry the
            // session updates; folding them in would break the prefix for nothing.
            applied_changes.clear();
        } else {
            self.tools.append(&mut self.pending_tools);
            self.static_blocks.append(&mut self.pending_static);
            self.session_blocks = self.session_latest.clone();
            self.pending_session.clear();
            self.undelivered_static.clear();
        }
        let after = self.fingerprint();
        let reused_blocks = before.common_blocks(&after);
        CacheBreak {
            dropped_messages: cut,
            kept_messages: self.history.len(),
            kept_beyond_asked: naive_cut.saturating_sub(cut),
            reused_blocks,
            lost_blocks: before.blocks.len() - reused_blocks,
            applied_changes,
        }
    }

    /// Compacts to `window.keep_messages` once history holds more than `window.max_messages`.
    pub fn enforce_window(&mut self, window: &HistoryWindow) -> Option<CacheBreak> {
        (self.history.len() > window.max_messages).then(|| self.compact(window.keep_messages))
    }
}

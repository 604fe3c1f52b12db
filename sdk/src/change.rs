//! What a call that changes a conversation did: applied, unchanged, deferred to the next
//! compaction (with what that will cost), or refused.

use std::ops::{Deref, DerefMut};

use serde::Serialize;

use crate::conversation::{Conversation, PrefixChange};
use crate::error::ConversationError;

/// The outcome of a call that changes a [`Conversation`]: `add_static`, `add_session`,
/// `add_tool` and the `push_*` methods.
///
/// It dereferences to the conversation, so calls still chain
/// (`conversation.add_static("Be terse.").push_user("hi")`), and it must be used: a change
/// can be refused (an input the provider would reject, or a prefix change in strict mode),
/// deferred to the next compaction with a cost, or carry a volatile value into a cached tier.
/// `.into_result()?` turns a refusal into an error; [`Change::effect`] and
/// [`Change::volatile`] say the rest.
///
/// ```
/// use kvlint_sdk::{Conversation, Effect};
///
/// let mut conversation = Conversation::new();
/// conversation.add_static("Be terse.").push_user("hi").into_result().unwrap();
/// let _sent = conversation.to_openai_chat("gpt-4.1");
/// // After the first request, a new static block travels in history until compaction, and says
/// // what that compaction costs.
/// let change = conversation.add_static("Answer in French.");
/// let Some(Effect::Deferred { lost_blocks, .. }) = change.effect() else { unreachable!() };
/// assert_eq!(*lost_blocks, 1); // "hi", which follows the static blocks
/// ```
#[must_use = "a change can be refused, deferred to compaction at a cost, or carry a volatile value into the prefix: check it (`.into_result()?`, `.effect()`, `.volatile()`)"]
pub struct Change<'a> {
    conversation: &'a mut Conversation,
    outcome: Result<ChangeReport, ConversationError>,
}

/// What an accepted change did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChangeReport {
    pub effect: Effect,
    /// Volatile values found in a tier that is cached across turns (static or session).
    /// Without the `guard` feature, tiers are not scanned and this is empty.
    pub volatile: Vec<VolatileValue>,
}

/// Where an accepted change went.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "effect")]
pub enum Effect {
    /// In the prompt from the next body on, after everything already sent.
    Applied,
    /// Already there: nothing changed.
    Unchanged,
    /// The prefix is committed: the change waits for the next compaction, which recomputes
    /// `lost_blocks` blocks of the current prefix (the blocks after the change's place). A
    /// static block or a session value also travels in history as a note until then.
    Deferred {
        change: PrefixChange,
        lost_blocks: usize,
    },
}

/// A value that changes from request to request, found in a tier cached across turns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VolatileValue {
    /// `static` or `session`.
    pub tier: &'static str,
    /// `timestamp` or `id`.
    pub class: &'static str,
    pub value: String,
    /// The kvlint rule that reports the break it causes (`volatile-timestamp`, `volatile-id`)
    /// and its code.
    pub rule: &'static str,
    pub code: &'static str,
}

impl<'a> Change<'a> {
    pub(crate) fn new(
        conversation: &'a mut Conversation,
        outcome: Result<ChangeReport, ConversationError>,
    ) -> Self {
        Self {
            conversation,
            outcome,
        }
    }

    /// The refusal as an error, else what the change did.
    pub fn into_result(self) -> Result<ChangeReport, ConversationError> {
        self.outcome
    }

    pub fn error(&self) -> Option<&ConversationError> {
        self.outcome.as_ref().err()
    }

    /// Where the change went; `None` when it was refused.
    pub fn effect(&self) -> Option<&Effect> {
        self.outcome.as_ref().ok().map(|report| &report.effect)
    }

    pub fn volatile(&self) -> &[VolatileValue] {
        self.outcome
            .as_ref()
            .map_or(&[], |report| report.volatile.as_slice())
    }

    /// Applied or unchanged, with no volatile value: nothing to look at.
    pub fn is_clean(&self) -> bool {
        self.outcome.as_ref().is_ok_and(|report| {
            report.volatile.is_empty() && !matches!(report.effect, Effect::Deferred { .. })
        })
    }
}

impl Deref for Change<'_> {
    type Target = Conversation;

    fn deref(&self) -> &Conversation {
        self.conversation
    }
}

impl DerefMut for Change<'_> {
    fn deref_mut(&mut self) -> &mut Conversation {
        self.conversation
    }
}

impl std::fmt::Debug for Change<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Change")
            .field("outcome", &self.outcome)
            .finish_non_exhaustive()
    }
}

impl ChangeReport {
    pub(crate) fn applied() -> Self {
        Self::of(Effect::Applied)
    }

    pub(crate) fn of(effect: Effect) -> Self {
        Self {
            effect,
            volatile: Vec::new(),
        }
    }
}

/// Timestamps and ids in `text`, found by the detectors `kvlint check` names breaks with.
#[cfg(feature = "guard")]
pub(crate) fn volatile_values(tier: &'static str, text: &str) -> Vec<VolatileValue> {
    use kvlint_rules::volatile::{VolatileClass, labelled_counter_in};
    // Numbers are ordinary in instructions and profiles: a counter is one a word labels as
    // counting (`Token budget left: 180863`).
    [
        VolatileClass::Timestamp,
        VolatileClass::Id,
        VolatileClass::Counter,
    ]
    .into_iter()
    .filter_map(|class| {
        let value = match class {
            VolatileClass::Counter => labelled_counter_in(text)?,
            _ => class.first_in(text)?,
        };
        let rule = class.rule();
        Some(VolatileValue {
            tier,
            class: class.as_str(),
            value: value.to_owned(),
            rule: rule.name,
            code: rule.code,
        })
    })
    .collect()
}

#[cfg(not(feature = "guard"))]
pub(crate) fn volatile_values(_tier: &'static str, _text: &str) -> Vec<VolatileValue> {
    Vec::new()
}

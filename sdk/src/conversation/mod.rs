//! The conversation: prompt content in stability tiers, and an append-only history.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

mod compact;
mod message;

pub use compact::{CacheBreak, HistoryWindow, SUMMARY_SESSION_KEY};
pub(crate) use message::Returned;
pub use message::{Message, Role};

use crate::canonical::nfc;
use crate::change::{Change, ChangeReport, Effect, volatile_values};
use crate::content::Part;
use crate::error::ConversationError;
use crate::fingerprint::PrefixFingerprint;
use crate::tool::{Tool, ToolCall};

/// A change to the static or session tier asked for after the prefix was sent. It waits for
/// the next [`Conversation::compact`], which applies it and reports it in the [`CacheBreak`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrefixChange {
    /// A tool added, or redefined, mid-session.
    Tool(Tool),
    /// A static block added mid-session.
    Static(String),
    /// A session-tier value changed mid-session; until compaction it travels in history.
    Session { key: String, text: String },
}

impl PrefixChange {
    /// What happens to the change until the compaction that folds it into the prefix: a tool
    /// waits; instructions and session values travel as a note in the next message.
    pub fn until_compaction(&self) -> &'static str {
        match self {
            Self::Tool(_) => "it waits for compaction",
            Self::Static(_) | Self::Session { .. } => {
                "it travels as a note in the next message until compaction"
            }
        }
    }
}

impl std::fmt::Display for PrefixChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Tool(tool) => write!(f, "tool `{}` added or redefined", tool.name()),
            Self::Static(_) => write!(f, "a static block added"),
            Self::Session { key, .. } => write!(f, "session block `{key}` updated"),
        }
    }
}

/// An agent conversation assembled so that each turn is a strict extension of the previous.
///
/// Content is added in tiers, in any order; every output renders them in this order:
/// tools and **static** blocks (instructions), **session** blocks (stable for the session),
/// the append-only **history**, and the **turn** tier (volatile context) last, inside the
/// newest message.
///
/// The first body built (any `to_*` adapter or [`Conversation::render`]; build from
/// [`Conversation::preview`] for a body that is not sent) commits the prefix:
/// from then on, new tools wait for [`Conversation::compact`], and a new static block or a
/// changed session value travels in history instead of editing the prefix.
///
/// A conversation saves and restores with serde (`serde_json::to_string`, `from_str`), all of
/// it: tiers, history, changes waiting for compaction and whether the prefix is committed, so
/// a loop can checkpoint between turns and resume without changing one token.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Conversation {
    pub(crate) tools: BTreeMap<String, Tool>,
    pub(crate) static_blocks: Vec<String>,
    /// The session tier as sent, by key.
    pub(crate) session_blocks: BTreeMap<String, String>,
    /// The latest value of each session key (what compaction folds into the tier).
    session_latest: BTreeMap<String, String>,
    /// Session values changed after commit, not yet attached to a history message.
    pending_session: BTreeMap<String, String>,
    pending_tools: BTreeMap<String, Tool>,
    pending_static: Vec<String>,
    /// Static blocks added after commit, not yet attached to a history message.
    #[serde(default)]
    undelivered_static: Vec<String>,
    pub(crate) history: Vec<Message>,
    pub(crate) turn_context: Vec<String>,
    committed: AtomicBool,
    /// Strict mode: see [`Conversation::strict`].
    #[serde(default)]
    strict: bool,
    /// Whether the turn context was built into a body: it then belongs to a sent request,
    /// and the next change to the conversation starts the next turn's context.
    turn_context_sent: AtomicBool,
}

impl Clone for Conversation {
    fn clone(&self) -> Self {
        Self {
            tools: self.tools.clone(),
            static_blocks: self.static_blocks.clone(),
            session_blocks: self.session_blocks.clone(),
            session_latest: self.session_latest.clone(),
            pending_session: self.pending_session.clone(),
            pending_tools: self.pending_tools.clone(),
            pending_static: self.pending_static.clone(),
            undelivered_static: self.undelivered_static.clone(),
            history: self.history.clone(),
            turn_context: self.turn_context.clone(),
            committed: AtomicBool::new(self.is_committed()),
            strict: self.strict,
            turn_context_sent: AtomicBool::new(self.turn_context_sent.load(Ordering::Relaxed)),
        }
    }
}

impl Conversation {
    pub fn new() -> Self {
        Self::default()
    }

    /// A conversation in strict mode: a change to a tier after the first request, or a
    /// volatile value (a timestamp, an id) given to the static or session tier, is refused
    /// with an error instead of deferred or reported.
    pub fn strict() -> Self {
        Self {
            strict: true,
            ..Self::default()
        }
    }

    pub fn is_strict(&self) -> bool {
        self.strict
    }

    /// Adds a static block: instructions that hold across sessions. Blocks render in the
    /// order added; adding the same text twice changes nothing.
    ///
    /// After the prefix is committed, a new block does not edit the prefix (which would
    /// invalidate the cache, and on Anthropic's preserved-thinking models every thinking block
    /// sent back): it is shown in the turn tier until the next message is appended, then
    /// frozen into that message as a note (`Instructions update: …`), the place the providers
    /// document for an instruction update; [`Conversation::compact`] folds it into the tier.
    /// The outcome says so ([`Effect::Deferred`], with the cost of that compaction; refused in
    /// strict mode). A timestamp or an id in the text is reported ([`Change::volatile`];
    /// refused in strict mode).
    ///
    /// ```
    /// use kvlint_sdk::Conversation;
    ///
    /// let mut conversation = Conversation::new();
    /// conversation.add_static("Be terse.").push_user("Plan the trip.");
    /// let first = conversation.to_anthropic("claude-opus-5-5");
    /// conversation.push_assistant("Rome, then Naples.", []);
    /// conversation.add_static("Answer in French.");
    /// conversation.push_user("And then?");
    /// let second = conversation.to_anthropic("claude-opus-5-5");
    /// assert_eq!(second["system"], first["system"]);
    /// assert_eq!(second["messages"][2]["content"][1]["text"], "Instructions update:\nAnswer in French.");
    /// ```
    pub fn add_static(&mut self, text: impl AsRef<str>) -> Change<'_> {
        let text = nfc(text.as_ref());
        if self.static_blocks.contains(&text) || self.pending_static.contains(&text) {
            return Change::new(self, Ok(ChangeReport::of(Effect::Unchanged)));
        }
        let place = self.tools.len() + self.static_blocks.len();
        let volatile = volatile_values("static", &text);
        self.change_tier(place, PrefixChange::Static(text), volatile)
    }

    /// Sets the session block `key` (user profile, repository facts, memory). Blocks render
    /// ordered by key. Setting the value it already has changes nothing.
    ///
    /// After the prefix is committed, a new value does not edit the prefix: it is shown in the
    /// turn tier until the next message is appended, then frozen into that message as a note
    /// (`Session context update (key): …`); [`Conversation::compact`] folds it into the tier.
    /// The outcome says so ([`Effect::Deferred`]; refused in strict mode), and reports a
    /// timestamp or an id in the value.
    pub fn add_session(&mut self, key: impl AsRef<str>, text: impl AsRef<str>) -> Change<'_> {
        let (key, text) = (nfc(key.as_ref()), nfc(text.as_ref()));
        if self.session_latest.get(&key) == Some(&text) {
            return Change::new(self, Ok(ChangeReport::of(Effect::Unchanged)));
        }
        let place = self.tools.len()
            + self.static_blocks.len()
            + self.session_blocks.range(..key.clone()).count();
        let volatile = volatile_values("session", &text);
        self.change_tier(place, PrefixChange::Session { key, text }, volatile)
    }

    /// Adds a tool. Tools render ordered by name, whatever order they are added in; adding an
    /// equal tool again changes nothing, a tool of the same name replaces it (before commit;
    /// after, at the next compaction: [`Effect::Deferred`], refused in strict mode).
    pub fn add_tool(&mut self, tool: Tool) -> Change<'_> {
        if self.tools.get(tool.name()) == Some(&tool)
            || self.pending_tools.get(tool.name()) == Some(&tool)
        {
            return Change::new(self, Ok(ChangeReport::of(Effect::Unchanged)));
        }
        let place = self.tools.range(..tool.name().to_owned()).count();
        self.change_tier(place, PrefixChange::Tool(tool), Vec::new())
    }

    /// Applies a tier change before commit; after, defers it to compaction (or refuses it in
    /// strict mode). `place` is the change's block index in the fingerprint.
    fn change_tier(
        &mut self,
        place: usize,
        change: PrefixChange,
        volatile: Vec<crate::change::VolatileValue>,
    ) -> Change<'_> {
        if self.strict
            && let Some(found) = volatile.first()
        {
            let error = ConversationError::Volatile {
                tier: found.tier,
                class: found.class,
                value: found.value.clone(),
                rule: found.rule,
            };
            return Change::new(self, Err(error));
        }
        let committed = self.is_committed();
        let prefix_blocks = self.tools.len()
            + self.static_blocks.len()
            + self.session_blocks.len()
            + self.history.len();
        let lost_blocks = prefix_blocks.saturating_sub(place);
        if committed && self.strict {
            let error = ConversationError::CommittedTier {
                change,
                lost_blocks,
            };
            return Change::new(self, Err(error));
        }
        let effect = if committed {
            Effect::Deferred {
                change: change.clone(),
                lost_blocks,
            }
        } else {
            Effect::Applied
        };
        match change {
            PrefixChange::Tool(tool) if committed => {
                self.pending_tools.insert(tool.name().to_owned(), tool);
            }
            PrefixChange::Tool(tool) => {
                self.tools.insert(tool.name().to_owned(), tool);
            }
            PrefixChange::Static(text) if committed => {
                self.undelivered_static.push(text.clone());
                self.pending_static.push(text);
            }
            PrefixChange::Static(text) => self.static_blocks.push(text),
            PrefixChange::Session { key, text } => {
                self.session_latest.insert(key.clone(), text.clone());
                if committed {
                    self.pending_session.insert(key, text);
                } else {
                    self.session_blocks.insert(key, text);
                }
            }
        }
        Change::new(self, Ok(ChangeReport { effect, volatile }))
    }

    /// Adds volatile context for this turn only (time, working directory, git status, budgets,
    /// retrieved snippets). It is rendered last, in the newest message, and cleared after the
    /// turn: when the model's answer is appended ([`Conversation::push_assistant`]), or, once
    /// a body has been built with it, by the next context added or message appended.
    pub fn add_turn_context(&mut self, text: impl AsRef<str>) -> &mut Self {
        self.drop_sent_turn_context();
        // An empty block is rejected by Anthropic and says nothing.
        if !text.as_ref().is_empty() {
            self.turn_context.push(nfc(text.as_ref()));
        }
        self
    }

    /// The context of a request already built belongs to that request, not to the next.
    fn drop_sent_turn_context(&mut self) {
        if self.turn_context_sent.swap(false, Ordering::Relaxed) {
            self.turn_context.clear();
        }
    }

    /// Drops this turn's volatile context.
    pub fn clear_turn_context(&mut self) -> &mut Self {
        self.turn_context.clear();
        self.turn_context_sent.store(false, Ordering::Relaxed);
        self
    }

    /// Appends a user message. An empty text is refused ([`ConversationError::Empty`]).
    pub fn push_user(&mut self, text: impl AsRef<str>) -> Change<'_> {
        self.push_user_parts([Part::text(text)])
    }

    /// Appends a user message of several parts: text, images, documents.
    ///
    /// ```
    /// use kvlint_sdk::{Conversation, Part, Source};
    ///
    /// let mut conversation = Conversation::new();
    /// let screenshot = Source::Base64 { media_type: "image/png".into(), data: "iVBORw0KGgo=".into() };
    /// conversation.push_user_parts([Part::text("What does this show?"), Part::image(screenshot)])
    ///     .into_result()
    ///     .unwrap();
    /// let body = conversation.to_anthropic("claude-sonnet-4-5");
    /// assert_eq!(body["messages"][0]["content"][1]["source"]["data"], "iVBORw0KGgo=");
    /// ```
    pub fn push_user_parts(&mut self, parts: impl IntoIterator<Item = Part>) -> Change<'_> {
        let outcome = self.user_side(Role::User, parts.into_iter().collect(), None);
        Change::new(self, outcome)
    }

    /// Appends the model's answer: its text and the tools it called. The turn's volatile
    /// context is cleared: the turn is over.
    ///
    /// Refused: an answer with neither text nor calls, a call whose arguments are not a JSON
    /// object, an answer first in history ([`ConversationError`]).
    pub fn push_assistant(
        &mut self,
        text: impl AsRef<str>,
        tool_calls: impl IntoIterator<Item = ToolCall>,
    ) -> Change<'_> {
        let parts = (!text.as_ref().is_empty()).then(|| Part::text(text));
        self.push_assistant_parts(parts, tool_calls)
    }

    /// Appends the model's answer of several parts: text, thinking blocks, server tool blocks,
    /// Responses reasoning items, and the tools it called. Thinking blocks go first, as
    /// Anthropic requires; the rest keep their order, the calls last.
    pub fn push_assistant_parts(
        &mut self,
        parts: impl IntoIterator<Item = Part>,
        tool_calls: impl IntoIterator<Item = ToolCall>,
    ) -> Change<'_> {
        let (mut parts, rest): (Vec<Part>, Vec<Part>) = parts
            .into_iter()
            .filter(|part| part.as_text() != Some(""))
            .partition(Part::is_thinking);
        parts.extend(rest);
        let outcome = self.push_answer(parts, tool_calls.into_iter().collect(), None);
        Change::new(self, outcome)
    }

    pub(crate) fn push_answer(
        &mut self,
        parts: Vec<Part>,
        tool_calls: Vec<ToolCall>,
        returned: Option<Returned>,
    ) -> Result<ChangeReport, ConversationError> {
        self.check_assistant(&parts, &tool_calls)?;
        self.history.push(Message {
            role: Role::Assistant,
            parts,
            tool_calls,
            tool_call_id: None,
            notes: Vec::new(),
            returned,
        });
        self.clear_turn_context();
        Ok(ChangeReport::applied())
    }

    fn check_assistant(
        &self,
        parts: &[Part],
        tool_calls: &[ToolCall],
    ) -> Result<(), ConversationError> {
        if self.history.is_empty() {
            return Err(ConversationError::AssistantFirst);
        }
        if parts.is_empty() && tool_calls.is_empty() {
            return Err(ConversationError::Empty { role: "assistant" });
        }
        for call in tool_calls {
            if let Some(reason) = call.arguments_error() {
                return Err(ConversationError::ToolArguments {
                    call_id: call.id().to_owned(),
                    reason,
                });
            }
        }
        Ok(())
    }

    /// Appends the result of the tool call `call_id`. Refused when no assistant message in
    /// history made that call ([`ConversationError::UnknownToolCall`]).
    pub fn push_tool_result(
        &mut self,
        call_id: impl Into<String>,
        text: impl AsRef<str>,
    ) -> Change<'_> {
        self.push_tool_result_parts(call_id, [Part::text(text)])
    }

    /// Appends the result of the tool call `call_id` as several parts (text and images).
    pub fn push_tool_result_parts(
        &mut self,
        call_id: impl Into<String>,
        parts: impl IntoIterator<Item = Part>,
    ) -> Change<'_> {
        let call_id = call_id.into();
        let known = self
            .history
            .iter()
            .flat_map(Message::tool_calls)
            .any(|call| call.id() == call_id);
        let outcome = if known {
            // A tool's output may be empty: every API takes an empty result.
            self.user_side(Role::Tool, parts.into_iter().collect(), Some(call_id))
        } else {
            Err(ConversationError::UnknownToolCall { call_id })
        };
        Change::new(self, outcome)
    }

    /// Appends a user or tool message, carrying the tier updates not yet delivered.
    fn user_side(
        &mut self,
        role: Role,
        parts: Vec<Part>,
        tool_call_id: Option<String>,
    ) -> Result<ChangeReport, ConversationError> {
        let empty = |part: &Part| part.as_text() == Some("");
        if role == Role::User && (parts.is_empty() || parts.iter().any(empty)) {
            return Err(ConversationError::Empty { role: "user" });
        }
        self.drop_sent_turn_context();
        let notes = self.undelivered_notes();
        self.undelivered_static.clear();
        self.pending_session.clear();
        self.history.push(Message {
            role,
            parts,
            tool_calls: Vec::new(),
            tool_call_id,
            notes,
            returned: None,
        });
        Ok(ChangeReport::applied())
    }

    /// The history, oldest first.
    pub fn history(&self) -> &[Message] {
        &self.history
    }

    /// The tools in the order they render (by name).
    pub fn tools(&self) -> impl Iterator<Item = &Tool> {
        self.tools.values()
    }

    /// Tier changes that wait for the next compaction.
    pub fn pending_changes(&self) -> Vec<PrefixChange> {
        let tools = self.pending_tools.values().cloned().map(PrefixChange::Tool);
        let statics = self
            .pending_static
            .iter()
            .cloned()
            .map(PrefixChange::Static);
        let sessions = self
            .session_latest
            .iter()
            .filter(|(key, text)| self.session_blocks.get(*key) != Some(*text))
            .map(|(key, text)| PrefixChange::Session {
                key: key.clone(),
                text: text.clone(),
            });
        tools.chain(statics).chain(sessions).collect()
    }

    /// Whether a body has been built: the prefix is fixed until the next compaction.
    pub fn is_committed(&self) -> bool {
        self.committed.load(Ordering::Relaxed)
    }

    /// Called by every body builder: the prefix is sent, and so is this turn's context.
    pub(crate) fn commit(&self) {
        self.committed.store(true, Ordering::Relaxed);
        self.turn_context_sent.store(true, Ordering::Relaxed);
    }

    /// The turn tier's text: tier updates not yet in history, then the turn context.
    pub fn turn_tier(&self) -> Option<String> {
        let mut items = self.undelivered_notes();
        items.extend(self.turn_context.iter().cloned());
        (!items.is_empty()).then(|| items.join("\n"))
    }

    /// The notes that carry the tier changes made after commit and not yet in history:
    /// instruction updates, then session updates.
    fn undelivered_notes(&self) -> Vec<String> {
        let instructions = self
            .undelivered_static
            .iter()
            .map(|text| format!("Instructions update:\n{text}"));
        let sessions = self
            .pending_session
            .iter()
            .map(|(key, text)| format!("Session context update ({key}):\n{text}"));
        instructions.chain(sessions).collect()
    }

    /// A copy to build bodies from without sending them (to log, count or show a prompt before
    /// the first turn): the copy commits its prefix when a body is built, this conversation
    /// does not.
    ///
    /// ```
    /// use kvlint_sdk::Conversation;
    ///
    /// let mut conversation = Conversation::new();
    /// conversation.add_static("Be terse.").push_user("hi");
    /// let shown = conversation.preview().to_openai_chat("gpt-4.1");
    /// assert!(!conversation.is_committed());
    /// // Still before the first turn: a static block joins the prefix instead of waiting.
    /// conversation.add_static("Answer in French.");
    /// assert!(conversation.pending_changes().is_empty());
    /// assert_ne!(conversation.to_openai_chat("gpt-4.1"), shown);
    /// ```
    pub fn preview(&self) -> Self {
        self.clone()
    }

    /// This conversation without its turn tier: the prompt the next turn starts with.
    /// Useful to warm a cache, and to check that a turn keeps its prefix.
    pub fn without_turn_tier(&self) -> Self {
        let mut stable = self.clone();
        stable.clear_turn_context();
        stable.pending_session.clear();
        stable.undelivered_static.clear();
        stable
    }

    /// The hash chain over the prefix; see [`PrefixFingerprint`].
    pub fn fingerprint(&self) -> PrefixFingerprint {
        PrefixFingerprint::of(self)
    }

    /// The key that routes this session's requests to the replica holding its prefix.
    pub fn routing_key(&self) -> String {
        self.fingerprint().key
    }
}

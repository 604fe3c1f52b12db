//! A history message and who it is from.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::content::{Api, Part};
use crate::tool::ToolCall;

/// Who a history message is from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
    /// A tool's result (sent as a user turn by Anthropic).
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Assistant => "assistant",
            Self::Tool => "tool",
        }
    }
}

/// A history message, frozen when it was appended: there is no way to change it, only to
/// drop it with [`Conversation::compact`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub(super) role: Role,
    /// Text, images, documents and reasoning, in order.
    pub(super) parts: Vec<Part>,
    pub(super) tool_calls: Vec<ToolCall>,
    pub(super) tool_call_id: Option<String>,
    /// Session-context updates delivered with this message (see [`Conversation::add_session`]).
    pub(super) notes: Vec<String>,
    /// A response pushed into history as its API returned it: sent back to that API exactly
    /// so (Anthropic content blocks, Responses output items with their ids).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) returned: Option<Returned>,
}

/// An assistant message's content as an API returned it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Returned {
    pub(crate) api: Api,
    pub(crate) items: Vec<Value>,
}

impl Message {
    pub fn role(&self) -> Role {
        self.role
    }

    /// The message's text parts, joined.
    pub fn text(&self) -> String {
        self.parts.iter().filter_map(Part::as_text).collect()
    }

    /// Everything the message holds but its tool calls, in order.
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    pub fn tool_calls(&self) -> &[ToolCall] {
        &self.tool_calls
    }

    /// For a tool result: the call it answers.
    pub fn tool_call_id(&self) -> Option<&str> {
        self.tool_call_id.as_deref()
    }

    /// Session-context updates that travel with this message, after its text.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The message's one serialization, as the prefix fingerprint hashes it.
    pub(crate) fn canonical_text(&self) -> String {
        let calls: Vec<serde_json::Value> = self
            .tool_calls
            .iter()
            .map(|call| {
                serde_json::json!({"arguments": call.arguments(), "id": call.id(), "name": call.name()})
            })
            .collect();
        serde_json::json!({
            "notes": self.notes,
            "parts": self.parts,
            "role": self.role.as_str(),
            "tool_call_id": self.tool_call_id,
            "tool_calls": calls,
        })
        .to_string()
    }
}

impl Message {
    /// The content as `api` returned it, when this message is a response of that API.
    pub(crate) fn returned_by(&self, api: Api) -> Option<&[Value]> {
        self.returned
            .as_ref()
            .filter(|returned| returned.api == api)
            .map(|returned| returned.items.as_slice())
    }
}

//! Who a conversation item is from, as a type instead of a string.

use std::fmt;

use serde::{Serialize, Serializer};

/// Who a conversation item is from: a message's `role`, or for a Responses `input` item
/// that is not a message, its `type`. Any string is accepted, as sent: kvlint reads
/// requests, it does not validate them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    System,
    Developer,
    User,
    Assistant,
    Tool,
    /// OpenAI's legacy role for a function's result.
    Function,
    /// A Responses `function_call` item.
    FunctionCall,
    /// A Responses `function_call_output` item.
    FunctionCallOutput,
    /// A Responses `custom_tool_call` item.
    CustomToolCall,
    /// A Responses `custom_tool_call_output` item.
    CustomToolCallOutput,
    /// A Responses `reasoning` item.
    Reasoning,
    /// Any other role or item type, spelled as sent. [`Role::from`] builds it only for
    /// spellings not named above.
    Other(String),
}

impl Role {
    /// The role as the request spells it.
    pub fn as_str(&self) -> &str {
        match self {
            Self::System => "system",
            Self::Developer => "developer",
            Self::User => "user",
            Self::Assistant => "assistant",
            Self::Tool => "tool",
            Self::Function => "function",
            Self::FunctionCall => "function_call",
            Self::FunctionCallOutput => "function_call_output",
            Self::CustomToolCall => "custom_tool_call",
            Self::CustomToolCallOutput => "custom_tool_call_output",
            Self::Reasoning => "reasoning",
            Self::Other(role) => role,
        }
    }

    /// System and developer messages: instructions, which templates render at the head of
    /// the prompt when they come first.
    pub fn is_instructions(&self) -> bool {
        matches!(self, Self::System | Self::Developer)
    }
}

impl From<&str> for Role {
    fn from(role: &str) -> Self {
        match role {
            "system" => Self::System,
            "developer" => Self::Developer,
            "user" => Self::User,
            "assistant" => Self::Assistant,
            "tool" => Self::Tool,
            "function" => Self::Function,
            "function_call" => Self::FunctionCall,
            "function_call_output" => Self::FunctionCallOutput,
            "custom_tool_call" => Self::CustomToolCall,
            "custom_tool_call_output" => Self::CustomToolCallOutput,
            "reasoning" => Self::Reasoning,
            other => Self::Other(other.to_owned()),
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Role {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_keep_their_spelling() {
        for spelling in [
            "system",
            "developer",
            "user",
            "assistant",
            "tool",
            "function",
            "function_call",
            "function_call_output",
            "custom_tool_call",
            "custom_tool_call_output",
            "reasoning",
            "item",
            "System",
            "critic",
        ] {
            let role = Role::from(spelling);
            assert_eq!(role.as_str(), spelling);
            assert_eq!(serde_json::to_value(&role).unwrap(), spelling);
        }
        assert_eq!(Role::from("tool"), Role::Tool);
        assert_eq!(Role::from("critic"), Role::Other("critic".into()));
    }
}

//! Which API a request body is written for, from the keys and shapes only that API uses.

use serde_json::{Map, Value};

use super::BodyFormat;

impl BodyFormat {
    /// Detects the format of a body from the keys and shapes only that API uses.
    pub(super) fn detect(body: &Map<String, Value>) -> Option<Self> {
        if body.contains_key("input") || body.contains_key("instructions") {
            return Some(Self::OpenAiResponses);
        }
        let messages = body.get("messages")?.as_array()?;
        let model_is_claude = body
            .get("model")
            .and_then(Value::as_str)
            .is_some_and(|model| model.contains("claude"));
        let anthropic_tools = body
            .get("tools")
            .and_then(Value::as_array)
            .is_some_and(|tools| tools.iter().any(|tool| tool.get("input_schema").is_some()));
        let anthropic_blocks = messages.iter().any(|message| {
            message
                .get("content")
                .and_then(Value::as_array)
                .is_some_and(|blocks| {
                    blocks.iter().any(|block| {
                        matches!(
                            block.get("type").and_then(Value::as_str),
                            Some("tool_use" | "tool_result" | "thinking" | "redacted_thinking")
                        )
                    })
                })
        });
        let openai_roles = messages.iter().any(|message| {
            message.get("tool_calls").is_some()
                || matches!(
                    message.get("role").and_then(Value::as_str),
                    Some("system" | "developer" | "tool" | "function")
                )
        });
        if !openai_roles
            && (body.contains_key("system")
                || anthropic_tools
                || anthropic_blocks
                || model_is_claude)
        {
            Some(Self::AnthropicMessages)
        } else {
            Some(Self::OpenAiChat)
        }
    }
}

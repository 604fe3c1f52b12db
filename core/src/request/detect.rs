//! Which API a request body is written for, from the keys and shapes only that API uses.

use serde_json::{Map, Value};

use super::BodyFormat;

impl BodyFormat {
    /// Detects the format of a body from the keys and shapes only that API uses.
    pub(super) fn detect(body: &Map<String, Value>) -> Option<Self> {
        if body.contains_key("input") || body.contains_key("instructions") {
            return Some(Self::OpenAiResponses);
        }
        if body.get("contents").is_some_and(Value::is_array) {
            return Some(Self::GeminiGenerateContent);
        }
        if super::bedrock::is_converse(body) {
            return Some(Self::BedrockConverse);
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
        let role_is = |roles: &[&str]| {
            messages.iter().any(|message| {
                message
                    .get("role")
                    .and_then(Value::as_str)
                    .is_some_and(|role| roles.contains(&role))
            })
        };
        let openai_roles = role_is(&["developer", "tool", "function"])
            || messages
                .iter()
                .any(|message| message.get("tool_calls").is_some());
        // A system message among the messages is OpenAI's way, unless the body is Anthropic's
        // by its own signs (engines' `/v1/messages` take such messages).
        // Amazon Bedrock's and Vertex AI's Anthropic bodies name the API version in the body.
        let anthropic_signs = body.contains_key("system")
            || body.contains_key("anthropic_version")
            || anthropic_tools
            || anthropic_blocks;
        if !openai_roles && (anthropic_signs || (model_is_claude && !role_is(&["system"]))) {
            Some(Self::AnthropicMessages)
        } else {
            Some(Self::OpenAiChat)
        }
    }
}

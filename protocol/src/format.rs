//! Which API a request body is written for, from the keys and shapes only that API uses.

use serde::Serialize;
use serde_json::{Map, Value};

/// The API a request body is written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum BodyFormat {
    #[serde(rename = "openai-chat")]
    OpenAiChat,
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    #[serde(rename = "anthropic-messages")]
    AnthropicMessages,
    #[serde(rename = "gemini-generate-content")]
    GeminiGenerateContent,
    #[serde(rename = "bedrock-converse")]
    BedrockConverse,
}

/// Anthropic content block types no other API sends inside `messages`.
const ANTHROPIC_BLOCKS: [&str; 6] = [
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "image",
    "document",
];

/// Keys of a Bedrock Converse content block, which is keyed by kind rather than typed.
const CONVERSE_BLOCK_KEYS: [&str; 7] = [
    "text",
    "toolUse",
    "toolResult",
    "cachePoint",
    "reasoningContent",
    "image",
    "document",
];

impl BodyFormat {
    pub fn name(self) -> &'static str {
        match self {
            Self::OpenAiChat => "openai-chat",
            Self::OpenAiResponses => "openai-responses",
            Self::AnthropicMessages => "anthropic-messages",
            Self::GeminiGenerateContent => "gemini-generate-content",
            Self::BedrockConverse => "bedrock-converse",
        }
    }

    /// Whether inference engines take bodies of this format (OpenAI's and Anthropic's APIs);
    /// Gemini's and Bedrock's are their providers' own.
    pub fn is_served_by_engines(self) -> bool {
        !matches!(self, Self::GeminiGenerateContent | Self::BedrockConverse)
    }

    /// Detects the format of a body from the keys and shapes only that API uses; `None` when
    /// it has none of them (no `messages`, `input`, `instructions` or `contents`).
    pub fn detect(body: &Map<String, Value>) -> Option<Self> {
        if body.contains_key("input") || body.contains_key("instructions") {
            return Some(Self::OpenAiResponses);
        }
        if body.get("contents").is_some_and(Value::is_array) {
            return Some(Self::GeminiGenerateContent);
        }
        if is_converse(body) {
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
                        block
                            .get("type")
                            .and_then(Value::as_str)
                            .is_some_and(|kind| ANTHROPIC_BLOCKS.contains(&kind))
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

/// Whether a body is a Converse request: a `toolConfig` or `inferenceConfig`, or blocks keyed
/// by kind (no `type`) in `system` or the messages' `content`. Converse names its model in the
/// URL (`POST /model/{modelId}/converse`), never in the body: a body with a `model` and a block
/// without `type` is an OpenAI or Anthropic body with a broken block, which its reader refuses.
fn is_converse(body: &Map<String, Value>) -> bool {
    let keyed_blocks = |blocks: Option<&Value>| {
        blocks.and_then(Value::as_array).is_some_and(|blocks| {
            blocks.iter().any(|block| {
                block.as_object().is_some_and(|block| {
                    !block.contains_key("type")
                        && CONVERSE_BLOCK_KEYS
                            .iter()
                            .any(|key| block.contains_key(*key))
                })
            })
        })
    };
    body.contains_key("toolConfig")
        || body.contains_key("inferenceConfig")
        || !body.contains_key("model")
            && (keyed_blocks(body.get("system"))
                || body
                    .get("messages")
                    .and_then(Value::as_array)
                    .is_some_and(|messages| {
                        messages
                            .iter()
                            .any(|message| keyed_blocks(message.get("content")))
                    }))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn detect(body: Value) -> Option<BodyFormat> {
        BodyFormat::detect(body.as_object()?)
    }

    #[test]
    fn each_api_is_known_by_its_own_signs() {
        let user = json!([{"role": "user", "content": "hi"}]);
        for (body, expected) in [
            (
                json!({"model": "gpt-4o", "messages": user}),
                BodyFormat::OpenAiChat,
            ),
            (
                json!({"model": "m", "input": "hi"}),
                BodyFormat::OpenAiResponses,
            ),
            (
                json!({"model": "m", "system": "Be terse.", "messages": user}),
                BodyFormat::AnthropicMessages,
            ),
            (
                json!({"model": "claude-sonnet-4-5", "messages": user}),
                BodyFormat::AnthropicMessages,
            ),
            (
                json!({"model": "m", "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}),
                BodyFormat::AnthropicMessages,
            ),
            (
                json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
                BodyFormat::GeminiGenerateContent,
            ),
            (
                json!({"messages": [{"role": "user", "content": [{"text": "hi"}]}]}),
                BodyFormat::BedrockConverse,
            ),
            // A block without `type` in a body naming its model: not Converse's, which names
            // the model in the URL.
            (
                json!({"model": "gpt-4o", "messages": [{"role": "user", "content": [{"text": "hi"}]}]}),
                BodyFormat::OpenAiChat,
            ),
            (
                json!({"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": [{"text": "hi"}]}]}),
                BodyFormat::AnthropicMessages,
            ),
            // A tool message is OpenAI's, whatever the model is called.
            (
                json!({"model": "claude-x", "messages": [{"role": "tool", "tool_call_id": "a", "content": "ok"}]}),
                BodyFormat::OpenAiChat,
            ),
        ] {
            assert_eq!(detect(body.clone()), Some(expected), "{body}");
        }
        assert_eq!(detect(json!({"model": "m", "prompt": "hi"})), None);
    }
}

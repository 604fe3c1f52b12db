//! Anthropic Messages: the `system` prompt between the tools and the messages, which are
//! read like chat messages.

use serde_json::{Map, Value};

use super::builder::PartsBuilder;
use super::{BodyError, PartKind};
use crate::json::kind_of;
use crate::path::PartPath;

impl PartsBuilder<'_> {
    pub(super) fn anthropic_system(&mut self, body: &Map<String, Value>) -> Result<(), BodyError> {
        let path = PartPath::root().key("system");
        match body.get("system") {
            None | Some(Value::Null) => {}
            Some(Value::String(text)) => self.push(path, PartKind::System, text.clone(), None),
            Some(Value::Array(blocks)) => {
                for (index, block) in blocks.iter().enumerate() {
                    let block_path = path.index(index);
                    let text = block.get("text").and_then(Value::as_str).ok_or_else(|| {
                        BodyError::new(
                            block_path.clone(),
                            "a system block must have a `text` string",
                        )
                    })?;
                    self.push(
                        block_path.key("text"),
                        PartKind::System,
                        text.to_owned(),
                        None,
                    );
                }
            }
            Some(other) => {
                return Err(BodyError::new(
                    path,
                    format!(
                        "`system` must be a string or an array of text blocks, found {}",
                        kind_of(other)
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::request::tests::content_paths;
    use crate::request::{BodyFormat, Request};

    #[test]
    fn anthropic_system_comes_after_tools() {
        let body = json!({
            "model": "claude-sonnet-4",
            "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
            "tools": [{"name": "t", "input_schema": {}, "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "x", "content": "r"}]}]
        });
        let request = Request::from_body(&body).unwrap();
        assert_eq!(request.format, BodyFormat::AnthropicMessages);
        assert_eq!(
            content_paths(&request),
            [
                "tools[0]",
                "system[0].text",
                "messages[0].content[0].tool_use_id",
                "messages[0].content[0].content"
            ]
        );
        assert_eq!(&*request.parts[0].text, r#"{"name":"t","input_schema":{}}"#);
    }

    #[test]
    fn bedrock_and_vertex_bodies_are_anthropic_by_their_version() {
        // No system prompt, no blocks, no tools, no Claude model name: only the version says.
        let body = json!({
            "anthropic_version": "bedrock-2023-05-31",
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "hi"}]
        });
        let request = Request::from_body(&body).unwrap();
        assert_eq!(request.format, BodyFormat::AnthropicMessages);
        let without_version = json!({"messages": [{"role": "user", "content": "hi"}]});
        let request = Request::from_body(&without_version).unwrap();
        assert_eq!(request.format, BodyFormat::OpenAiChat);
    }
}

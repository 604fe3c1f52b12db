//! Amazon Bedrock Converse (`docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html`):
//! `toolConfig.tools[].toolSpec`, `system` blocks, then `messages` whose `content` blocks are
//! keyed by kind (`text`, `toolUse`, `toolResult`, `reasoningContent`, `image`, …) rather than
//! typed. A `cachePoint` block marks a breakpoint after the block before it; it is not prompt
//! text. Claude on Bedrock caches tools, then system, then messages, as Anthropic does.

use serde_json::{Map, Value};

use super::builder::PartsBuilder;
use super::{BodyError, PartKind, Role, short_hash};
use crate::json::{compact_json, kind_of};
use crate::path::PartPath;

/// The blocks a `cachePoint` marks: the one before each, in `items` at `path`.
pub(super) fn cache_points(path: &PartPath, items: Option<&Value>, found: &mut Vec<PartPath>) {
    for (index, item) in items
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        if item.get("cachePoint").is_some()
            && let Some(before) = index.checked_sub(1)
        {
            found.push(path.index(before));
        }
    }
}

impl PartsBuilder<'_> {
    pub(super) fn converse_body(&mut self, body: &Map<String, Value>) -> Result<(), BodyError> {
        let config = PartPath::root().key("toolConfig");
        let tool_config = body.get("toolConfig");
        let tools = tool_config
            .and_then(|config| config.get("tools"))
            .and_then(Value::as_array);
        for (index, tool) in tools.into_iter().flatten().enumerate() {
            if tool.get("cachePoint").is_some() {
                continue;
            }
            let name = tool
                .pointer("/toolSpec/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            self.tool_part(config.key("tools").index(index), name, tool);
        }
        if let Some(choice) = tool_config.and_then(|config| config.get("toolChoice")) {
            self.push(
                config.key("toolChoice"),
                PartKind::Setting,
                compact_json(choice),
                None,
            );
        }
        let system_path = PartPath::root().key("system");
        match body.get("system") {
            None | Some(Value::Null) => {}
            Some(Value::Array(blocks)) => {
                for (index, block) in blocks.iter().enumerate() {
                    let block_path = system_path.index(index);
                    if let Some(text) = block.get("text").and_then(Value::as_str) {
                        self.push(
                            block_path.key("text"),
                            PartKind::System,
                            text.to_owned(),
                            None,
                        );
                    } else if block.get("cachePoint").is_none() {
                        let text = format!("[system block {}]", short_hash(&compact_json(block)));
                        self.push(block_path, PartKind::System, text, None);
                    }
                }
            }
            Some(other) => {
                return Err(BodyError::new(
                    system_path,
                    format!(
                        "`system` must be an array of blocks, found {}",
                        kind_of(other)
                    ),
                ));
            }
        }
        self.each_item(body, "messages", Self::converse_message)
    }

    fn converse_message(&mut self, path: PartPath, message: &Value) -> Result<(), BodyError> {
        let role = match message.get("role").and_then(Value::as_str) {
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            _ => {
                return Err(BodyError::new(
                    path.key("role"),
                    "`role` must be `user` or `assistant`",
                ));
            }
        };
        let message_index = self.open_message(path.clone(), role);
        let content_path = path.key("content");
        let blocks = message
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| {
                BodyError::new(content_path.clone(), "`content` must be an array of blocks")
            })?;
        for (index, block) in blocks.iter().enumerate() {
            self.converse_block(&content_path.index(index), block, message_index)?;
        }
        self.close_message(path, message_index);
        Ok(())
    }

    fn converse_block(
        &mut self,
        path: &PartPath,
        block: &Value,
        message: usize,
    ) -> Result<(), BodyError> {
        let Some(object) = block.as_object() else {
            return Err(BodyError::new(
                path.clone(),
                format!(
                    "a content block must be an object, found {}",
                    kind_of(block)
                ),
            ));
        };
        let text = |value: Option<&Value>| value.and_then(Value::as_str).map(str::to_owned);
        if let Some(content) = text(object.get("text")) {
            self.push(path.key("text"), PartKind::Text, content, Some(message));
        } else if let Some(call) = object.get("toolUse") {
            let call_path = path.key("toolUse");
            if let Some(id) = text(call.get("toolUseId")) {
                self.push(
                    call_path.key("toolUseId"),
                    PartKind::ToolCallId,
                    id,
                    Some(message),
                );
            }
            if let Some(name) = text(call.get("name")) {
                self.push(
                    call_path.key("name"),
                    PartKind::ToolCallName,
                    name,
                    Some(message),
                );
            }
            if let Some(input) = call.get("input") {
                self.push(
                    call_path.key("input"),
                    PartKind::Arguments,
                    compact_json(input),
                    Some(message),
                );
            }
        } else if let Some(result) = object.get("toolResult") {
            let result_path = path.key("toolResult");
            if let Some(id) = text(result.get("toolUseId")) {
                self.push(
                    result_path.key("toolUseId"),
                    PartKind::ToolCallId,
                    id,
                    Some(message),
                );
            }
            let inner = result.get("content").and_then(Value::as_array);
            for (index, item) in inner.into_iter().flatten().enumerate() {
                let item_path = result_path.key("content").index(index);
                let (item_path, content) = match (text(item.get("text")), item.get("json")) {
                    (Some(content), _) => (item_path.key("text"), content),
                    (None, Some(json)) => (item_path.key("json"), compact_json(json)),
                    (None, None) => (
                        item_path,
                        format!("[result block {}]", short_hash(&compact_json(item))),
                    ),
                };
                self.push(item_path, PartKind::ToolResult, content, Some(message));
            }
        } else if let Some(reasoning) = object.get("reasoningContent") {
            let reasoning_path = path.key("reasoningContent");
            match reasoning
                .pointer("/reasoningText/text")
                .and_then(Value::as_str)
            {
                Some(thought) => self.push(
                    reasoning_path.key("reasoningText").key("text"),
                    PartKind::Reasoning,
                    thought.to_owned(),
                    Some(message),
                ),
                None => {
                    let digest = short_hash(&compact_json(reasoning));
                    self.push(
                        reasoning_path,
                        PartKind::Reasoning,
                        format!("[redacted reasoning {digest}]"),
                        Some(message),
                    );
                }
            }
        } else if !object.contains_key("cachePoint") {
            // Images, documents, video, guard content: a change to them is a change of the prompt.
            let text = format!("[content block {}]", short_hash(&compact_json(block)));
            self.push(path.clone(), PartKind::Media, text, Some(message));
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
    fn converse_blocks_are_read_by_kind_and_cache_points_mark_the_block_before() {
        let body = json!({
            "system": [{"text": "Be brief."}, {"cachePoint": {"type": "default"}}],
            "toolConfig": {"tools": [{"toolSpec": {"name": "get", "inputSchema": {"json": {"type": "object"}}}}, {"cachePoint": {"type": "default"}}]},
            "messages": [
                {"role": "user", "content": [{"text": "weather?"}]},
                {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "get", "input": {"city": "Rome"}}}]},
                {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"json": {"sky": "clear"}}]}}, {"cachePoint": {"type": "default"}}]},
            ],
            "inferenceConfig": {"maxTokens": 64},
        });
        let request = Request::from_body(&body).unwrap();
        assert_eq!(request.format, BodyFormat::BedrockConverse);
        assert_eq!(request.tool_names(), ["get"]);
        assert_eq!(
            content_paths(&request),
            [
                "toolConfig.tools[0]",
                "system[0].text",
                "messages[0].content[0].text",
                "messages[1].content[0].toolUse.toolUseId",
                "messages[1].content[0].toolUse.name",
                "messages[1].content[0].toolUse.input",
                "messages[2].content[0].toolResult.toolUseId",
                "messages[2].content[0].toolResult.content[0].json",
            ]
        );
        let breakpoints: Vec<String> = request
            .breakpoints
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            breakpoints,
            ["toolConfig.tools[0]", "system[0]", "messages[2].content[0]"]
        );
    }
}

//! Content blocks, whichever API they come from: text, tool use and results, thinking, and
//! media that stands in the prompt as a digest.

use serde_json::Value;

use super::builder::PartsBuilder;
use super::{BodyError, PartKind, short_hash, without_cache_control};
use crate::json::{compact_json, kind_of};
use crate::path::PartPath;

impl PartsBuilder<'_> {
    /// Content blocks of any of the three APIs.
    pub(super) fn blocks(
        &mut self,
        path: &PartPath,
        blocks: &[Value],
        message: usize,
    ) -> Result<(), BodyError> {
        for (index, block) in blocks.iter().enumerate() {
            let block_path = path.index(index);
            let object = match block {
                Value::Object(object) => object,
                Value::String(text) => {
                    self.push(block_path, PartKind::Text, text.clone(), Some(message));
                    continue;
                }
                other => {
                    return Err(BodyError::new(
                        block_path,
                        format!(
                            "a content block must be an object, found {}",
                            kind_of(other)
                        ),
                    ));
                }
            };
            // Every API requires a block's `type`.
            let block_type = object.get("type").and_then(Value::as_str).ok_or_else(|| {
                BodyError::new(
                    block_path.clone(),
                    "a content block must have a `type` string (`text`, `image_url`, `tool_use`, ...)",
                )
            })?;
            match block_type {
                "text" | "input_text" | "output_text" | "summary_text" | "reasoning_text" => {
                    let text = object.get("text").and_then(Value::as_str).ok_or_else(|| {
                        BodyError::new(
                            block_path.key("text"),
                            format!("a `{block_type}` block must have a `text` string"),
                        )
                    })?;
                    let kind =
                        if block_type.ends_with("summary_text") || block_type == "reasoning_text" {
                            PartKind::Reasoning
                        } else {
                            PartKind::Text
                        };
                    self.push(block_path.key("text"), kind, text.to_owned(), Some(message));
                }
                "tool_use" | "server_tool_use" => {
                    self.string_field(&block_path, object, "id", PartKind::ToolCallId, message)?;
                    self.string_field(
                        &block_path,
                        object,
                        "name",
                        PartKind::ToolCallName,
                        message,
                    )?;
                    if let Some(input) = object.get("input") {
                        self.push(
                            block_path.key("input"),
                            PartKind::Arguments,
                            compact_json(input),
                            Some(message),
                        );
                    }
                }
                "tool_result" => {
                    self.string_field(
                        &block_path,
                        object,
                        "tool_use_id",
                        PartKind::ToolCallId,
                        message,
                    )?;
                    match object.get("content") {
                        Some(Value::Array(inner)) => {
                            self.blocks(&block_path.key("content"), inner, message)?
                        }
                        Some(Value::String(text)) => {
                            self.push(
                                block_path.key("content"),
                                PartKind::ToolResult,
                                text.clone(),
                                Some(message),
                            );
                        }
                        _ => {}
                    }
                }
                // Mistral's thinking is a list of text chunks; Anthropic's a string.
                "thinking" => match object.get("thinking") {
                    Some(Value::Array(chunks)) => {
                        for (index, chunk) in chunks.iter().enumerate() {
                            let text = chunk
                                .get("text")
                                .and_then(Value::as_str)
                                .unwrap_or_default();
                            self.push(
                                block_path.key("thinking").index(index).key("text"),
                                PartKind::Reasoning,
                                text.to_owned(),
                                Some(message),
                            );
                        }
                    }
                    _ => self.string_field(
                        &block_path,
                        object,
                        "thinking",
                        PartKind::Reasoning,
                        message,
                    )?,
                },
                "redacted_thinking" => {
                    let data = object
                        .get("data")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    let text = format!("[redacted thinking {}]", short_hash(data));
                    self.push(
                        block_path.key("data"),
                        PartKind::Reasoning,
                        text,
                        Some(message),
                    );
                }
                _ => {
                    // Images, audio, documents: their bytes are not prompt text, but a change
                    // to them is a change of the prompt. Stand in a short digest.
                    let definition = without_cache_control(block);
                    let text = format!("[{block_type} {}]", short_hash(&compact_json(&definition)));
                    self.push(block_path, PartKind::Media, text, Some(message));
                }
            }
        }
        Ok(())
    }
}

//! OpenAI Chat Completions: `messages` with string or block content and `tool_calls`.
//! Anthropic's messages and Responses items that carry a `role` are read here too.

use serde_json::{Map, Value};

use super::builder::PartsBuilder;
use super::{BodyError, PartKind, Role};
use crate::json::{compact_json, kind_of};
use crate::path::PartPath;

impl PartsBuilder<'_> {
    /// The `messages` array of a Chat Completions or Anthropic Messages body.
    pub(super) fn chat_messages(&mut self, body: &Map<String, Value>) -> Result<(), BodyError> {
        self.each_item(body, "messages", |builder, path, message| {
            if builder.repeat_earlier_message(&path, message) {
                return Ok(());
            }
            builder.message(path, message)
        })
    }

    /// One message with a `role`: its name or call id, reasoning, content and tool calls.
    pub(super) fn message(&mut self, path: PartPath, message: &Value) -> Result<(), BodyError> {
        let object = message.as_object().ok_or_else(|| {
            BodyError::new(
                path.clone(),
                format!("a message must be an object, found {}", kind_of(message)),
            )
        })?;
        let role = match object.get("role") {
            Some(Value::String(role)) => match Role::from(role.as_str()) {
                // Every API refuses a message with a role it does not know.
                Role::Other(role) => {
                    return Err(BodyError::new(
                        path.key("role"),
                        format!(
                            "unknown role `{role}`: expected system, developer, user, assistant, tool or function"
                        ),
                    ));
                }
                known => known,
            },
            Some(other) => {
                return Err(BodyError::new(
                    path.key("role"),
                    format!("`role` must be a string, found {}", kind_of(other)),
                ));
            }
            None => return Err(BodyError::new(path, "a message must have a `role`")),
        };
        let index = self.open_message(path.clone(), role.clone());
        for key in ["name", "tool_call_id"] {
            if object.get(key).is_some_and(Value::is_string) {
                self.string_field(&path, object, key, PartKind::ToolCallId, index)?;
            }
        }
        // Cohere v2 sends the assistant's `tool_plan` back with its tool calls.
        for key in ["reasoning_content", "reasoning", "thinking", "tool_plan"] {
            if object.get(key).is_some_and(Value::is_string) {
                self.string_field(&path, object, key, PartKind::Reasoning, index)?;
            }
        }
        let content_path = path.key("content");
        let content_kind = if role == Role::Tool {
            PartKind::ToolResult
        } else {
            PartKind::Text
        };
        match object.get("content") {
            None | Some(Value::Null) => {}
            Some(Value::String(text)) => {
                self.push(content_path, content_kind, text.clone(), Some(index))
            }
            Some(Value::Array(blocks)) => self.blocks(&content_path, blocks, index)?,
            Some(other) => {
                return Err(BodyError::new(
                    content_path,
                    format!(
                        "`content` must be a string, null or an array of content blocks, found {}",
                        kind_of(other)
                    ),
                ));
            }
        }
        if let Some(tool_calls) = object.get("tool_calls").filter(|calls| !calls.is_null()) {
            let calls_path = path.key("tool_calls");
            let calls = tool_calls.as_array().ok_or_else(|| {
                BodyError::new(
                    calls_path.clone(),
                    format!(
                        "`tool_calls` must be an array, found {}",
                        kind_of(tool_calls)
                    ),
                )
            })?;
            for (call_index, call) in calls.iter().enumerate() {
                self.tool_call(calls_path.index(call_index), call, index)?;
            }
        }
        self.close_message(path, index);
        Ok(())
    }

    fn tool_call(&mut self, path: PartPath, call: &Value, message: usize) -> Result<(), BodyError> {
        let object = call.as_object().ok_or_else(|| {
            BodyError::new(
                path.clone(),
                format!("a tool call must be an object, found {}", kind_of(call)),
            )
        })?;
        if object.contains_key("id") {
            self.string_field(&path, object, "id", PartKind::ToolCallId, message)?;
        }
        let function_path = path.key("function");
        let function = object
            .get("function")
            .and_then(Value::as_object)
            .ok_or_else(|| {
                BodyError::new(
                    function_path.clone(),
                    "a tool call must have a `function` object",
                )
            })?;
        self.string_field(
            &function_path,
            function,
            "name",
            PartKind::ToolCallName,
            message,
        )?;
        match function.get("arguments") {
            Some(Value::String(arguments)) => {
                self.push(
                    function_path.key("arguments"),
                    PartKind::Arguments,
                    arguments.clone(),
                    Some(message),
                );
            }
            Some(arguments @ Value::Object(_)) => {
                self.push(
                    function_path.key("arguments"),
                    PartKind::Arguments,
                    compact_json(arguments),
                    Some(message),
                );
            }
            Some(other) => {
                return Err(BodyError::new(
                    function_path.key("arguments"),
                    format!(
                        "`arguments` must be a JSON string, found {}",
                        kind_of(other)
                    ),
                ));
            }
            None => {}
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
    fn openai_chat_parts_follow_cache_order() {
        let body = json!({
            "model": "gpt-4o",
            "messages": [
                {"role": "system", "content": "sys"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "ok"}
            ],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
        });
        let request = Request::from_body(&body).unwrap();
        assert_eq!(request.format, BodyFormat::OpenAiChat);
        assert_eq!(
            content_paths(&request),
            [
                "tools[0]",
                "messages[0].content",
                "messages[1].tool_calls[0].id",
                "messages[1].tool_calls[0].function.name",
                "messages[1].tool_calls[0].function.arguments",
                "messages[2].tool_call_id",
                "messages[2].content",
            ]
        );
        assert_eq!(request.tool_names(), ["f"]);
    }

    #[test]
    fn wrong_types_name_the_place() {
        let body = json!({"messages": [{"role": "user", "content": 3}]});
        let error = Request::from_body(&body).unwrap_err();
        assert_eq!(error.path.to_string(), "messages[0].content");
        assert!(
            error.message.contains("found a number"),
            "{}",
            error.message
        );

        let error = Request::from_body(&json!({"prompt": "x"})).unwrap_err();
        assert_eq!(
            error.message,
            "not a request body in a known format: a JSON object with keys `prompt`"
        );
    }

    #[test]
    fn cohere_v2_chat_bodies_are_read_as_chat() {
        let body = json!({
            "model": "command-a-03-2025",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "tool_plan": "I will look it up.", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "get", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": [
                    {"type": "document", "document": {"data": "{\"sky\": \"clear\"}"}}]},
            ],
            "tools": [{"type": "function", "function": {"name": "get", "parameters": {}}}],
        });
        let request = Request::from_body(&body).unwrap();
        assert_eq!(request.format, BodyFormat::OpenAiChat);
        let paths = content_paths(&request);
        assert!(
            paths.contains(&"messages[2].tool_plan".to_owned()),
            "{paths:?}"
        );
        assert!(
            paths.contains(&"messages[3].content[0]".to_owned()),
            "{paths:?}"
        );
    }

    #[test]
    fn mistral_thinking_chunks_are_reasoning() {
        let body = json!({"model": "magistral-medium", "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": [{"type": "text", "text": "They greet."}]},
                {"type": "text", "text": "Hello."}]},
            {"role": "user", "content": "again"},
        ]});
        let request = Request::from_body(&body).unwrap();
        let thought = request
            .parts
            .iter()
            .find(|part| part.path.to_string() == "messages[1].content[0].thinking[0].text")
            .unwrap();
        assert_eq!(thought.kind, crate::request::PartKind::Reasoning);
        assert_eq!(&*thought.text, "They greet.");
    }

    #[test]
    fn bodies_every_api_refuses_are_errors_at_their_place() {
        let refused = [
            (
                json!({"messages": [{"role": "bot", "content": "hi"}]}),
                "messages[0].role",
                "unknown role `bot`",
            ),
            (
                // Neither typed (OpenAI, Anthropic) nor keyed by kind (Bedrock Converse).
                json!({"messages": [{"role": "user", "content": [{"txt": "hi"}]}]}),
                "messages[0].content[0]",
                "must have a `type`",
            ),
        ];
        for (body, place, message) in refused {
            let error = Request::from_body(&body).unwrap_err();
            assert_eq!(error.path.to_string(), place);
            assert!(error.message.contains(message), "{}", error.message);
        }
    }
}

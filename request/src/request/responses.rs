//! OpenAI Responses: `instructions`, then `input` as a string or as items (from GPT-6.2 on,
//! `input` then `instructions`). Items with a
//! `role` are messages; the others (function calls and their output, reasoning) become
//! messages whose role is their `type` (`item` when they have none).

use serde_json::{Map, Value};

use super::builder::PartsBuilder;
use super::{BodyError, PartKind, Role, short_hash};
use crate::json::{compact_json, kind_of};
use crate::path::PartPath;

impl PartsBuilder<'_> {
    /// The `instructions` and `input` of a Responses body.
    /// The `instructions` and `input` of a Responses body, in the order the model lays them
    /// out: `instructions` first, or after `input` from GPT-6.2 on
    /// ([`kvlint_protocol::openai::instructions_after_input`]).
    pub(super) fn responses_input(&mut self, body: &Map<String, Value>) -> Result<(), BodyError> {
        let instructions = match body.get("instructions").filter(|value| !value.is_null()) {
            Some(instructions) => Some(instructions.as_str().ok_or_else(|| {
                BodyError::new(
                    PartPath::root().key("instructions"),
                    format!(
                        "`instructions` must be a string, found {}",
                        kind_of(instructions)
                    ),
                )
            })?),
            None => None,
        };
        let after_input = body
            .get("model")
            .and_then(Value::as_str)
            .is_some_and(kvlint_protocol::openai::instructions_after_input);
        let push_instructions = |builder: &mut Self| {
            if let Some(text) = instructions {
                let path = PartPath::root().key("instructions");
                builder.push(path, PartKind::System, text.to_owned(), None);
            }
        };
        if !after_input {
            push_instructions(self);
        }
        self.responses_items(body.get("input"))?;
        if after_input {
            push_instructions(self);
        }
        Ok(())
    }

    fn responses_items(&mut self, input: Option<&Value>) -> Result<(), BodyError> {
        let path = PartPath::root().key("input");
        match input {
            None | Some(Value::Null) => Ok(()),
            Some(Value::String(text)) => {
                let message = self.open_message(path.clone(), Role::User);
                self.push(path.clone(), PartKind::Text, text.clone(), Some(message));
                self.close_message(path, message);
                Ok(())
            }
            Some(Value::Array(items)) => {
                for (index, item) in items.iter().enumerate() {
                    self.responses_item(path.index(index), item)?;
                }
                Ok(())
            }
            Some(other) => Err(BodyError::new(
                path,
                format!(
                    "`input` must be a string or an array of items, found {}",
                    kind_of(other)
                ),
            )),
        }
    }

    fn responses_item(&mut self, path: PartPath, item: &Value) -> Result<(), BodyError> {
        let object = item.as_object().ok_or_else(|| {
            BodyError::new(
                path.clone(),
                format!("an input item must be an object, found {}", kind_of(item)),
            )
        })?;
        let item_type = object.get("type").and_then(Value::as_str);
        if object.contains_key("role") && matches!(item_type, None | Some("message")) {
            return self.message(path, item);
        }
        let role = Role::from(item_type.unwrap_or("item"));
        let message = self.open_message(path.clone(), role.clone());
        match role {
            Role::FunctionCall | Role::CustomToolCall => {
                self.string_field(&path, object, "call_id", PartKind::ToolCallId, message)?;
                self.string_field(&path, object, "name", PartKind::ToolCallName, message)?;
                let arguments_key = if object.contains_key("input") {
                    "input"
                } else {
                    "arguments"
                };
                self.string_field(&path, object, arguments_key, PartKind::Arguments, message)?;
            }
            Role::FunctionCallOutput | Role::CustomToolCallOutput => {
                self.string_field(&path, object, "call_id", PartKind::ToolCallId, message)?;
                match object.get("output") {
                    Some(Value::Array(blocks)) => {
                        self.blocks(&path.key("output"), blocks, message)?
                    }
                    Some(_) => {
                        self.string_field(&path, object, "output", PartKind::ToolResult, message)?
                    }
                    None => {}
                }
            }
            Role::Reasoning => {
                if let Some(Value::Array(summary)) = object.get("summary") {
                    self.blocks(&path.key("summary"), summary, message)?;
                }
                if let Some(Value::String(encrypted)) = object.get("encrypted_content") {
                    let text = format!("[encrypted reasoning {}]", short_hash(encrypted));
                    self.push(
                        path.key("encrypted_content"),
                        PartKind::Reasoning,
                        text,
                        Some(message),
                    );
                }
            }
            _ => self.push(
                path.clone(),
                PartKind::Media,
                compact_json(item),
                Some(message),
            ),
        }
        self.close_message(path, message);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::request::tests::content_paths;
    use crate::request::{BodyFormat, Request};

    #[test]
    fn responses_items_become_messages() {
        let body = json!({
            "instructions": "be brief",
            "input": [
                {"role": "user", "content": "hi"},
                {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c", "output": "42"}
            ]
        });
        let request = Request::from_body(&body).unwrap();
        assert_eq!(request.format, BodyFormat::OpenAiResponses);
        assert_eq!(request.messages.len(), 3);
        assert_eq!(
            content_paths(&request),
            [
                "instructions",
                "input[0].content",
                "input[1].call_id",
                "input[1].name",
                "input[1].arguments",
                "input[2].call_id",
                "input[2].output"
            ]
        );
    }
}

//! Google Gemini `generateContent` (REST, `ai.google.dev/api/generate-content`): `tools` of
//! `functionDeclarations`, `systemInstruction`, then `contents` of `user` and `model` turns
//! whose `parts` hold text, thoughts, function calls and responses, and media. Field names are
//! read in both spellings the API takes (`systemInstruction` and `system_instruction`), and the
//! Python SDK's `config` (`config.system_instruction`, `config.tools`) as tracing records it.
//!
//! The order Gemini lays these out in its prompt is not documented; kvlint puts tools, then the
//! system instruction, then the contents (as Anthropic and Bedrock do). A change to the tools
//! or the system instruction loses the cached prefix whichever comes first.

use serde_json::{Map, Value};

use super::builder::PartsBuilder;
use super::{BodyError, PartKind, Role, short_hash};
use crate::json::{compact_json, kind_of};
use crate::path::PartPath;

/// The value of `key` in `object` under either of its spellings, with the spelling found.
fn either<'a>(
    object: &'a Map<String, Value>,
    keys: [&'static str; 2],
) -> Option<(&'static str, &'a Value)> {
    keys.into_iter().find_map(|key| {
        object
            .get(key)
            .filter(|value| !value.is_null())
            .map(|value| (key, value))
    })
}

impl PartsBuilder<'_> {
    pub(super) fn gemini_body(&mut self, body: &Map<String, Value>) -> Result<(), BodyError> {
        let config = body.get("config").and_then(Value::as_object);
        // Tools: each function declaration on its own, other tools (search, code execution) whole.
        let (tools_path, tools) = match (
            body.get("tools"),
            config.and_then(|config| config.get("tools")),
        ) {
            (Some(tools), _) => (PartPath::root().key("tools"), Some(tools)),
            (None, Some(tools)) => (PartPath::root().key("config").key("tools"), Some(tools)),
            (None, None) => (PartPath::root(), None),
        };
        for (index, tool) in tools
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let path = tools_path.index(index);
            let declarations = tool
                .as_object()
                .and_then(|tool| either(tool, ["functionDeclarations", "function_declarations"]));
            match declarations {
                Some((key, Value::Array(declarations))) => {
                    for (inner, declaration) in declarations.iter().enumerate() {
                        let name = declaration
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        self.tool_part(path.key(key).index(inner), name, declaration);
                    }
                }
                _ => self.tool_part(path, "", tool),
            }
        }
        for key in [
            "toolConfig",
            "tool_config",
            "cachedContent",
            "cached_content",
        ] {
            if let Some(value) = body.get(key).filter(|value| !value.is_null()) {
                self.push(
                    PartPath::root().key(key),
                    PartKind::Setting,
                    compact_json(value),
                    None,
                );
            }
        }
        let instruction = either(body, ["systemInstruction", "system_instruction"])
            .map(|(key, value)| (PartPath::root().key(key), value))
            .or_else(|| {
                let (key, value) = either(config?, ["systemInstruction", "system_instruction"])?;
                Some((PartPath::root().key("config").key(key), value))
            });
        if let Some((path, instruction)) = instruction {
            match instruction {
                Value::String(text) => self.push(path, PartKind::System, text.clone(), None),
                Value::Object(content) => {
                    let parts = content.get("parts").and_then(Value::as_array);
                    for (index, part) in parts.into_iter().flatten().enumerate() {
                        if let Some(text) = part.get("text").and_then(Value::as_str) {
                            let part_path = path.key("parts").index(index).key("text");
                            self.push(part_path, PartKind::System, text.to_owned(), None);
                        }
                    }
                }
                other => {
                    return Err(BodyError::new(
                        path,
                        format!(
                            "the system instruction must be a Content object, found {}",
                            kind_of(other)
                        ),
                    ));
                }
            }
        }
        self.each_item(body, "contents", Self::gemini_content)
    }

    fn gemini_content(&mut self, path: PartPath, content: &Value) -> Result<(), BodyError> {
        let object = content.as_object().ok_or_else(|| {
            BodyError::new(
                path.clone(),
                format!("a content must be an object, found {}", kind_of(content)),
            )
        })?;
        let role = match object.get("role").and_then(Value::as_str) {
            None | Some("user") => Role::User,
            Some("model") => Role::Assistant,
            Some("function" | "tool") => Role::Tool,
            Some(other) => {
                return Err(BodyError::new(
                    path.key("role"),
                    format!("unknown role `{other}`: expected user or model"),
                ));
            }
        };
        let message = self.open_message(path.clone(), role);
        let parts_path = path.key("parts");
        let parts = object
            .get("parts")
            .and_then(Value::as_array)
            .ok_or_else(|| {
                BodyError::new(parts_path.clone(), "a content must have a `parts` array")
            })?;
        for (index, part) in parts.iter().enumerate() {
            let part_path = parts_path.index(index);
            let Some(part) = part.as_object() else {
                return Err(BodyError::new(
                    part_path,
                    format!("a part must be an object, found {}", kind_of(part)),
                ));
            };
            if let Some(text) = part.get("text").and_then(Value::as_str) {
                let thought = part.get("thought").and_then(Value::as_bool) == Some(true);
                let kind = if thought {
                    PartKind::Reasoning
                } else {
                    PartKind::Text
                };
                self.push(part_path.key("text"), kind, text.to_owned(), Some(message));
            } else if let Some((key, call)) = either(part, ["functionCall", "function_call"]) {
                self.gemini_function(
                    &part_path.key(key),
                    call,
                    "args",
                    PartKind::Arguments,
                    message,
                );
            } else if let Some((key, response)) =
                either(part, ["functionResponse", "function_response"])
            {
                self.gemini_function(
                    &part_path.key(key),
                    response,
                    "response",
                    PartKind::ToolResult,
                    message,
                );
            } else {
                // Media, code and its result: a change to them is a change of the prompt.
                let text = format!(
                    "[gemini part {}]",
                    short_hash(&compact_json(&Value::Object(part.clone())))
                );
                self.push(part_path, PartKind::Media, text, Some(message));
            }
        }
        self.close_message(path, message);
        Ok(())
    }

    /// A function call or response: its id, name, and arguments or result as compact JSON.
    fn gemini_function(
        &mut self,
        path: &PartPath,
        function: &Value,
        payload: &'static str,
        kind: PartKind,
        message: usize,
    ) {
        let field = |key: &str| function.get(key).and_then(Value::as_str);
        if let Some(id) = field("id") {
            self.push(
                path.key("id"),
                PartKind::ToolCallId,
                id.to_owned(),
                Some(message),
            );
        }
        if let Some(name) = field("name") {
            self.push(
                path.key("name"),
                PartKind::ToolCallName,
                name.to_owned(),
                Some(message),
            );
        }
        if let Some(value) = function.get(payload) {
            self.push(path.key(payload), kind, compact_json(value), Some(message));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::request::tests::content_paths;
    use crate::request::{BodyFormat, Request};

    #[test]
    fn gemini_tools_come_first_then_the_instruction_and_the_turns() {
        let body = json!({
            "contents": [
                {"role": "user", "parts": [{"text": "weather in Rome?"}]},
                {"role": "model", "parts": [{"functionCall": {"name": "get", "args": {"city": "Rome"}}}]},
                {"role": "user", "parts": [{"functionResponse": {"name": "get", "response": {"sky": "clear"}}}]},
            ],
            "systemInstruction": {"parts": [{"text": "Be brief."}]},
            "tools": [{"functionDeclarations": [{"name": "get", "parameters": {"type": "object"}}, {"name": "put"}]}],
            "generationConfig": {"temperature": 0},
        });
        let request = Request::from_body(&body).unwrap();
        assert_eq!(request.format, BodyFormat::GeminiGenerateContent);
        assert_eq!(request.tool_names(), ["get", "put"]);
        assert_eq!(
            content_paths(&request),
            [
                "tools[0].functionDeclarations[0]",
                "tools[0].functionDeclarations[1]",
                "systemInstruction.parts[0].text",
                "contents[0].parts[0].text",
                "contents[1].parts[0].functionCall.name",
                "contents[1].parts[0].functionCall.args",
                "contents[2].parts[0].functionResponse.name",
                "contents[2].parts[0].functionResponse.response",
            ]
        );
        // The SDK's spelling, as traces record it: the same prompt.
        let sdk = json!({
            "contents": body["contents"],
            "config": {"system_instruction": "Be brief.", "tools": [{"function_declarations": [{"name": "get"}]}]},
        });
        let request = Request::from_body(&sdk).unwrap();
        assert_eq!(request.tool_names(), ["get"]);
        assert_eq!(content_paths(&request)[1], "config.system_instruction");
    }
}

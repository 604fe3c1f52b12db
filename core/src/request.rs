//! The request model: one request body, whatever its API, as prompt parts in cache order.
//!
//! Each provider caches a request in a fixed order: Anthropic tools → system → messages,
//! OpenAI tools → instructions/system → messages. [`Request::parts`] lists the prompt's
//! pieces in that order, each with the path it came from, so a divergence found in the
//! rendered text can be named as a place in the user's file.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::path::{PartPath, PathSegment};
use crate::session::kind_of;

/// The API a request body is written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum BodyFormat {
    #[serde(rename = "openai-chat")]
    OpenAiChat,
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    #[serde(rename = "anthropic-messages")]
    AnthropicMessages,
}

impl BodyFormat {
    pub fn name(self) -> &'static str {
        match self {
            Self::OpenAiChat => "openai-chat",
            Self::OpenAiResponses => "openai-responses",
            Self::AnthropicMessages => "anthropic-messages",
        }
    }

    /// Detects the format of a body from the keys and shapes only that API uses.
    fn detect(body: &Map<String, Value>) -> Option<Self> {
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

/// What a part of the prompt is. Structural parts (role headers, message ends) are
/// scaffolding the renderer adds; they are not content a user would call "re-sent".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PartKind {
    Tool,
    Setting,
    System,
    Header,
    Text,
    ToolCallName,
    ToolCallId,
    Arguments,
    ToolResult,
    Reasoning,
    Media,
    End,
}

impl PartKind {
    pub fn is_structural(self) -> bool {
        matches!(self, Self::Header | Self::End)
    }
}

/// One piece of the prompt in cache order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    pub path: PartPath,
    pub kind: PartKind,
    pub text: String,
    /// The index into [`Request::messages`] this part belongs to, if any.
    pub message: Option<usize>,
}

/// A tool definition as sent.
#[derive(Clone, Debug, PartialEq)]
pub struct Tool {
    pub name: String,
    pub path: PartPath,
    /// The definition without `cache_control`, which marks a breakpoint but is not prompt text.
    pub definition: Value,
}

/// A conversation item: a chat message, or a Responses `input` item.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    pub path: PartPath,
    pub role: String,
    pub value: Value,
}

/// A request body parsed into prompt parts in the provider's cache order.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub format: BodyFormat,
    pub model: Option<String>,
    pub tools: Vec<Tool>,
    pub messages: Vec<Message>,
    pub parts: Vec<Part>,
    /// Blocks marked as cache breakpoints (`cache_control`, `prompt_cache_breakpoint`).
    pub breakpoints: Vec<PartPath>,
    /// Anthropic's top-level `cache_control`: a breakpoint on the last cacheable block.
    pub automatic_breakpoint: bool,
    pub body: Value,
}

/// A body that does not have the shape of any supported API, with the place that is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BodyError {
    pub path: PartPath,
    pub message: String,
    pub expected: Option<String>,
}

impl BodyError {
    pub fn new(path: PartPath, message: impl Into<String>) -> Self {
        Self {
            path,
            message: message.into(),
            expected: None,
        }
    }

    fn expected(mut self, expected: impl Into<String>) -> Self {
        self.expected = Some(expected.into());
        self
    }
}

const SUPPORTED_FORMATS: &str = "expected an OpenAI Chat Completions body (`messages`), an OpenAI \
    Responses body (`input` and/or `instructions`) or an Anthropic Messages body (`messages`, \
    `system`, `tools[].input_schema`)";

impl Request {
    pub fn from_body(body: &Value) -> Result<Self, BodyError> {
        let Some(object) = body.as_object() else {
            return Err(BodyError::new(
                PartPath::root(),
                format!("expected a request body object, found {}", kind_of(body)),
            ));
        };
        let format = BodyFormat::detect(object).ok_or_else(|| {
            BodyError::new(PartPath::root(), "no known request format").expected(SUPPORTED_FORMATS)
        })?;
        let mut builder = Builder {
            tools: Vec::new(),
            messages: Vec::new(),
            parts: Vec::new(),
        };
        builder.tools(object)?;
        // Settings that change what the provider caches: tool choice and output schemas are
        // rendered after the tools; Anthropic's thinking parameters and OpenAI's reasoning
        // effort invalidate the system prompt and messages when they change.
        for setting in [
            "tool_choice",
            "response_format",
            "text",
            "thinking",
            "reasoning",
            "reasoning_effort",
        ] {
            if let Some(value) = object.get(setting).filter(|value| !value.is_null()) {
                let path = PartPath::root().key(setting);
                builder.push(path, PartKind::Setting, compact_json(value), None);
            }
        }
        match format {
            BodyFormat::OpenAiChat => builder.chat_messages(object)?,
            BodyFormat::AnthropicMessages => {
                builder.anthropic_system(object)?;
                builder.chat_messages(object)?;
            }
            BodyFormat::OpenAiResponses => builder.responses_input(object)?,
        }
        Ok(Self {
            format,
            model: object
                .get("model")
                .and_then(Value::as_str)
                .map(str::to_owned),
            tools: builder.tools,
            messages: builder.messages,
            parts: builder.parts,
            breakpoints: breakpoints(object),
            automatic_breakpoint: object.contains_key("cache_control"),
            body: body.clone(),
        })
    }

    /// The block a part belongs to, as cache breakpoints and Anthropic's lookback count
    /// blocks: a tool, a system block, a message's content block, else the whole message.
    pub fn block_of(path: &PartPath) -> PartPath {
        let segments = path.segments();
        let key = match segments.first() {
            Some(PathSegment::Key(key)) => key.as_str(),
            _ => "",
        };
        let content_block = matches!(
            (segments.get(2), segments.get(3)),
            (Some(PathSegment::Key(content)), Some(PathSegment::Index(_))) if content == "content"
        );
        let depth = match key {
            "messages" | "input" if content_block => 4,
            "messages" | "input" | "tools" => 2,
            "system" if matches!(segments.get(1), Some(PathSegment::Index(_))) => 2,
            _ => 1,
        };
        path.truncated(depth)
    }

    /// The tool names in request order.
    pub fn tool_names(&self) -> Vec<&str> {
        self.tools.iter().map(|tool| tool.name.as_str()).collect()
    }
}

struct Builder {
    tools: Vec<Tool>,
    messages: Vec<Message>,
    parts: Vec<Part>,
}

impl Builder {
    fn push(&mut self, path: PartPath, kind: PartKind, text: String, message: Option<usize>) {
        self.parts.push(Part {
            path,
            kind,
            text,
            message,
        });
    }

    fn tools(&mut self, body: &Map<String, Value>) -> Result<(), BodyError> {
        let Some(tools) = body.get("tools").filter(|tools| !tools.is_null()) else {
            return Ok(());
        };
        let tools_path = PartPath::root().key("tools");
        let tools = tools.as_array().ok_or_else(|| {
            BodyError::new(
                tools_path.clone(),
                format!("`tools` must be an array, found {}", kind_of(tools)),
            )
        })?;
        for (index, tool) in tools.iter().enumerate() {
            let path = tools_path.index(index);
            if !tool.is_object() {
                return Err(BodyError::new(
                    path,
                    format!("a tool must be an object, found {}", kind_of(tool)),
                ));
            }
            let name = tool
                .pointer("/function/name")
                .or_else(|| tool.get("name"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let definition = without_cache_control(tool);
            self.push(
                path.clone(),
                PartKind::Tool,
                compact_json(&definition),
                None,
            );
            self.tools.push(Tool {
                name,
                path,
                definition,
            });
        }
        Ok(())
    }

    fn anthropic_system(&mut self, body: &Map<String, Value>) -> Result<(), BodyError> {
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

    fn chat_messages(&mut self, body: &Map<String, Value>) -> Result<(), BodyError> {
        let path = PartPath::root().key("messages");
        let messages = body
            .get("messages")
            .and_then(Value::as_array)
            .ok_or_else(|| BodyError::new(path.clone(), "`messages` must be an array"))?;
        for (index, message) in messages.iter().enumerate() {
            self.message(path.index(index), message)?;
        }
        Ok(())
    }

    fn responses_input(&mut self, body: &Map<String, Value>) -> Result<(), BodyError> {
        if let Some(instructions) = body.get("instructions").filter(|value| !value.is_null()) {
            let path = PartPath::root().key("instructions");
            let text = instructions.as_str().ok_or_else(|| {
                BodyError::new(
                    path.clone(),
                    format!(
                        "`instructions` must be a string, found {}",
                        kind_of(instructions)
                    ),
                )
            })?;
            self.push(path, PartKind::System, text.to_owned(), None);
        }
        let path = PartPath::root().key("input");
        match body.get("input") {
            None | Some(Value::Null) => Ok(()),
            Some(Value::String(text)) => {
                let message = self.open_message(path.clone(), "user", Value::String(text.clone()));
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
        let role = item_type.unwrap_or("item");
        let message = self.open_message(path.clone(), role, item.clone());
        match role {
            "function_call" | "custom_tool_call" => {
                self.string_field(&path, object, "call_id", PartKind::ToolCallId, message)?;
                self.string_field(&path, object, "name", PartKind::ToolCallName, message)?;
                let arguments_key = if object.contains_key("input") {
                    "input"
                } else {
                    "arguments"
                };
                self.string_field(&path, object, arguments_key, PartKind::Arguments, message)?;
            }
            "function_call_output" | "custom_tool_call_output" => {
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
            "reasoning" => {
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

    fn open_message(&mut self, path: PartPath, role: &str, value: Value) -> usize {
        let index = self.messages.len();
        self.messages.push(Message {
            path: path.clone(),
            role: role.to_owned(),
            value,
        });
        self.push(
            path,
            PartKind::Header,
            format!("<|im_start|>{role}\n"),
            Some(index),
        );
        index
    }

    fn close_message(&mut self, path: PartPath, message: usize) {
        self.push(
            path,
            PartKind::End,
            "<|im_end|>\n".to_owned(),
            Some(message),
        );
    }

    fn message(&mut self, path: PartPath, message: &Value) -> Result<(), BodyError> {
        let object = message.as_object().ok_or_else(|| {
            BodyError::new(
                path.clone(),
                format!("a message must be an object, found {}", kind_of(message)),
            )
        })?;
        let role = match object.get("role") {
            Some(Value::String(role)) => role.as_str(),
            Some(other) => {
                return Err(BodyError::new(
                    path.key("role"),
                    format!("`role` must be a string, found {}", kind_of(other)),
                ));
            }
            None => return Err(BodyError::new(path, "a message must have a `role`")),
        };
        let index = self.open_message(path.clone(), role, message.clone());
        for key in ["name", "tool_call_id"] {
            if object.get(key).is_some_and(Value::is_string) {
                self.string_field(&path, object, key, PartKind::ToolCallId, index)?;
            }
        }
        for key in ["reasoning_content", "reasoning", "thinking"] {
            if object.get(key).is_some_and(Value::is_string) {
                self.string_field(&path, object, key, PartKind::Reasoning, index)?;
            }
        }
        let content_path = path.key("content");
        let content_kind = if role == "tool" {
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

    fn string_field(
        &mut self,
        path: &PartPath,
        object: &Map<String, Value>,
        key: &str,
        kind: PartKind,
        message: usize,
    ) -> Result<(), BodyError> {
        match object.get(key) {
            None | Some(Value::Null) => Ok(()),
            Some(Value::String(text)) => {
                self.push(path.key(key), kind, text.clone(), Some(message));
                Ok(())
            }
            Some(other) => Err(BodyError::new(
                path.key(key),
                format!("`{key}` must be a string, found {}", kind_of(other)),
            )),
        }
    }

    /// Content blocks of any of the three APIs.
    fn blocks(
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
            let block_type = object.get("type").and_then(Value::as_str).unwrap_or("text");
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
                "thinking" => self.string_field(
                    &block_path,
                    object,
                    "thinking",
                    PartKind::Reasoning,
                    message,
                )?,
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

/// The blocks that carry a breakpoint marker, in cache order.
fn breakpoints(body: &Map<String, Value>) -> Vec<PartPath> {
    let marked = |value: &Value| {
        value
            .get("cache_control")
            .is_some_and(|marker| !marker.is_null())
            || value
                .get("prompt_cache_breakpoint")
                .is_some_and(|marker| !marker.is_null())
    };
    let mut found = Vec::new();
    let mut scan = |path: PartPath, items: Option<&Value>| {
        for (index, item) in items
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            if marked(item) {
                found.push(path.index(index));
            }
        }
    };
    scan(PartPath::root().key("tools"), body.get("tools"));
    scan(PartPath::root().key("system"), body.get("system"));
    for key in ["messages", "input"] {
        for (index, message) in body
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let message_path = PartPath::root().key(key).index(index);
            scan(message_path.key("content"), message.get("content"));
        }
    }
    found
}

/// JSON as sent: keys in their order, no spaces.
pub fn compact_json(value: &Value) -> String {
    value.to_string()
}

/// Whether two values serialize to the same bytes. `==` on `serde_json::Value` ignores key
/// order; the cache does not.
pub fn same_bytes(a: &Value, b: &Value) -> bool {
    compact_json(a) == compact_json(b)
}

fn without_cache_control(value: &Value) -> Value {
    match value {
        Value::Object(object) => Value::Object(
            object
                .iter()
                .filter(|(key, _)| key.as_str() != "cache_control")
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn short_hash(text: &str) -> String {
    blake3::hash(text.as_bytes()).to_hex()[..12].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths(request: &Request) -> Vec<String> {
        request
            .parts
            .iter()
            .filter(|part| !part.kind.is_structural())
            .map(|part| part.path.to_string())
            .collect()
    }

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
            paths(&request),
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
            paths(&request),
            [
                "tools[0]",
                "system[0].text",
                "messages[0].content[0].tool_use_id",
                "messages[0].content[0].content"
            ]
        );
        assert_eq!(request.parts[0].text, r#"{"name":"t","input_schema":{}}"#);
    }

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
            paths(&request),
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
        assert_eq!(error.message, "no known request format");
    }
}

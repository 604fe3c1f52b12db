//! The request model: one request body, whatever its API, as prompt parts in cache order.
//!
//! Each provider caches a request in a fixed order: Anthropic tools → system → messages,
//! OpenAI tools → instructions/system → messages. [`Request::parts`] lists the prompt's
//! pieces in that order, each with the path it came from, so a divergence found in the
//! rendered text can be named as a place in the user's file.
//!
//! The parsing is split by API: `detect` tells the formats apart, `chat`, `responses` and
//! `anthropic` read each one's messages, `blocks` reads the content blocks they share, and
//! `builder` holds the parts list they fill. [`Role`] is in `role`.

mod anthropic;
mod bedrock;
mod blocks;
mod builder;
mod chat;
mod gemini;
mod responses;
mod role;

use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::sync::Arc;

use crate::json::kind_of;
use crate::path::{PartPath, PathSegment};
use builder::PartsBuilder;

// The JSON helpers lived here first; other crates import them from this module.
pub use crate::json::{compact_json, same_bytes};
pub use role::Role;

/// The API a request body is written for, detected by [`BodyFormat::detect`].
pub use kvlint_protocol::BodyFormat;

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
    /// Shared with every equal text of the session (turns resend most of theirs).
    pub text: Arc<str>,
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

impl Tool {
    /// A function tool without a name (none, not a string, or empty), which every API and
    /// engine refuses. Built-in tools (`{"type": "web_search"}`) have none.
    pub fn is_nameless_function(&self) -> bool {
        let declares_function = self.definition.get("function").is_some()
            || self.definition.get("type").and_then(Value::as_str) == Some("function");
        declares_function && self.name.is_empty()
    }
}

/// A conversation item: a chat message, or a Responses `input` item.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    /// Where the message is in the body ([`Request::message_value`] reads it there).
    pub path: PartPath,
    pub role: Role,
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

/// The texts and paths of a session's parts, each kept once: a turn resends most of the
/// previous turn's messages, and their parts share the earlier turn's instead of copying them.
#[derive(Debug, Default)]
pub struct SharedParts {
    texts: HashSet<Arc<str>>,
    paths: HashSet<PartPath>,
}

impl SharedParts {
    pub fn text(&mut self, text: String) -> Arc<str> {
        if let Some(shared) = self.texts.get(text.as_str()) {
            return Arc::clone(shared);
        }
        let shared: Arc<str> = Arc::from(text);
        self.texts.insert(Arc::clone(&shared));
        shared
    }

    /// Every distinct text kept.
    pub fn into_texts(self) -> Vec<Arc<str>> {
        self.texts.into_iter().collect()
    }

    /// Forgets the texts and paths no request holds any more: a guard that keeps one turn
    /// keeps only that turn's.
    pub fn forget_unused(&mut self) {
        self.texts.retain(|text| Arc::strong_count(text) > 1);
        self.paths.retain(PartPath::is_shared);
    }

    pub fn path(&mut self, path: PartPath) -> PartPath {
        if let Some(shared) = self.paths.get(&path) {
            return shared.clone();
        }
        self.paths.insert(path.clone());
        path
    }
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
    Responses body (`input` and/or `instructions`), an Anthropic Messages body (`messages`, \
    `system`, `tools[].input_schema`), a Gemini generateContent body (`contents`) or a Bedrock \
    Converse body (`messages` of `content` blocks keyed by kind, `toolConfig`)";

impl Request {
    /// The JSON value of message `index`, as sent.
    pub fn message_value(&self, index: usize) -> Option<&Value> {
        self.messages.get(index)?.path.lookup(&self.body)
    }

    pub fn from_body(body: &Value) -> Result<Self, BodyError> {
        Self::parse(body.clone(), &mut SharedParts::default())
    }

    /// Parses a body, sharing part texts and paths with the earlier turns' through `shared`.
    pub fn parse(body: Value, shared: &mut SharedParts) -> Result<Self, BodyError> {
        Self::parse_after(body, shared, None)
    }

    /// [`Request::parse`] knowing the request the session sent before (`earlier`): the
    /// messages it sends again at the same place, byte for byte, are taken over from it, not
    /// read again, so parsing a turn costs what it adds. The result is what `parse` gives.
    pub fn parse_after(
        body: Value,
        shared: &mut SharedParts,
        earlier: Option<&Request>,
    ) -> Result<Self, BodyError> {
        let Some(object) = body.as_object() else {
            return Err(BodyError::new(
                PartPath::root(),
                format!("expected a request body object, found {}", kind_of(&body)),
            ));
        };
        let format = BodyFormat::detect(object).ok_or_else(|| {
            let keys: Vec<String> = object
                .keys()
                .take(8)
                .map(|key| format!("`{key}`"))
                .collect();
            let what = match keys.len() {
                0 => "an empty JSON object".to_owned(),
                _ if object.len() > keys.len() => format!(
                    "a JSON object with keys {}, … ({} in all)",
                    keys.join(", "),
                    object.len()
                ),
                _ => format!("a JSON object with keys {}", keys.join(", ")),
            };
            BodyError::new(
                PartPath::root(),
                format!("not a request body in a known format: {what}"),
            )
            .expected(SUPPORTED_FORMATS)
        })?;
        let earlier = earlier.filter(|earlier| earlier.format == format);
        let mut builder = PartsBuilder::new(shared, earlier);
        if format.is_served_by_engines() {
            builder.tools(object)?;
            builder.settings(object);
        }
        match format {
            BodyFormat::OpenAiChat => builder.chat_messages(object)?,
            BodyFormat::AnthropicMessages => {
                builder.anthropic_system(object)?;
                builder.chat_messages(object)?;
            }
            BodyFormat::OpenAiResponses => builder.responses_input(object)?,
            BodyFormat::GeminiGenerateContent => builder.gemini_body(object)?,
            BodyFormat::BedrockConverse => builder.converse_body(object)?,
        }
        let model = object
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let breakpoints = breakpoints(object);
        let automatic_breakpoint = object.contains_key("cache_control");
        Ok(Self {
            format,
            model,
            tools: builder.tools,
            messages: builder.messages,
            parts: builder.parts,
            breakpoints,
            automatic_breakpoint,
            body,
        })
    }

    /// The block a part belongs to, as cache breakpoints and Anthropic's lookback count
    /// blocks: a tool, a system block, a message's content block, else the whole message.
    pub fn block_of(path: &PartPath) -> PartPath {
        let segments = path.segments();
        let key = match segments.first() {
            Some(PathSegment::Key(key)) => key,
            _ => "",
        };
        let content_block = matches!(
            (segments.get(2), segments.get(3)),
            (Some(PathSegment::Key(content)), Some(PathSegment::Index(_))) if *content == "content"
        );
        let depth = match key {
            "messages" | "input" if content_block => 4,
            "messages" | "input" | "tools" | "contents" => 2,
            "toolConfig" => 3,
            "system" if matches!(segments.get(1), Some(PathSegment::Index(_))) => 2,
            _ => 1,
        };
        path.truncated(depth)
    }

    /// Whether the request continues a conversation the provider keeps: OpenAI Responses'
    /// `previous_response_id` or `conversation`. Its body sends only the new input; the prefix
    /// lives on the server.
    pub fn continues_on_server(&self) -> bool {
        self.format == BodyFormat::OpenAiResponses
            && ["previous_response_id", "conversation"]
                .iter()
                .any(|key| self.body.get(*key).is_some_and(|value| !value.is_null()))
    }

    /// The tool names in request order.
    pub fn tool_names(&self) -> Vec<&str> {
        self.tools.iter().map(|tool| tool.name.as_str()).collect()
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
    // Bedrock's `cachePoint` blocks mark the block before them.
    let tools = body
        .get("toolConfig")
        .and_then(|config| config.get("tools"));
    let mut cache_points = Vec::new();
    bedrock::cache_points(
        &PartPath::root().key("toolConfig").key("tools"),
        tools,
        &mut cache_points,
    );
    bedrock::cache_points(
        &PartPath::root().key("system"),
        body.get("system"),
        &mut cache_points,
    );
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
            bedrock::cache_points(
                &message_path.key("content"),
                message.get("content"),
                &mut cache_points,
            );
        }
    }
    found.extend(cache_points);
    found
}

/// A tool or block as prompt text: `cache_control` marks a breakpoint, it is not prompt.
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

/// A short digest standing in for bytes that are not prompt text (media, encrypted
/// reasoning), so that a change to them still shows as a changed part.
fn short_hash(text: &str) -> String {
    blake3::hash(text.as_bytes()).to_hex()[..12].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paths of the content parts, in order (message scaffolding left out).
    pub(super) fn content_paths(request: &Request) -> Vec<String> {
        request
            .parts
            .iter()
            .filter(|part| !part.kind.is_structural())
            .map(|part| part.path.to_string())
            .collect()
    }

    /// `parse_after` must give what `parse` gives: on every turn of the corpus's sessions after
    /// the one before, and on turns that change an earlier message in ways `==` does not see.
    #[test]
    fn parse_after_the_previous_turn_is_parse() {
        let mut sessions: Vec<Vec<Value>> = kvlint_fixtures::corpus_sessions()
            .iter()
            .map(|session| kvlint_fixtures::written_requests(session))
            .collect();
        assert!(sessions.len() > 10, "no corpus sessions");
        let turn = |content: serde_json::Value, arguments: serde_json::Value| {
            serde_json::json!({"model": "m", "messages": [
                {"role": "system", "content": "Be terse."},
                {"role": "user", "content": content},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                    "function": {"name": "f", "arguments": arguments}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "done"}]})
        };
        let text = |text: &str| serde_json::json!([{"type": "text", "text": text}]);
        sessions.push(vec![
            turn(text("hi"), serde_json::json!({"a": 1, "b": 2})),
            // The same arguments in another key order: equal to `==`, not to the cache.
            turn(text("hi"), serde_json::json!({"b": 2, "a": 1})),
            turn(text("hi"), serde_json::json!({"b": 2.0, "a": 1})),
            turn(text("hello"), serde_json::json!({"b": 2.0, "a": 1})),
            turn(
                serde_json::json!("hello"),
                serde_json::json!({"b": 2.0, "a": 1}),
            ),
            // An Anthropic body after a Chat one.
            serde_json::json!({"model": "m", "system": "Be terse.", "max_tokens": 8,
                "messages": [{"role": "user", "content": "hello"}]}),
        ]);
        let mut compared = 0;
        for bodies in &sessions {
            let (mut shared, mut shared_after) = (SharedParts::default(), SharedParts::default());
            let mut earlier: Option<Request> = None;
            for body in bodies {
                let parsed = Request::parse(body.clone(), &mut shared);
                let after = Request::parse_after(body.clone(), &mut shared_after, earlier.as_ref());
                assert_eq!(parsed, after, "{body}");
                compared += 1;
                earlier = after.ok();
            }
        }
        assert!(compared > 100, "{compared}");
    }

    #[test]
    fn shared_parts_forget_what_no_request_holds() {
        let body = |question: &str| {
            serde_json::json!({"messages": [{"role": "system", "content": "Be terse."},
                                            {"role": "user", "content": question}]})
        };
        let mut shared = SharedParts::default();
        let first = Request::parse(body("hi"), &mut shared).unwrap();
        let second = Request::parse(body("bye"), &mut shared).unwrap();
        // The system prompt is one text, shared by both turns.
        let system = |request: &Request| {
            let part = request.parts.iter().find(|part| &*part.text == "Be terse.");
            Arc::clone(&part.unwrap().text)
        };
        assert!(Arc::ptr_eq(&system(&first), &system(&second)));
        drop(first);
        shared.forget_unused();
        let texts: Vec<String> = shared
            .into_texts()
            .iter()
            .map(|text| text.to_string())
            .collect();
        assert!(texts.iter().any(|text| text == "Be terse."), "{texts:?}");
        assert!(texts.iter().any(|text| text == "bye"), "{texts:?}");
        assert!(!texts.iter().any(|text| text == "hi"), "{texts:?}");
        drop(second);
    }
}

//! Rendering a request into the exact text and tokens an engine prefills.
//!
//! Two modes:
//! - **provider** (the default, offline): the request's parts in the provider's cache order,
//!   each tokenized with the embedded `o200k_base` encoding. Exact for OpenAI's encoding of
//!   the text; an approximation of other providers' counts.
//! - **engine**: the request rendered through a model's chat template (as transformers does)
//!   and tokenized with its `tokenizer.json`: the tokens a self-hosted engine computes.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Range;

use serde_json::{Map, Value, json};

use crate::error::InputError;
use crate::request::{BodyFormat, Part, PartKind, Request};
use crate::template::{ChatTemplate, PythonJson};
use crate::tokenize::{Tokenizer, Tokens};

/// A byte range of the rendered text and the request part it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    pub range: Range<usize>,
    /// Index into [`Request::parts`].
    pub part: usize,
}

/// A request as text and tokens, with every byte attributed to a request part.
#[derive(Clone, Debug, Default)]
pub struct Rendered {
    pub text: String,
    /// Sorted, non-overlapping; together they cover the whole text.
    pub segments: Vec<Segment>,
    pub tokens: Tokens,
}

impl Rendered {
    /// The segment that holds byte `offset`, or the last one past the end.
    pub fn segment_at(&self, offset: usize) -> Option<&Segment> {
        let index = self
            .segments
            .partition_point(|segment| segment.range.end <= offset);
        self.segments.get(index).or_else(|| self.segments.last())
    }
}

/// How requests become tokens.
pub enum Renderer {
    Provider {
        tokenizer: Tokenizer,
    },
    Engine {
        template: Box<ChatTemplate>,
        tokenizer: Tokenizer,
        add_generation_prompt: bool,
    },
}

impl Renderer {
    /// Provider mode with the embedded `o200k_base` encoding.
    pub fn provider() -> Self {
        Self::Provider {
            tokenizer: Tokenizer::o200k_base(),
        }
    }

    /// The name reported as `renderer`: `provider:o200k_base` or `engine:<template>`.
    pub fn name(&self) -> String {
        match self {
            Self::Provider { tokenizer } => format!("provider:{}", tokenizer.name()),
            Self::Engine {
                template,
                tokenizer,
                ..
            } => {
                format!("engine:{}+{}", file_name(template.path()), tokenizer.name())
            }
        }
    }

    /// Whether each rendered prompt ends with the generation prompt, where the model's answer
    /// starts (engine mode, as engines render chat requests).
    pub fn ends_with_generation_prompt(&self) -> bool {
        matches!(
            self,
            Self::Engine {
                add_generation_prompt: true,
                ..
            }
        )
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        match self {
            Self::Provider { tokenizer } | Self::Engine { tokenizer, .. } => tokenizer,
        }
    }

    /// Whether token counts for a request of `format` are only an approximation.
    pub fn is_approximate(&self, format: BodyFormat) -> bool {
        match self {
            Self::Provider { .. } => format == BodyFormat::AnthropicMessages,
            Self::Engine { .. } => false,
        }
    }

    pub fn render(&self, request: &Request) -> Result<Rendered, InputError> {
        self.render_after(request, None)
    }

    /// Renders a request knowing the turn before it: parts it sends again unchanged reuse
    /// that turn's tokens without being hashed or encoded again.
    pub fn render_after(
        &self,
        request: &Request,
        previous: Option<(&Request, &Rendered)>,
    ) -> Result<Rendered, InputError> {
        match self {
            Self::Provider { tokenizer } => Ok(render_parts(request, tokenizer, previous)),
            Self::Engine {
                template,
                tokenizer,
                add_generation_prompt,
            } => {
                let (messages, tools) = chat_view(request);
                let text = template.render(&messages, tools.as_deref(), *add_generation_prompt)?;
                let segments = locate_parts(&text, request, tools.as_deref().unwrap_or_default());
                let tokens = tokenizer.encode_text(&text);
                Ok(Rendered {
                    text,
                    segments,
                    tokens,
                })
            }
        }
    }
}

fn file_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// Provider mode: the parts back to back, each tokenized on its own.
fn render_parts(
    request: &Request,
    tokenizer: &Tokenizer,
    previous: Option<(&Request, &Rendered)>,
) -> Rendered {
    let length = request.parts.iter().map(|part| part.text.len()).sum();
    let mut text = String::with_capacity(length);
    let mut segments = Vec::with_capacity(request.parts.len());
    let mut tokens = Tokens::default();
    for (index, part) in request.parts.iter().enumerate() {
        let start = text.len();
        text.push_str(&part.text);
        segments.push(Segment {
            range: start..text.len(),
            part: index,
        });
        // The same part at the same place as in the previous turn: take its tokens.
        let unchanged = previous.and_then(|(previous_request, previous_rendered)| {
            let previous_part = previous_request.parts.get(index)?;
            (previous_part.text == part.text)
                .then(|| previous_rendered.tokens.piece(index))
                .flatten()
        });
        let chunk = unchanged.unwrap_or_else(|| tokenizer.encode_piece(&part.text));
        tokens.push_piece(chunk, start);
    }
    Rendered {
        text,
        segments,
        tokens,
    }
}

/// Engine mode: finds each content part of the request in the rendered text, and gives the
/// text between them (role headers, template text) to a neighbouring part.
///
/// Parts are searched in request order from where the last one was found; tools and system
/// text, which templates move (Qwen puts the tools after the system message), are searched
/// in the whole text.
fn locate_parts(text: &str, request: &Request, chat_tools: &[Cow<'_, Value>]) -> Vec<Segment> {
    // Located ranges by start, to check a candidate against its neighbours only.
    let mut located: BTreeMap<usize, (usize, usize)> = BTreeMap::new();
    let mut is_located = vec![false; request.parts.len()];
    let mut cursor = 0;
    for (index, part) in request.parts.iter().enumerate() {
        if !matches!(
            part.kind,
            PartKind::Tool
                | PartKind::System
                | PartKind::Text
                | PartKind::Arguments
                | PartKind::ToolResult
                | PartKind::Reasoning
        ) {
            continue;
        }
        let is_free = |range: &Range<usize>| {
            let before = located.range(..=range.start).next_back();
            let after = located.range(range.start..).next();
            before.is_none_or(|(_, (end, _))| *end <= range.start)
                && after.is_none_or(|(start, _)| range.end <= *start)
        };
        // Tools reach the template in chat form, whatever the request's API.
        let chat_tool = (part.kind == PartKind::Tool)
            .then(|| request.tools.iter().position(|tool| tool.path == part.path))
            .flatten()
            .and_then(|index| chat_tools.get(index))
            .map(Cow::as_ref);
        let in_head = matches!(part.kind, PartKind::Tool | PartKind::System)
            || part
                .message
                .and_then(|message| request.messages.get(message))
                .is_some_and(|message| matches!(message.role.as_str(), "system" | "developer"));
        let found = needles(part, chat_tool)
            .into_iter()
            .filter(|needle| !needle.is_empty())
            .find_map(|needle| {
                let after_cursor = text[cursor..].find(needle.as_ref()).map(|at| cursor + at);
                // Only the head of the prompt is rendered out of order by templates; searching
                // the whole text for every part would make rendering quadratic.
                let anywhere = in_head
                    .then(|| text.match_indices(needle.as_ref()).map(|(at, _)| at))
                    .into_iter()
                    .flatten();
                after_cursor
                    .into_iter()
                    .chain(anywhere)
                    .map(|start| start..start + needle.len())
                    .find(|range| is_free(range))
            });
        if let Some(range) = found {
            cursor = cursor.max(range.end);
            located.insert(range.start, (range.end, index));
            is_located[index] = true;
        }
    }
    let located: Vec<Segment> = located
        .into_iter()
        .map(|(start, (end, part))| Segment {
            range: start..end,
            part,
        })
        .collect();
    let is_located = |part: usize| is_located[part];
    // Text between two located parts belongs to the first content part the search could not
    // find between them (a tool call the template re-serialized), else to the header of the
    // message that follows, else to the part right after the earlier one.
    let gap_owner = |after: Option<usize>, before: usize| {
        let first = after.map_or(0, |part| part + 1);
        if let Some(skipped) = (first..before)
            .find(|&part| !request.parts[part].kind.is_structural() && !is_located(part))
        {
            return skipped;
        }
        let header = request.parts[before].message.and_then(|message| {
            request.parts[..=before]
                .iter()
                .rposition(|part| part.message == Some(message) && part.kind == PartKind::Header)
        });
        header.unwrap_or(first.min(request.parts.len().saturating_sub(1)))
    };
    let mut segments = Vec::with_capacity(located.len() * 2 + 1);
    let mut previous_end = 0;
    let mut previous_part = None;
    for segment in &located {
        if previous_end < segment.range.start {
            segments.push(Segment {
                range: previous_end..segment.range.start,
                part: gap_owner(previous_part, segment.part),
            });
        }
        previous_end = segment.range.end;
        previous_part = Some(segment.part);
        segments.push(segment.clone());
    }
    if previous_end < text.len() || segments.is_empty() {
        let last = request.parts.len().saturating_sub(1);
        segments.push(Segment {
            range: previous_end..text.len(),
            part: previous_part.map_or(0, |part| (part + 1).min(last)),
        });
    }
    segments
}

/// The texts a part may appear as in a template's output: as sent, trimmed, and for JSON
/// (a tool, tool-call arguments) as Python's `json.dumps` writes it.
fn needles<'a>(part: &'a Part, chat_tool: Option<&Value>) -> Vec<Cow<'a, str>> {
    let parsed = match (part.kind, chat_tool) {
        (PartKind::Tool, Some(chat_tool)) => Some(chat_tool.clone()),
        (PartKind::Tool | PartKind::Arguments, _) => serde_json::from_str::<Value>(&part.text).ok(),
        _ => None,
    };
    let mut needles = Vec::new();
    if let Some(value) = &parsed {
        needles.push(Cow::Owned(PythonJson::compact().dumps(value)));
        if let Some(function) = value.get("function") {
            needles.push(Cow::Owned(PythonJson::compact().dumps(function)));
        }
    }
    needles.push(Cow::Borrowed(part.text.as_str()));
    needles.push(Cow::Borrowed(part.text.trim()));
    needles
}

/// The request as chat-format `messages` and `tools`, the shape chat templates expect and
/// engines pass them: tool-call arguments as objects, text blocks joined.
pub fn chat_view(request: &Request) -> (Vec<Cow<'_, Value>>, Option<Vec<Cow<'_, Value>>>) {
    let Some(body) = request.body.as_object() else {
        return (Vec::new(), None);
    };
    let owned = |(messages, tools): (Vec<Value>, Option<Vec<Value>>)| {
        (
            messages.into_iter().map(Cow::Owned).collect(),
            tools.map(|tools| tools.into_iter().map(Cow::Owned).collect()),
        )
    };
    let (messages, tools): (Vec<Cow<'_, Value>>, Option<Vec<Cow<'_, Value>>>) = match request.format
    {
        BodyFormat::OpenAiChat => (
            request
                .messages
                .iter()
                .map(|message| openai_chat_message(&message.value))
                .collect(),
            body.get("tools")
                .and_then(Value::as_array)
                .map(|tools| tools.iter().map(Cow::Borrowed).collect()),
        ),
        BodyFormat::AnthropicMessages => owned(anthropic_chat_view(body)),
        BodyFormat::OpenAiResponses => owned(responses_chat_view(body)),
    };
    (messages, tools.filter(|tools| !tools.is_empty()))
}

/// An OpenAI chat message as engines hand it to templates: text blocks joined, tool-call
/// arguments parsed. Borrowed when there is nothing to change.
fn openai_chat_message(original: &Value) -> Cow<'_, Value> {
    let has_blocks = original.get("content").is_some_and(Value::is_array);
    let has_string_arguments = original
        .get("tool_calls")
        .and_then(Value::as_array)
        .is_some_and(|calls| {
            calls.iter().any(|call| {
                call.pointer("/function/arguments")
                    .is_some_and(Value::is_string)
            })
        });
    if !has_blocks && !has_string_arguments {
        return Cow::Borrowed(original);
    }
    let mut message = original.as_object().cloned().unwrap_or_default();
    if let Some(Value::Array(blocks)) = message.get("content")
        && let Some(text) = joined_text(blocks)
    {
        message.insert("content".into(), Value::String(text));
    }
    if let Some(Value::Array(calls)) = message.get_mut("tool_calls") {
        for call in calls {
            if let Some(arguments) = call.pointer_mut("/function/arguments")
                && let Some(parsed) = arguments
                    .as_str()
                    .and_then(|text| serde_json::from_str::<Value>(text).ok())
            {
                *arguments = parsed;
            }
        }
    }
    Cow::Owned(Value::Object(message))
}

/// The text of content blocks that are all text, joined by newlines; `None` otherwise.
fn joined_text(blocks: &[Value]) -> Option<String> {
    let texts: Option<Vec<&str>> = blocks
        .iter()
        .map(|block| match block {
            Value::String(text) => Some(text.as_str()),
            block
                if matches!(
                    block.get("type").and_then(Value::as_str),
                    Some("text" | "input_text" | "output_text")
                ) =>
            {
                block.get("text").and_then(Value::as_str)
            }
            _ => None,
        })
        .collect();
    texts.map(|texts| texts.join("\n"))
}

fn function_tool(
    name: Option<&Value>,
    description: Option<&Value>,
    parameters: Option<&Value>,
) -> Value {
    let mut function = Map::new();
    function.insert("name".into(), name.cloned().unwrap_or(Value::Null));
    if let Some(description) = description {
        function.insert("description".into(), description.clone());
    }
    function.insert(
        "parameters".into(),
        parameters.cloned().unwrap_or_else(|| json!({})),
    );
    json!({"type": "function", "function": function})
}

fn anthropic_chat_view(body: &Map<String, Value>) -> (Vec<Value>, Option<Vec<Value>>) {
    let mut messages = Vec::new();
    match body.get("system") {
        Some(Value::String(text)) => messages.push(json!({"role": "system", "content": text})),
        Some(Value::Array(blocks)) => {
            if let Some(text) = joined_text(blocks) {
                messages.push(json!({"role": "system", "content": text}));
            }
        }
        _ => {}
    }
    for message in body
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let role = message.get("role").cloned().unwrap_or(Value::Null);
        let blocks = match message.get("content") {
            Some(Value::Array(blocks)) => blocks.clone(),
            Some(other) => vec![json!({"type": "text", "text": other})],
            None => Vec::new(),
        };
        let mut texts = Vec::new();
        let mut reasoning = Vec::new();
        let mut tool_calls = Vec::new();
        for block in &blocks {
            match block.get("type").and_then(Value::as_str) {
                Some("tool_use") => tool_calls.push(json!({
                    "id": block.get("id"),
                    "type": "function",
                    "function": {"name": block.get("name"), "arguments": block.get("input")},
                })),
                Some("tool_result") => {
                    let content = match block.get("content") {
                        Some(Value::Array(inner)) => {
                            joined_text(inner).map(Value::String).unwrap_or(Value::Null)
                        }
                        Some(other) => other.clone(),
                        None => Value::String(String::new()),
                    };
                    messages.push(json!({"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": content}));
                }
                Some("thinking") => reasoning.extend(block.get("thinking").and_then(Value::as_str)),
                _ => texts.extend(block.get("text").and_then(Value::as_str)),
            }
        }
        if texts.is_empty() && tool_calls.is_empty() && reasoning.is_empty() {
            continue;
        }
        let mut converted = Map::new();
        converted.insert("role".into(), role);
        converted.insert("content".into(), Value::String(texts.join("\n")));
        if !reasoning.is_empty() {
            converted.insert(
                "reasoning_content".into(),
                Value::String(reasoning.join("\n")),
            );
        }
        if !tool_calls.is_empty() {
            converted.insert("tool_calls".into(), Value::Array(tool_calls));
        }
        messages.push(Value::Object(converted));
    }
    let tools = body.get("tools").and_then(Value::as_array).map(|tools| {
        tools
            .iter()
            .map(|tool| {
                function_tool(
                    tool.get("name"),
                    tool.get("description"),
                    tool.get("input_schema"),
                )
            })
            .collect()
    });
    (messages, tools)
}

fn responses_chat_view(body: &Map<String, Value>) -> (Vec<Value>, Option<Vec<Value>>) {
    let mut messages: Vec<Value> = Vec::new();
    if let Some(Value::String(instructions)) = body.get("instructions") {
        messages.push(json!({"role": "system", "content": instructions}));
    }
    let items = match body.get("input") {
        Some(Value::String(text)) => vec![json!({"role": "user", "content": text})],
        Some(Value::Array(items)) => items.clone(),
        _ => Vec::new(),
    };
    for item in items {
        match item.get("type").and_then(Value::as_str) {
            Some("function_call") => {
                let arguments = item
                    .get("arguments")
                    .and_then(Value::as_str)
                    .unwrap_or("{}");
                let arguments = serde_json::from_str(arguments)
                    .unwrap_or_else(|_| Value::String(arguments.to_owned()));
                let call = json!({
                    "id": item.get("call_id"),
                    "type": "function",
                    "function": {"name": item.get("name"), "arguments": arguments},
                });
                let previous_is_call = messages
                    .last()
                    .is_some_and(|last| last.get("tool_calls").is_some());
                match messages
                    .last_mut()
                    .and_then(|last| last.get_mut("tool_calls"))
                {
                    Some(Value::Array(calls)) if previous_is_call => calls.push(call),
                    _ => messages
                        .push(json!({"role": "assistant", "content": "", "tool_calls": [call]})),
                }
            }
            Some("function_call_output") => messages.push(json!({
                "role": "tool",
                "tool_call_id": item.get("call_id"),
                "content": item.get("output"),
            })),
            Some("reasoning") => {}
            _ => {
                let content = match item.get("content") {
                    Some(Value::Array(blocks)) => joined_text(blocks)
                        .map(Value::String)
                        .unwrap_or(Value::Null),
                    Some(other) => other.clone(),
                    None => Value::Null,
                };
                let role = match item.get("role").and_then(Value::as_str) {
                    Some("developer") => "system",
                    Some(role) => role,
                    None => "user",
                };
                messages.push(json!({"role": role, "content": content}));
            }
        }
    }
    let tools = body.get("tools").and_then(Value::as_array).map(|tools| {
        tools
            .iter()
            .map(|tool| {
                function_tool(
                    tool.get("name"),
                    tool.get("description"),
                    tool.get("parameters"),
                )
            })
            .collect()
    });
    (messages, tools)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    #[test]
    fn provider_segments_cover_the_text() {
        let body = json!({"messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hi"}]});
        let request = Request::from_body(&body).unwrap();
        let rendered = Renderer::provider().render(&request).unwrap();
        let system = rendered.text.find("You are").unwrap();
        let segment = rendered.segment_at(system).unwrap();
        assert_eq!(
            request.parts[segment.part].path.to_string(),
            "messages[0].content"
        );
        assert_eq!(
            rendered.segments.last().map(|s| s.range.end),
            Some(rendered.text.len())
        );
    }

    #[test]
    fn engine_mode_attributes_template_text_to_the_following_part() {
        let dir = std::env::temp_dir().join(format!("kvlint-render-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.jinja");
        std::fs::write(
            &path,
            "{% for m in messages %}<{{ m.role }}>{% if loop.first %}Date: {{ strftime_now('%Y-%m-%d') }}\n{% endif %}{{ m.content }}</>{% endfor %}",
        )
        .unwrap();
        let now = NaiveDate::from_ymd_opt(2026, 1, 2)
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .unwrap();
        let renderer = Renderer::Engine {
            template: Box::new(ChatTemplate::from_file(&path, now).unwrap()),
            tokenizer: Tokenizer::o200k_base(),
            add_generation_prompt: false,
        };
        let body = json!({"messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"}]});
        let request = Request::from_body(&body).unwrap();
        let rendered = renderer.render(&request).unwrap();
        assert_eq!(
            rendered.text,
            "<system>Date: 2026-01-02\nBe terse.</><user>hi</>"
        );
        let date = rendered
            .segment_at(rendered.text.find("2026").unwrap())
            .unwrap();
        assert_eq!(request.parts[date.part].path.to_string(), "messages[0]");
        let hi = rendered
            .segment_at(rendered.text.find("hi").unwrap())
            .unwrap();
        assert_eq!(
            request.parts[hi.part].path.to_string(),
            "messages[1].content"
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}

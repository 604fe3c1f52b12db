//! OpenTelemetry traces in OTLP JSON (`resourceSpans[].scopeSpans[].spans[]`; one document,
//! or one per line as the Collector's file exporter writes them). A model call's span does not
//! hold the request body: it holds the prompt in attributes, from which a body is rebuilt in
//! OpenAI's chat format. Read, in this order:
//! - **OpenInference**: `input.value` when it is the request as JSON, else
//!   `llm.input_messages.N.message.*` and `llm.tools.N.tool.json_schema`;
//! - **GenAI semantic conventions**: `gen_ai.system_instructions`, `gen_ai.input.messages`
//!   and `gen_ai.tool.definitions` (JSON, messages of typed parts), or the older
//!   `gen_ai.prompt.N.*` with `llm.request.functions.N.*`.
//!
//! - **Google's ADK**: `gcp.vertex.agent.llm_request`, the Gemini SDK's request, read as a
//!   Gemini body.
//!
//! A span with model-call attributes but no prompt (content capture turned off) is passed
//! over and said; other spans (HTTP, database, the agent's own) are not model calls.

use serde_json::{Map, Value, json};

use super::place::JsonPlaces;
use super::{Body, Container, Interaction, Place, Recording, key_headers};
use kvlint_request::path::PathSegment;

/// The trace one OTLP document holds (`root`, parsed from `text`); `None` when it is not one.
pub(super) fn read_document(root: &Value, text: &str) -> Option<Recording> {
    is_trace(root).then(|| recording(vec![(root, text, 0)]))
}

/// The trace a file of one OTLP document per line holds (the Collector's file exporter);
/// `None` unless its first line is one: the other lines are parsed only then.
pub(super) fn read_lines(text: &str) -> Option<Recording> {
    let mut documents = Vec::new();
    let mut offset = 0;
    for (line_index, line) in text.split_inclusive('\n').enumerate() {
        if !line.trim().is_empty() {
            let root: Value = serde_json::from_str(line).ok()?;
            if !is_trace(&root) {
                return None;
            }
            documents.push((root, offset, line_index));
        }
        offset += line.len();
    }
    (!documents.is_empty()).then(|| {
        recording(
            documents
                .iter()
                .map(|(root, offset, lines_before)| (root, &text[*offset..], *lines_before))
                .collect(),
        )
    })
}

fn is_trace(root: &Value) -> bool {
    root.get("resourceSpans").is_some_and(Value::is_array)
}

/// The model calls of OTLP documents (each parsed, its text from its start, the file's lines
/// before it), in the order they were made: spans are exported as they end.
fn recording(documents: Vec<(&Value, &str, usize)>) -> Recording {
    let mut spans = Vec::new();
    for (root, text, lines_before) in documents {
        collect_spans(root, text, lines_before, &mut spans);
    }
    spans.sort_by_key(|span| span.start);
    let interactions = spans
        .into_iter()
        .enumerate()
        .map(|(index, span)| Interaction {
            index,
            method: "POST".into(),
            url: span.url,
            body: span.body,
            at: span.at,
            response: span.response,
            conversation: span.conversation,
            key_headers: span.key_headers,
            time: (span.start > 0).then(|| span.start as f64 / 1e9),
        })
        .collect();
    Recording {
        container: Container::Otlp,
        interactions,
    }
}

/// A model call's span.
struct Span {
    start: u64,
    url: String,
    body: Body,
    at: Place,
    response: Option<Value>,
    conversation: Option<String>,
    /// The request headers the span kept (`http.request.header.<name>`, the HTTP semantic
    /// conventions' string arrays) that keys are read from.
    key_headers: Vec<(String, String)>,
}

/// The model calls of one OTLP document, `text` from its start, `lines_before` it in the file.
fn collect_spans(root: &Value, text: &str, lines_before: usize, spans: &mut Vec<Span>) {
    let resources = root.get("resourceSpans").and_then(Value::as_array);
    let mut places = JsonPlaces::new(text);
    for (resource_index, resource) in resources.into_iter().flatten().enumerate() {
        let scopes = resource.get("scopeSpans").and_then(Value::as_array);
        for (scope_index, scope) in scopes.into_iter().flatten().enumerate() {
            let members = scope.get("spans").and_then(Value::as_array);
            for (span_index, span) in members.into_iter().flatten().enumerate() {
                let attributes = attributes(span);
                let Some(body) = request(&attributes) else {
                    continue;
                };
                let path = [
                    PathSegment::Key("resourceSpans"),
                    PathSegment::Index(resource_index),
                    PathSegment::Key("scopeSpans"),
                    PathSegment::Index(scope_index),
                    PathSegment::Key("spans"),
                    PathSegment::Index(span_index),
                ];
                let mut at = places.place(&path);
                at.line += lines_before;
                spans.push(Span {
                    start: integer(span.get("startTimeUnixNano")).unwrap_or(0),
                    url: endpoint(&attributes),
                    body,
                    at,
                    response: response(&attributes),
                    conversation: ["gen_ai.conversation.id", "gcp.vertex.agent.session_id"]
                        .iter()
                        .find_map(|key| attributes.get(*key)?.as_str())
                        .map(str::to_owned),
                    key_headers: key_headers(attributes.iter().filter_map(|(key, value)| {
                        let name = key.strip_prefix("http.request.header.")?;
                        let value = match value {
                            Value::Array(values) => values.first()?.as_str()?,
                            value => value.as_str()?,
                        };
                        Some((name, value))
                    })),
                });
            }
        }
    }
}

/// An OTLP integer: a JSON number or, as `int64` and `fixed64` are written, a string.
fn integer(value: Option<&Value>) -> Option<u64> {
    match value? {
        Value::Number(number) => number.as_u64(),
        Value::String(text) => text.parse().ok(),
        _ => None,
    }
}

/// A span's attributes as a map from key to plain JSON value.
fn attributes(span: &Value) -> Map<String, Value> {
    key_values(span.get("attributes"))
}

fn key_values(list: Option<&Value>) -> Map<String, Value> {
    list.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|pair| {
            let key = pair.get("key")?.as_str()?;
            Some((key.to_owned(), any_value(pair.get("value")?)))
        })
        .collect()
}

/// An OTLP `AnyValue` as plain JSON.
fn any_value(value: &Value) -> Value {
    let Some((kind, inner)) = value.as_object().and_then(|object| object.iter().next()) else {
        return Value::Null;
    };
    match kind.as_str() {
        "intValue" => integer(Some(inner)).map_or(Value::Null, Value::from),
        "arrayValue" => Value::Array(
            inner
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(any_value)
                .collect(),
        ),
        "kvlistValue" => Value::Object(key_values(inner.get("values"))),
        _ => inner.clone(),
    }
}

/// Where the call went, for grouping: the provider and the operation.
fn endpoint(attributes: &Map<String, Value>) -> String {
    let text = |key: &str| attributes.get(key).and_then(Value::as_str);
    let provider = text("gen_ai.provider.name")
        .or_else(|| text("gen_ai.system"))
        .or_else(|| text("llm.provider"))
        .or_else(|| text("llm.system"))
        .unwrap_or("unknown");
    let operation = text("gen_ai.operation.name").unwrap_or("chat");
    format!("otel://{provider}/{operation}")
}

/// The request a span's attributes hold, rebuilt; `None` when the span is not a model call.
fn request(attributes: &Map<String, Value>) -> Option<Body> {
    let rebuilt = google_adk(attributes)
        .or_else(|| open_inference(attributes))
        .or_else(|| gen_ai(attributes))
        .or_else(|| gen_ai_prompt(attributes));
    if let Some(body) = rebuilt {
        return Some(Body::Reconstructed(body));
    }
    let operation = attributes
        .get("gen_ai.operation.name")
        .and_then(Value::as_str);
    let model_call = matches!(
        operation,
        Some("chat" | "text_completion" | "generate_content")
    ) || attributes
        .get("openinference.span.kind")
        .and_then(Value::as_str)
        == Some("LLM");
    if operation == Some("embeddings") {
        return Some(Body::None("not a prompt (`embeddings` operation)".into()));
    }
    model_call.then(|| Body::None("a model call without its prompt (content not captured)".into()))
}

/// The response a span's attributes hold: OpenInference's `output.value` when it is the
/// response as JSON, else the generated text and usage rebuilt as a chat completion
/// (`gen_ai.output.messages`, `gen_ai.usage.*`, `llm.output_messages.N.*`,
/// `llm.token_count.*`).
fn response(attributes: &Map<String, Value>) -> Option<Value> {
    if let Some(adk) = json_attribute(attributes, "gcp.vertex.agent.llm_response")
        .filter(|response| response.get("usage_metadata").is_some())
    {
        return Some(adk);
    }
    let output = (attributes.get("output.mime_type").and_then(Value::as_str)
        == Some("application/json"))
    .then(|| json_attribute(attributes, "output.value"))
    .flatten()
    .filter(Value::is_object);
    if output.is_some() {
        return output;
    }
    let count = |keys: &[&str]| keys.iter().find_map(|key| integer(attributes.get(*key)));
    let prompt = count(&["gen_ai.usage.input_tokens", "llm.token_count.prompt"]);
    // OpenTelemetry's GenAI conventions ("The number of input tokens served from a
    // provider-managed cache", `model/gen-ai/registry.yaml`, v1.40.0), Sentry's older spelling,
    // pydantic-ai's own (`usage.py`, `UsageBase.opentelemetry_attributes`, still emitted "for
    // backwards compat"), OpenInference's.
    let cached = count(&[
        "gen_ai.usage.cache_read.input_tokens",
        "gen_ai.usage.cache_read_input_tokens",
        "gen_ai.usage.details.cache_read_tokens",
        "llm.token_count.prompt_details.cache_read",
    ]);
    // The same for writes ("The number of input tokens written to a provider-managed cache"),
    // and the name semantic-conventions-genai renamed it to (`cache_write`, PR #440).
    let written = count(&[
        "gen_ai.usage.cache_creation.input_tokens",
        "gen_ai.usage.cache_write.input_tokens",
        "gen_ai.usage.cache_creation_input_tokens",
        "gen_ai.usage.details.cache_write_tokens",
        "llm.token_count.prompt_details.cache_write",
    ]);
    // pydantic-ai leaves a zero out: a write without a read is a read of none.
    let cached = cached.or(written.map(|_| 0));
    let text = match json_attribute(attributes, "gen_ai.output.messages") {
        Some(Value::Array(messages)) => messages
            .iter()
            .filter_map(|message| message.get("parts").and_then(Value::as_array))
            .map(|parts| joined_text(parts))
            .collect::<String>(),
        _ => indexed(attributes, "llm.output_messages.")
            .iter()
            .filter_map(|message| message.get("message.content").and_then(Value::as_str))
            .collect(),
    };
    if prompt.is_none() && text.is_empty() {
        return None;
    }
    let mut usage = Map::new();
    if let Some(prompt) = prompt {
        usage.insert("prompt_tokens".into(), prompt.into());
    }
    if let Some(cached) = cached {
        let mut details = json!({"cached_tokens": cached});
        if let Some(written) = written {
            details["cache_write_tokens"] = written.into();
        }
        usage.insert("prompt_tokens_details".into(), details);
    }
    Some(
        json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}], "usage": usage}),
    )
}

/// A JSON value an attribute holds as text, or as structure already.
fn json_attribute(attributes: &Map<String, Value>, key: &str) -> Option<Value> {
    match attributes.get(key)? {
        Value::String(text) => serde_json::from_str(text).ok(),
        other => Some(other.clone()),
    }
}

/// `model`, `messages` and `tools` as a chat body.
fn chat_body(attributes: &Map<String, Value>, messages: Vec<Value>, tools: Vec<Value>) -> Value {
    let model = ["gen_ai.request.model", "llm.model_name"]
        .iter()
        .find_map(|key| attributes.get(*key).and_then(Value::as_str))
        .unwrap_or_default();
    let mut body = json!({"model": model, "messages": messages});
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools);
    }
    body
}

/// Attributes `prefix.N.…` grouped by `N`, in order, each with the rest of its keys.
fn indexed(attributes: &Map<String, Value>, prefix: &str) -> Vec<Map<String, Value>> {
    let mut groups: std::collections::BTreeMap<usize, Map<String, Value>> = Default::default();
    for (key, value) in attributes {
        let Some((index, rest)) = key
            .strip_prefix(prefix)
            .and_then(|rest| rest.split_once('.'))
        else {
            continue;
        };
        if let Ok(index) = index.parse::<usize>() {
            groups
                .entry(index)
                .or_default()
                .insert(rest.to_owned(), value.clone());
        }
    }
    groups.into_values().collect()
}

// ---- Google's Agent Development Kit ----

/// ADK's `call_llm` span: the request as the Gemini SDK was given it
/// (`gcp.vertex.agent.llm_request`: `model`, `config.system_instruction`, `config.tools`,
/// `contents`), read as a Gemini body.
fn google_adk(attributes: &Map<String, Value>) -> Option<Value> {
    json_attribute(attributes, "gcp.vertex.agent.llm_request")
        .filter(|request| request.get("contents").is_some_and(Value::is_array))
}

// ---- OpenInference ----

fn open_inference(attributes: &Map<String, Value>) -> Option<Value> {
    // The request as the instrumented client was given it.
    let input = (attributes.get("input.mime_type").and_then(Value::as_str)
        == Some("application/json"))
    .then(|| json_attribute(attributes, "input.value"))
    .flatten()
    .filter(|input| input.get("messages").is_some_and(Value::is_array));
    if input.is_some() {
        return input;
    }
    let messages = indexed(attributes, "llm.input_messages.");
    if messages.is_empty() {
        return None;
    }
    let messages = messages
        .iter()
        .map(|fields| flat_message(fields, &OPEN_INFERENCE))
        .collect();
    let tools = indexed(attributes, "llm.tools.")
        .iter()
        .filter_map(|tool| json_attribute(tool, "tool.json_schema"))
        .collect();
    Some(chat_body(attributes, messages, tools))
}

/// A message kept in flat attributes (`llm.input_messages.N.*`, `gen_ai.prompt.N.*`): the two
/// conventions name the same fields under other prefixes — the message's (`message.`), a tool
/// call's (`tool_call.`) and its function's (`function.`).
struct FlatNames {
    message: &'static str,
    call: &'static str,
    function: &'static str,
}

const OPEN_INFERENCE: FlatNames = FlatNames {
    message: "message.",
    call: "tool_call.",
    function: "function.",
};

const GEN_AI_PROMPT: FlatNames = FlatNames {
    message: "",
    call: "",
    function: "",
};

fn flat_message(fields: &Map<String, Value>, names: &FlatNames) -> Value {
    let FlatNames {
        message: at,
        call: call_at,
        function: function_at,
    } = names;
    let text = |key: &str| fields.get(&format!("{at}{key}")).and_then(Value::as_str);
    let mut message = Map::new();
    message.insert("role".into(), json!(text("role").unwrap_or("user")));
    let contents = indexed(fields, &format!("{at}contents."));
    if let Some(content) = text("content") {
        message.insert("content".into(), json!(content));
    } else if !contents.is_empty() {
        let parts = contents
            .iter()
            .map(|part| {
                let text = |key: &str| part.get(key).and_then(Value::as_str);
                match text("message_content.type") {
                    Some("image") => json!({"type": "image_url", "image_url": {"url": text("message_content.image.image.url").unwrap_or_default()}}),
                    _ => json!({"type": "text", "text": text("message_content.text").unwrap_or_default()}),
                }
            })
            .collect();
        message.insert("content".into(), Value::Array(parts));
    }
    if let Some(name) = text("name") {
        message.insert("name".into(), json!(name));
    }
    let calls: Vec<Value> = indexed(fields, &format!("{at}tool_calls."))
        .iter()
        .map(|call| {
            let field = |key: String| call.get(&key).cloned();
            chat_tool_call(
                field(format!("{call_at}id")),
                field(format!("{call_at}{function_at}name")),
                field(format!("{call_at}{function_at}arguments")).as_ref(),
            )
        })
        .collect();
    if !calls.is_empty() {
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    if let Some(id) = text("tool_call_id") {
        message.insert("tool_call_id".into(), json!(id));
    }
    Value::Object(message)
}

// ---- GenAI semantic conventions ----

/// `gen_ai.input.messages`: messages of typed parts (`text`, `tool_call`,
/// `tool_call_response`), with `gen_ai.system_instructions` before them.
fn gen_ai(attributes: &Map<String, Value>) -> Option<Value> {
    let input = json_attribute(attributes, "gen_ai.input.messages")?;
    let input = input.as_array()?;
    let mut messages = Vec::new();
    if let Some(instructions) = json_attribute(attributes, "gen_ai.system_instructions") {
        let parts = match instructions {
            Value::Array(parts) => parts,
            other => vec![other],
        };
        messages.push(json!({"role": "system", "content": joined_text(&parts)}));
    }
    for message in input {
        messages.extend(gen_ai_message(message));
    }
    let tools = match json_attribute(attributes, "gen_ai.tool.definitions") {
        Some(Value::Array(tools)) => tools.iter().map(chat_tool).collect(),
        _ => Vec::new(),
    };
    Some(chat_body(attributes, messages, tools))
}

/// The text of `text` parts (or plain strings), joined as a client joins them.
fn joined_text(parts: &[Value]) -> String {
    parts
        .iter()
        .filter_map(|part| match part {
            Value::String(text) => Some(text.as_str()),
            _ => part.get("content").and_then(Value::as_str),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One GenAI message as chat messages: a tool message per tool result it carries.
fn gen_ai_message(message: &Value) -> Vec<Value> {
    let role = message
        .get("role")
        .and_then(Value::as_str)
        .unwrap_or("user");
    let parts = message
        .get("parts")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let kind = |part: &Value| {
        part.get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let responses: Vec<Value> = parts
        .iter()
        .filter(|part| kind(part) == "tool_call_response")
        .map(|part| {
            let content = part.get("response").map(json_text).unwrap_or_default();
            json!({"role": "tool", "tool_call_id": part.get("id").cloned().unwrap_or_default(), "content": content})
        })
        .collect();
    if !responses.is_empty() {
        return responses;
    }
    let texts: Vec<Value> = parts
        .iter()
        .filter(|part| kind(part) == "text")
        .cloned()
        .collect();
    let calls: Vec<Value> = parts
        .iter()
        .filter(|part| kind(part) == "tool_call")
        .map(|part| {
            chat_tool_call(
                part.get("id").cloned(),
                part.get("name").cloned(),
                part.get("arguments"),
            )
        })
        .collect();
    let mut chat = Map::new();
    chat.insert("role".into(), json!(role));
    if !texts.is_empty() || calls.is_empty() {
        chat.insert("content".into(), json!(joined_text(&texts)));
    }
    if let Some(name) = message.get("name") {
        chat.insert("name".into(), name.clone());
    }
    if !calls.is_empty() {
        chat.insert("tool_calls".into(), Value::Array(calls));
    }
    vec![Value::Object(chat)]
}

/// A tool call in chat's shape; arguments kept as text, or serialized when a convention
/// parsed them.
fn chat_tool_call(id: Option<Value>, name: Option<Value>, arguments: Option<&Value>) -> Value {
    json!({"id": id.unwrap_or_default(), "type": "function", "function": {
        "name": name.unwrap_or_default(),
        "arguments": arguments.map_or_else(|| "{}".to_owned(), json_text),
    }})
}

/// A string as it is, any other value as compact JSON.
fn json_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// A tool definition in chat's shape: `{type: function, function: {…}}`.
fn chat_tool(tool: &Value) -> Value {
    if tool.get("function").is_some() || tool.get("name").is_none() {
        return tool.clone();
    }
    let mut function = tool.as_object().cloned().unwrap_or_default();
    function.remove("type");
    json!({"type": "function", "function": function})
}

/// The older attributes: `gen_ai.prompt.N.{role,content,tool_call_id}`,
/// `gen_ai.prompt.N.tool_calls.M.{id,name,arguments}`, tools in
/// `llm.request.functions.N.{name,description,parameters}`.
fn gen_ai_prompt(attributes: &Map<String, Value>) -> Option<Value> {
    let prompt = indexed(attributes, "gen_ai.prompt.");
    if prompt.is_empty() {
        return None;
    }
    let messages = prompt
        .iter()
        .map(|fields| flat_message(fields, &GEN_AI_PROMPT))
        .collect();
    let tools = indexed(attributes, "llm.request.functions.")
        .iter()
        .map(|function| {
            let mut definition = Map::new();
            for key in ["name", "description"] {
                if let Some(value) = function.get(key) {
                    definition.insert(key.into(), value.clone());
                }
            }
            if let Some(parameters) = json_attribute(function, "parameters") {
                definition.insert("parameters".into(), parameters);
            }
            json!({"type": "function", "function": definition})
        })
        .collect();
    Some(chat_body(attributes, messages, tools))
}

#[cfg(test)]
mod tests;

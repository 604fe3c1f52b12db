//! Tools the model may call, and the calls it made.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use thiserror::Error;

use crate::ConversationError;
use crate::canonical::{canonical_json, canonical_schema, nfc};

/// A tool definition in canonical form: name and description in NFC, the parameter schema
/// canonical ([`canonical_schema`]). Two tools built from equal content are equal and
/// serialize to the same bytes, whatever order their schema's keys were written in.
///
/// ```
/// use kvlint_sdk::Tool;
/// use serde_json::json;
///
/// let a = Tool::new("read_file", "Read a file", json!({"type": "object", "required": ["path", "line"],
///     "properties": {"path": {"type": "string"}, "line": {"type": "integer"}}}));
/// let b = Tool::new("read_file", "Read a file", json!({"properties": {"line": {"type": "integer"},
///     "path": {"type": "string"}}, "required": ["line", "path"], "type": "object"}));
/// assert_eq!(a, b);
/// assert_eq!(a.canonical_text(), b.canonical_text());
/// ```
///
/// Fields other than the name, the description and the schema (OpenAI's `"strict": true`,
/// which changes what the API does) are kept, canonical, and sent after the schema in key
/// order ([`Tool::extra_fields`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(from = "ToolFields")]
pub struct Tool {
    name: String,
    description: String,
    parameters: Value,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    extra: Map<String, Value>,
}

/// A tool as saved: read back through [`Tool::new`], so a restored tool is canonical too.
#[derive(Deserialize)]
struct ToolFields {
    name: String,
    description: String,
    parameters: Value,
    #[serde(default)]
    extra: Map<String, Value>,
}

impl From<ToolFields> for Tool {
    fn from(fields: ToolFields) -> Self {
        let tool = Self::new(fields.name, fields.description, fields.parameters);
        fields
            .extra
            .into_iter()
            .fold(tool, |tool, (key, value)| tool.with_extra_field(key, value))
    }
}

/// The fields of a definition that are not extra fields: the tool's name, description and
/// schema (under either API's key), the wrapper's `type`, and `cache_control`, whose
/// breakpoints the conversation places itself (a fifth one is refused by Anthropic).
const DEFINITION_FIELDS: [&str; 6] = [
    "name",
    "description",
    "parameters",
    "input_schema",
    "type",
    "cache_control",
];

/// A tool definition that is not in any format [`Tool::from_definition`] reads.
#[derive(Debug, Error, miette::Diagnostic)]
#[error("not a tool definition: {reason}")]
#[diagnostic(
    code(kvlint_sdk::tool),
    help(
        "expected an OpenAI Chat tool (`{{\"type\": \"function\", \"function\": {{\"name\", \"parameters\"}}}}`), an OpenAI Responses tool (`{{\"type\": \"function\", \"name\", \"parameters\"}}`) or an Anthropic tool (`{{\"name\", \"input_schema\"}}`)"
    )
)]
pub struct ToolDefinitionError {
    pub reason: String,
}

impl Tool {
    /// A tool from its name, description and JSON Schema for its arguments.
    pub fn new(name: impl AsRef<str>, description: impl AsRef<str>, parameters: Value) -> Self {
        Self {
            name: nfc(name.as_ref()),
            description: nfc(description.as_ref()),
            parameters: canonical_schema(&parameters),
            extra: Map::new(),
        }
    }

    /// This tool with one more field sent beside the name, description and schema (such as
    /// `"strict": true`), canonical ([`canonical_json`]); the fields render in key order.
    /// The name, description, schema, `type` and `cache_control` are not extra fields: they
    /// are ignored here.
    ///
    /// ```
    /// use kvlint_sdk::Tool;
    /// use serde_json::json;
    ///
    /// let strict = Tool::new("search", "Search.", json!({"type": "object"})).with_extra_field("strict", json!(true));
    /// let read = Tool::from_definition(&json!({"type": "function", "function": {"name": "search",
    ///     "description": "Search.", "parameters": {"type": "object"}, "strict": true}})).unwrap();
    /// assert_eq!(strict, read);
    /// assert_eq!(read.extra_fields()["strict"], true);
    /// ```
    pub fn with_extra_field(mut self, key: impl AsRef<str>, value: Value) -> Self {
        let key = nfc(key.as_ref());
        if !DEFINITION_FIELDS.contains(&key.as_str()) {
            self.extra.insert(key, canonical_json(&value));
            self.extra.sort_keys();
        }
        self
    }

    /// A tool from a definition in any of the three APIs' shapes.
    pub fn from_definition(definition: &Value) -> Result<Self, ToolDefinitionError> {
        let function = definition.get("function").unwrap_or(definition);
        let name = function
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| ToolDefinitionError {
                reason: "no `name` string".into(),
            })?;
        let description = function
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let parameters = function
            .get("parameters")
            .or_else(|| function.get("input_schema"))
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
        let tool = Self::new(name, description, parameters);
        Ok(function
            .as_object()
            .into_iter()
            .flatten()
            .fold(tool, |tool, (key, value)| {
                tool.with_extra_field(key, value.clone())
            }))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn description(&self) -> &str {
        &self.description
    }

    /// The canonical parameter schema.
    pub fn parameters(&self) -> &Value {
        &self.parameters
    }

    /// Fields sent beside the name, description and schema, in key order (see
    /// [`Tool::with_extra_field`]).
    pub fn extra_fields(&self) -> &Map<String, Value> {
        &self.extra
    }

    /// The one serialization of this tool (canonical JSON), as the prefix fingerprint hashes it.
    pub fn canonical_text(&self) -> String {
        let mut fields = self.extra.clone();
        fields.insert("description".into(), json!(self.description));
        fields.insert("name".into(), json!(self.name));
        fields.insert("parameters".into(), self.parameters.clone());
        fields.sort_keys();
        Value::Object(fields).to_string()
    }

    /// `{"type": "function", "function": {"name", "description", "parameters"}}`
    pub(crate) fn openai_chat(&self) -> Value {
        json!({"type": "function", "function": self.name_description_and("parameters")})
    }

    /// `{"type": "function", "name", "description", "parameters"}`
    pub(crate) fn openai_responses(&self) -> Value {
        let mut tool = Map::new();
        tool.insert("type".into(), Value::String("function".into()));
        tool.extend(self.name_description_and("parameters"));
        Value::Object(tool)
    }

    /// `{"name", "description", "input_schema"}`
    pub(crate) fn anthropic(&self) -> Value {
        Value::Object(self.name_description_and("input_schema"))
    }

    fn name_description_and(&self, schema_key: &str) -> Map<String, Value> {
        let mut fields = Map::new();
        fields.insert("name".into(), Value::String(self.name.clone()));
        if !self.description.is_empty() {
            fields.insert(
                "description".into(),
                Value::String(self.description.clone()),
            );
        }
        fields.insert(schema_key.into(), self.parameters.clone());
        fields.extend(self.extra.clone());
        fields
    }
}

/// A call the model made, frozen: its arguments are serialized once, when the call is made,
/// and every later turn sends those same bytes.
///
/// ```
/// use kvlint_sdk::ToolCall;
/// use serde_json::json;
///
/// // Arguments as a value: serialized once, canonically.
/// let call = ToolCall::new("call_1", "read_file", &json!({"path": "src/lib.rs", "line": 3}));
/// assert_eq!(call.arguments(), r#"{"line":3,"path":"src/lib.rs"}"#);
/// // Arguments as the model wrote them: kept byte for byte (what a self-hosted engine cached).
/// let call = ToolCall::verbatim("call_2", "read_file", r#"{"path": "a.rs"}"#);
/// assert_eq!(call.arguments(), r#"{"path": "a.rs"}"#);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(from = "ToolCallFields")]
pub struct ToolCall {
    id: String,
    name: String,
    arguments: String,
    /// The arguments as an object, parsed once, for APIs that send them as JSON (Anthropic's
    /// `input`).
    #[serde(skip_serializing)]
    input: Value,
}

/// A tool call as saved: its arguments' one serialization, read back as it was sent.
#[derive(Deserialize)]
struct ToolCallFields {
    id: String,
    name: String,
    arguments: String,
}

impl From<ToolCallFields> for ToolCall {
    fn from(fields: ToolCallFields) -> Self {
        Self::verbatim(fields.id, fields.name, fields.arguments)
    }
}

impl ToolCall {
    /// A call as the language bindings take it: `{id, name, arguments}` (arguments as a JSON
    /// string, kept byte for byte, or as a value, serialized canonically) or the Chat
    /// Completions shape `{id, function: {name, arguments}}`.
    pub fn from_json(call: &Value) -> Result<Self, ConversationError> {
        let function = call.get("function").unwrap_or(call);
        let text = |value: &Value, key: &str| {
            value
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| ConversationError::body("tool call", format!("no `{key}` string")))
        };
        let (id, name) = (text(call, "id")?, text(function, "name")?);
        Ok(match function.get("arguments") {
            Some(Value::String(arguments)) => Self::verbatim(id, name, arguments.clone()),
            Some(arguments) => Self::new(id, name, arguments),
            None => Self::new(id, name, &Value::Object(Map::new())),
        })
    }

    /// A call whose arguments are given as a value: they are serialized once, canonically
    /// (keys sorted, text NFC).
    pub fn new(id: impl Into<String>, name: impl AsRef<str>, arguments: &Value) -> Self {
        let canonical = canonical_json(arguments);
        Self::frozen(
            id.into(),
            nfc(name.as_ref()),
            canonical.to_string(),
            canonical,
        )
    }

    /// A call whose arguments are kept exactly as the model generated them. Arguments that
    /// are not a JSON object are refused when the call is appended
    /// ([`crate::ConversationError::ToolArguments`]).
    pub fn verbatim(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        let arguments = arguments.into();
        let parsed = serde_json::from_str(&arguments).unwrap_or(Value::Null);
        Self::frozen(id.into(), name.into(), arguments, parsed)
    }

    fn frozen(id: String, name: String, arguments: String, parsed: Value) -> Self {
        // Arguments that are not an object never reach a body: the conversation refuses them.
        let input = match parsed {
            object @ Value::Object(_) => object,
            _ => Value::Object(Map::new()),
        };
        Self {
            id,
            name,
            arguments,
            input,
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The arguments' one serialization.
    pub fn arguments(&self) -> &str {
        &self.arguments
    }

    pub(crate) fn input(&self) -> &Value {
        &self.input
    }

    /// Why the arguments are not a JSON object, when they are not.
    pub(crate) fn arguments_error(&self) -> Option<String> {
        match serde_json::from_str::<Value>(&self.arguments) {
            Ok(Value::Object(_)) => None,
            Ok(_) => Some("JSON, but not an object".to_owned()),
            Err(error) => Some(format!("invalid JSON: {error}")),
        }
    }
}

//! What a template sees: the context transformers renders a chat template with.

use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::{Map, Value};

/// What a template sees, serialized straight into template values without copying the
/// conversation first. Later keys win, as in Python's `render(**special_tokens, ..., **kwargs)`.
#[derive(Serialize)]
pub(super) struct TemplateContext<'a> {
    #[serde(flatten)]
    pub special_tokens: &'a Map<String, Value>,
    pub messages: Vec<TransformersMessage<'a>>,
    pub documents: (),
    pub tools: Option<Vec<&'a Value>>,
    pub add_generation_prompt: bool,
    #[serde(flatten)]
    pub kwargs: &'a Map<String, Value>,
}

/// The variables transformers itself passes, besides the special tokens.
pub(super) const CONTEXT_VARIABLES: [&str; 4] =
    ["messages", "documents", "tools", "add_generation_prompt"];

/// Names a message's reasoning goes by; templates read the first.
const REASONING_FIELDS: [&str; 3] = ["reasoning_content", "thinking", "reasoning"];

/// A message as transformers hands it to the template: keys whose value is null dropped
/// (`_normalize_chat_messages`), and the reasoning copied to `thinking` (first) and
/// `reasoning_content` (`_alias_reasoning_fields`).
pub(super) struct TransformersMessage<'a>(pub &'a Value);

impl Serialize for TransformersMessage<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Some(object) = self.0.as_object() else {
            return self.0.serialize(serializer);
        };
        let present = |key: &str| object.get(key).filter(|value| !value.is_null());
        let reasoning = REASONING_FIELDS.iter().find_map(|key| present(key));
        let mut map = serializer.serialize_map(None)?;
        if let Some(reasoning) = reasoning {
            map.serialize_entry("thinking", present("thinking").unwrap_or(reasoning))?;
        }
        for (key, value) in object {
            let aliased =
                reasoning.is_some() && matches!(key.as_str(), "thinking" | "reasoning_content");
            if !value.is_null() && !aliased {
                map.serialize_entry(key, value)?;
            }
        }
        if let Some(reasoning) = reasoning {
            map.serialize_entry("reasoning_content", reasoning)?;
        }
        map.end()
    }
}

/// The special tokens of a tokenizer config, as plain strings (configs also write them as
/// `{"content": ...}` objects).
pub(super) fn special_tokens(config: &Value) -> Map<String, Value> {
    config
        .as_object()
        .map(|object| {
            object
                .iter()
                .filter(|(key, _)| key.ends_with("_token"))
                .filter_map(|(key, value)| {
                    let content = value.as_str().or_else(|| value.get("content")?.as_str())?;
                    Some((key.clone(), Value::String(content.to_owned())))
                })
                .collect()
        })
        .unwrap_or_default()
}

//! Message content beyond text: images, documents, reasoning, and the provider's own blocks.
//!
//! A [`Part`] is one piece of a message. Text, images and documents render in every API's
//! shape; reasoning and server-side tool blocks are the provider's own and are sent back
//! to that provider exactly as it returned them (byte for byte: the signature of a thinking
//! block, the encrypted content of a reasoning item), and left out of the other APIs' bodies.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::canonical::nfc;
use crate::error::ConversationError;

/// The API a body is built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Api {
    OpenAiChat,
    OpenAiResponses,
    Anthropic,
}

/// Where an image's or a document's bytes are.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Source {
    /// A URL the provider fetches.
    Url { url: String },
    /// The bytes, base64-encoded, with their media type (`image/png`, `application/pdf`).
    Base64 { media_type: String, data: String },
    /// A file uploaded to the provider's file store.
    File { file_id: String },
}

impl Source {
    /// A source from a URL, reading `data:` URLs as base64 content.
    pub fn from_url(url: &str) -> Self {
        if let Some(rest) = url.strip_prefix("data:")
            && let Some((media_type, data)) = rest.split_once(";base64,")
        {
            return Self::Base64 {
                media_type: media_type.to_owned(),
                data: data.to_owned(),
            };
        }
        Self::Url {
            url: url.to_owned(),
        }
    }

    /// The OpenAI form: a URL, base64 content as a `data:` URL; `None` for a file id.
    fn openai_url(&self) -> Option<String> {
        match self {
            Self::Url { url } => Some(url.clone()),
            Self::Base64 { media_type, data } => Some(format!("data:{media_type};base64,{data}")),
            Self::File { .. } => None,
        }
    }

    /// Anthropic's `source` object.
    fn anthropic(&self) -> Value {
        match self {
            Self::Url { url } => json!({"type": "url", "url": url}),
            Self::Base64 { media_type, data } => {
                json!({"type": "base64", "media_type": media_type, "data": data})
            }
            Self::File { file_id } => json!({"type": "file", "file_id": file_id}),
        }
    }

    fn from_anthropic(source: &Value, path: &str) -> Result<Self, ConversationError> {
        let field = |name: &str| {
            source
                .get(name)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| ConversationError::body(path, format!("no `{name}` string")))
        };
        match source.get("type").and_then(Value::as_str) {
            Some("url") => Ok(Self::Url { url: field("url")? }),
            Some("base64") => Ok(Self::Base64 {
                media_type: field("media_type")?,
                data: field("data")?,
            }),
            Some("file") => Ok(Self::File {
                file_id: field("file_id")?,
            }),
            other => Err(ConversationError::body(
                path,
                format!("unsupported source type {other:?}"),
            )),
        }
    }
}

/// One piece of a message.
///
/// ```
/// use kvlint_sdk::{Part, Source};
///
/// let image = Part::image(Source::from_url("data:image/png;base64,iVBORw0KGgo="));
/// assert_eq!(image, Part::Image {
///     source: Source::Base64 { media_type: "image/png".into(), data: "iVBORw0KGgo=".into() },
///     detail: None,
/// });
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    Text {
        text: String,
    },
    Image {
        source: Source,
        /// OpenAI's `detail` (`low`, `high`, `auto`), when one was given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    Document {
        source: Source,
        /// The file name (OpenAI) or title (Anthropic).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
    },
    /// An Anthropic `thinking` or `redacted_thinking` block, as the API returned it (its
    /// signature included). Sent back first in its assistant message, as the API requires;
    /// left out of OpenAI bodies.
    Thinking {
        block: Value,
    },
    /// An Anthropic server-side tool block (`server_tool_use`, `web_search_tool_result`,
    /// `mcp_tool_use`, …), as returned; left out of OpenAI bodies.
    ServerTool {
        block: Value,
    },
    /// An OpenAI Responses output item other than a message or a function call (a
    /// `reasoning` item with its `encrypted_content`, a `web_search_call`, …), as returned;
    /// left out of Chat Completions and Anthropic bodies.
    ResponsesItem {
        item: Value,
    },
}

impl Part {
    /// A text part (NFC).
    pub fn text(text: impl AsRef<str>) -> Self {
        Self::Text {
            text: nfc(text.as_ref()),
        }
    }

    pub fn image(source: Source) -> Self {
        Self::Image {
            source,
            detail: None,
        }
    }

    pub fn document(source: Source, title: Option<String>) -> Self {
        Self::Document { source, title }
    }

    /// An Anthropic thinking block with its signature.
    pub fn thinking(thinking: impl Into<String>, signature: impl Into<String>) -> Self {
        Self::Thinking {
            block: json!({"type": "thinking", "thinking": thinking.into(), "signature": signature.into()}),
        }
    }

    /// An Anthropic redacted thinking block (encrypted `data`).
    pub fn redacted_thinking(data: impl Into<String>) -> Self {
        Self::Thinking {
            block: json!({"type": "redacted_thinking", "data": data.into()}),
        }
    }

    /// A part from a content block in any of the three APIs' shapes: text (`text`,
    /// `input_text`, `output_text`), images (`image_url`, `input_image`, `image`), documents
    /// (`file`, `input_file`, `document`), Anthropic thinking and server tool blocks.
    pub fn from_block(block: &Value) -> Result<Self, ConversationError> {
        Self::parse(block, "content block")
    }

    /// A message's content as the language bindings take it: a string (one text part) or an
    /// array of content blocks in any API's shape ([`Part::from_block`]).
    pub fn from_content(content: &Value) -> Result<Vec<Self>, ConversationError> {
        match content {
            Value::String(text) => Ok(vec![Self::text(text)]),
            Value::Array(blocks) => blocks.iter().map(Self::from_block).collect(),
            _ => Err(ConversationError::body(
                "content",
                "expected a string or an array of content blocks",
            )),
        }
    }

    pub(crate) fn parse(block: &Value, path: &str) -> Result<Self, ConversationError> {
        Self::parse_known(block, path)?.ok_or_else(|| {
            let kind = block
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or_default();
            ConversationError::body(path, format!("content of type `{kind}` is not supported"))
        })
    }

    /// [`Part::parse`], with `None` for a block of a type this crate does not know.
    pub(crate) fn parse_known(
        block: &Value,
        path: &str,
    ) -> Result<Option<Self>, ConversationError> {
        let kind = block
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| ConversationError::body(path, "a content block without a `type`"))?;
        let string = |name: &str| block.get(name).and_then(Value::as_str);
        let missing = |name: &str| ConversationError::body(path, format!("no `{name}` string"));
        let part = match kind {
            "text" | "input_text" | "output_text" => {
                Self::text(string("text").ok_or_else(|| missing("text"))?)
            }
            "image_url" => {
                let image = block.get("image_url");
                let url = image
                    .and_then(|image| image.get("url").or(Some(image)))
                    .and_then(Value::as_str)
                    .ok_or_else(|| missing("image_url.url"))?;
                let detail = image
                    .and_then(|image| image.get("detail"))
                    .and_then(Value::as_str);
                Self::Image {
                    source: Source::from_url(url),
                    detail: detail.map(str::to_owned),
                }
            }
            "input_image" => {
                let source = match (string("image_url"), string("file_id")) {
                    (Some(url), _) => Source::from_url(url),
                    (None, Some(file_id)) => Source::File {
                        file_id: file_id.to_owned(),
                    },
                    (None, None) => return Err(missing("image_url")),
                };
                Self::Image {
                    source,
                    detail: string("detail").map(str::to_owned),
                }
            }
            "image" => Self::image(Source::from_anthropic(
                block.get("source").unwrap_or(&Value::Null),
                path,
            )?),
            "file" | "input_file" => {
                let file = block.get("file").unwrap_or(block);
                let field = |name: &str| file.get(name).and_then(Value::as_str);
                let source = match (field("file_data"), field("file_id"), field("file_url")) {
                    (Some(data), _, _) => Source::from_url(data),
                    (None, Some(file_id), _) => Source::File {
                        file_id: file_id.to_owned(),
                    },
                    (None, None, Some(url)) => Source::Url {
                        url: url.to_owned(),
                    },
                    _ => return Err(missing("file_data")),
                };
                Self::document(source, field("filename").map(str::to_owned))
            }
            "document" => Self::document(
                Source::from_anthropic(block.get("source").unwrap_or(&Value::Null), path)?,
                string("title").map(str::to_owned),
            ),
            "thinking" | "redacted_thinking" => Self::Thinking {
                block: block.clone(),
            },
            _ if is_anthropic_server_block(kind) => Self::ServerTool {
                block: block.clone(),
            },
            _ => return Ok(None),
        };
        Ok(Some(part))
    }

    pub(crate) fn as_text(&self) -> Option<&str> {
        match self {
            Self::Text { text } => Some(text),
            _ => None,
        }
    }

    /// Whether the part is the model's reasoning (sent back first in its message).
    pub(crate) fn is_thinking(&self) -> bool {
        matches!(self, Self::Thinking { .. })
    }

    /// The part as a content block of `api`, for a message of `role` (`user` parts are
    /// input, `assistant` parts output); `None` when the API has no such content.
    pub(crate) fn block(&self, api: Api, assistant: bool) -> Option<Value> {
        match (self, api) {
            (Self::Text { text }, Api::OpenAiResponses) => {
                let kind = if assistant {
                    "output_text"
                } else {
                    "input_text"
                };
                Some(json!({"type": kind, "text": text}))
            }
            (Self::Text { text }, _) => Some(json!({"type": "text", "text": text})),
            (Self::Image { source, detail }, Api::OpenAiChat) => {
                let mut image = Map::new();
                image.insert("url".into(), Value::String(source.openai_url()?));
                if let Some(detail) = detail {
                    image.insert("detail".into(), Value::String(detail.clone()));
                }
                Some(json!({"type": "image_url", "image_url": image}))
            }
            (Self::Image { source, detail }, Api::OpenAiResponses) => {
                let mut image = Map::new();
                image.insert("type".into(), Value::String("input_image".into()));
                match source {
                    Source::File { file_id } => image.insert("file_id".into(), json!(file_id)),
                    _ => image.insert("image_url".into(), json!(source.openai_url())),
                };
                image.insert("detail".into(), json!(detail.as_deref().unwrap_or("auto")));
                Some(Value::Object(image))
            }
            (Self::Image { source, .. }, Api::Anthropic) => {
                Some(json!({"type": "image", "source": source.anthropic()}))
            }
            (Self::Document { source, title }, Api::OpenAiChat | Api::OpenAiResponses) => {
                let mut file = Map::new();
                if api == Api::OpenAiResponses {
                    file.insert("type".into(), Value::String("input_file".into()));
                }
                if let Some(title) = title {
                    file.insert("filename".into(), Value::String(title.clone()));
                }
                match source {
                    Source::Url { url } => file.insert("file_url".into(), json!(url)),
                    Source::File { file_id } => file.insert("file_id".into(), json!(file_id)),
                    Source::Base64 { .. } => {
                        file.insert("file_data".into(), json!(source.openai_url()))
                    }
                };
                Some(match api {
                    Api::OpenAiChat => json!({"type": "file", "file": file}),
                    _ => Value::Object(file),
                })
            }
            (Self::Document { source, title }, Api::Anthropic) => {
                let mut document = Map::new();
                document.insert("type".into(), Value::String("document".into()));
                document.insert("source".into(), source.anthropic());
                if let Some(title) = title {
                    document.insert("title".into(), Value::String(title.clone()));
                }
                Some(Value::Object(document))
            }
            (Self::Thinking { block } | Self::ServerTool { block }, Api::Anthropic) => {
                Some(block.clone())
            }
            (Self::ResponsesItem { item }, Api::OpenAiResponses) => Some(item.clone()),
            _ => None,
        }
    }
}

/// Anthropic's server-side tool blocks: the call and the result of a tool Anthropic runs.
pub(crate) fn is_anthropic_server_block(kind: &str) -> bool {
    kind == "server_tool_use"
        || kind == "mcp_tool_use"
        || kind == "mcp_tool_result"
        || kind == "container_upload"
        || kind.ends_with("_tool_result")
}

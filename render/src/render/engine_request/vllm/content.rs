//! A message's content as vLLM hands it to the template (`vllm/renderers/chat_utils.py`):
//! `_parse_chat_message_content_parts` and `_parse_chat_message_content_part` turn each part
//! into text (or a part object, for templates that iterate parts), and
//! `_strip_claude_code_billing_header` cleans system messages.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::template_facts::ContentFormat;
use super::{Failure, request};

/// `_CLAUDE_CODE_BILLING_HEADER`: a line Claude Code puts first in its system prompt, with a
/// value that changes on every request; vLLM drops it.
pub(super) const BILLING_HEADER: &str = "x-anthropic-billing-header";

/// Part types parsed as text (`TEXT_PART_TYPES`).
const TEXT_PART_TYPES: [&str; 5] = ["text", "input_text", "output_text", "refusal", "thinking"];

/// Part types vLLM loads as images, audio, video or embeddings (`MM_PARSER_MAP`), and the
/// keys that mark a part without `type` as one of them.
const MEDIA_PART_TYPES: [&str; 10] = [
    "input_image",
    "image_url",
    "image_embeds",
    "audio_embeds",
    "video_embeds",
    "prompt_embeds",
    "image_pil",
    "audio_url",
    "input_audio",
    "video_url",
];
const MEDIA_PART_KEYS: [&str; 9] = [
    "image_url",
    "image_pil",
    "image_embeds",
    "audio_embeds",
    "video_embeds",
    "prompt_embeds",
    "audio_url",
    "input_audio",
    "video_url",
];

/// `_KNOWN_CONTENT_PART_FIELDS`: the keys some content part type declares. The others are
/// passed on with a text part when templates take content as parts.
const KNOWN_PART_FIELDS: [&str; 18] = [
    "audio_embeds",
    "audio_url",
    "closed",
    "data",
    "file",
    "image_embeds",
    "image_pil",
    "image_url",
    "input_audio",
    "name",
    "prompt_cache_breakpoint",
    "refusal",
    "text",
    "thinking",
    "type",
    "uuid",
    "video_embeds",
    "video_url",
];

/// The part types named in vLLM's "Unsupported chat content part type" answer.
const SUPPORTED_PART_TYPES: &str = "audio_embeds, audio_url, image_embeds, image_pil, \
    image_url, input_audio, input_image, input_text, output_text, prompt_embeds, refusal, \
    text, thinking, tool_reference, video_embeds, video_url";

/// A content part before parsing: a string (string content is one), or a part object,
/// with its text replaced where the billing header was cut.
enum RawPart<'p> {
    Text(Cow<'p, str>),
    Object(&'p Map<String, Value>, Option<String>),
}

/// A message's content as the template gets it: parts parsed, then joined by newlines
/// (string format) or kept as a list of part objects (OpenAI format).
pub(super) fn parse_content(
    role: &str,
    content: Option<&Value>,
    format: ContentFormat,
) -> Result<Value, Failure> {
    let mut parts: Vec<RawPart<'_>> = match content {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(text)) => vec![RawPart::Text(Cow::Borrowed(text))],
        Some(Value::Array(parts)) => parts
            .iter()
            .map(|part| match part {
                Value::String(text) => Ok(RawPart::Text(Cow::Borrowed(text))),
                Value::Object(object) => Ok(RawPart::Object(object, None)),
                _ => Err(Failure::Refused(
                    "Input should be a valid dictionary at content".into(),
                )),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(Failure::Refused(
                "Input should be a valid string at content".into(),
            ));
        }
    };
    if role == "system" {
        parts = without_billing_header(parts);
    }
    let mut parsed = Vec::with_capacity(parts.len());
    for part in &parts {
        // `if parse_res:` — an empty text (or a missing one) is left out of the join.
        if let Some(part) = parse_part(part, format)?
            && request::truthy(Some(&part))
        {
            parsed.push(part);
        }
    }
    Ok(match format {
        ContentFormat::OpenAi => Value::Array(parsed),
        ContentFormat::String => {
            let mut texts = Vec::with_capacity(parsed.len());
            for (index, part) in parsed.iter().enumerate() {
                // Python's `"\n".join` takes strings only.
                let text = part.as_str().ok_or_else(|| {
                    Failure::Refused(format!(
                        "sequence item {index}: expected str instance, {} found",
                        python_type(part)
                    ))
                })?;
                texts.push(text);
            }
            Value::String(texts.join("\n"))
        }
    })
}

/// `_strip_claude_code_billing_header`: a system text part that starts with the header loses
/// its first line, and the part goes when nothing is left.
fn without_billing_header(parts: Vec<RawPart<'_>>) -> Vec<RawPart<'_>> {
    parts
        .into_iter()
        .filter_map(|part| {
            let text = match &part {
                RawPart::Text(text) => Some(text.as_ref()),
                RawPart::Object(object, _)
                    if object.get("type").is_some_and(|kind| kind == "text") =>
                {
                    object.get("text").and_then(Value::as_str)
                }
                RawPart::Object(..) => None,
            };
            let Some(text) = text.filter(|text| text.starts_with(BILLING_HEADER)) else {
                return Some(part);
            };
            let rest = text
                .split_once('\n')
                .map_or("", |(_, rest)| rest)
                .to_owned();
            if rest.is_empty() {
                return None;
            }
            Some(match part {
                RawPart::Text(_) => RawPart::Text(Cow::Owned(rest)),
                RawPart::Object(object, _) => RawPart::Object(object, Some(rest)),
            })
        })
        .collect()
}

/// `_parse_chat_message_content_part`: a part as a string (string format) or a part object
/// (OpenAI format); `None` for a text part without text, which vLLM skips.
fn parse_part(part: &RawPart<'_>, format: ContentFormat) -> Result<Option<Value>, Failure> {
    let (object, replaced_text) = match part {
        RawPart::Text(text) => {
            return Ok(Some(text_part(
                Value::String(text.to_string()),
                Map::new(),
                format,
            )));
        }
        RawPart::Object(object, replaced) => (*object, replaced),
    };
    let kind = object.get("type").filter(|kind| !kind.is_null());
    let has_uuid = object.get("uuid").is_some_and(|uuid| !uuid.is_null());
    // `_parse_chat_message_content_mm_part`: the type, and the value that holds the content.
    let (kind, content): (&str, Option<&Value>) = match kind.and_then(Value::as_str) {
        Some(kind) if !has_uuid && is_parsed_type(kind) => (kind, part_content(object, kind)),
        _ if kind.is_none() || has_uuid => {
            if MEDIA_PART_KEYS.iter().any(|key| object.contains_key(*key)) {
                return Err(multimodal());
            }
            if !object.contains_key("tool_reference") {
                return Err(Failure::Refused(
                    "Missing 'type' field in multimodal part.".into(),
                ));
            }
            ("tool_reference", object.get("name"))
        }
        None => {
            return Err(Failure::Refused(
                "Invalid 'type' field in multimodal part.".into(),
            ));
        }
        Some(kind) => (kind, None),
    };
    let content = content.filter(|content| !content.is_null());
    if TEXT_PART_TYPES.contains(&kind) {
        if content.is_none() && matches!(kind, "text" | "refusal") {
            return Ok(None);
        }
        if kind == "text" {
            check_cache_breakpoint(object.get("prompt_cache_breakpoint"))?;
        }
        let text = match (replaced_text, content) {
            (Some(text), _) => Value::String(text.clone()),
            (None, Some(text @ Value::String(_))) => text.clone(),
            (None, Some(_)) => {
                return Err(Failure::Refused(format!(
                    "Input should be a valid string at content.{kind}"
                )));
            }
            (None, None) => Value::Null,
        };
        let extras = object
            .iter()
            .filter(|(key, _)| !KNOWN_PART_FIELDS.contains(&key.as_str()))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        return Ok(Some(text_part(text, extras, format)));
    }
    if MEDIA_PART_TYPES.contains(&kind) {
        return Err(multimodal());
    }
    if kind == "tool_reference" {
        let name = content.cloned().unwrap_or(Value::Null);
        return Ok(Some(match format {
            ContentFormat::String => name,
            ContentFormat::OpenAi => {
                let mut reference = Map::new();
                reference.insert("type".into(), Value::String("tool_reference".into()));
                reference.insert("name".into(), name);
                Value::Object(reference)
            }
        }));
    }
    Err(Failure::Refused(format!(
        "Unsupported chat content part type: '{kind}'. Supported types: {SUPPORTED_PART_TYPES}."
    )))
}

fn is_parsed_type(kind: &str) -> bool {
    TEXT_PART_TYPES.contains(&kind) || MEDIA_PART_TYPES.contains(&kind) || kind == "tool_reference"
}

/// The key `MM_PARSER_MAP` reads a part's content from.
fn part_content<'p>(object: &'p Map<String, Value>, kind: &str) -> Option<&'p Value> {
    let key = match kind {
        "text" | "input_text" | "output_text" => "text",
        "thinking" => "thinking",
        "refusal" => "refusal",
        "tool_reference" => "name",
        _ => return None,
    };
    object.get(key)
}

/// OpenAI's `prompt_cache_breakpoint` on a text part: `{"mode": "explicit", "ttl": …}`.
pub(super) fn check_cache_breakpoint(breakpoint: Option<&Value>) -> Result<(), Failure> {
    let Some(breakpoint) = breakpoint else {
        return Ok(());
    };
    let valid = breakpoint
        .get("mode")
        .is_some_and(|mode| mode == "explicit")
        && breakpoint
            .get("ttl")
            .is_none_or(|ttl| ttl == "30m" || ttl == "12h");
    if valid {
        Ok(())
    } else {
        Err(Failure::Refused(
            "Input should be a valid dictionary at content.prompt_cache_breakpoint".into(),
        ))
    }
}

fn text_part(text: Value, extras: Map<String, Value>, format: ContentFormat) -> Value {
    match format {
        ContentFormat::String => text,
        ContentFormat::OpenAi => {
            let mut part = Map::new();
            part.insert("type".into(), Value::String("text".into()));
            part.insert("text".into(), text);
            part.extend(extras);
            Value::Object(part)
        }
    }
}

fn multimodal() -> Failure {
    Failure::NotModelled(
        "image, audio or video content (vLLM loads it only for multimodal models, as the \
         model's placeholders)"
            .into(),
    )
}

/// The name Python gives a JSON value's type, for vLLM's reasons.
pub(super) fn python_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(number) if number.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

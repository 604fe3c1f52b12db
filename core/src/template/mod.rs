//! Chat templates rendered the way Hugging Face transformers renders them.
//!
//! transformers compiles a chat template in a Jinja environment with `trim_blocks` and
//! `lstrip_blocks`, the loop-controls extension, a `tojson` filter that keeps key order and
//! does not HTML-escape (`json.dumps(x, ensure_ascii=False)`), `raise_exception` and
//! `strftime_now`. The template sees `messages`, `tools`, `add_generation_prompt`, the
//! special tokens of the tokenizer config and any extra keyword arguments.
//!
//! This module loads a template and builds the context; `environment` holds the Jinja
//! environment and the functions transformers adds, `python_json` the `json.dumps` layout
//! its `tojson` filter writes.

mod environment;
mod python_json;

use std::borrow::Borrow;
use std::path::Path;

use chrono::NaiveDateTime;
use minijinja::value::{Serde, Value as JinjaValue};
use minijinja::{Environment, Error as JinjaError, ErrorKind};
use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::{Map, Value};

use crate::error::InputError;
use environment::transformers_environment;

pub use python_json::PythonJson;

/// A loaded chat template with the context transformers gives it.
pub struct ChatTemplate {
    environment: Environment<'static>,
    /// The named template sources, to rebuild the environment on another clock.
    sources: Vec<(String, String)>,
    path: String,
    /// `bos_token`, `eos_token` and the other special tokens of the tokenizer config.
    special_tokens: Map<String, Value>,
    /// Extra variables, as `chat_template_kwargs` on an engine.
    pub kwargs: Map<String, Value>,
    has_tool_use_variant: bool,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("path", &self.path)
            .finish()
    }
}

const DEFAULT_NAME: &str = "default";
const TOOL_USE_NAME: &str = "tool_use";

impl ChatTemplate {
    /// Loads a Jinja chat template, or the `chat_template` of a `tokenizer_config.json`.
    ///
    /// `now` is the clock `strftime_now` reads; pin it for reproducible output.
    pub fn from_file(path: &Path, now: NaiveDateTime) -> Result<Self, InputError> {
        let display = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| InputError::Io {
            path: display.clone(),
            source,
        })?;
        let is_config = path
            .extension()
            .is_some_and(|extension| extension == "json");
        if is_config {
            Self::from_tokenizer_config(&display, &text, now)
        } else {
            Self::from_source(
                display,
                vec![(DEFAULT_NAME.to_owned(), text)],
                Map::new(),
                now,
            )
        }
    }

    fn from_tokenizer_config(
        path: &str,
        text: &str,
        now: NaiveDateTime,
    ) -> Result<Self, InputError> {
        let config = parse_config(path, text)?;
        let templates = match config.get("chat_template") {
            Some(Value::String(source)) => vec![(DEFAULT_NAME.to_owned(), source.clone())],
            Some(Value::Array(named)) => named
                .iter()
                .filter_map(|entry| {
                    Some((
                        entry.get("name")?.as_str()?.to_owned(),
                        entry.get("template")?.as_str()?.to_owned(),
                    ))
                })
                .collect(),
            _ => Vec::new(),
        };
        if templates.is_empty() {
            return Err(InputError::Template {
                path: path.to_owned(),
                message: "no `chat_template` in this tokenizer config".into(),
                help: Some("expected a Jinja file, or a tokenizer_config.json with a `chat_template` string or list".into()),
            });
        }
        Self::from_source(path.to_owned(), templates, special_tokens(&config), now)
    }

    fn from_source(
        path: String,
        templates: Vec<(String, String)>,
        special_tokens: Map<String, Value>,
        now: NaiveDateTime,
    ) -> Result<Self, InputError> {
        let mut environment = transformers_environment(now);
        let sources = templates.clone();
        let has_tool_use_variant = templates.iter().any(|(name, _)| name == TOOL_USE_NAME);
        let default_name = templates
            .iter()
            .map(|(name, _)| name.clone())
            .find(|name| name == DEFAULT_NAME)
            .or_else(|| templates.first().map(|(name, _)| name.clone()))
            .unwrap_or_default();
        for (name, source) in templates {
            let name = if name == default_name {
                DEFAULT_NAME.to_owned()
            } else {
                name
            };
            environment
                .add_template_owned(name, without_generation_blocks(&source))
                .map_err(|error| template_error(&path, &error))?;
        }
        Ok(Self {
            environment,
            sources,
            path,
            special_tokens,
            kwargs: Map::new(),
            has_tool_use_variant,
        })
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// The same template and context with `strftime_now` reading another clock.
    pub fn with_clock(&self, now: NaiveDateTime) -> Result<Self, InputError> {
        let mut template = Self::from_source(
            self.path.clone(),
            self.sources.clone(),
            self.special_tokens.clone(),
            now,
        )?;
        template.kwargs = self.kwargs.clone();
        Ok(template)
    }

    /// Takes `bos_token`, `eos_token` and the other special tokens from a
    /// `tokenizer_config.json`, as transformers does for a tokenizer's chat template.
    pub fn with_special_tokens_from(mut self, config_path: &Path) -> Result<Self, InputError> {
        let display = config_path.display().to_string();
        let text = std::fs::read_to_string(config_path).map_err(|source| InputError::Io {
            path: display.clone(),
            source,
        })?;
        self.special_tokens = special_tokens(&parse_config(&display, &text)?);
        Ok(self)
    }

    /// Renders a conversation given as chat-format `messages` and `tools`.
    pub fn render<M: Borrow<Value>>(
        &self,
        messages: &[M],
        tools: Option<&[M]>,
        add_generation_prompt: bool,
    ) -> Result<String, InputError> {
        let name = if tools.is_some() && self.has_tool_use_variant {
            TOOL_USE_NAME
        } else {
            DEFAULT_NAME
        };
        let template = self
            .environment
            .get_template(name)
            .map_err(|error| template_error(&self.path, &error))?;
        let context = TemplateContext {
            special_tokens: &self.special_tokens,
            messages: messages
                .iter()
                .map(|message| TransformersMessage(message.borrow()))
                .collect(),
            documents: (),
            tools: tools.map(|tools| tools.iter().map(Borrow::borrow).collect()),
            add_generation_prompt,
            kwargs: &self.kwargs,
        };
        template
            .render(JinjaValue::from(Serde(&context)))
            .map_err(|error| template_error(&self.path, &error))
    }
}

/// What a template sees, serialized straight into template values without copying the
/// conversation first. Later keys win, as in Python's `render(**special_tokens, ..., **kwargs)`.
#[derive(Serialize)]
struct TemplateContext<'a> {
    #[serde(flatten)]
    special_tokens: &'a Map<String, Value>,
    messages: Vec<TransformersMessage<'a>>,
    documents: (),
    tools: Option<Vec<&'a Value>>,
    add_generation_prompt: bool,
    #[serde(flatten)]
    kwargs: &'a Map<String, Value>,
}

/// Names a message's reasoning goes by; templates read the first.
const REASONING_FIELDS: [&str; 3] = ["reasoning_content", "thinking", "reasoning"];

/// A message as transformers hands it to the template: keys whose value is null dropped
/// (`_normalize_chat_messages`), and the reasoning copied to `thinking` (first) and
/// `reasoning_content` (`_alias_reasoning_fields`).
struct TransformersMessage<'a>(&'a Value);

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

fn parse_config(path: &str, text: &str) -> Result<Value, InputError> {
    serde_json::from_str(text).map_err(|error| InputError::Template {
        path: path.to_owned(),
        message: format!(
            "invalid JSON at line {}, column {}: {error}",
            error.line(),
            error.column()
        ),
        help: Some("expected a tokenizer_config.json".into()),
    })
}

/// The special tokens of a tokenizer config, as plain strings (configs also write them as
/// `{"content": ...}` objects).
fn special_tokens(config: &Value) -> Map<String, Value> {
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

/// transformers' `{% generation %}` block marks assistant tokens and renders its body as
/// is; an always-true `if` block keeps the same whitespace handling.
fn without_generation_blocks(source: &str) -> String {
    static TAGS: std::sync::LazyLock<Option<regex::Regex>> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"\{%(-|\+)?\s*(end)?generation\s*(-|\+)?%\}").ok()
    });
    match TAGS.as_ref() {
        Some(tags) => tags
            .replace_all(source, |captures: &regex::Captures<'_>| {
                let open = captures.get(1).map_or("", |m| m.as_str());
                let close = captures.get(3).map_or("", |m| m.as_str());
                let statement = if captures.get(2).is_some() {
                    "endif"
                } else {
                    "if true"
                };
                format!("{{%{open} {statement} {close}%}}")
            })
            .into_owned(),
        None => source.to_owned(),
    }
}

fn template_error(path: &str, error: &JinjaError) -> InputError {
    let place = error
        .line()
        .map(|line| format!(" at line {line}"))
        .unwrap_or_default();
    let detail = error
        .detail()
        .map(|detail| format!(": {detail}"))
        .unwrap_or_default();
    let message = if error.kind() == ErrorKind::InvalidOperation && error.detail().is_some() {
        format!("the template raised an exception{place}{detail}")
    } else {
        format!("{}{place}{detail}", error.kind())
    };
    InputError::Template {
        path: path.to_owned(),
        message,
        help: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> NaiveDateTime {
        chrono::NaiveDate::from_ymd_opt(2026, 11, 29)
            .and_then(|date| date.and_hms_opt(10, 0, 0))
            .unwrap()
    }

    fn template(source: &str) -> ChatTemplate {
        ChatTemplate::from_source(
            "t.jinja".into(),
            vec![("default".into(), source.into())],
            Map::new(),
            now(),
        )
        .unwrap()
    }

    #[test]
    fn tojson_matches_python_json_dumps() {
        let rendered = template("{{ tools | tojson }}|{{ tools[0] | tojson(indent=2) }}")
            .render(
                &[],
                Some(&[json!({"z": "é<>", "a": [1, 2.5], "e": {}})]),
                false,
            )
            .unwrap();
        assert_eq!(
            rendered,
            "[{\"z\": \"é<>\", \"a\": [1, 2.5], \"e\": {}}]|{\n  \"z\": \"é<>\",\n  \"a\": [\n    1,\n    2.5\n  ],\n  \"e\": {}\n}"
        );
    }

    #[test]
    fn blocks_are_trimmed_like_transformers() {
        let source = "{% for m in messages %}\n  {% if m.role == 'user' %}\n<{{ m.content }}>\n  {% endif %}\n{% endfor %}\n";
        let rendered = template(source)
            .render(
                &[
                    json!({"role": "user", "content": "a"}),
                    json!({"role": "x", "content": "b"}),
                ],
                None,
                false,
            )
            .unwrap();
        assert_eq!(rendered, "<a>\n");
    }

    #[test]
    fn strftime_now_reads_the_pinned_clock_and_exceptions_surface() {
        let rendered = template("{{ strftime_now('%d %b %Y') }}")
            .render::<Value>(&[], None, false)
            .unwrap();
        assert_eq!(rendered, "29 Nov 2026");
        let error = template("{{ raise_exception('no system role') }}")
            .render::<Value>(&[], None, false)
            .unwrap_err();
        assert!(error.to_string().contains("no system role"), "{error}");
    }

    #[test]
    fn python_string_methods_work() {
        let rendered = template("{{ 'a,b'.split(',') | join('+') }}{{ ' x '.strip() }}{% if 'ab'.startswith('a') %}y{% endif %}")
            .render::<Value>(&[], None, false)
            .unwrap();
        assert_eq!(rendered, "a+bxy");
    }
}

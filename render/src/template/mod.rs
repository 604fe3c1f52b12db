//! Chat templates rendered the way Hugging Face transformers renders them.
//!
//! transformers compiles a chat template in a Jinja environment with `trim_blocks` and
//! `lstrip_blocks`, the loop-controls extension, a `tojson` filter that keeps key order and
//! does not HTML-escape (`json.dumps(x, ensure_ascii=False)`), `raise_exception` and
//! `strftime_now`. The template sees `messages`, `tools`, `add_generation_prompt`, the
//! special tokens of the tokenizer config and any extra keyword arguments.
//!
//! This module loads a template and renders it; `environment` holds the Jinja environment
//! and the functions transformers adds, `message` the context a template sees,
//! `python_list` the lists a template may change in place (as Jinja2 and llama.cpp allow),
//! `python_json` the `json.dumps` layout its `tojson` filter writes, `source` where a
//! template's lines are in its file, `render_error` the errors as the user reads them and
//! `syntax_tree` what a template does, read from its parsed source (whether it is a chat
//! template at all).

mod environment;
mod limits;
mod message;
mod python_json;
mod python_list;
mod render_error;
mod source;
pub(crate) mod syntax_tree;

use std::borrow::Borrow;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use chrono::NaiveDateTime;
use kvlint_request::error::{InputError, read_text};
use minijinja::value::{Serde, Value as JinjaValue};
use minijinja::{Environment, Error as JinjaError};
use serde_json::{Map, Value};

use crate::diagnostic::Span;
use crate::error::RenderError;
use environment::{ClockProbe, Tripwire, set_clock, transformers_environment};
use message::{CONTEXT_VARIABLES, TemplateContext, TransformersMessage, special_tokens};
use python_list::ListMutations;
use render_error::{SPECIAL_TOKENS, template_error, undefined_variable};
pub(crate) use source::without_generation_blocks;
use source::{Origin, TemplateSource};

pub use environment::Clock;
use limits::OutputCap;
pub use limits::TemplateLimits;
pub use python_json::PythonJson;
pub use syntax_tree::is_chat_template;

/// A loaded chat template with the context transformers gives it.
#[derive(Clone)]
pub struct ChatTemplate {
    environment: Environment<'static>,
    path: String,
    /// The file's text, to place template lines in it.
    file_text: String,
    sources: Vec<TemplateSource>,
    /// `bos_token`, `eos_token` and the other special tokens of the tokenizer config.
    special_tokens: Map<String, Value>,
    /// The special tokens rendered as placeholders, for a template given without its
    /// tokenizer config.
    placeholder_tokens: Vec<String>,
    /// Extra variables, as `chat_template_kwargs` on an engine.
    pub kwargs: Map<String, Value>,
    has_tool_use_variant: bool,
    clock: Clock,
    list_mutations: Arc<ListMutations>,
    limits: TemplateLimits,
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

/// A place the template is asked to reveal by failing there.
#[derive(Clone, Copy, Debug)]
pub enum SiteProbe<'a> {
    /// The `strftime_now` call of this number (0-based, in the order they are made).
    StrftimeCall(usize),
    /// The first use of this variable.
    Variable(&'a str),
    /// Where the text of a message's field (its `content`, its `reasoning_content`) is first
    /// printed.
    MessageField { message: usize, field: &'a str },
    /// Where a tool's name is first printed (or serialized).
    ToolName,
}

/// An expression of the template: its text and its place in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateSite {
    pub expression: String,
    pub span: Option<Span>,
}

/// A placeholder for a special token or variable the template needs and was not given.
pub fn placeholder(name: &str) -> String {
    format!("<kvlint-placeholder:{name}>")
}

impl ChatTemplate {
    /// Loads a Jinja chat template, or the `chat_template` of a `tokenizer_config.json`.
    ///
    /// `now` is the clock `strftime_now` reads; pin it for reproducible output.
    pub fn from_file(path: &Path, now: NaiveDateTime) -> Result<Self, InputError> {
        Self::from_text(path, read_text(path)?, now)
    }

    /// A chat template from the text of a file at `path` (an editor's unsaved buffer): Jinja,
    /// or a `tokenizer_config.json` when the path ends in `.json`.
    pub fn from_text(path: &Path, text: String, now: NaiveDateTime) -> Result<Self, InputError> {
        let display = path.display().to_string();
        let is_config = path
            .extension()
            .is_some_and(|extension| extension == "json");
        let template = if is_config {
            Self::from_tokenizer_config(display, text, now)
        } else {
            let sources = vec![TemplateSource {
                name: DEFAULT_NAME.to_owned(),
                text: text.clone(),
                origin: Origin::File,
            }];
            Self::from_sources(display, text, sources, Map::new(), now)
        };
        // The SDK's API names `InputError` here: rendering's own error, converted.
        Ok(template?)
    }

    fn from_tokenizer_config(
        path: String,
        text: String,
        now: NaiveDateTime,
    ) -> Result<Self, RenderError> {
        let config = parse_config(&path, &text)?;
        let mut sources: Vec<TemplateSource> = match config.get("chat_template") {
            Some(Value::String(source)) => vec![TemplateSource {
                name: DEFAULT_NAME.to_owned(),
                text: source.clone(),
                origin: Origin::ConfigString,
            }],
            Some(Value::Array(named)) => named
                .iter()
                .enumerate()
                .filter_map(|(index, entry)| {
                    Some(TemplateSource {
                        name: entry.get("name")?.as_str()?.to_owned(),
                        text: entry.get("template")?.as_str()?.to_owned(),
                        origin: Origin::ConfigEntry(index),
                    })
                })
                .collect(),
            _ => Vec::new(),
        };
        if sources.is_empty() {
            return Err(RenderError::Template {
                path,
                message: "no `chat_template` in this tokenizer config".into(),
                help: Some("expected a Jinja file, or a tokenizer_config.json with a `chat_template` string or list".into()),
            });
        }
        // The template named `default`, else the first, is the one rendered without tools.
        if !sources.iter().any(|source| source.name == DEFAULT_NAME)
            && let Some(first) = sources.first_mut()
        {
            first.name = DEFAULT_NAME.to_owned();
        }
        let tokens = special_tokens(&config);
        Self::from_sources(path, text, sources, tokens, now)
    }

    fn from_sources(
        path: String,
        file_text: String,
        sources: Vec<TemplateSource>,
        special_tokens: Map<String, Value>,
        now: NaiveDateTime,
    ) -> Result<Self, RenderError> {
        let list_mutations = Arc::new(ListMutations::default());
        let clock = Clock::At(now);
        let mut environment = transformers_environment(clock, Arc::clone(&list_mutations));
        let limits = TemplateLimits::default();
        set_limits(&mut environment, limits);
        for source in &sources {
            environment
                .add_template_owned(source.name.clone(), without_generation_blocks(&source.text))
                .map_err(|error| template_error(&path, &error, &sources))?;
        }
        let has_tool_use_variant = sources.iter().any(|source| source.name == TOOL_USE_NAME);
        Ok(Self {
            environment,
            path,
            file_text,
            sources,
            special_tokens,
            placeholder_tokens: Vec::new(),
            kwargs: Map::new(),
            has_tool_use_variant,
            clock,
            list_mutations,
            limits,
        })
    }

    /// The template without special tokens, extra variables or transformers' functions, as an
    /// engine's probe renders it in a plain Jinja environment (`bos_token`, `strftime_now` and
    /// `raise_exception` undefined).
    pub fn bare(&self) -> Self {
        let mut bare = self.clone();
        bare.special_tokens.clear();
        bare.kwargs.clear();
        bare.environment.remove_global("strftime_now");
        bare.environment.remove_global("raise_exception");
        bare
    }

    /// The template rendered for requests without tools (a Jinja file's text, or a tokenizer
    /// config's `default` or first template).
    pub fn default_source(&self) -> &str {
        self.named_source(DEFAULT_NAME).unwrap_or_default()
    }

    /// A tokenizer config's `tool_use` template, which transformers renders for requests with
    /// tools.
    pub fn tool_use_source(&self) -> Option<&str> {
        self.named_source(TOOL_USE_NAME)
    }

    fn named_source(&self, name: &str) -> Option<&str> {
        self.sources
            .iter()
            .find(|source| source.name == name)
            .map(|source| source.text.as_str())
    }

    /// Whether some source of the template contains `text` (transformers' check that a field
    /// to continue is one the template reads).
    pub fn mentions(&self, text: &str) -> bool {
        self.sources.iter().any(|source| source.text.contains(text))
    }

    /// Renders the default template for every request, with tools too, as an engine that
    /// does not choose a tokenizer config's `tool_use` template does.
    pub fn render_default_only(&mut self) {
        self.has_tool_use_variant = false;
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// The same template, rendered under other limits.
    pub fn with_limits(mut self, limits: TemplateLimits) -> Self {
        set_limits(&mut self.environment, limits);
        self.limits = limits;
        self
    }

    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// The same template and context with `strftime_now` reading another clock.
    pub fn with_clock(&self, clock: Clock) -> Self {
        let mut template = self.clone();
        set_clock(&mut template.environment, clock);
        template.clock = clock;
        template
    }

    /// Takes `bos_token`, `eos_token` and the other special tokens from a
    /// `tokenizer_config.json`, as transformers does for a tokenizer's chat template.
    pub fn with_special_tokens_from(mut self, config_path: &Path) -> Result<Self, InputError> {
        let display = config_path.display().to_string();
        let text = read_text(config_path)?;
        self.special_tokens = special_tokens(&parse_config(&display, &text)?);
        self.placeholder_tokens.clear();
        Ok(self)
    }

    /// Gives the special tokens the template reads and has no value for (`bos_token`,
    /// `eos_token`) a placeholder value that names them: `<kvlint-placeholder:bos_token>`.
    /// For a Jinja file checked without its tokenizer config.
    pub fn with_placeholder_special_tokens(mut self) -> Self {
        let read = self.undeclared_variables();
        for token in SPECIAL_TOKENS {
            if read.contains(token) && !self.special_tokens.contains_key(token) {
                self.special_tokens
                    .insert(token.to_owned(), Value::String(placeholder(token)));
                self.placeholder_tokens.push(token.to_owned());
            }
        }
        self
    }

    /// The special tokens rendered as placeholders.
    pub fn placeholder_tokens(&self) -> &[String] {
        &self.placeholder_tokens
    }

    /// Whether any render so far changed a list in place (`ns.ids.append(x)`), which
    /// transformers' sandboxed Jinja refuses (so vLLM and SGLang fail where llama.cpp renders).
    pub fn mutated_lists(&self) -> bool {
        self.list_mutations.happened()
    }

    /// The variables the template reads and neither sets nor gets from transformers:
    /// special tokens and extra keyword arguments (`date_string`, `enable_thinking`).
    pub fn undeclared_variables(&self) -> BTreeSet<String> {
        let globals: BTreeSet<&str> = self.environment.globals().map(|(name, _)| name).collect();
        self.sources
            .iter()
            .filter_map(|source| self.environment.get_template(&source.name).ok())
            .flat_map(|template| template.undeclared_variables(false))
            .filter(|name| {
                !globals.contains(name.as_str()) && !CONTEXT_VARIABLES.contains(&name.as_str())
            })
            .collect()
    }

    /// Renders a conversation given as chat-format `messages` and `tools`.
    pub fn render<M: Borrow<Value>>(
        &self,
        messages: &[M],
        tools: Option<&[M]>,
        add_generation_prompt: bool,
    ) -> Result<String, InputError> {
        Ok(self.apply(messages, tools, add_generation_prompt)?)
    }

    /// [`ChatTemplate::render`] with rendering's own error, for the renderer and the checks
    /// (as transformers' `apply_chat_template`).
    pub(crate) fn apply<M: Borrow<Value>>(
        &self,
        messages: &[M],
        tools: Option<&[M]>,
        add_generation_prompt: bool,
    ) -> Result<String, RenderError> {
        self.render_jinja(messages, tools, add_generation_prompt)
            .map_err(|error| template_error(&self.path, &error, &self.sources))
    }

    /// The variable, not passed by transformers, that the conversation fails for being
    /// undefined (`functions` in a template written for a server that passes it).
    pub fn missing_variable<M: Borrow<Value>>(
        &self,
        messages: &[M],
        tools: Option<&[M]>,
        add_generation_prompt: bool,
    ) -> Option<String> {
        let error = self
            .render_jinja(messages, tools, add_generation_prompt)
            .err()?;
        let name = undefined_variable(&error)?;
        let passed = self.kwargs.contains_key(&name) || self.special_tokens.contains_key(&name);
        (!passed && self.undeclared_variables().contains(&name)).then_some(name)
    }

    /// Where in the template a `strftime_now` call or a variable's first use is, found by
    /// making it fail there; `None` when rendering the conversation never reaches it.
    pub fn site<M: Borrow<Value>>(
        &self,
        messages: &[M],
        tools: Option<&[M]>,
        probe: SiteProbe<'_>,
    ) -> Option<TemplateSite> {
        let error = match probe {
            SiteProbe::StrftimeCall(call) => self
                .with_clock(Clock::FailingCall(call))
                .render_with(messages, tools, true, None),
            SiteProbe::Variable(name) => {
                let mut probing = self.clone();
                probing.kwargs.remove(name);
                probing.special_tokens.remove(name);
                let tripwire = (name, JinjaValue::from_object(Tripwire));
                probing.render_with(messages, tools, true, Some(tripwire))
            }
            SiteProbe::MessageField { message, field } => {
                let mut probed: Vec<Value> = messages.iter().map(|m| m.borrow().clone()).collect();
                let text = probed.get_mut(message)?.get_mut(field)?;
                if !text.is_string() {
                    return None;
                }
                *text = Value::String(environment::PROBED_TEXT.to_owned());
                let tools: Option<Vec<&Value>> =
                    tools.map(|tools| tools.iter().map(Borrow::borrow).collect());
                let probed: Vec<&Value> = probed.iter().collect();
                let _probing = environment::Probing::start();
                self.render_with(&probed, tools.as_deref(), true, None)
            }
            SiteProbe::ToolName => {
                let mut probed: Vec<Value> =
                    tools?.iter().map(|tool| tool.borrow().clone()).collect();
                for tool in &mut probed {
                    let function = match tool.get_mut("function") {
                        Some(function) => function,
                        None => tool,
                    };
                    if let Some(name) = function.get_mut("name") {
                        *name = Value::String(environment::PROBED_TEXT.to_owned());
                    }
                }
                let messages: Vec<&Value> = messages.iter().map(Borrow::borrow).collect();
                let probed: Vec<&Value> = probed.iter().collect();
                let _probing = environment::Probing::start();
                self.render_with(&messages, Some(&probed), true, None)
            }
        }
        .err()?;
        if let SiteProbe::StrftimeCall(call) = probe {
            let probed = std::error::Error::source(&error)
                .and_then(|source| source.downcast_ref::<ClockProbe>())
                .is_some_and(|ClockProbe(failed)| *failed == call);
            if !probed {
                return None;
            }
        }
        let range = error.range()?;
        let source = self
            .sources
            .iter()
            .find(|source| error.name() == Some(source.name.as_str()))?;
        Some(TemplateSite {
            expression: source.text.get(range.clone())?.to_owned(),
            span: source.file_span(&self.file_text, &range),
        })
    }

    /// Where the template last names `name` (`add_generation_prompt`) in the template it
    /// renders without tools: the place a test of it is made.
    pub fn last_mention(&self, name: &str) -> Option<TemplateSite> {
        let source = self
            .sources
            .iter()
            .find(|source| source.name == DEFAULT_NAME)?;
        let start = source.text.rfind(name)?;
        let range = start..start + name.len();
        Some(TemplateSite {
            expression: name.to_owned(),
            span: source.file_span(&self.file_text, &range),
        })
    }

    fn render_jinja<M: Borrow<Value>>(
        &self,
        messages: &[M],
        tools: Option<&[M]>,
        add_generation_prompt: bool,
    ) -> Result<String, JinjaError> {
        self.render_with(messages, tools, add_generation_prompt, None)
    }

    fn render_with<M: Borrow<Value>>(
        &self,
        messages: &[M],
        tools: Option<&[M]>,
        add_generation_prompt: bool,
        extra: Option<(&str, JinjaValue)>,
    ) -> Result<String, JinjaError> {
        let name = if tools.is_some() && self.has_tool_use_variant {
            TOOL_USE_NAME
        } else {
            DEFAULT_NAME
        };
        let template = self.environment.get_template(name)?;
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
        let input_bytes = messages
            .iter()
            .map(Borrow::borrow)
            .chain(tools.into_iter().flatten().map(Borrow::borrow))
            .map(json_bytes)
            .fold(0, usize::saturating_add);
        let _cap = OutputCap::set(self.limits, input_bytes);
        let context = JinjaValue::from(Serde(&context));
        match extra {
            // The last map wins.
            Some((key, value)) => {
                let overlay = JinjaValue::from(std::collections::BTreeMap::from([(
                    JinjaValue::from(key),
                    value,
                )]));
                template.render(minijinja::value::merge_maps([context, overlay]))
            }
            None => template.render(context),
        }
    }
}

fn set_limits(environment: &mut Environment<'static>, limits: TemplateLimits) {
    environment.set_fuel(Some(limits.fuel));
    environment.set_recursion_limit(limits.recursion);
}

/// About the bytes a JSON value takes written out: the size of a conversation, which the
/// output a template may print is measured against.
fn json_bytes(value: &Value) -> usize {
    match value {
        Value::String(text) => text.len() + 2,
        Value::Array(items) => items.iter().map(|item| json_bytes(item) + 1).sum::<usize>() + 2,
        Value::Object(entries) => {
            entries
                .iter()
                .map(|(key, item)| key.len() + 4 + json_bytes(item))
                .sum::<usize>()
                + 2
        }
        other => other.to_string().len(),
    }
}

fn parse_config(path: &str, text: &str) -> Result<Value, RenderError> {
    serde_json::from_str(text).map_err(|error| RenderError::Template {
        path: path.to_owned(),
        message: format!(
            "invalid JSON at line {}, column {}: {error}",
            error.line(),
            error.column()
        ),
        help: Some("expected a tokenizer_config.json".into()),
    })
}

#[cfg(test)]
mod tests;

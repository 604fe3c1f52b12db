//! Checking a model's chat template for prefix breaks, before any traffic exists.
//!
//! A built-in agent conversation (system prompt, tools, a user task, assistant turns with
//! reasoning and parallel tool calls, tool results, more user turns) is rendered turn by turn,
//! the way an engine renders each request, and again on another date and without a system
//! message. Wherever turn N's prompt is not a prefix of turn N+1's, the check says where and
//! why: the date or time in the prompt, reasoning dropped from earlier turns, a generation
//! prompt history does not reproduce, the system prompt moved, or anything else.
//!
//! A template that refuses part of the conversation (parallel calls, a system message) is
//! checked on the conversation without that part ([`conversation`]), and the check says so
//! in its [`TemplateNote`]s, as it does for placeholders given to what the template needs
//! and was not given.

mod clock;
mod conversation;
mod turns;

use std::fmt;

use chrono::NaiveDateTime;
use serde_json::Value;

use crate::error::RenderError;
use crate::template::{ChatTemplate, Clock, TemplateSite, placeholder};
use clock::{clock_break, date_variable_breaks};
use turns::{tools_in_system_block, turn_breaks};

pub use conversation::{Feature, Variant, turn_lengths};

/// Why a template's turn N is not a prefix of turn N+1 (or of itself on another day).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TemplateBreakKind {
    /// The prompt contains the current date (`strftime_now`): it changes at midnight.
    DateInjected,
    /// The prompt contains the time of day (`strftime_now` with hours, minutes or seconds):
    /// it changes on every request.
    TimeInjected,
    /// A date variable (`date_string`) sits in the prompt; its default is fixed, but a server
    /// that passes today's date changes the prompt daily.
    DateVariable,
    /// Earlier assistant turns lose their reasoning once a later turn exists.
    ReasoningDropped,
    /// The generation prompt (e.g. an opened `<think>`) is not rendered the same way once
    /// the answer is part of the history.
    GenerationPromptNotReproduced,
    /// The system prompt moves (e.g. into the newest user message) as turns are added.
    SystemPromptMoved,
    /// Any other change of earlier turns' text.
    HistoryChanged,
    /// Tools render inside the system block: any tool change shifts everything after.
    ToolsInSystemBlock,
}

/// When a break happens only for some requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BreakCondition {
    /// Only requests without a system message: the template's default system prompt holds it.
    NoSystemMessage,
}

impl fmt::Display for BreakCondition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoSystemMessage => f.write_str("when no system message is sent"),
        }
    }
}

/// One finding of the template check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateBreak {
    pub kind: TemplateBreakKind,
    /// The later turn (0-based) whose prompt does not extend the earlier one.
    pub turn: usize,
    /// Byte offset in the earlier prompt where the two first differ.
    pub offset: usize,
    /// The earlier and later text around the divergence.
    pub before: String,
    pub after: String,
    /// When the break happens only for some requests.
    pub condition: Option<BreakCondition>,
    /// The template expression responsible (the `strftime_now` call, the date variable),
    /// where the check can tell.
    pub site: Option<TemplateSite>,
    /// For a date variable, its name; for the clock, a variable that keeps it out of the
    /// prompt when passed a fixed value (`date_string`).
    pub variable: Option<String>,
}

impl TemplateBreak {
    pub fn new(
        kind: TemplateBreakKind,
        turn: usize,
        offset: usize,
        before: String,
        after: String,
    ) -> Self {
        Self {
            kind,
            turn,
            offset,
            before,
            after,
            condition: None,
            site: None,
            variable: None,
        }
    }
}

/// How the check rendered the template, where it is not what an engine would do with the
/// model's own files and an agent's requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TemplateNote {
    /// Special tokens rendered as placeholders (no tokenizer config was given).
    PlaceholderTokens(Vec<String>),
    /// Variables the template needs and transformers does not pass, rendered as placeholders.
    PlaceholderVariables(Vec<String>),
    /// The template refuses parts of the conversation; it was checked without them.
    Refused {
        dropped: Vec<Feature>,
        error: String,
    },
    /// The template changes a list in place, which transformers' sandbox refuses.
    MutatesLists,
}

impl fmt::Display for TemplateNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = |names: &[String]| {
            names
                .iter()
                .map(|name| format!("`{name}` as `{}`", placeholder(name)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            Self::PlaceholderTokens(tokens) => write!(
                f,
                "rendered with placeholder special tokens ({}); pass the model's tokenizer_config.json for its own",
                names(tokens)
            ),
            Self::PlaceholderVariables(variables) => write!(
                f,
                "the template needs variables transformers does not pass, rendered as placeholders: {}",
                names(variables)
            ),
            Self::Refused { dropped, error } => {
                let dropped: Vec<&str> = dropped.iter().map(|feature| feature.describe()).collect();
                write!(
                    f,
                    "the template refuses the full agent conversation ({error}); checked without {}",
                    dropped.join(", ")
                )
            }
            Self::MutatesLists => f.write_str(
                "the template changes a list in place (`.append`): Jinja2 and llama.cpp render it, transformers' sandbox (vLLM, SGLang) raises",
            ),
        }
    }
}

/// What the check found, and how it rendered the template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateCheck {
    pub breaks: Vec<TemplateBreak>,
    pub notes: Vec<TemplateNote>,
    /// The conversation the template was checked on.
    pub variant: Variant,
}

/// The full built-in agent conversation, as chat messages and tools.
pub fn agent_conversation() -> (Vec<Value>, Vec<Value>) {
    Variant::default().conversation()
}

/// More variables than a template written for one server needs.
const MAX_MISSING_VARIABLES: usize = 8;

/// Renders the conversation turn by turn and reports each break, on the conversation with
/// the fewest features the template refuses left out.
pub fn check_template(
    template: &ChatTemplate,
    now: NaiveDateTime,
) -> Result<TemplateCheck, RenderError> {
    let mut template = template.with_clock(Clock::At(now));
    let mut filled = Filled::default();
    let mut refusal: Option<RenderError> = None;
    for variant in Variant::in_order_of_preference() {
        let (messages, tools) = variant.conversation();
        fill_missing_variables(&mut template, &messages, &tools, &mut filled);
        let checked = template
            .apply(&messages, Some(&tools), true)
            .and_then(|_| check_variant(&template, now, &variant));
        match checked {
            Ok(breaks) => {
                let mut notes = Vec::new();
                let mut tokens = template.placeholder_tokens().to_vec();
                tokens.extend(filled.tokens);
                if !tokens.is_empty() {
                    notes.push(TemplateNote::PlaceholderTokens(tokens));
                }
                if !filled.variables.is_empty() {
                    notes.push(TemplateNote::PlaceholderVariables(filled.variables));
                }
                if let Some(error) = refusal.filter(|_| !variant.dropped.is_empty()) {
                    notes.push(TemplateNote::Refused {
                        dropped: variant.dropped.clone(),
                        error: refusal_reason(&error),
                    });
                }
                if template.mutated_lists() {
                    notes.push(TemplateNote::MutatesLists);
                }
                return Ok(TemplateCheck {
                    breaks,
                    notes,
                    variant,
                });
            }
            // Past a bound the template is at fault, not the conversation: no variant helps.
            Err(error @ RenderError::TemplateLimit { .. }) => return Err(error),
            Err(error) => {
                refusal.get_or_insert(error);
            }
        }
    }
    Err(refusal.unwrap_or_else(|| RenderError::Template {
        path: template.path().to_owned(),
        message: "the template renders no variant of the agent conversation".into(),
        help: None,
    }))
}

/// The message of a template error without the file name in front.
fn refusal_reason(error: &RenderError) -> String {
    match error {
        RenderError::Template { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// What the check gave a placeholder because the conversation failed without it.
#[derive(Default)]
struct Filled {
    /// Special tokens the tokenizer config lacks (`bos_token`).
    tokens: Vec<String>,
    /// Variables a server would pass (`functions`, `datetime`).
    variables: Vec<String>,
}

/// Gives every variable the conversation fails on for being undefined a placeholder.
fn fill_missing_variables(
    template: &mut ChatTemplate,
    messages: &[Value],
    tools: &[Value],
    filled: &mut Filled,
) {
    for _ in 0..MAX_MISSING_VARIABLES {
        let Some(name) = template.missing_variable(messages, Some(tools), true) else {
            return;
        };
        template
            .kwargs
            .insert(name.clone(), Value::String(placeholder(&name)));
        if name.ends_with("_token") {
            filled.tokens.push(name);
        } else {
            filled.variables.push(name);
        }
    }
}

/// Every break of one conversation variant.
fn check_variant(
    template: &ChatTemplate,
    now: NaiveDateTime,
    variant: &Variant,
) -> Result<Vec<TemplateBreak>, RenderError> {
    let (messages, tools) = variant.conversation();
    let lengths = turn_lengths(&messages);
    let prompts = lengths
        .iter()
        .map(|length| template.apply(&messages[..*length], Some(&tools), true))
        .collect::<Result<Vec<String>, RenderError>>()?;
    let Some((first_length, first_prompt)) = lengths.first().zip(prompts.first()) else {
        return Ok(Vec::new());
    };
    let first_turn = &messages[..*first_length];
    let mut breaks = Vec::new();

    // The same request on another day, with the system message and, if the template gives
    // a default one, without.
    let clock = clock_break(template, now, first_turn, &tools, None)?;
    let clock_kind = clock.as_ref().map(|found| found.kind.clone());
    breaks.extend(clock);
    if variant.has(Feature::SystemMessage) {
        let (plain, _) = variant.without(Feature::SystemMessage).conversation();
        let plain_first = turn_lengths(&plain)
            .first()
            .map_or(&plain[..0], |length| &plain[..*length]);
        let condition = Some(BreakCondition::NoSystemMessage);
        // A template that requires a system message has no default one to check.
        if let Ok(Some(found)) = clock_break(template, now, plain_first, &tools, condition)
            && clock_kind != Some(TemplateBreakKind::TimeInjected)
            && clock_kind.as_ref() != Some(&found.kind)
        {
            breaks.push(found);
        }
    }
    breaks.extend(date_variable_breaks(
        template,
        first_turn,
        &tools,
        first_prompt,
    ));
    breaks.extend(turn_breaks(
        template, &messages, &tools, &lengths, &prompts,
    )?);
    breaks.extend(tools_in_system_block(
        template,
        &messages,
        &tools,
        first_prompt,
    )?);
    Ok(breaks)
}

fn role_of(message: &Value) -> Option<&str> {
    message.get("role").and_then(Value::as_str)
}

fn divergence(
    earlier: &str,
    later: &str,
    kind: TemplateBreakKind,
    turn: usize,
) -> Option<TemplateBreak> {
    if earlier == later {
        return None;
    }
    let offset = common_prefix(earlier, later);
    Some(TemplateBreak::new(
        kind,
        turn,
        offset,
        window(earlier, offset),
        window(later, offset),
    ))
}

fn common_prefix(a: &str, b: &str) -> usize {
    let bytes = crate::prefix::common_prefix_len(a.bytes(), b.bytes());
    crate::locate::floor_char_boundary(a, bytes)
}

/// The text around an offset: a little before, more after.
fn window(text: &str, offset: usize) -> String {
    let start = crate::locate::floor_char_boundary(text, offset.saturating_sub(24));
    let end = crate::locate::floor_char_boundary(text, (offset + 48).min(text.len()));
    text[start..end].to_owned()
}

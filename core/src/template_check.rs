//! Checking a model's chat template for prefix breaks, before any traffic exists.
//!
//! A built-in agent conversation (system prompt, tools, a user task, assistant turns with
//! reasoning and tool calls, tool results, more user turns) is rendered turn by turn, the way
//! an engine renders each request, and again on another date. Wherever turn N's prompt is not
//! a prefix of turn N+1's, the check says where and why: the date in the prompt, reasoning
//! dropped from earlier turns, a generation prompt history does not reproduce, the system
//! prompt moved, or anything else.

use chrono::{Duration, NaiveDateTime};
use serde_json::{Value, json};

use crate::error::InputError;
use crate::template::ChatTemplate;

/// Why a template's turn N is not a prefix of turn N+1 (or of itself on another day).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TemplateBreakKind {
    /// The prompt contains the current date (`strftime_now`): it changes at midnight.
    DateInjected,
    /// A `date_string` variable sits in the prompt; its default is fixed, but a server that
    /// passes today's date changes the prompt daily.
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
}

/// The synthetic agent conversation, as chat messages and tools.
pub fn agent_conversation() -> (Vec<Value>, Vec<Value>) {
    let tools = vec![
        json!({"type": "function", "function": {"name": "read_file", "description": "Read a file from the repository.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string", "description": "Path to read"}}, "required": ["path"]}}}),
        json!({"type": "function", "function": {"name": "run_tests", "description": "Run the test suite.",
            "parameters": {"type": "object", "properties": {"filter": {"type": "string"}}}}}),
    ];
    let call = |id: &str, name: &str, arguments: Value| json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}});
    let messages = vec![
        json!({"role": "system", "content": "You are a careful coding agent working in the acme-api repository."}),
        json!({"role": "user", "content": "The test test_rounding fails. Find out why."}),
        json!({"role": "assistant", "content": "", "reasoning_content": "I should look at the pricing module first.",
            "tool_calls": [call("a1b2c3d4e", "read_file", json!({"path": "src/pricing.py"}))]}),
        json!({"role": "tool", "tool_call_id": "a1b2c3d4e", "content": "def price(x):\n    return round(x, 2)"}),
        json!({"role": "assistant", "content": "The function rounds half to even; the test expects half up.",
            "reasoning_content": "Python's round uses banker's rounding."}),
        json!({"role": "user", "content": "Fix it and run the tests."}),
        json!({"role": "assistant", "content": "", "reasoning_content": "Quantize with ROUND_HALF_UP, then run the tests.",
            "tool_calls": [call("f5g6h7i8j", "run_tests", json!({"filter": "rounding"}))]}),
        json!({"role": "tool", "tool_call_id": "f5g6h7i8j", "content": "1 passed"}),
        json!({"role": "assistant", "content": "Fixed: prices now round half up, and the test passes.",
            "reasoning_content": "Done; report back."}),
        json!({"role": "user", "content": "Thanks. Anything else to watch out for?"}),
    ];
    (messages, tools)
}

/// The number of messages each turn's request holds: every turn ends with a user or tool
/// message, as requests to an engine do.
fn turn_lengths(messages: &[Value]) -> Vec<usize> {
    (1..=messages.len())
        .filter(|&length| {
            matches!(
                messages[length - 1].get("role").and_then(Value::as_str),
                Some("user" | "tool")
            )
        })
        .collect()
}

/// Renders the conversation turn by turn and reports each break. A template that refuses a
/// system message (Gemma 2) is checked on the conversation without one.
pub fn check_template(
    template: &ChatTemplate,
    now: NaiveDateTime,
) -> Result<Vec<TemplateBreak>, InputError> {
    let (messages, tools) = agent_conversation();
    match check_conversation(template, now, &messages, &tools) {
        // It fails with the system message but renders the conversation without it.
        Err(_) if template.render(&messages[1..2], Some(&tools), true).is_ok() => {
            check_conversation(template, now, &messages[1..], &tools)
        }
        result => result,
    }
}

fn check_conversation(
    template: &ChatTemplate,
    now: NaiveDateTime,
    messages: &[Value],
    tools: &[Value],
) -> Result<Vec<TemplateBreak>, InputError> {
    let lengths = turn_lengths(messages);
    let render = |length: usize, template: &ChatTemplate| {
        template.render(&messages[..length], Some(tools), true)
    };
    let prompts = lengths
        .iter()
        .map(|length| render(*length, template))
        .collect::<Result<Vec<String>, InputError>>()?;
    let mut breaks = Vec::new();

    // The same request on another day.
    if let Some(first) = lengths.first() {
        let tomorrow = template.with_clock(now + Duration::days(1) + Duration::hours(1))?;
        let later = render(*first, &tomorrow)?;
        if let Some(found) = divergence(&prompts[0], &later, TemplateBreakKind::DateInjected, 0) {
            breaks.push(found);
        }
        let mut dated = template.with_clock(now)?;
        dated
            .kwargs
            .insert("date_string".into(), Value::String("01 Jan 2031".into()));
        let with_date_string = render(*first, &dated)?;
        if with_date_string.contains("01 Jan 2031")
            && let Some(found) = divergence(
                &prompts[0],
                &with_date_string,
                TemplateBreakKind::DateVariable,
                0,
            )
        {
            breaks.push(found);
        }
    }

    for (turn, pair) in prompts.windows(2).enumerate() {
        let (earlier, later) = (&pair[0], &pair[1]);
        if later.starts_with(earlier.as_str()) {
            continue;
        }
        let without_generation = template.render(&messages[..lengths[turn]], Some(tools), false)?;
        let kind = classify(
            earlier,
            later,
            &without_generation,
            &messages[..lengths[turn]],
        );
        if let Some(found) = divergence(earlier, later, kind, turn + 1) {
            breaks.push(found);
        }
    }

    // Tools inside the system block: the prompt with and without tools first differs before
    // the first user message's text.
    let first_user = messages
        .iter()
        .position(|message| message.get("role").and_then(Value::as_str) == Some("user"))
        .unwrap_or(0);
    let no_tools = template.render::<Value>(&messages[..=first_user], None, true)?;
    let with_tools = &prompts[0];
    let user_text = messages[first_user]
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let first_difference = common_prefix(&no_tools, with_tools);
    let user_at = with_tools.find(user_text).unwrap_or(with_tools.len());
    let system_text = messages
        .first()
        .filter(|message| message.get("role").and_then(Value::as_str) == Some("system"))
        .and_then(|message| message.get("content"))
        .and_then(Value::as_str);
    let system_at = system_text.and_then(|text| with_tools.find(text));
    if first_difference < user_at && system_at.is_some_and(|at| at < user_at) {
        breaks.push(TemplateBreak {
            kind: TemplateBreakKind::ToolsInSystemBlock,
            turn: 0,
            offset: first_difference,
            before: window(&no_tools, first_difference),
            after: window(with_tools, first_difference),
        });
    }
    Ok(breaks)
}

fn classify(
    earlier: &str,
    later: &str,
    without_generation: &str,
    history: &[Value],
) -> TemplateBreakKind {
    let offset = common_prefix(earlier, later);
    // Both turns agree on the prompt proper; the break is in the generation prompt.
    if earlier.starts_with(without_generation)
        && later.starts_with(without_generation)
        && offset >= without_generation.len()
    {
        return TemplateBreakKind::GenerationPromptNotReproduced;
    }
    let reasoning_lost = history.iter().any(|message| {
        message
            .get("reasoning_content")
            .and_then(Value::as_str)
            .is_some_and(|reasoning| earlier.contains(reasoning) && !later.contains(reasoning))
    });
    if reasoning_lost {
        return TemplateBreakKind::ReasoningDropped;
    }
    let system = history
        .first()
        .filter(|message| message.get("role").and_then(Value::as_str) == Some("system"))
        .and_then(|message| message.get("content"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !system.is_empty() && earlier.find(system) != later.find(system) {
        return TemplateBreakKind::SystemPromptMoved;
    }
    TemplateBreakKind::HistoryChanged
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
    Some(TemplateBreak {
        kind,
        turn,
        offset,
        before: window(earlier, offset),
        after: window(later, offset),
    })
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

//! Breaks between consecutive turns: each request rendered as an engine renders it, and
//! turn N's prompt compared with turn N+1's; and tools rendered inside the system block.

use serde_json::Value;

use super::{TemplateBreak, TemplateBreakKind, common_prefix, divergence, role_of, window};
use crate::error::InputError;
use crate::template::{ChatTemplate, SiteProbe};

/// The prompts of each turn (with the generation prompt, as engines render requests) and
/// the breaks between consecutive ones.
pub(super) fn turn_breaks(
    template: &ChatTemplate,
    messages: &[Value],
    tools: &[Value],
    lengths: &[usize],
    prompts: &[String],
) -> Result<Vec<TemplateBreak>, InputError> {
    let mut breaks = Vec::new();
    for (turn, pair) in prompts.windows(2).enumerate() {
        let (earlier, later) = (&pair[0], &pair[1]);
        if later.starts_with(earlier.as_str()) {
            continue;
        }
        let history = &messages[..lengths[turn]];
        let without_generation = template.render(history, Some(tools), false)?;
        let kind = classify(earlier, later, &without_generation, history);
        if let Some(found) = divergence(earlier, later, kind, turn + 1) {
            breaks.push(found);
        }
    }
    Ok(breaks)
}

/// Tools inside the system block: the prompt with and without tools first differs before
/// the first user message's text, and the system prompt comes before that text too.
pub(super) fn tools_in_system_block(
    template: &ChatTemplate,
    messages: &[Value],
    tools: &[Value],
    with_tools: &str,
) -> Result<Option<TemplateBreak>, InputError> {
    let Some(first_user) = messages
        .iter()
        .position(|message| role_of(message) == Some("user"))
    else {
        return Ok(None);
    };
    let no_tools = template.render::<Value>(&messages[..=first_user], None, true)?;
    let user_text = messages[first_user]
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let first_difference = common_prefix(&no_tools, with_tools);
    let user_at = with_tools.find(user_text).unwrap_or(with_tools.len());
    let system_at = system_text(messages).and_then(|text| with_tools.find(text));
    if first_difference >= user_at || system_at.is_none_or(|at| at >= user_at) {
        return Ok(None);
    }
    let mut found = TemplateBreak::new(
        TemplateBreakKind::ToolsInSystemBlock,
        0,
        first_difference,
        window(&no_tools, first_difference),
        window(with_tools, first_difference),
    );
    found.site = template.site(
        &messages[..=first_user],
        Some(tools),
        SiteProbe::Variable("tools"),
    );
    Ok(Some(found))
}

fn system_text(messages: &[Value]) -> Option<&str> {
    messages
        .first()
        .filter(|message| role_of(message) == Some("system"))
        .and_then(|message| message.get("content"))
        .and_then(Value::as_str)
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
    let system = system_text(history).unwrap_or_default();
    if !system.is_empty() && earlier.find(system) != later.find(system) {
        return TemplateBreakKind::SystemPromptMoved;
    }
    TemplateBreakKind::HistoryChanged
}

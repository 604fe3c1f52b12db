//! Breaks between consecutive turns: each request rendered as an engine renders it, and
//! turn N's prompt compared with turn N+1's; and tools rendered inside the system block.

use serde_json::Value;

use super::{TemplateBreak, TemplateBreakKind, common_prefix, divergence, role_of, window};
use crate::error::RenderError;
use crate::template::{ChatTemplate, SiteProbe};

/// The prompts of each turn (with the generation prompt, as engines render requests) and
/// the breaks between consecutive ones.
pub(super) fn turn_breaks(
    template: &ChatTemplate,
    messages: &[Value],
    tools: &[Value],
    lengths: &[usize],
    prompts: &[String],
) -> Result<Vec<TemplateBreak>, RenderError> {
    let mut breaks = Vec::new();
    for (turn, pair) in prompts.windows(2).enumerate() {
        let (earlier, later) = (&pair[0], &pair[1]);
        if later.starts_with(earlier.as_str()) {
            continue;
        }
        let history = &messages[..lengths[turn]];
        let later_history = &messages[..lengths[turn + 1]];
        let without_generation = template.apply(history, Some(tools), false)?;
        let (kind, probe) = classify(earlier, later, &without_generation, history);
        if let Some(mut found) = divergence(earlier, later, kind, turn + 1) {
            found.site = match probe {
                // The reasoning is printed in the earlier prompt only.
                Some(Probe::Reasoning(message)) => template.site(
                    history,
                    Some(tools),
                    SiteProbe::MessageField {
                        message,
                        field: "reasoning_content",
                    },
                ),
                // Printed in one of the two prompts at least.
                Some(Probe::Content(message)) => {
                    [history, later_history].into_iter().find_map(|messages| {
                        let field = "content";
                        let probe = SiteProbe::MessageField { message, field };
                        template.site(messages, Some(tools), probe)
                    })
                }
                Some(Probe::GenerationPrompt) => template.last_mention("add_generation_prompt"),
                None => None,
            };
            breaks.push(found);
        }
    }
    Ok(breaks)
}

/// Where a break's site is looked for: where the template prints an earlier message's
/// reasoning (in the earlier prompt) or a message's content, or its test of
/// `add_generation_prompt`.
enum Probe {
    Reasoning(usize),
    Content(usize),
    GenerationPrompt,
}

/// Tools inside the system block: the prompt with and without tools first differs before
/// the first user message's text, and the system prompt comes before that text too.
pub(super) fn tools_in_system_block(
    template: &ChatTemplate,
    messages: &[Value],
    tools: &[Value],
    with_tools: &str,
) -> Result<Option<TemplateBreak>, RenderError> {
    let Some(first_user) = messages
        .iter()
        .position(|message| role_of(message) == Some("user"))
    else {
        return Ok(None);
    };
    let no_tools = template.apply::<Value>(&messages[..=first_user], None, true)?;
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
    // The first use of `tools`, else (a template that tests it before iterating it) where a
    // tool's name is printed.
    found.site = [SiteProbe::Variable("tools"), SiteProbe::ToolName]
        .into_iter()
        .find_map(|probe| template.site(&messages[..=first_user], Some(tools), probe));
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
) -> (TemplateBreakKind, Option<Probe>) {
    let offset = common_prefix(earlier, later);
    // Both turns agree on the prompt proper; the break is in the generation prompt.
    if earlier.starts_with(without_generation)
        && later.starts_with(without_generation)
        && offset >= without_generation.len()
    {
        return (
            TemplateBreakKind::GenerationPromptNotReproduced,
            Some(Probe::GenerationPrompt),
        );
    }
    let reasoning_lost = history.iter().position(|message| {
        message
            .get("reasoning_content")
            .and_then(Value::as_str)
            .is_some_and(|reasoning| earlier.contains(reasoning) && !later.contains(reasoning))
    });
    if let Some(message) = reasoning_lost {
        return (
            TemplateBreakKind::ReasoningDropped,
            Some(Probe::Reasoning(message)),
        );
    }
    let system = system_text(history).unwrap_or_default();
    if !system.is_empty() && earlier.find(system) != later.find(system) {
        return (
            TemplateBreakKind::SystemPromptMoved,
            Some(Probe::Content(0)),
        );
    }
    // The message printed last before the divergence, in the earlier prompt.
    let changed = history
        .iter()
        .enumerate()
        .filter_map(|(index, message)| {
            let content = message.get("content").and_then(Value::as_str)?;
            let at = earlier
                .find(content)
                .filter(|at| *at <= offset && !content.is_empty())?;
            Some((at, index))
        })
        .max()
        .map(|(_, index)| Probe::Content(index));
    (TemplateBreakKind::HistoryChanged, changed)
}

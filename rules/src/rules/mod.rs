//! One file per rule. Adding a rule: its file here and one line in [`register_rules!`] below.

use kvlint_request::request::{PartKind, same_bytes};

use crate::TurnPair;

/// Declares each rule's module, re-exports its struct, and lists it in [`RULES`], in the
/// order rules are asked: the most specific first.
macro_rules! register_rules {
    ($($module:ident::$rule:ident),+ $(,)?) => {
        $(
            mod $module;
            pub use $module::$rule;
        )+

        /// Every rule, in the order they are asked: the most specific first.
        pub static RULES: &[&dyn crate::Rule] = &[$(&$rule),+];
    };
}

register_rules! {
    tool_order::ToolOrder,
    list_order::ListOrder,
    tool_set_change::ToolSetChange,
    json_reserialized::JsonReserialized,
    system_merged::SystemMerged,
    volatile_timestamp::VolatileTimestamp,
    volatile_id::VolatileId,
    volatile_counter::VolatileCounter,
    history_rewrite::HistoryRewrite,
    thinking_prefix_check::ThinkingPrefixCheck,
    prefix_edit::PrefixEdit,
    cache_breakpoint::CacheBreakpoint,
    reported_usage::ReportedUsage,
    no_cache_breakpoint::NoCacheBreakpoint,
    no_cache_routing_key::NoCacheRoutingKey,
    below_cache_minimum::BelowCacheMinimum,
    instructions_uncached::InstructionsUncached,
    idle_gap::IdleGap,
    cold_start::ColdStart,
    generation_prompt::GenerationPrompt,
    tools_in_system::ToolsInSystem,
}

/// Whether the pair diverges where tools are rendered (before the conversation) while the
/// two turns send different tool lists.
pub(crate) fn diverges_in_tools(pair: &TurnPair<'_>) -> bool {
    let previous = &pair.previous.tools;
    let current = &pair.current.tools;
    let differ = previous.len() != current.len()
        || previous.iter().zip(current).any(|(before, after)| {
            before.name != after.name || !same_bytes(&before.definition, &after.definition)
        });
    if !differ {
        return false;
    }
    let in_head = |part: Option<&kvlint_request::request::Part>,
                   messages: &[kvlint_request::request::Message]| {
        part.is_some_and(|part| match part.kind {
            PartKind::Tool | PartKind::Setting | PartKind::System => true,
            _ => part.message.is_some_and(|index| {
                index == 0
                    && messages
                        .first()
                        .is_some_and(|message| message.role.is_instructions())
            }),
        })
    };
    in_head(pair.current_part(), &pair.current.messages)
        || in_head(pair.previous_part(), &pair.previous.messages)
}

/// The first tool whose definition the current turn sends in other bytes, as (earlier,
/// current), when it is the same tool (same name) in both turns.
pub(crate) fn changed_tool<'a>(
    pair: &TurnPair<'a>,
) -> Option<(
    &'a kvlint_request::request::Tool,
    &'a kvlint_request::request::Tool,
)> {
    let (after, before) = pair
        .current
        .tools
        .iter()
        .zip(&pair.previous.tools)
        .find(|(after, before)| !same_bytes(&after.definition, &before.definition))?;
    (after.name == before.name).then_some((before, after))
}

/// A name list for messages: `a`, `b` and `c`.
pub(crate) fn quoted_list(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|name| format!("`{name}`")).collect();
    match quoted.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// A text as messages quote it: its first line that is not a lone tag (`<system-reminder>`),
/// cut after its last word within 40 characters.
pub(crate) fn excerpt(text: &str) -> String {
    let lone_tag = |line: &str| line.starts_with('<') && line.ends_with('>') && !line.contains(' ');
    let mut lines = text.lines().map(str::trim).filter(|line| !line.is_empty());
    let line = lines
        .clone()
        .find(|line| !lone_tag(line))
        .or_else(|| lines.next())
        .unwrap_or_default();
    match line.char_indices().nth(40) {
        Some((cut, _)) => {
            let head = &line[..cut];
            let words = if line[cut..].starts_with(' ') {
                head
            } else {
                head.rsplit_once(' ').map_or(head, |(words, _)| words)
            };
            format!("{}…", words.trim_end())
        }
        None => line.to_owned(),
    }
}

/// The messages of the findings `kvlint check` gives on a fixture session of
/// `fixtures/rules/` (its rule, turn and place are checked by `tests/fixtures.rs`).
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) fn fixture_messages(fixture: &str) -> Vec<String> {
    let path = kvlint_fixtures::root().join("rules").join(fixture);
    let session = kvlint_core::SessionFile::read(&path).unwrap();
    crate::check_session(&session, &kvlint_render::Renderer::provider(), None)
        .unwrap()
        .findings
        .into_iter()
        .map(|finding| finding.message)
        .collect()
}

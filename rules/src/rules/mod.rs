//! One file per rule. Adding a rule: its file here and one line in [`register_rules!`] below.

use kvlint_core::request::{PartKind, same_bytes};

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
    tool_set_change::ToolSetChange,
    json_reserialized::JsonReserialized,
    volatile_timestamp::VolatileTimestamp,
    volatile_id::VolatileId,
    volatile_counter::VolatileCounter,
    history_rewrite::HistoryRewrite,
    prefix_edit::PrefixEdit,
    cache_breakpoint::CacheBreakpoint,
    reported_usage::ReportedUsage,
    no_cache_breakpoint::NoCacheBreakpoint,
    no_cache_routing_key::NoCacheRoutingKey,
    below_cache_minimum::BelowCacheMinimum,
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
    let in_head = |part: Option<&kvlint_core::request::Part>,
                   messages: &[kvlint_core::request::Message]| {
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

/// A name list for messages: `a`, `b` and `c`.
pub(crate) fn quoted_list(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|name| format!("`{name}`")).collect();
    match quoted.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

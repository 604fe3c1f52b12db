//! One file per rule. Adding a rule: a file here, a line below, a line in [`crate::RULES`].

mod cache_breakpoint;
mod generation_prompt;
mod history_rewrite;
mod json_reserialized;
mod prefix_edit;
mod tool_order;
mod tool_set_change;
mod tools_in_system;
mod volatile_counter;
mod volatile_id;
mod volatile_timestamp;

pub use cache_breakpoint::CacheBreakpoint;
pub use generation_prompt::GenerationPrompt;
pub use history_rewrite::HistoryRewrite;
pub use json_reserialized::JsonReserialized;
pub use prefix_edit::PrefixEdit;
pub use tool_order::ToolOrder;
pub use tool_set_change::ToolSetChange;
pub use tools_in_system::ToolsInSystem;
pub use volatile_counter::VolatileCounter;
pub use volatile_id::VolatileId;
pub use volatile_timestamp::VolatileTimestamp;

use kvlint_core::analysis::TurnPair;
use kvlint_core::request::{PartKind, same_bytes};

/// Whether the pair diverges where tools are rendered (before the conversation) while the
/// two turns send different tool lists.
pub(crate) fn diverges_in_tools(pair: &TurnPair<'_>) -> bool {
    let previous = &pair.previous.request.tools;
    let current = &pair.current.request.tools;
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
    in_head(pair.current_part(), &pair.current.request.messages)
        || in_head(pair.previous_part(), &pair.previous.request.messages)
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

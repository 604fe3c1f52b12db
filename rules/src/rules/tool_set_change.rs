
use super::{diverges_in_tools, quoted_list};
use crate::volatile::VolatileClass;
use crate::{Finding, Rule, RuleInput, RuleMeta, declare_rule};

declare_rule! {
    /// ## What it does
    /// Finds turns that add or remove a tool, or change a tool's definition, compared with
    /// the turn before.
    ///
    /// ## Why is this bad?
    /// Tools come first in the prompt. Adding, removing or editing one changes the prompt
    /// from that tool on: the rest of the tools, the system prompt and the whole history are
    /// recomputed. Agents that load tools lazily (tool search, MCP servers that connect
    /// late, permissions that unlock tools) pay a full prefill each time the list changes.
    ///
    /// ## Example
    /// ```python
    /// if user.is_authenticated:
    ///     tools.remove(login_tool)   # the next turn's tools differ
    /// ```
    ///
    /// ## Use instead
    /// Send the full tool list from the first turn and keep it fixed for the session; mask
    /// tools that are not allowed with `tool_choice` or by refusing the call, rather than
    /// removing them. Append tools that must be added late at the end of the list.
    pub struct ToolSetChange {
        name: "tool-set-change",
        code: "KV202",
        summary: "a tool is added, removed or redefined",
    }
}

impl Rule for ToolSetChange {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check(&self, input: &RuleInput<'_>) -> Option<Finding> {
        let RuleInput::TurnPair(pair) = *input else {
            return None;
        };
        if !diverges_in_tools(pair) {
            return None;
        }
        let before = pair.previous.tool_names();
        let after = pair.current.tool_names();
        let added: Vec<&str> = after
            .iter()
            .filter(|name| !before.contains(name))
            .copied()
            .collect();
        let removed: Vec<&str> = before
            .iter()
            .filter(|name| !after.contains(name))
            .copied()
            .collect();
        let message = match (added.is_empty(), removed.is_empty()) {
            (false, true) => format!("tool {} added", quoted_list(&added)),
            (true, false) => format!("tool {} removed", quoted_list(&removed)),
            (false, false) => format!(
                "tool {} replaced by {}",
                quoted_list(&removed),
                quoted_list(&added)
            ),
            (true, true) => {
                let previous_tools = &pair.previous.tools;
                let changed = pair
                    .current
                    .tools
                    .iter()
                    .zip(previous_tools)
                    .find(|(after, before)| after.definition != before.definition)?;
                // Equal JSON in other serialization, or a volatile value inside a description,
                // is another rule's finding.
                let (before, after) = (
                    changed.1.definition.to_string(),
                    changed.0.definition.to_string(),
                );
                let volatile = [VolatileClass::Timestamp, VolatileClass::Id]
                    .iter()
                    .any(|class| {
                        class.occurs_in(&before)
                            && class.normalize(&before) == class.normalize(&after)
                    });
                if volatile {
                    return None;
                }
                format!("the definition of tool `{}` changed", changed.0.name)
            }
        };
        Some(Finding::of_pair(
            pair,
            &message,
            "send the full tool list from the first turn and keep it fixed for the session; mask tools instead of removing them",
        ))
    }
}

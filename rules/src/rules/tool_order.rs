
use super::{diverges_in_tools, quoted_list};
use crate::{Finding, Rule, RuleInput, RuleMeta, declare_rule};

declare_rule! {
    /// ## What it does
    /// Finds turns that send the same tools as the turn before, in another order.
    ///
    /// ## Why is this bad?
    /// Tools are rendered first, before the system prompt and the conversation. A new order
    /// changes the prompt from the first tool on, so the engine recomputes everything:
    /// every tool, the system prompt and the whole history. Tool lists built from a hash map
    /// or a set (MCP servers, plugin registries) come out in a different order per process
    /// or per reconnect.
    ///
    /// ## Example
    /// ```python
    /// tools = [to_schema(t) for t in mcp_client.list_tools()]  # order of the server's dict
    /// ```
    ///
    /// ## Use instead
    /// Sort tools by name once, when the session starts, and send that list every turn:
    /// ```python
    /// tools = sorted((to_schema(t) for t in mcp_client.list_tools()), key=lambda t: t["name"])
    /// ```
    pub struct ToolOrder {
        name: "tool-order",
        code: "KV201",
        summary: "the same tools are sent in another order",
    }
}

impl Rule for ToolOrder {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check(&self, input: &RuleInput<'_>) -> Option<Finding> {
        let RuleInput::TurnPair(pair) = *input else {
            return None;
        };
        let before = pair.previous.tool_names();
        let after = pair.current.tool_names();
        let (mut sorted_before, mut sorted_after) = (before.clone(), after.clone());
        sorted_before.sort_unstable();
        sorted_after.sort_unstable();
        if before == after || sorted_before != sorted_after || !diverges_in_tools(pair) {
            return None;
        }
        let moved: Vec<&str> = before
            .iter()
            .zip(&after)
            .filter(|(was, is)| was != is)
            .map(|(was, _)| *was)
            .collect();
        Some(Finding::of_pair(pair, &format!(
                "the same {} tools are sent in another order ({} moved)",
                before.len(),
                quoted_list(&moved)
            ), "sort tools by name once per session and send the same list every turn"))
    }
}

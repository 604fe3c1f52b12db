use serde_json::Value;

use super::{changed_tool, diverges_in_tools, excerpt};
use crate::{Finding, Rule, RuleInput, RuleMeta, declare_rule};

declare_rule! {
    /// ## What it does
    /// Finds a list whose items are sent again in another order inside one text: the
    /// sub-agents a tool's description lists, the MCP servers, skills or files a system
    /// prompt lists. The text holds the same lines as the turn before, in another order.
    ///
    /// ## Why is this bad?
    /// The cache matches tokens, not sets: a list in a new order is a new prompt from its
    /// first moved line on, and everything after it is recomputed. A tool's description is
    /// rendered before the system prompt and the conversation, so a reordered list there
    /// recomputes the whole prompt. Lists built from a hash map, a set, a directory walk or
    /// plugins that load concurrently come out in another order per process, per resume or
    /// per reconnect (claude-code#49038: the `Agent` tool listing sub-agent types in random
    /// order; opencode#18215: agents and skills in the task and skill tools' descriptions).
    ///
    /// ## Example
    /// ```python
    /// agents = load_agents()  # a dict filled as plugins finish loading
    /// description = "Available agent types:\n" + "\n".join(
    ///     f"- {a.name}: {a.description}" for a in agents.values())
    /// ```
    ///
    /// ## Use instead
    /// Sort the items once (by name) when the session starts and send that text every turn:
    /// ```python
    /// description = "Available agent types:\n" + "\n".join(
    ///     f"- {a.name}: {a.description}" for a in sorted(agents.values(), key=lambda a: a.name))
    /// ```
    pub struct ListOrder {
        name: "list-order",
        code: "KV205",
        summary: "the lines of a list are sent in another order",
    }
}

impl Rule for ListOrder {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check(&self, input: &RuleInput<'_>) -> Option<Finding> {
        let RuleInput::TurnPair(pair) = *input else {
            return None;
        };
        let (what, before, after) =
            if diverges_in_tools(pair) {
                let (before, after) = changed_tool(pair)?;
                let (field, before_text, after_text) =
                    only_changed_string(&before.definition, &after.definition)?;
                (
                    format!("tool `{}`'s `{field}`", after.name),
                    before_text,
                    after_text,
                )
            } else {
                let change = pair.change()?;
                (
                    format!("`{}`", pair.divergence.part),
                    change.previous_text,
                    change.current_text,
                )
            };
        // Equal JSON in another key order is json-reserialized's.
        let as_json = |text: &str| serde_json::from_str::<Value>(text).ok();
        if let (Some(before_value), Some(after_value)) = (as_json(before), as_json(after))
            && before_value == after_value
        {
            return None;
        }
        let reordered = reordered_lines(before, after)?;
        Some(Finding::of_pair(
            pair,
            &format!(
                "the same {} lines of {what} in another order (`{}` now where `{}` was)",
                reordered.lines,
                excerpt(reordered.moved),
                excerpt(reordered.displaced)
            ),
            "build the list in a fixed order (sorted by name) once per session and send the same text every turn",
        ))
    }
}

/// A list sent again with its lines in another order.
#[derive(Debug, PartialEq)]
struct Reordered<'a> {
    /// The lines of the list: the reordered lines and the list items around them.
    lines: usize,
    /// The first line whose place changed, as this turn sends it, and the line the earlier
    /// turn had there.
    moved: &'a str,
    displaced: &'a str,
}

/// The reordered list when `after` holds exactly the lines of `before` and only their order
/// differs.
fn reordered_lines<'a>(before: &'a str, after: &'a str) -> Option<Reordered<'a>> {
    let before_lines: Vec<&str> = before.split('\n').collect();
    let after_lines: Vec<&str> = after.split('\n').collect();
    if before_lines.len() != after_lines.len() {
        return None;
    }
    let differs = |(was, is): (&&str, &&str)| was != is;
    let start = before_lines.iter().zip(&after_lines).position(differs)?;
    let end = before_lines.len()
        - before_lines
            .iter()
            .rev()
            .zip(after_lines.iter().rev())
            .position(differs)?;
    let mut moved_before = before_lines[start..end].to_vec();
    let mut moved_after = after_lines[start..end].to_vec();
    moved_before.sort_unstable();
    moved_after.sort_unstable();
    if moved_before != moved_after {
        return None;
    }
    // The list goes on over unmoved neighbours that are items of the same kind: lines that
    // open with the same marker (`- `, `* `, `1. `, `<`).
    let marker = |line: &str| -> String {
        let start = line.find(char::is_alphabetic).unwrap_or(line.len());
        line[..start]
            .chars()
            .filter(|c| !c.is_ascii_digit())
            .collect()
    };
    let item_marker = marker(before_lines[start]);
    let is_item = |line: &str| !item_marker.trim().is_empty() && marker(line) == item_marker;
    let earlier_items = before_lines[..start]
        .iter()
        .rev()
        .take_while(|line| is_item(line))
        .count();
    let later_items = before_lines[end..]
        .iter()
        .take_while(|line| is_item(line))
        .count();
    Some(Reordered {
        lines: end - start + earlier_items + later_items,
        moved: after_lines[start],
        displaced: before_lines[start],
    })
}

/// The one string of a tool definition that differs between two turns, with its place
/// (`function.description`), when everything else is equal.
fn only_changed_string<'a>(
    before: &'a Value,
    after: &'a Value,
) -> Option<(String, &'a str, &'a str)> {
    let (mut before_leaves, mut after_leaves) = (Vec::new(), Vec::new());
    leaves(before, String::new(), &mut before_leaves);
    leaves(after, String::new(), &mut after_leaves);
    if before_leaves.len() != after_leaves.len() {
        return None;
    }
    let mut changed = before_leaves
        .into_iter()
        .zip(after_leaves)
        .filter(|((_, was), (_, is))| was != is);
    let ((place, was), (same_place, is)) = changed.next()?;
    if changed.next().is_some() || place != same_place {
        return None;
    }
    Some((place, was.as_str()?, is.as_str()?))
}

/// Every scalar of a JSON value with its place, in document order.
fn leaves<'a>(value: &'a Value, place: String, found: &mut Vec<(String, &'a Value)>) {
    let join = |key: &str| {
        if place.is_empty() {
            key.to_owned()
        } else {
            format!("{place}.{key}")
        }
    };
    match value {
        Value::Object(map) => {
            for (key, item) in map {
                leaves(item, join(key), found);
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                leaves(item, format!("{place}[{index}]"), found);
            }
        }
        scalar => found.push((place, scalar)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_swap_inside_a_list_counts_the_whole_list() {
        let before = "Agents:\n- a: one\n- b: two\n- c: three\n- d: four\nUse them well.";
        let after = "Agents:\n- a: one\n- c: three\n- b: two\n- d: four\nUse them well.";
        assert_eq!(
            reordered_lines(before, after),
            Some(Reordered {
                lines: 4,
                moved: "- c: three",
                displaced: "- b: two"
            })
        );
    }

    #[test]
    fn the_finding_counts_the_list_and_names_the_first_moved_line() {
        let messages =
            super::super::fixture_messages("list-order/fail/agent-tool-subagents-resume.jsonl");
        assert_eq!(
            messages,
            [concat!(
                "the same 7 lines of tool `Agent`'s `description` in another order ",
                "(`- Plan: Designs an implementation plan…` now where ",
                "`- Explore: Fast read-only search through…` was): 626 cached tokens recomputed"
            )]
        );
    }

    #[test]
    fn an_edited_line_is_not_a_new_order() {
        let before = "- a\n- b\n- c";
        assert_eq!(reordered_lines(before, "- b\n- a\n- C"), None);
        assert_eq!(reordered_lines(before, "- b\n- a"), None);
    }

    #[test]
    fn only_one_changed_string_of_a_tool_is_read() {
        let before = serde_json::json!({"name": "Agent", "description": "x\ny", "input_schema": {"type": "object"}});
        let after = serde_json::json!({"name": "Agent", "description": "y\nx", "input_schema": {"type": "object"}});
        assert_eq!(
            only_changed_string(&before, &after),
            Some(("description".to_owned(), "x\ny", "y\nx"))
        );
        let retyped = serde_json::json!({"name": "Agent", "description": "y\nx", "input_schema": {"type": "array"}});
        assert_eq!(only_changed_string(&before, &retyped), None);
    }
}

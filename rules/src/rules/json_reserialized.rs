use kvlint_request::request::BodyFormat;
use kvlint_request::request::{Part, PartKind, Request, same_bytes};
use serde_json::Value;

use super::{changed_tool, diverges_in_tools};
use crate::{Finding, Rule, RuleInput, RuleMeta, TurnPair, declare_rule};

declare_rule! {
    /// ## What it does
    /// Finds JSON that is sent again with the same value but other bytes: tool schemas
    /// whose keys come out in another order, tool-call arguments re-serialized with other
    /// spacing, key order or escaping (an Anthropic `tool_use` block's `input` object with
    /// its keys in another order).
    ///
    /// When two or more earlier messages come back this way in one turn, and none is
    /// otherwise changed, dropped or moved, the whole history was re-serialized, as a
    /// session resumed from storage rebuilds it from parsed values: the finding says
    /// "resumed session re-serialized", how many messages, and the first differing byte.
    /// It is a case of this rule, not a rule of its own, because the cause and the fix are
    /// the same: bytes rebuilt from a value instead of the bytes that were sent.
    ///
    /// ## Why is this bad?
    /// The cache matches tokens, not values. `{"a": 1}` and `{"a":1}` are the same
    /// arguments but not the same prompt, so everything after the first re-serialized
    /// schema or tool call is recomputed. It happens when a framework parses tool-call
    /// arguments into a dict and serializes them again for the next turn, or builds schemas
    /// from a model class whose field order is not fixed. A resumed session whose history is
    /// rebuilt from a database or a transcript pays for its whole conversation again on the
    /// first turn after the resume (claude-code#43657: 5.9 % of the prompt read from the
    /// cache after `--continue`; hermes-agent#52813: resumed messages rebuilt from the state
    /// database never match the live ones).
    ///
    /// ## Example
    /// ```python
    /// call["function"]["arguments"] = json.dumps(json.loads(call["function"]["arguments"]))
    /// ```
    ///
    /// ## Use instead
    /// Keep the exact string the model produced for tool-call arguments and send it back
    /// unchanged; serialize schemas once per session with a fixed key order. Store each
    /// message as it was sent and send those bytes again when a session resumes.
    pub struct JsonReserialized {
        name: "json-reserialized",
        code: "KV203",
        summary: "equal JSON is sent serialized differently",
    }
}

impl Rule for JsonReserialized {
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
                (
                    format!("the schema of tool `{}` is", after.name),
                    before.definition.to_string(),
                    after.definition.to_string(),
                )
            } else {
                let part = pair.current_part()?;
                if !matches!(
                    part.kind,
                    PartKind::Arguments | PartKind::ToolResult | PartKind::Text
                ) {
                    return None;
                }
                let change = pair.change()?;
                // Where a tool call's arguments are a JSON object rather than a string, name
                // the field the body holds them in.
                let what = match (part.kind, pair.current.format) {
                    (PartKind::Arguments, BodyFormat::AnthropicMessages) => {
                        "the `input` of a `tool_use` block is"
                    }
                    (PartKind::Arguments, BodyFormat::BedrockConverse) => {
                        "the `input` of a `toolUse` block is"
                    }
                    (PartKind::Arguments, BodyFormat::GeminiGenerateContent) => {
                        "the `args` of a `functionCall` are"
                    }
                    (PartKind::Arguments, _) => "tool-call arguments are",
                    _ => "JSON content is",
                };
                (
                    what.to_owned(),
                    change.previous_text.to_owned(),
                    change.current_text.to_owned(),
                )
            };
        let before_value: Value = serde_json::from_str(&before).ok()?;
        let after_value: Value = serde_json::from_str(&after).ok()?;
        // serde_json's maps compare without regard to key order.
        if !(before_value.is_object() || before_value.is_array()) || before_value != after_value {
            return None;
        }
        if let Some(resumed) = resumed_history(pair) {
            return Some(resumed);
        }
        let difference = if same_bytes(&before_value, &after_value) {
            "other spacing or escaping"
        } else {
            "another key order"
        };
        Some(Finding::of_pair(pair, &format!("{what} the same JSON value serialized with {difference}"), "send the exact bytes of the earlier turn: keep tool-call arguments as the model wrote them and serialize schemas once, with a fixed key order"))
    }
}

/// The whole history re-serialized at once, as a resumed session rebuilds it: two or more
/// earlier messages sent again with the same content in other bytes, none otherwise changed.
fn resumed_history(pair: &TurnPair<'_>) -> Option<Finding> {
    if diverges_in_tools(pair) || pair.current_part()?.message.is_none() {
        return None;
    }
    let reserialized = reserialized_messages(pair.previous, pair.current)?;
    if reserialized < 2 {
        return None;
    }
    let change = pair.change()?;
    let byte = pair.divergence.byte;
    Some(Finding::of_pair(
        pair,
        &format!(
            "resumed session re-serialized: {reserialized} earlier messages sent again with the same content in other bytes, the first at byte {byte} of `{}`: `{}` became `{}`",
            pair.divergence.part,
            around(change.previous_text, byte),
            around(change.current_text, byte)
        ),
        "store each message as it was sent and send those bytes again on resume; never rebuild history from parsed values",
    ))
}

/// The text around a byte offset, as a message quotes it: 16 bytes either side.
fn around(text: &str, byte: usize) -> String {
    let start = (0..=byte.saturating_sub(16).min(text.len()))
        .rev()
        .find(|&index| text.is_char_boundary(index))
        .unwrap_or(0);
    let end = (byte.saturating_add(16).min(text.len())..=text.len())
        .find(|&index| text.is_char_boundary(index))
        .unwrap_or(text.len());
    let ellipsis = |cut: bool| if cut { "…" } else { "" };
    format!(
        "{}{}{}",
        ellipsis(start > 0),
        text[start..end].replace('\n', "\\n"),
        ellipsis(end < text.len())
    )
}

/// How many of the earlier turn's messages this turn sends again with the same content in
/// other bytes; `None` when one of them is changed otherwise, dropped or moved.
fn reserialized_messages(previous: &Request, current: &Request) -> Option<usize> {
    if current.messages.len() < previous.messages.len() {
        return None;
    }
    let mut reserialized = 0;
    for (index, message) in previous.messages.iter().enumerate() {
        if current.messages[index].role != message.role {
            return None;
        }
        let (before, after) = (content(previous, index), content(current, index));
        if before.len() != after.len() {
            return None;
        }
        let mut differs = false;
        for (was, is) in before.iter().zip(&after) {
            if was.kind != is.kind {
                return None;
            }
            if was.text != is.text {
                if !same_content(&was.text, &is.text) {
                    return None;
                }
                differs = true;
            }
        }
        reserialized += usize::from(differs);
    }
    Some(reserialized)
}

/// A message's content parts.
fn content(request: &Request, index: usize) -> Vec<&Part> {
    request
        .parts
        .iter()
        .filter(|part| part.message == Some(index) && !part.kind.is_structural())
        .collect()
}

/// Whether two texts say the same in other bytes: equal JSON values, or equal words.
fn same_content(before: &str, after: &str) -> bool {
    let json = |text: &str| {
        serde_json::from_str::<Value>(text)
            .ok()
            .filter(|value| value.is_object() || value.is_array())
    };
    if let (Some(before), Some(after)) = (json(before), json(after)) {
        return before == after;
    }
    before.split_whitespace().eq(after.split_whitespace())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_content_is_equal_json_or_equal_words() {
        assert!(same_content(r#"{"a":1,"b":"é"}"#, r#"{"b": "\u00e9", "a": 1}"#));
        assert!(same_content("done.\n</system-reminder>\n", "done.\n</system-reminder>"));
        assert!(!same_content(r#"{"a":1}"#, r#"{"a":2}"#));
        assert!(!same_content("ls -la", "ls -l"));
    }

    #[test]
    fn a_resumed_history_is_named_with_its_first_differing_byte() {
        let messages =
            super::super::fixture_messages("json-reserialized/fail/resumed-session-state-db.jsonl");
        assert_eq!(
            messages,
            [concat!(
                "resumed session re-serialized: 4 earlier messages sent again with the same content in other bytes, ",
                "the first at byte 9 of `messages[2].tool_calls[0].function.arguments`: ",
                r#"`{"start":"2026-12-01","en…` became `{"start": "2026-12-01", "…`: 133 cached tokens recomputed"#
            )]
        );
    }
}

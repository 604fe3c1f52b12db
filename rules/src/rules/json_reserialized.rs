use kvlint_core::BodyFormat;
use kvlint_core::request::{PartKind, same_bytes};
use serde_json::Value;

use super::diverges_in_tools;
use crate::{Finding, Rule, RuleInput, RuleMeta, declare_rule};

declare_rule! {
    /// ## What it does
    /// Finds JSON that is sent again with the same value but other bytes: tool schemas
    /// whose keys come out in another order, tool-call arguments re-serialized with other
    /// spacing, key order or escaping (an Anthropic `tool_use` block's `input` object with
    /// its keys in another order).
    ///
    /// ## Why is this bad?
    /// The cache matches tokens, not values. `{"a": 1}` and `{"a":1}` are the same
    /// arguments but not the same prompt, so everything after the first re-serialized
    /// schema or tool call is recomputed. It happens when a framework parses tool-call
    /// arguments into a dict and serializes them again for the next turn, or builds schemas
    /// from a model class whose field order is not fixed.
    ///
    /// ## Example
    /// ```python
    /// call["function"]["arguments"] = json.dumps(json.loads(call["function"]["arguments"]))
    /// ```
    ///
    /// ## Use instead
    /// Keep the exact string the model produced for tool-call arguments and send it back
    /// unchanged; serialize schemas once per session with a fixed key order.
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
                let previous_tools = &pair.previous.tools;
                let (after, before) =
                    pair.current.tools.iter().zip(previous_tools).find(
                        |(after, before)| !same_bytes(&after.definition, &before.definition),
                    )?;
                if after.name != before.name {
                    return None;
                }
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
        let difference = if same_bytes(&before_value, &after_value) {
            "other spacing or escaping"
        } else {
            "another key order"
        };
        Some(Finding::of_pair(pair, &format!("{what} the same JSON value serialized with {difference}"), "send the exact bytes of the earlier turn: keep tool-call arguments as the model wrote them and serialize schemas once, with a fixed key order"))
    }
}

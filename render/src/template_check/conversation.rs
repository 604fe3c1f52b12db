//! The built-in agent conversation, with the variants real agents send: with and without a
//! system message, parallel tool calls, `content: null` beside tool calls, tool-call ids of
//! nine alphanumerics (Mistral's templates refuse others), reasoning on every assistant turn.
//!
//! Templates refuse some of these (Llama 3.1 raises on parallel calls, Gemma 2 on a system
//! message and on tool turns, Qwen3 and Phi-3.5 on a missing `content`); the check takes the
//! conversation with as few features dropped as the template needs, and says which.

use serde_json::{Value, json};

/// Something real agents send that some templates refuse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Feature {
    /// Several tool calls in one assistant message, their results in as many tool messages.
    ParallelToolCalls,
    /// `content: null` in an assistant message with tool calls (OpenAI's API sends it;
    /// transformers drops the key, so the template sees no `content`).
    NullContent,
    /// Tool-call arguments as an object, as engines hand them to templates (else a JSON string).
    ArgumentObjects,
    /// Tool calls and tool results at all.
    ToolTurns,
    /// A system message first.
    SystemMessage,
}

impl Feature {
    /// Every feature, in the order they are dropped when a template refuses the conversation.
    pub const ALL: [Feature; 5] = [
        Feature::ParallelToolCalls,
        Feature::NullContent,
        Feature::ArgumentObjects,
        Feature::ToolTurns,
        Feature::SystemMessage,
    ];

    pub fn describe(self) -> &'static str {
        match self {
            Feature::ParallelToolCalls => "parallel tool calls",
            Feature::NullContent => "`content: null` beside tool calls",
            Feature::ArgumentObjects => "tool-call arguments as objects",
            Feature::ToolTurns => "tool calls and tool results",
            Feature::SystemMessage => "a system message",
        }
    }
}

/// The built-in conversation with some features left out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Variant {
    /// What is left out, in [`Feature::ALL`] order.
    pub dropped: Vec<Feature>,
}

impl Variant {
    pub fn has(&self, feature: Feature) -> bool {
        !self.dropped.contains(&feature)
    }

    pub fn without(&self, feature: Feature) -> Self {
        let mut dropped = self.dropped.clone();
        if !dropped.contains(&feature) {
            dropped.push(feature);
            dropped.sort();
        }
        Self { dropped }
    }

    /// Every variant, the least lost first; variants that send the same
    /// messages (tool features without tool turns) appear once.
    pub fn in_order_of_preference() -> Vec<Variant> {
        let mut variants: Vec<Variant> = (0u32..1 << Feature::ALL.len())
            .map(|mask| Variant {
                dropped: Feature::ALL
                    .iter()
                    .enumerate()
                    .filter(|(bit, _)| mask & (1 << bit) != 0)
                    .map(|(_, feature)| *feature)
                    .collect(),
            })
            .filter(|variant| {
                // Without tool turns, the tool features are moot.
                variant.has(Feature::ToolTurns)
                    || variant.dropped.iter().all(|feature| {
                        matches!(feature, Feature::ToolTurns | Feature::SystemMessage)
                    })
            })
            .collect();
        variants.sort_by_key(|variant| (variant.cost(), variant.dropped.clone()));
        variants
    }

    /// How much of the conversation is lost: the system message and tool turns weigh more
    /// than all the smaller features together.
    fn cost(&self) -> u32 {
        self.dropped
            .iter()
            .map(|feature| match feature {
                Feature::SystemMessage => 8,
                Feature::ToolTurns => 4,
                _ => 1,
            })
            .sum()
    }

    /// The variant's messages and the tools sent with every request.
    pub fn conversation(&self) -> (Vec<Value>, Vec<Value>) {
        let tools = vec![
            json!({"type": "function", "function": {"name": "read_file", "description": "Read a file from the repository.",
                "parameters": {"type": "object", "properties": {"path": {"type": "string", "description": "Path to read"}}, "required": ["path"]}}}),
            json!({"type": "function", "function": {"name": "run_tests", "description": "Run the test suite.",
                "parameters": {"type": "object", "properties": {"filter": {"type": "string", "description": "Only tests whose name contains this"}}, "required": []}}}),
        ];
        let arguments = |value: Value| {
            if self.has(Feature::ArgumentObjects) {
                value
            } else {
                Value::String(value.to_string())
            }
        };
        let call = |id: &str, name: &str, value: Value| json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments(value)}});
        let no_content = if self.has(Feature::NullContent) {
            Value::Null
        } else {
            Value::String(String::new())
        };
        let assistant_calls = |reasoning: &str, calls: Vec<Value>| json!({"role": "assistant", "content": no_content, "reasoning_content": reasoning, "tool_calls": calls});
        let tool = |id: &str, content: &str| json!({"role": "tool", "tool_call_id": id, "content": content});
        let assistant = |content: &str, reasoning: &str| json!({"role": "assistant", "content": content, "reasoning_content": reasoning});
        let user = |content: &str| json!({"role": "user", "content": content});

        let mut messages = Vec::new();
        if self.has(Feature::SystemMessage) {
            messages.push(json!({"role": "system", "content": SYSTEM_PROMPT}));
        }
        messages.push(user(FIRST_USER_MESSAGE));
        if self.has(Feature::ToolTurns) {
            let mut calls = vec![call(
                "a1b2c3d4e",
                "read_file",
                json!({"path": "src/pricing.py"}),
            )];
            if self.has(Feature::ParallelToolCalls) {
                calls.push(call(
                    "k9l8m7n6o",
                    "read_file",
                    json!({"path": "tests/test_pricing.py"}),
                ));
            }
            let parallel = calls.len() > 1;
            messages.push(assistant_calls(
                "I should look at the pricing module and its test.",
                calls,
            ));
            messages.push(tool("a1b2c3d4e", "def price(x):\n    return round(x, 2)"));
            if parallel {
                messages.push(tool(
                    "k9l8m7n6o",
                    "def test_rounding():\n    assert price(2.675) == 2.68",
                ));
            }
        }
        messages.push(assistant(
            "The function rounds half to even; the test expects half up.",
            "Python's round uses banker's rounding.",
        ));
        messages.push(user("Fix it and run the tests."));
        if self.has(Feature::ToolTurns) {
            messages.push(assistant_calls(
                "Quantize with ROUND_HALF_UP, then run the tests.",
                vec![call(
                    "f5g6h7i8j",
                    "run_tests",
                    json!({"filter": "rounding"}),
                )],
            ));
            messages.push(tool("f5g6h7i8j", "1 passed"));
        }
        messages.push(assistant(
            "Fixed: prices now round half up, and the test passes.",
            "Done; report back.",
        ));
        messages.push(user("Thanks. Anything else to watch out for?"));
        (messages, tools)
    }
}

pub(super) const SYSTEM_PROMPT: &str =
    "You are a careful coding agent working in the acme-api repository.";
pub(super) const FIRST_USER_MESSAGE: &str = "The test test_rounding fails. Find out why.";

/// The number of messages each request holds: a request ends with a user message or with
/// the last of a run of tool results, as an agent sends them once every call has returned.
pub fn turn_lengths(messages: &[Value]) -> Vec<usize> {
    let role = |message: Option<&Value>| {
        message
            .and_then(|message| message.get("role"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    (1..=messages.len())
        .filter(|&length| match role(messages.get(length - 1)).as_deref() {
            Some("user") => true,
            Some("tool") => role(messages.get(length)).as_deref() != Some("tool"),
            _ => false,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_drop_the_fewest_features_first() {
        let variants = Variant::in_order_of_preference();
        assert_eq!(variants[0], Variant::default());
        assert_eq!(variants[1].dropped, [Feature::ParallelToolCalls]);
        assert_eq!(variants.len(), 18);
        assert_eq!(
            variants.last().map(|variant| variant.dropped.clone()),
            Some(vec![Feature::ToolTurns, Feature::SystemMessage])
        );
    }

    #[test]
    fn requests_end_after_every_tool_result_has_come_back() {
        let (messages, _) = Variant::default().conversation();
        let lengths = turn_lengths(&messages);
        // user | call, 2 results | user | call, result | user
        assert_eq!(lengths, [2, 5, 7, 9, 11]);
        let (messages, _) = Variant::default()
            .without(Feature::ToolTurns)
            .conversation();
        assert_eq!(turn_lengths(&messages), [2, 4, 6]);
    }
}

//! `--redact`: records without the conversation's text. Every string that carries text a
//! person or the model wrote (message content, instructions, tool arguments and results,
//! thinking) is replaced by a placeholder of the same length and shape. The structure, the
//! roles, the tool names and ids and the settings stay, so the record still checks like the
//! session did (a break stays a break, in the same place) and its token counts stay close.

use std::hash::{BuildHasher, RandomState};

use serde_json::Value;

/// Keys whose string values are text to hide, at any depth.
const TEXT_KEYS: [&str; 12] = [
    "content",
    "text",
    "input",
    "instructions",
    "system",
    "arguments",
    "output",
    "thinking",
    "partial_json",
    "refusal",
    "reasoning_content",
    "data",
];

/// `value` with every text string replaced by its placeholder, keyed by `key` (one per run).
pub(super) fn redacted(value: &Value, key: &RandomState) -> Value {
    redact(value, false, key)
}

fn redact(value: &Value, inside_text: bool, key: &RandomState) -> Value {
    match value {
        Value::String(text) if inside_text => Value::String(placeholder(text, key)),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| redact(item, inside_text, key))
                .collect(),
        ),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(name, value)| {
                    let text = inside_text || TEXT_KEYS.contains(&name.as_str());
                    (
                        name.clone(),
                        redact(value, text && !is_structural(name), key),
                    )
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Keys that name structure even inside content blocks.
fn is_structural(key: &str) -> bool {
    matches!(
        key,
        "type"
            | "role"
            | "id"
            | "name"
            | "tool_use_id"
            | "tool_call_id"
            | "call_id"
            | "media_type"
            | "cache_control"
    )
}

/// The same length and shape: each ASCII letter is shifted within the alphabet (case kept) and
/// each digit within 0–9, by an amount a hash keyed for this run of the proxy gives for its
/// place; other letters become a letter picked the same way; everything else (spaces,
/// punctuation, line breaks) stays. So equal texts stay equal, a changed ASCII character stays
/// changed, and without the run's key the text cannot be read back.
fn placeholder(text: &str, key: &RandomState) -> String {
    text.chars()
        .enumerate()
        .map(|(index, character)| {
            let shift = key.hash_one(index);
            let rotate = |first: u8, count: u64| {
                let offset = (u64::from(character as u8 - first) + shift % count) % count;
                char::from(first + offset as u8)
            };
            match character {
                'a'..='z' => rotate(b'a', 26),
                'A'..='Z' => rotate(b'A', 26),
                '0'..='9' => rotate(b'0', 10),
                other if other.is_alphanumeric() => {
                    char::from(b'a' + (key.hash_one((index, other)) % 26) as u8)
                }
                other => other,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn text_is_hidden_and_structure_kept() {
        let body = json!({"model": "m", "messages": [
            {"role": "system", "content": "Secret plan. Now: 10:22"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{\"path\": \"a.rs\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "fn main() {}"}]}]});
        let key = RandomState::new();
        let hidden = redacted(&body, &key);
        assert_eq!(hidden["model"], "m");
        assert_eq!(hidden["messages"][0]["role"], "system");
        let system = hidden["messages"][0]["content"].as_str().unwrap();
        assert_eq!(system.len(), "Secret plan. Now: 10:22".len());
        assert!(!system.contains("Secret") && !system.contains("plan"));
        assert_eq!(&system[6..7], " ");
        let call = &hidden["messages"][1]["tool_calls"][0];
        assert_eq!(
            (call["id"].as_str(), call["function"]["name"].as_str()),
            (Some("call_1"), Some("read"))
        );
        let arguments = &body["messages"][1]["tool_calls"][0]["function"]["arguments"];
        assert_ne!(&call["function"]["arguments"], arguments);
        assert_eq!(hidden["messages"][2]["content"][0]["type"], "text");
        assert_ne!(hidden["messages"][2]["content"][0]["text"], "fn main() {}");
        // Equal texts stay equal; a changed clock stays a change, in the same place.
        let later = json!({"messages": [{"role": "system", "content": "Secret plan. Now: 10:23"}]});
        let a = redacted(&body, &key)["messages"][0]["content"].clone();
        let b = redacted(&later, &key)["messages"][0]["content"].clone();
        let (a, b) = (a.as_str().unwrap(), b.as_str().unwrap());
        assert_eq!(a, system);
        assert_eq!(a[..a.len() - 1], b[..b.len() - 1]);
        assert_ne!(a, b);
        assert!(b[b.len() - 1..].chars().all(|c| c.is_ascii_digit()));
    }
}

//! Small JSON helpers shared by the readers of request bodies and session files.

use serde_json::Value;

/// JSON as sent: keys in their order, no spaces.
pub fn compact_json(value: &Value) -> String {
    value.to_string()
}

/// Whether two values serialize to the same bytes. `==` on `serde_json::Value` ignores key
/// order; the cache does not.
pub fn same_bytes(a: &Value, b: &Value) -> bool {
    compact_json(a) == compact_json(b)
}

/// A value's JSON type, as error messages name it ("found a number").
pub(crate) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

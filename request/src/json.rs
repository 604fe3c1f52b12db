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
pub fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The heap a parsed value takes, about: serde_json's `preserve_order` objects (an index
/// table and a vector of hash, key and value per entry), each allocation with the
/// allocator's overhead.
pub fn heap_size(value: &Value) -> usize {
    const PER_ALLOCATION: usize = 16;
    const PER_ENTRY: usize = 2 * size_of::<usize>() + size_of::<String>() + size_of::<Value>();
    match value {
        Value::String(text) => text.capacity() + PER_ALLOCATION,
        Value::Array(items) => {
            items.capacity() * size_of::<Value>()
                + PER_ALLOCATION
                + items.iter().map(heap_size).sum::<usize>()
        }
        Value::Object(object) => {
            object.len() * PER_ENTRY
                + 2 * PER_ALLOCATION
                + object
                    .iter()
                    .map(|(key, value)| key.capacity() + PER_ALLOCATION + heap_size(value))
                    .sum::<usize>()
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_size_grows_with_what_a_value_holds() {
        let small = serde_json::json!({"role": "user", "content": "hi"});
        let larger = serde_json::json!({"role": "user", "content": "hi".repeat(100)});
        let two = serde_json::json!([small.clone(), small.clone()]);
        assert!(heap_size(&small) > "hi".len() + "role".len() + "content".len());
        assert_eq!(
            heap_size(&larger) - heap_size(&small),
            198 + ("hi".repeat(100).capacity() - 200)
        );
        assert!(heap_size(&two) > 2 * heap_size(&small));
    }
}

//! Small JSON helpers shared by the readers of request bodies and session files.

use serde_json::Value;

/// JSON as sent: keys in their order, no spaces.
pub fn compact_json(value: &Value) -> String {
    value.to_string()
}

/// Whether two values serialize to the same bytes. `==` on `serde_json::Value` ignores key
/// order, and holds `0.0 == -0.0`; the cache does not.
pub fn same_bytes(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|((key_a, a), (key_b, b))| key_a == key_b && same_bytes(a, b))
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same_bytes(a, b))
        }
        (Value::Number(a), Value::Number(b)) if a.is_f64() && b.is_f64() => {
            a.as_f64().map(f64::to_bits) == b.as_f64().map(f64::to_bits)
        }
        _ => a == b,
    }
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
    fn same_bytes_is_equal_compact_json() {
        let values: Vec<Value> = [
            r#"{"a": 1, "b": [1, 2.5, {"c": null}]}"#,
            r#"{"b": [1, 2.5, {"c": null}], "a": 1}"#,
            r#"{"a": 1, "b": [1, 2.5, {"c": null}], "d": true}"#,
            r#"{"a": 1.0, "b": [1, 2.5, {"c": null}]}"#,
            r#"{"a": 1, "b": [1, 2.5, {"c": false}]}"#,
            r#"{"a": 1, "b": [1, 2.5]}"#,
            r#"[0.0]"#,
            r#"[-0.0]"#,
            r#"[-1]"#,
            r#""é""#,
            r#""\u00e9""#,
        ]
        .iter()
        .map(|text| serde_json::from_str(text).unwrap())
        .collect();
        for a in &values {
            for b in &values {
                assert_eq!(
                    same_bytes(a, b),
                    compact_json(a) == compact_json(b),
                    "{a} {b}"
                );
            }
        }
        // `==` says these are equal; the bytes sent are not.
        assert_eq!(values[0], values[1]);
        assert!(!same_bytes(&values[0], &values[1]));
        assert!(!same_bytes(&values[6], &values[7]));
    }

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

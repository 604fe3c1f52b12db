//! Canonical JSON and text: one serialization for equal content, whatever order it was built in.
//!
//! A cache compares bytes. Two tool schemas that are equal as JSON but written with their keys
//! in another order, or a name typed with a decomposed accent, are different prompts. The
//! functions here give every equal value the same bytes:
//!
//! - object keys sorted (by code point), at every depth;
//! - arrays kept in their order: in JSON Schema the order of `enum`, `oneOf`, `anyOf`,
//!   `allOf`, `prefixItems`, `examples` and tuple `items` carries meaning;
//! - a schema's `required` list sorted: it is a set;
//! - every string, keys included, in Unicode normalization form C (NFC).
//!
//! Canonicalization is idempotent: the canonical form of a canonical value is itself.

use serde_json::{Map, Value};
use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfc_quick};

/// Text in Unicode normalization form C.
pub fn nfc(text: &str) -> String {
    if is_nfc_quick(text.chars()) == IsNormalized::Yes {
        text.to_owned()
    } else {
        text.nfc().collect()
    }
}

/// A JSON value with object keys sorted at every depth and strings in NFC; arrays keep their
/// order. Use it for data: tool-call arguments, `const` and `default` values.
pub fn canonical_json(value: &Value) -> Value {
    match value {
        Value::String(text) => Value::String(nfc(text)),
        Value::Array(items) => Value::Array(items.iter().map(canonical_json).collect()),
        Value::Object(object) => sorted_object(object, |_, value| canonical_json(value)),
        other => other.clone(),
    }
}

/// A JSON Schema in canonical form: [`canonical_json`], and `required` lists sorted wherever
/// a schema sits (under `properties`, `items`, `anyOf`, `$defs`, …). Values that are data
/// (`enum`, `const`, `default`, `examples`) are only key-sorted, never reordered.
pub fn canonical_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(object) => sorted_object(object, schema_keyword),
        // `true`/`false` schemas, or something that is not a schema: data.
        other => canonical_json(other),
    }
}

fn schema_keyword(keyword: &str, value: &Value) -> Value {
    match keyword {
        "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => {
            match value {
                Value::Object(schemas) => {
                    sorted_object(schemas, |_, schema| canonical_schema(schema))
                }
                other => canonical_json(other),
            }
        }
        // A schema, or (tuple `items`, `prefixItems`, the combinators) schemas in order.
        "items" | "additionalItems" | "prefixItems" | "allOf" | "anyOf" | "oneOf" => match value {
            Value::Array(schemas) => Value::Array(schemas.iter().map(canonical_schema).collect()),
            schema => canonical_schema(schema),
        },
        "not"
        | "if"
        | "then"
        | "else"
        | "additionalProperties"
        | "contains"
        | "propertyNames"
        | "unevaluatedItems"
        | "unevaluatedProperties"
        | "contentSchema" => canonical_schema(value),
        "required" => match value {
            Value::Array(names) if names.iter().all(Value::is_string) => {
                let mut names: Vec<String> =
                    names.iter().filter_map(Value::as_str).map(nfc).collect();
                names.sort();
                Value::Array(names.into_iter().map(Value::String).collect())
            }
            other => canonical_json(other),
        },
        _ => canonical_json(value),
    }
}

/// The object's entries with NFC keys, sorted by key, each value mapped by `canonical_value`
/// (which sees the key as written, to recognise schema keywords).
fn sorted_object(
    object: &Map<String, Value>,
    canonical_value: impl Fn(&str, &Value) -> Value,
) -> Value {
    let mut entries: Vec<(String, Value)> = object
        .iter()
        .map(|(key, value)| (nfc(key), canonical_value(key, value)))
        .collect();
    entries.sort_by(|(a, _), (b, _)| a.cmp(b));
    Value::Object(entries.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_sorted_and_meaningful_arrays_kept() {
        let schema = json!({
            "type": "object",
            "required": ["path", "line"],
            "properties": {
                "path": {"type": "string", "description": "Cafe\u{301}"},
                "mode": {"enum": ["write", "append"], "default": {"b": 1, "a": 2}},
                "line": {"anyOf": [{"type": "integer"}, {"type": "null"}]}
            }
        });
        let canonical = canonical_schema(&schema);
        assert_eq!(
            canonical.to_string(),
            r#"{"properties":{"line":{"anyOf":[{"type":"integer"},{"type":"null"}]},"mode":{"default":{"a":2,"b":1},"enum":["write","append"]},"path":{"description":"Café","type":"string"}},"required":["line","path"],"type":"object"}"#
        );
        assert_eq!(canonical_schema(&canonical), canonical);
    }

    #[test]
    fn required_inside_data_is_not_sorted() {
        let schema = json!({"default": {"required": ["b", "a"]}, "required": ["b", "a"]});
        assert_eq!(
            canonical_schema(&schema).to_string(),
            r#"{"default":{"required":["b","a"]},"required":["a","b"]}"#
        );
    }
}

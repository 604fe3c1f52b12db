//! A tool's `parameters` as SGLang's `_validate_request` leaves them: database-style type
//! names rewritten in place (`normalize_json_schema_types`, function_call/utils.py), then
//! checked as a JSON Schema 2020-12 (`Draft202012Validator.check_schema`).

use serde_json::Value;

/// `_STANDARD_JSON_SCHEMA_TYPES`.
const STANDARD_TYPES: [&str; 7] = [
    "null", "boolean", "object", "array", "number", "string", "integer",
];

/// `_JSON_SCHEMA_TYPE_ALIASES`.
const ALIASES: [(&str, &str); 27] = [
    ("str", "string"),
    ("text", "string"),
    ("varchar", "string"),
    ("char", "string"),
    ("enum", "string"),
    ("uuid", "string"),
    ("date", "string"),
    ("datetime", "string"),
    ("time", "string"),
    ("timestamp", "string"),
    ("binary", "string"),
    ("blob", "string"),
    ("bytea", "string"),
    ("bytes", "string"),
    ("varbinary", "string"),
    ("bool", "boolean"),
    ("bigint", "integer"),
    ("smallint", "integer"),
    ("tinyint", "integer"),
    ("double", "number"),
    ("decimal", "number"),
    ("real", "number"),
    ("numeric", "number"),
    ("arr", "array"),
    ("tuple", "array"),
    ("set", "array"),
    ("map", "object"),
];

/// `_PREFIX_RULES`: a prefix matches the whole name, or one followed by a digit, a bracket,
/// a parenthesis or a space.
const PREFIX_RULES: [(&[&str], &str); 4] = [
    (&["int", "uint", "long", "short", "unsigned"], "integer"),
    (&["num", "float"], "number"),
    (&["list"], "array"),
    (&["dict"], "object"),
];

/// Keywords whose value is an object of schemas, a list of schemas, or one schema, as
/// `normalize_json_schema_types` walks them.
const SCHEMA_MAPS: [&str; 5] = [
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];
const SCHEMA_LISTS: [&str; 4] = ["anyOf", "oneOf", "allOf", "prefixItems"];
const SCHEMAS: [&str; 10] = [
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
];

fn normalized_type(raw: &str) -> Option<&'static str> {
    if let Some(standard) = STANDARD_TYPES.iter().find(|standard| **standard == raw) {
        return Some(standard);
    }
    let base = raw
        .split('(')
        .next()
        .unwrap_or_default()
        .trim()
        .to_lowercase();
    if let Some(standard) = STANDARD_TYPES.iter().find(|standard| **standard == base) {
        return Some(standard);
    }
    if let Some((_, mapped)) = ALIASES.iter().find(|(alias, _)| *alias == base) {
        return Some(mapped);
    }
    PREFIX_RULES.iter().find_map(|(prefixes, target)| {
        prefixes
            .iter()
            .any(|prefix| {
                base == *prefix
                    || base.strip_prefix(prefix).is_some_and(|rest| {
                        rest.starts_with(|next: char| {
                            next.is_ascii_digit() || "[<( \t".contains(next)
                        })
                    })
            })
            .then_some(*target)
    })
}

/// Rewrites non-standard `type` names to JSON Schema's, in place, through the nested schemas.
pub(super) fn normalize_types(schema: &mut Value) {
    match schema {
        Value::Array(items) => items.iter_mut().for_each(normalize_types),
        Value::Object(map) => {
            match map.get_mut("type") {
                Some(Value::String(name)) => {
                    if let Some(standard) = normalized_type(name) {
                        *name = standard.to_owned();
                    }
                }
                Some(Value::Array(names)) => {
                    let mut normalized: Vec<Value> = Vec::with_capacity(names.len());
                    for name in names.drain(..) {
                        let name = match name.as_str().and_then(normalized_type) {
                            Some(standard) => Value::String(standard.to_owned()),
                            None => name,
                        };
                        if !normalized.contains(&name) {
                            normalized.push(name);
                        }
                    }
                    *names = normalized;
                }
                _ => {}
            }
            for key in SCHEMA_MAPS {
                if let Some(Value::Object(nested)) = map.get_mut(key) {
                    nested.values_mut().for_each(normalize_types);
                }
            }
            for key in SCHEMA_LISTS {
                if let Some(Value::Array(nested)) = map.get_mut(key) {
                    nested.iter_mut().for_each(normalize_types);
                }
            }
            for key in SCHEMAS {
                if let Some(nested) = map.get_mut(key) {
                    normalize_types(nested);
                }
            }
        }
        _ => {}
    }
}

/// The meta-schema's checks on the keywords tools use: a schema is an object or a boolean;
/// `type` a standard name or a list of distinct ones; `required` a list of distinct strings;
/// `enum` a list; the nested schemas schemas.
pub(super) fn check(schema: &Value) -> Result<(), String> {
    let map = match schema {
        Value::Bool(_) => return Ok(()),
        Value::Object(map) => map,
        other => return Err(format!("{other} is not of type 'object', 'boolean'")),
    };
    let is_type = |value: &Value| {
        value
            .as_str()
            .is_some_and(|name| STANDARD_TYPES.contains(&name))
    };
    match map.get("type") {
        None => {}
        Some(Value::Array(names)) => {
            if let Some(bad) = names.iter().find(|name| !is_type(name)) {
                return Err(format!("{bad} is not valid under any of the given schemas"));
            }
            if has_duplicates(names) {
                return Err(format!(
                    "{} has non-unique elements",
                    Value::Array(names.clone())
                ));
            }
        }
        Some(name) if is_type(name) => {}
        Some(bad) => return Err(format!("{bad} is not valid under any of the given schemas")),
    }
    match map.get("required") {
        None => {}
        Some(Value::Array(names)) => {
            if let Some(bad) = names.iter().find(|name| !name.is_string()) {
                return Err(format!("{bad} is not of type 'string'"));
            }
            if has_duplicates(names) {
                return Err(format!(
                    "{} has non-unique elements",
                    Value::Array(names.clone())
                ));
            }
        }
        Some(bad) => return Err(format!("{bad} is not of type 'array'")),
    }
    if let Some(bad) = map.get("enum").filter(|values| !values.is_array()) {
        return Err(format!("{bad} is not of type 'array'"));
    }
    for key in SCHEMA_MAPS.into_iter().filter(|key| *key != "definitions") {
        match map.get(key) {
            None => {}
            Some(Value::Object(nested)) => nested.values().try_for_each(check)?,
            Some(bad) => return Err(format!("{bad} is not of type 'object'")),
        }
    }
    for key in SCHEMA_LISTS {
        match map.get(key) {
            None => {}
            Some(Value::Array(nested)) if !nested.is_empty() => {
                nested.iter().try_for_each(check)?
            }
            Some(bad @ Value::Array(_)) => return Err(format!("{bad} should be non-empty")),
            Some(bad) => return Err(format!("{bad} is not of type 'array'")),
        }
    }
    SCHEMAS
        .iter()
        .filter_map(|key| map.get(*key))
        .try_for_each(check)
}

fn has_duplicates(values: &[Value]) -> bool {
    values
        .iter()
        .enumerate()
        .any(|(index, value)| values[..index].contains(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn database_type_names_become_json_schema_types() {
        let mut schema = json!({"type": "object", "properties": {
            "a": {"type": "varchar(255)"}, "b": {"type": ["int32", "INT", "null"]},
            "c": {"type": "internal"}, "d": {"type": "list[str]"}}});
        normalize_types(&mut schema);
        assert_eq!(
            schema,
            json!({"type": "object", "properties": {
                "a": {"type": "string"}, "b": {"type": ["integer", "null"]},
                "c": {"type": "internal"}, "d": {"type": "array"}}})
        );
        assert!(check(&schema).is_err(), "`internal` is no type");
    }

    #[test]
    fn schemas_that_are_not_2020_12_are_refused() {
        assert!(check(&json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]})).is_ok());
        assert!(
            check(&json!({"properties": {"a": {"type": "string", "required": true}}})).is_err()
        );
        assert!(check(&json!({"anyOf": []})).is_err());
        assert!(check(&json!([1])).is_err());
    }
}

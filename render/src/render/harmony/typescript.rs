//! A tool's JSON Schema as the TypeScript type Harmony declares it with
//! (`HarmonyEncoding::json_schema_to_typescript`, oss-harmony 0.0.11 `src/encoding.rs`).
//!
//! Harmony's own rules, kept as they are: object properties in the order sent, `integer` as
//! `number`, descriptions, titles and examples as `//` comments, `default` after the type,
//! `oneOf` as a union one variant per line, `nullable` as `| null`; anything else is `any`.

use serde_json::Value;

/// The TypeScript type of `schema`, each nested line indented by `indent` more.
pub(super) fn typescript(schema: &Value, indent: &str) -> String {
    if let Some(Value::Array(variants)) = schema.get("oneOf") {
        let mut out = String::new();
        for variant in variants {
            out.push('\n');
            out.push_str(indent);
            out.push_str(" | ");
            out.push_str(&variant_type(variant, &format!("{indent}   ")));
            let mut comments = Vec::new();
            if let Some(description) = variant.get("description").and_then(Value::as_str) {
                comments.push(description.to_owned());
            }
            if let Some(default) = variant.get("default") {
                comments.push(trailing_default(default, variant));
            }
            if !comments.is_empty() {
                out.push_str(" // ");
                out.push_str(&comments.join(" "));
            }
        }
        return out;
    }
    if let Some(Value::Array(types)) = schema.get("type") {
        let names: Vec<&str> = types
            .iter()
            .filter_map(Value::as_str)
            .map(|name| if name == "integer" { "number" } else { name })
            .collect();
        if !names.is_empty() {
            return names.join(" | ");
        }
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("object") => object(schema, indent),
        Some("string") => {
            let values: Vec<String> = schema
                .get("enum")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(|value| format!("\"{value}\""))
                .collect();
            if values.is_empty() {
                "string".to_owned()
            } else {
                values.join(" | ")
            }
        }
        Some("number" | "integer") => "number".to_owned(),
        Some("boolean") => "boolean".to_owned(),
        Some("array") => match schema.get("items") {
            Some(items) => format!("{}[]", typescript(items, indent)),
            None => "Array<any>".to_owned(),
        },
        _ => "any".to_owned(),
    }
}

/// An object's properties, one per line, optional ones marked `?`.
fn object(schema: &Value, indent: &str) -> String {
    let mut out = String::new();
    if let Some(description) = schema.get("description").and_then(Value::as_str) {
        out.push_str(&format!("{indent}// {description}\n"));
    }
    out.push_str("{\n");
    if let Some(Value::Object(properties)) = schema.get("properties") {
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        for (name, property) in properties {
            let optional = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            if let Some(title) = property.get("title").and_then(Value::as_str) {
                out.push_str(&format!("{indent}// {title}\n{indent}//\n"));
            }
            let variants = property.get("oneOf");
            if variants.is_none()
                && let Some(description) = property.get("description").and_then(Value::as_str)
            {
                out.push_str(&format!("{indent}// {description}\n"));
            }
            if let Some(Value::Array(examples)) = property.get("examples")
                && !examples.is_empty()
            {
                out.push_str(&format!("{indent}// Examples:\n"));
                for example in examples.iter().filter_map(Value::as_str) {
                    out.push_str(&format!("{indent}// - \"{example}\"\n"));
                }
            }
            match variants {
                Some(Value::Array(variants)) => {
                    one_of_property(&mut out, name, optional, property, variants, indent);
                }
                _ => {
                    out.push_str(&format!("{indent}{name}{optional}: "));
                    out.push_str(&variant_type(property, &format!("{indent}    ")));
                    out.push(',');
                    if variants.is_none()
                        && let Some(default) = property.get("default")
                    {
                        out.push_str(&format!(" // {}", leading_default(default, property)));
                    }
                    out.push('\n');
                }
            }
        }
    }
    out.push_str(indent);
    out.push('}');
    out
}

/// A property whose schema is a `oneOf`: its comments above it, then one variant per line.
fn one_of_property(
    out: &mut String,
    name: &str,
    optional: &str,
    property: &Value,
    variants: &[Value],
    indent: &str,
) {
    let description = property.get("description").and_then(Value::as_str);
    let first_variant_says_it = description.is_some()
        && variants
            .first()
            .and_then(|variant| variant.get("description"))
            .and_then(Value::as_str)
            == description;
    let description_above = description.filter(|_| !first_variant_says_it);
    if let Some(description) = description_above {
        out.push_str(&format!("{indent}// {description}\n"));
    }
    if let Some(default) = property.get("default") {
        out.push_str(&format!(
            "{indent}// {}\n",
            leading_default(default, property)
        ));
    }
    out.push_str(&format!("{indent}{name}{optional}:\n"));
    for (index, variant) in variants.iter().enumerate() {
        out.push_str(&format!("{indent} | "));
        out.push_str(&variant_type(variant, &format!("{indent}   ")));
        let mut comments = Vec::new();
        if !(index == 0 && description_above.is_some())
            && let Some(variant_description) = variant.get("description").and_then(Value::as_str)
            && Some(variant_description) != description
        {
            comments.push(variant_description.to_owned());
        }
        if let Some(default) = variant.get("default") {
            comments.push(leading_default(default, variant));
        }
        if !comments.is_empty() {
            out.push_str(&format!(" // {}", comments.join(" ")));
        }
        out.push('\n');
    }
    out.push_str(&format!("{indent},\n"));
}

/// A schema's type, with `| null` when it is `nullable` and says no `null` yet.
fn variant_type(schema: &Value, indent: &str) -> String {
    let rendered = typescript(schema, indent);
    let nullable = schema
        .get("nullable")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if nullable && !rendered.contains("null") {
        format!("{rendered} | null")
    } else {
        rendered
    }
}

fn is_enum(schema: &Value) -> bool {
    schema
        .get("enum")
        .and_then(Value::as_array)
        .is_some_and(|values| !values.is_empty())
}

/// `default: …` as a property's comment: a string quoted unless the schema is an enum.
fn leading_default(default: &Value, schema: &Value) -> String {
    match default {
        Value::String(text) if !is_enum(schema) => format!("default: \"{text}\""),
        Value::String(text) => format!("default: {text}"),
        other => format!("default: {other}"),
    }
}

/// `default: …` after a top-level `oneOf` variant: an enum's string default as JSON.
fn trailing_default(default: &Value, schema: &Value) -> String {
    match default {
        Value::String(text) if !is_enum(schema) => format!("default: \"{text}\""),
        other => format!("default: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::typescript;

    #[test]
    fn objects_list_properties_in_order_with_their_comments() {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Where.", "title": "Path"},
                "limit": {"type": "integer", "default": 10},
                "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                "tags": {"type": "array", "items": {"type": "string"}, "examples": ["x"]},
                "either": {"oneOf": [{"type": "string"}, {"type": "number", "nullable": true}]}
            },
            "required": ["path"]
        });
        assert_eq!(
            typescript(&schema, ""),
            "{\n// Path\n//\n// Where.\npath: string,\nlimit?: number, // default: 10\n\
             mode?: \"a\" | \"b\", // default: a\n// Examples:\n// - \"x\"\ntags?: string[],\n\
             either?:\n | string\n | number | null\n,\n}"
        );
    }
}

//! Python's `json.dumps` layout, which templates' `tojson` and engines' tool rendering write.

use serde_json::Value;

/// Python's `json.dumps` layout.
pub struct PythonJson {
    pub indent: Option<usize>,
    pub sort_keys: bool,
    pub item_separator: String,
    pub key_separator: String,
}

impl PythonJson {
    /// `json.dumps(value, ensure_ascii=False)`: `{"a": 1, "b": [1, 2]}`.
    pub fn compact() -> Self {
        Self {
            indent: None,
            sort_keys: false,
            item_separator: ", ".into(),
            key_separator: ": ".into(),
        }
    }

    pub fn dumps(&self, value: &Value) -> String {
        let mut out = String::new();
        self.write(value, 0, &mut out);
        out
    }

    fn newline(&self, depth: usize, out: &mut String) {
        if let Some(indent) = self.indent {
            out.push('\n');
            out.extend(std::iter::repeat_n(' ', indent * depth));
        }
    }

    fn write(&self, value: &Value, depth: usize, out: &mut String) {
        match value {
            Value::Array(items) if !items.is_empty() => {
                out.push('[');
                for (index, item) in items.iter().enumerate() {
                    if index > 0 {
                        out.push_str(&self.item_separator);
                    }
                    self.newline(depth + 1, out);
                    self.write(item, depth + 1, out);
                }
                self.newline(depth, out);
                out.push(']');
            }
            Value::Object(object) if !object.is_empty() => {
                let mut entries: Vec<(&String, &Value)> = object.iter().collect();
                if self.sort_keys {
                    entries.sort_by(|a, b| a.0.cmp(b.0));
                }
                out.push('{');
                for (index, (key, item)) in entries.into_iter().enumerate() {
                    if index > 0 {
                        out.push_str(&self.item_separator);
                    }
                    self.newline(depth + 1, out);
                    write_python_string(key, out);
                    out.push_str(&self.key_separator);
                    self.write(item, depth + 1, out);
                }
                self.newline(depth, out);
                out.push('}');
            }
            Value::String(text) => write_python_string(text, out),
            Value::Number(number) => {
                let text = number.to_string();
                // Python writes whole floats with `.0`; serde_json agrees except for exponents.
                out.push_str(&text);
            }
            other => out.push_str(&other.to_string()),
        }
    }
}

fn write_python_string(text: &str, out: &mut String) {
    out.push('"');
    for character in text.chars() {
        match character {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            control if u32::from(control) < 0x20 => {
                out.push_str(&format!("\\u{:04x}", u32::from(control)));
            }
            other => out.push(other),
        }
    }
    out.push('"');
}

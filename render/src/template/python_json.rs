//! Python's `json.dumps` layout, which templates' `tojson` and engines' tool rendering write.

use serde_json::Value;

/// Python's `json.dumps` layout.
pub struct PythonJson {
    pub indent: Option<usize>,
    pub sort_keys: bool,
    pub item_separator: String,
    pub key_separator: String,
    /// Every character past ASCII written as `\uXXXX` (Python's default).
    pub ensure_ascii: bool,
}

impl PythonJson {
    /// `json.dumps(value, ensure_ascii=False)`: `{"a": 1, "b": [1, 2]}`.
    pub fn compact() -> Self {
        Self {
            indent: None,
            sort_keys: false,
            item_separator: ", ".into(),
            key_separator: ": ".into(),
            ensure_ascii: false,
        }
    }

    /// `json.dumps(value)`, Python's defaults: `{"caf\u00e9": [1, 2]}`.
    pub fn python_default() -> Self {
        Self {
            ensure_ascii: true,
            ..Self::compact()
        }
    }

    pub fn dumps(&self, value: &Value) -> String {
        let mut out = String::new();
        self.write(value, 0, &mut out);
        out
    }

    /// The length of [`PythonJson::dumps`]'s text, counted without writing it (saturating):
    /// what a template pays for before the text is made.
    pub fn dumps_len(&self, value: &Value) -> usize {
        let mut length = Length(0);
        self.write(value, 0, &mut length);
        length.0
    }

    fn newline(&self, depth: usize, out: &mut impl Sink) {
        if let Some(indent) = self.indent {
            out.push('\n');
            out.push_spaces(indent.saturating_mul(depth));
        }
    }

    fn write(&self, value: &Value, depth: usize, out: &mut impl Sink) {
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
                    write_python_string(key, self.ensure_ascii, out);
                    out.push_str(&self.key_separator);
                    self.write(item, depth + 1, out);
                }
                self.newline(depth, out);
                out.push('}');
            }
            Value::String(text) => write_python_string(text, self.ensure_ascii, out),
            Value::Number(number) => {
                let text = number.to_string();
                // Python writes whole floats with `.0`; serde_json agrees except for exponents.
                out.push_str(&text);
            }
            other => out.push_str(&other.to_string()),
        }
    }
}

/// Where JSON text goes: a string, or a count of its bytes.
trait Sink {
    fn push(&mut self, character: char);
    fn push_str(&mut self, text: &str);
    fn push_spaces(&mut self, count: usize);
}

impl Sink for String {
    fn push(&mut self, character: char) {
        String::push(self, character);
    }

    fn push_str(&mut self, text: &str) {
        String::push_str(self, text);
    }

    fn push_spaces(&mut self, count: usize) {
        self.push_str(&" ".repeat(count));
    }
}

/// A byte count.
struct Length(usize);

impl Sink for Length {
    fn push(&mut self, character: char) {
        self.0 = self.0.saturating_add(character.len_utf8());
    }

    fn push_str(&mut self, text: &str) {
        self.0 = self.0.saturating_add(text.len());
    }

    fn push_spaces(&mut self, count: usize) {
        self.0 = self.0.saturating_add(count);
    }
}

fn write_python_string(text: &str, ensure_ascii: bool, out: &mut impl Sink) {
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
            wide if ensure_ascii && !wide.is_ascii() => {
                let mut units = [0; 2];
                for unit in wide.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            other => out.push(other),
        }
    }
    out.push('"');
}

//! Keys given twice in one JSON object. serde_json keeps the last value, as Python's `json` does;
//! other parsers keep the first or refuse the body: the request kvlint reads may not be the one
//! the provider read.

use std::borrow::Cow;
use std::collections::HashMap;

/// A key an object holds twice.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DuplicateKey {
    /// The object, as a path from the document's root (`messages[1]`; empty for the root).
    pub object: String,
    pub key: String,
    /// Byte offsets of the two keys in the text scanned.
    pub first: usize,
    pub second: usize,
}

/// A container being scanned, and where in it the scan is.
enum Frame<'a> {
    Object {
        keys: Keys<'a>,
        /// The key whose value comes next; `None` while a key is expected.
        key: Option<Cow<'a, str>>,
    },
    Array {
        index: usize,
    },
}

/// The keys of an object so far and where each is: a list while short (most objects hold a
/// few keys), a hash map past that.
#[derive(Default)]
struct Keys<'a> {
    few: Vec<(Cow<'a, str>, usize)>,
    many: HashMap<Cow<'a, str>, usize>,
}

impl<'a> Keys<'a> {
    const FEW: usize = 16;

    fn get(&self, name: &str) -> Option<usize> {
        self.few
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, at)| *at)
            .or_else(|| self.many.get(name).copied())
    }

    /// Notes the place of a key not seen before.
    fn insert(&mut self, name: Cow<'a, str>, at: usize) {
        if self.few.len() < Self::FEW {
            self.few.push((name, at));
        } else {
            self.many.insert(name, at);
        }
    }
}

/// Every key given twice in an object of `json`, which must be valid JSON (as serde_json parsed
/// it already): one pass over the text, allocating only for keys with escapes.
pub fn duplicate_keys(json: &str) -> Vec<DuplicateKey> {
    let bytes = json.as_bytes();
    let mut found = Vec::new();
    let mut stack: Vec<Frame<'_>> = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'{' => stack.push(Frame::Object {
                keys: Keys::default(),
                key: None,
            }),
            b'[' => stack.push(Frame::Array { index: 0 }),
            b'}' | b']' => {
                stack.pop();
            }
            b',' => match stack.last_mut() {
                Some(Frame::Array { index }) => *index += 1,
                Some(Frame::Object { key, .. }) => *key = None,
                None => {}
            },
            b'"' => {
                let end = string_end(bytes, at);
                if let Some(Frame::Object { keys, key: None }) = stack.last() {
                    let raw = &json[at..end];
                    let name: Cow<'_, str> = if raw.contains('\\') {
                        Cow::Owned(serde_json::from_str(raw).unwrap_or_else(|_| raw.to_owned()))
                    } else {
                        Cow::Borrowed(&raw[1..raw.len() - 1])
                    };
                    let first = keys.get(&name);
                    if let Some(first) = first {
                        found.push(DuplicateKey {
                            object: path(&stack[..stack.len() - 1]),
                            key: name.clone().into_owned(),
                            first,
                            second: at,
                        });
                    }
                    if let Some(Frame::Object { keys, key }) = stack.last_mut() {
                        if first.is_none() {
                            keys.insert(name.clone(), at);
                        }
                        *key = Some(name);
                    }
                }
                at = end;
                continue;
            }
            _ => {}
        }
        at += 1;
    }
    found
}

/// The byte after the string that starts with the quote at `start`.
fn string_end(bytes: &[u8], start: usize) -> usize {
    let mut at = start + 1;
    while let Some(found) = bytes
        .get(at..)
        .and_then(|rest| memchr::memchr2(b'"', b'\\', rest))
    {
        at += found;
        if bytes[at] == b'"' {
            return at + 1;
        }
        at += 2;
    }
    bytes.len()
}

/// Where the containers of `frames` have got to, as a path: `messages[1].content`.
fn path(frames: &[Frame<'_>]) -> String {
    let mut path = String::new();
    for frame in frames {
        match frame {
            Frame::Object { key, .. } => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key.as_deref().unwrap_or_default());
            }
            Frame::Array { index } => {
                path.push('[');
                path.push_str(&index.to_string());
                path.push(']');
            }
        }
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_given_twice_are_found_with_both_places() {
        let json = r#"{"model": "a", "messages": [{"role": "user", "content": "x", "content": "y"}, {"role": "a\"}", "ro\u006ce": "b"}], "model": "b"}"#;
        let found = duplicate_keys(json);
        let places: Vec<(&str, &str)> = found
            .iter()
            .map(|duplicate| (duplicate.object.as_str(), duplicate.key.as_str()))
            .collect();
        assert_eq!(
            places,
            [
                ("messages[0]", "content"),
                ("messages[1]", "role"),
                ("", "model")
            ]
        );
        let content = &found[0];
        assert!(json[content.first..].starts_with(r#""content": "x""#));
        assert!(json[content.second..].starts_with(r#""content": "y""#));
        assert!(duplicate_keys(r#"{"a": {"a": 1}, "b": [{"a": 1}, {"a": 2}]}"#).is_empty());
    }
}

//! A YAML document as a tree of nodes that remember where they start, built from
//! saphyr-parser's events. Aliases are not expanded (a recording has no use for them, and
//! expanding them is how a hostile file grows without bound); nesting is bounded.

use saphyr_parser::{Event, Parser, ScalarStyle};

/// How deep a recording's YAML may nest.
pub(super) const MAX_DEPTH: usize = 256;

#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Scalar {
        text: String,
        /// Quoted or block scalars are strings whatever they say; plain ones may be numbers.
        plain: bool,
        /// A tag such as `!!binary` or Ruby's `!binary`: its suffix.
        tag: Option<String>,
        at: Place,
    },
    Sequence(Vec<Node>, Place),
    Mapping(Vec<(String, Node)>, Place),
    /// An alias, left unexpanded.
    Alias(Place),
    /// Bytes, from a binary format (msgpack).
    Bytes(Vec<u8>),
}

/// A place in the file: 1-based line and column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Place {
    pub line: usize,
    pub column: usize,
}

impl Node {
    pub fn place(&self) -> Place {
        match self {
            Self::Scalar { at, .. }
            | Self::Sequence(_, at)
            | Self::Mapping(_, at)
            | Self::Alias(at) => *at,
            Self::Bytes(_) => Place::default(),
        }
    }

    /// The value of `key` in a mapping.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Self::Mapping(entries, _) => entries
                .iter()
                .find(|(name, _)| name == key)
                .map(|(_, node)| node),
            _ => None,
        }
    }

    /// A scalar's text.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::Scalar { text, .. } => Some(text),
            _ => None,
        }
    }

    pub fn items(&self) -> &[Node] {
        match self {
            Self::Sequence(items, _) => items,
            _ => &[],
        }
    }

    /// The node as JSON, scalars typed as YAML 1.2's core schema types plain ones.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match self {
            Self::Scalar {
                text, plain: true, ..
            } => plain_scalar(text),
            Self::Scalar { text, .. } => Value::String(text.clone()),
            Self::Sequence(items, _) => Value::Array(items.iter().map(Self::to_json).collect()),
            Self::Mapping(entries, _) => Value::Object(
                entries
                    .iter()
                    .map(|(key, node)| (key.clone(), node.to_json()))
                    .collect(),
            ),
            Self::Alias(_) | Self::Bytes(_) => Value::Null,
        }
    }
}

/// A plain scalar's value: null, a boolean, a number, or the text.
fn plain_scalar(text: &str) -> serde_json::Value {
    use serde_json::Value;
    match text {
        "" | "~" | "null" | "Null" | "NULL" => Value::Null,
        "true" | "True" | "TRUE" => Value::Bool(true),
        "false" | "False" | "FALSE" => Value::Bool(false),
        _ => text
            .parse::<i64>()
            .map(Value::from)
            .ok()
            .or_else(|| {
                let looks_numeric = text
                    .bytes()
                    .all(|byte| byte.is_ascii_digit() || b"+-.eE".contains(&byte));
                looks_numeric
                    .then(|| text.parse::<f64>().ok())
                    .flatten()
                    .and_then(serde_json::Number::from_f64)
                    .map(Value::Number)
            })
            .unwrap_or_else(|| Value::String(text.to_owned())),
    }
}

/// Where parsing failed, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlError {
    pub at: Place,
    pub message: String,
}

/// The first document of `text`, or why it is not YAML.
pub fn parse(text: &str) -> Result<Option<Node>, YamlError> {
    // Open collections: their nodes so far, the key waiting for its value (mappings), and
    // where each started.
    enum Open {
        Sequence(Vec<Node>, Place),
        Mapping(Vec<(String, Node)>, Option<String>, Place),
    }
    let mut stack: Vec<Open> = Vec::new();
    let mut root = None;
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(|error| YamlError {
            at: Place {
                line: error.marker().line(),
                column: error.marker().col() + 1,
            },
            message: error.info().to_owned(),
        })?;
        let at = Place {
            line: span.start.line(),
            column: span.start.col() + 1,
        };
        let node = match event {
            Event::SequenceStart(..) | Event::MappingStart(..) if stack.len() >= MAX_DEPTH => {
                return Err(YamlError {
                    at,
                    message: format!("nested deeper than {MAX_DEPTH} levels"),
                });
            }
            Event::SequenceStart(..) => {
                stack.push(Open::Sequence(Vec::new(), at));
                continue;
            }
            Event::MappingStart(..) => {
                stack.push(Open::Mapping(Vec::new(), None, at));
                continue;
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Open::Sequence(items, start)) => Node::Sequence(items, start),
                _ => continue,
            },
            Event::MappingEnd => match stack.pop() {
                Some(Open::Mapping(entries, _, start)) => Node::Mapping(entries, start),
                _ => continue,
            },
            Event::Scalar(value, style, _, tag) => Node::Scalar {
                text: value.into_owned(),
                plain: style == ScalarStyle::Plain && tag.is_none(),
                tag: tag.map(|tag| tag.suffix.clone()),
                at,
            },
            Event::Alias(_) => Node::Alias(at),
            Event::DocumentEnd if root.is_some() => break,
            _ => continue,
        };
        match stack.last_mut() {
            None => root = Some(node),
            Some(Open::Sequence(items, _)) => items.push(node),
            Some(Open::Mapping(entries, key, _)) => match key.take() {
                Some(key) => entries.push((key, node)),
                None => {
                    // A key: a scalar's text (recordings have no other kind of key).
                    *key = Some(match node {
                        Node::Scalar { text, .. } => text,
                        _ => String::new(),
                    });
                }
            },
        }
    }
    Ok(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_keep_their_place_and_scalars_their_type() {
        let text = "a:\n  - 1\n  - 'x'\n  - !!binary aGk=\nb: {c: true, d: null}\n";
        let root = parse(text).unwrap().unwrap();
        assert_eq!(
            root.to_json(),
            serde_json::json!({"a": [1, "x", "aGk="], "b": {"c": true, "d": null}})
        );
        let items = root.get("a").unwrap().items();
        assert_eq!(items[1].place(), Place { line: 3, column: 5 });
        assert!(matches!(&items[2], Node::Scalar { tag: Some(tag), .. } if tag == "binary"));
    }

    #[test]
    fn deep_nesting_is_an_error() {
        let text = "[".repeat(MAX_DEPTH + 1);
        assert!(parse(&text).is_err());
    }
}

//! Paths into a request body, such as `messages[4].tool_calls[0].function.arguments`.

use std::fmt;

use serde::{Serialize, Serializer};

/// One step of a [`PartPath`]: an object key or an array index.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PathSegment {
    Key(String),
    Index(usize),
}

/// Where a part of a prompt comes from inside its request body.
///
/// Displayed the way a user reads it: `messages[4].tool_calls[0].function.arguments`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartPath(Vec<PathSegment>);

impl PartPath {
    pub fn root() -> Self {
        Self(Vec::new())
    }

    pub fn key(&self, key: &str) -> Self {
        let mut segments = self.0.clone();
        segments.push(PathSegment::Key(key.to_owned()));
        Self(segments)
    }

    pub fn index(&self, index: usize) -> Self {
        let mut segments = self.0.clone();
        segments.push(PathSegment::Index(index));
        Self(segments)
    }

    pub fn segments(&self) -> &[PathSegment] {
        &self.0
    }

    /// The path cut to its first `len` segments.
    pub fn truncated(&self, len: usize) -> Self {
        Self(self.0.iter().take(len).cloned().collect())
    }
}

impl fmt::Display for PartPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (position, segment) in self.0.iter().enumerate() {
            match segment {
                PathSegment::Key(key) if position == 0 => write!(f, "{key}")?,
                PathSegment::Key(key) => write!(f, ".{key}")?,
                PathSegment::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

impl Serialize for PartPath {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_like_a_user_writes_it() {
        let path = PartPath::root()
            .key("messages")
            .index(4)
            .key("tool_calls")
            .index(0)
            .key("function")
            .key("arguments");
        assert_eq!(
            path.to_string(),
            "messages[4].tool_calls[0].function.arguments"
        );
        assert_eq!(path.truncated(2).to_string(), "messages[4]");
    }
}

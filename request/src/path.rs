//! Paths into a request body, such as `messages[4].tool_calls[0].function.arguments`.

use std::fmt;
use std::sync::Arc;

use serde::{Serialize, Serializer};

/// One step of a [`PartPath`]: an object key or an array index.
///
/// Keys are the field names of the request formats kvlint reads, named in its code: a
/// session holds a path for every part of every turn, and static keys cost no allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PathSegment {
    Key(&'static str),
    Index(usize),
}

/// Where a part of a prompt comes from inside its request body.
///
/// Displayed the way a user reads it: `messages[4].tool_calls[0].function.arguments`.
///
/// Cheap to clone: a session's parts share their paths (see
/// [`SharedParts`](crate::request::SharedParts)).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartPath(Arc<[PathSegment]>);

impl PartPath {
    pub fn root() -> Self {
        Self::default()
    }

    /// Whether another holder shares this path's segments.
    pub fn is_shared(&self) -> bool {
        Arc::strong_count(&self.0) > 1
    }

    pub fn key(&self, key: &'static str) -> Self {
        self.then(PathSegment::Key(key))
    }

    pub fn index(&self, index: usize) -> Self {
        self.then(PathSegment::Index(index))
    }

    fn then(&self, segment: PathSegment) -> Self {
        Self(self.0.iter().copied().chain([segment]).collect())
    }

    pub fn segments(&self) -> &[PathSegment] {
        &self.0
    }

    /// The value this path names inside `root`.
    pub fn lookup<'v>(&self, root: &'v serde_json::Value) -> Option<&'v serde_json::Value> {
        self.0
            .iter()
            .try_fold(root, |value, segment| match segment {
                PathSegment::Key(key) => value.get(key),
                PathSegment::Index(index) => value.get(index),
            })
    }

    /// The path cut to its first `len` segments.
    pub fn truncated(&self, len: usize) -> Self {
        Self(self.0.iter().take(len).copied().collect())
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

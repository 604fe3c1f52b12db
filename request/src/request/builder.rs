//! The parts list under construction, and the steps every API shares: tool definitions,
//! cache-relevant settings, message scaffolding and string fields.

use std::ops::Range;

use serde_json::{Map, Value};

use super::{
    BodyError, Message, Part, PartKind, Request, Role, SharedParts, Tool, without_cache_control,
};
use crate::json::{compact_json, kind_of, same_bytes};
use crate::path::PartPath;

/// What [`super::Request::parse`] collects while it walks a body in cache order.
pub(super) struct PartsBuilder<'s> {
    pub(super) tools: Vec<Tool>,
    pub(super) messages: Vec<Message>,
    pub(super) parts: Vec<Part>,
    shared: &'s mut SharedParts,
    earlier: Option<EarlierTurn<'s>>,
}

/// The session's previous request, whose messages this one sends again.
struct EarlierTurn<'e> {
    request: &'e Request,
    /// Each message's parts in `request.parts`; `None` where they are not one run.
    parts: Vec<Option<Range<usize>>>,
}

impl<'e> EarlierTurn<'e> {
    fn new(request: &'e Request) -> Self {
        let mut parts: Vec<Option<Range<usize>>> = vec![None; request.messages.len()];
        let mut seen = vec![false; request.messages.len()];
        for (position, part) in request.parts.iter().enumerate() {
            let Some(message) = part.message else {
                continue;
            };
            match (parts.get_mut(message), seen.get_mut(message)) {
                (Some(Some(run)), _) if run.end == position => run.end = position + 1,
                (Some(run @ None), Some(seen @ false)) => {
                    *run = Some(position..position + 1);
                    *seen = true;
                }
                // A second run: its parts are not one block of the list.
                (Some(run), _) => *run = None,
                (None, _) => {}
            }
        }
        Self { request, parts }
    }
}

impl<'s> PartsBuilder<'s> {
    /// `earlier`: the request the session sent before this one, if it is to be reused.
    pub(super) fn new(shared: &'s mut SharedParts, earlier: Option<&'s Request>) -> Self {
        Self {
            tools: Vec::new(),
            messages: Vec::new(),
            parts: Vec::new(),
            shared,
            earlier: earlier.map(EarlierTurn::new),
        }
    }

    /// A message the earlier request sent at the same place with the same bytes: its record
    /// and parts are taken over as they are, not read again (an agent resends every earlier
    /// message each turn). Whether it was.
    pub(super) fn repeat_earlier_message(&mut self, path: &PartPath, message: &Value) -> bool {
        let index = self.messages.len();
        let Some(earlier) = &self.earlier else {
            return false;
        };
        let Some(record) = earlier.request.messages.get(index) else {
            return false;
        };
        let Some(Some(parts)) = earlier.parts.get(index) else {
            return false;
        };
        let same = record.path == *path
            && record
                .path
                .lookup(&earlier.request.body)
                .is_some_and(|sent| same_bytes(sent, message));
        if same {
            self.messages.push(record.clone());
            self.parts
                .extend_from_slice(&earlier.request.parts[parts.clone()]);
        }
        same
    }

    pub(super) fn push(
        &mut self,
        path: PartPath,
        kind: PartKind,
        text: String,
        message: Option<usize>,
    ) {
        self.parts.push(Part {
            path: self.shared.path(path),
            kind,
            text: self.shared.text(text),
            message,
        });
    }

    /// The `tools` array, as sent apart from `cache_control`.
    pub(super) fn tools(&mut self, body: &Map<String, Value>) -> Result<(), BodyError> {
        let Some(tools) = body.get("tools").filter(|tools| !tools.is_null()) else {
            return Ok(());
        };
        let tools_path = PartPath::root().key("tools");
        let tools = tools.as_array().ok_or_else(|| {
            BodyError::new(
                tools_path.clone(),
                format!("`tools` must be an array, found {}", kind_of(tools)),
            )
        })?;
        for (index, tool) in tools.iter().enumerate() {
            let path = tools_path.index(index);
            if !tool.is_object() {
                return Err(BodyError::new(
                    path,
                    format!("a tool must be an object, found {}", kind_of(tool)),
                ));
            }
            // A function tool without a name is read: the API or engine refuses that request
            // (`Tool::is_nameless_function`), not the whole file.
            let name = tool
                .pointer("/function/name")
                .or_else(|| tool.get("name"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            self.tool_part(path, &name, &without_cache_control(tool));
        }
        Ok(())
    }

    /// Each item of the array a body holds under `key` (its messages, contents), read by
    /// `read` with its path; an error naming the key when it is not an array.
    pub(super) fn each_item(
        &mut self,
        body: &Map<String, Value>,
        key: &'static str,
        mut read: impl FnMut(&mut Self, PartPath, &Value) -> Result<(), BodyError>,
    ) -> Result<(), BodyError> {
        let path = PartPath::root().key(key);
        let items = body
            .get(key)
            .and_then(Value::as_array)
            .ok_or_else(|| BodyError::new(path.clone(), format!("`{key}` must be an array")))?;
        for (index, item) in items.iter().enumerate() {
            read(self, path.index(index), item)?;
        }
        Ok(())
    }

    /// A tool definition: a part, and a tool by its name.
    pub(super) fn tool_part(&mut self, path: PartPath, name: &str, definition: &Value) {
        self.push(path.clone(), PartKind::Tool, compact_json(definition), None);
        self.tools.push(Tool {
            name: name.to_owned(),
            path,
            definition: definition.clone(),
        });
    }

    /// Settings that change what the provider caches: tool choice and output schemas are
    /// rendered after the tools; Anthropic's thinking parameters and OpenAI's reasoning
    /// effort invalidate the system prompt and messages when they change.
    pub(super) fn settings(&mut self, body: &Map<String, Value>) {
        for setting in [
            "tool_choice",
            "response_format",
            "text",
            "thinking",
            "reasoning",
            "reasoning_effort",
        ] {
            if let Some(value) = body.get(setting).filter(|value| !value.is_null()) {
                let path = PartPath::root().key(setting);
                self.push(path, PartKind::Setting, compact_json(value), None);
            }
        }
    }

    /// Starts a message: records it and pushes its header part. Scaffolding parts (header
    /// and end) carry no text: what stands there is the renderer's decision.
    pub(super) fn open_message(&mut self, path: PartPath, role: Role) -> usize {
        let index = self.messages.len();
        self.messages.push(Message {
            path: path.clone(),
            role,
        });
        self.push(path, PartKind::Header, String::new(), Some(index));
        index
    }

    pub(super) fn close_message(&mut self, path: PartPath, message: usize) {
        self.push(path, PartKind::End, String::new(), Some(message));
    }

    /// A string field of a message, item or block as a part; absent and null are skipped.
    pub(super) fn string_field(
        &mut self,
        path: &PartPath,
        object: &Map<String, Value>,
        key: &'static str,
        kind: PartKind,
        message: usize,
    ) -> Result<(), BodyError> {
        match object.get(key) {
            None | Some(Value::Null) => Ok(()),
            Some(Value::String(text)) => {
                self.push(path.key(key), kind, text.clone(), Some(message));
                Ok(())
            }
            Some(other) => Err(BodyError::new(
                path.key(key),
                format!("`{key}` must be a string, found {}", kind_of(other)),
            )),
        }
    }
}

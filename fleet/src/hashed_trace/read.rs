//! Reading a hashed trace whole: the requests each format's reader gives, grouped into
//! sessions and chained by [`crate::TraceBuilder`], and what every reader shares (a line's
//! JSON object with its place, the lines numbered).

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::{HashedFormat, HashedTraceError, bailian, lmcache, mooncake, weka};
use crate::trace::{Blocks, NewRequest, Trace, TraceBuilder};

/// One request read from a hashed trace.
pub(super) struct ReadRequest {
    /// Who its session is (the file's session id, else its line).
    pub(super) session: String,
    pub(super) time: Option<f64>,
    pub(super) input_length: u32,
    pub(super) output_length: u32,
    pub(super) hash_ids: Vec<u64>,
    /// Where it is in the file, for errors.
    pub(super) line: usize,
    /// Where its chain of hashes starts: 0, or a conversation's own when its ids are
    /// numbered within it.
    pub(super) seed: u64,
}

/// Reads the hashed trace `text` (from the file `path`) in `format`, or the form its first
/// record shows; `block_size` overrides the form's tokens per id (a `weka` file says its own).
pub fn read_hashed(
    path: &str,
    text: &str,
    format: Option<HashedFormat>,
    block_size: Option<u32>,
) -> Result<Trace, HashedTraceError> {
    let format = match format {
        Some(format) => format,
        None => detect(text).ok_or_else(|| HashedTraceError::Unknown {
            path: path.to_owned(),
        })?,
    };
    let (requests, file_block) = match format {
        HashedFormat::Mooncake | HashedFormat::MooncakeAgentic => {
            (mooncake::read(path, text)?, None)
        }
        HashedFormat::Bailian => (bailian::read(path, text)?, None),
        HashedFormat::Weka => {
            let (requests, block) = weka::read(path, text)?;
            (requests, Some(block))
        }
        HashedFormat::Lmcache => lmcache::read(path, text)?,
    };
    let block_size = block_size
        .or(file_block)
        .unwrap_or(format.default_block_size())
        .max(1);
    trace_of(path, format, requests, block_size)
}

/// The form of a hashed trace, from its first record.
pub(super) fn detect(text: &str) -> Option<HashedFormat> {
    let first: Value = match serde_json::from_str(text) {
        Ok(whole) => whole,
        Err(_) => serde_json::from_str(text.lines().find(|line| !line.trim().is_empty())?).ok()?,
    };
    let record = first.as_object()?;
    if record.contains_key("chat_id") && record.contains_key("parent_chat_id") {
        Some(HashedFormat::Bailian)
    } else if record.contains_key("chunk_hashes") {
        Some(HashedFormat::Lmcache)
    } else if record.get("requests").is_some_and(Value::is_array) {
        Some(HashedFormat::Weka)
    } else if record.contains_key("input_length") {
        Some(HashedFormat::Mooncake)
    } else {
        None
    }
}

/// The trace of requests read from a file: grouped by session in order of first appearance,
/// each session's requests in the file's order.
fn trace_of(
    path: &str,
    format: HashedFormat,
    requests: Vec<ReadRequest>,
    block_size: u32,
) -> Result<Trace, HashedTraceError> {
    let mut order: HashMap<String, usize> = HashMap::new();
    let mut grouped: Vec<(String, Vec<ReadRequest>)> = Vec::new();
    for request in requests {
        check_ids(path, &request, block_size)?;
        let position = *order.entry(request.session.clone()).or_insert_with(|| {
            grouped.push((request.session.clone(), Vec::new()));
            grouped.len() - 1
        });
        grouped[position].1.push(request);
    }
    let mut builder = TraceBuilder::new(block_size, format!("{} trace", format.name()));
    for (identity, requests) in grouped {
        let seed = requests.first().map_or(0, |request| request.seed);
        let session = builder.open(identity, seed);
        let mut previous = PreviousIds::default();
        for request in &requests {
            builder.push(session, &previous.next(request, block_size));
        }
        builder.close(session);
    }
    Ok(builder.finish())
}

/// Refuses a request with more ids than blocks of `block_size` tokens its prompt holds.
pub(super) fn check_ids(
    path: &str,
    request: &ReadRequest,
    block_size: u32,
) -> Result<(), HashedTraceError> {
    if request.hash_ids.len() <= (request.input_length as usize).div_ceil(block_size as usize) {
        return Ok(());
    }
    Err(HashedTraceError::Line {
        path: path.to_owned(),
        line: request.line,
        reason: format!(
            "{} hash ids for {} tokens: more than blocks of {block_size} tokens hold (is the block size the trace's?)",
            request.hash_ids.len(),
            request.input_length
        ),
    })
}

/// A session's previous request's full blocks' ids: its next request keeps the blocks of
/// their common prefix.
#[derive(Default)]
pub(super) struct PreviousIds(Vec<u64>);

impl PreviousIds {
    /// What `request` (whose ids [`check_ids`] passed), the session's next, is to its trace on
    /// blocks of `block_size` tokens.
    pub(super) fn next<'a>(&mut self, request: &'a ReadRequest, block_size: u32) -> NewRequest<'a> {
        let size = block_size as usize;
        let full = request
            .hash_ids
            .len()
            .min(request.input_length as usize / size);
        let ids = &request.hash_ids[..full];
        let kept = kvlint_protocol::common_slice_prefix_len(&self.0, ids);
        self.0.clear();
        self.0.extend_from_slice(ids);
        let shared = (kept * size) as u32;
        NewRequest {
            time: request.time,
            input_tokens: request.input_length,
            output_tokens: request.output_length,
            shared_with_previous: shared,
            shared_with_previous_sequence: shared,
            kept_blocks: kept,
            blocks: Blocks::Ids(&ids[kept..]),
            finding: None,
        }
    }
}

/// A line's JSON object, with the file and line its errors name.
pub(super) struct Record<'a> {
    pub(super) path: &'a str,
    pub(super) line: usize,
    pub(super) fields: Map<String, Value>,
}

impl<'a> Record<'a> {
    pub(super) fn parse(path: &'a str, line: usize, text: &str) -> Result<Self, HashedTraceError> {
        let value: Value = serde_json::from_str(text).map_err(|error| HashedTraceError::Line {
            path: path.to_owned(),
            line,
            reason: format!("not JSON: {error}"),
        })?;
        Self::of(path, line, value)
    }

    pub(super) fn of(path: &'a str, line: usize, value: Value) -> Result<Self, HashedTraceError> {
        match value {
            Value::Object(fields) => Ok(Self { path, line, fields }),
            _ => Err(HashedTraceError::Line {
                path: path.to_owned(),
                line,
                reason: "not a JSON object".into(),
            }),
        }
    }

    pub(super) fn into_value(self) -> Value {
        Value::Object(self.fields)
    }

    pub(super) fn error(&self, reason: String) -> HashedTraceError {
        HashedTraceError::Line {
            path: self.path.to_owned(),
            line: self.line,
            reason,
        }
    }

    /// A count of tokens.
    pub(super) fn tokens(&self, key: &str) -> Result<u32, HashedTraceError> {
        self.fields
            .get(key)
            .and_then(Value::as_u64)
            .and_then(|value| u32::try_from(value).ok())
            .ok_or_else(|| self.error(format!("`{key}` is missing or not a count of tokens")))
    }

    /// A non-negative number, when the record has it.
    pub(super) fn number(&self, key: &str) -> Result<Option<f64>, HashedTraceError> {
        match self.fields.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => value
                .as_f64()
                .filter(|number| number.is_finite() && *number >= 0.0)
                .map(Some)
                .ok_or_else(|| self.error(format!("`{key}` is not a non-negative number"))),
        }
    }

    pub(super) fn hash_ids(&self, key: &str) -> Result<Vec<u64>, HashedTraceError> {
        let list = match self.fields.get(key) {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::Array(list)) => list,
            Some(_) => return Err(self.error(format!("`{key}` is not a list"))),
        };
        list.iter()
            .map(|id| {
                id.as_u64()
                    .ok_or_else(|| self.error(format!("`{key}` holds {id}, not an integer id")))
            })
            .collect()
    }

    /// An identifier: a string, or a number written as text.
    pub(super) fn identifier(&self, key: &str) -> Option<String> {
        match self.fields.get(key)? {
            Value::String(text) => Some(text.clone()),
            Value::Number(number) => Some(number.to_string()),
            _ => None,
        }
    }
}

/// The non-empty lines of `text` with their numbers, from 1.
pub(super) fn numbered_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(index, line)| (index + 1, line))
        .filter(|(_, line)| !line.trim().is_empty())
}

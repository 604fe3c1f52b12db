//! Mooncake's JSON Lines (`kvcache-ai/Mooncake`, `FAST25-release/README.md`), and AIPerf's
//! multi-turn form of them (`session_id`, `delay`): see the module above for each field.

use std::collections::HashMap;
use std::io::Write;

use serde_json::Value;

use super::{HashedRequest, HashedTraceError, ReadRequest, Record, milliseconds, numbered_lines};

/// Writes `requests` one line each, the fields in the published order; `agentic` adds the
/// session and the delay after its previous request.
pub(super) fn write(
    requests: &[HashedRequest],
    agentic: bool,
    out: &mut impl Write,
) -> std::io::Result<()> {
    for request in requests {
        let mut fields: Vec<(&str, Value)> = Vec::with_capacity(5);
        if agentic {
            fields.push(("session_id", format!("session-{}", request.session).into()));
        }
        let delay = request
            .previous
            .and_then(|previous| Some(request.time? - requests[previous].time?));
        match (agentic, request.previous, delay) {
            (true, Some(_), Some(delay)) => fields.push(("delay", milliseconds(delay))),
            (true, Some(_), None) => {}
            _ => {
                if let Some(time) = request.time {
                    fields.push(("timestamp", milliseconds(time)));
                }
            }
        }
        fields.push(("input_length", request.input_length.into()));
        fields.push(("output_length", request.output_length.into()));
        fields.push(("hash_ids", request.hash_ids.clone().into()));
        write_line(&fields, out)?;
    }
    Ok(())
}

/// One JSON object on one line, its fields in the order given, spaced as the published files.
pub(super) fn write_line(fields: &[(&str, Value)], out: &mut impl Write) -> std::io::Result<()> {
    out.write_all(b"{")?;
    for (position, (key, value)) in fields.iter().enumerate() {
        if position > 0 {
            out.write_all(b", ")?;
        }
        let value = match value {
            Value::Array(items) => format!(
                "[{}]",
                items
                    .iter()
                    .map(Value::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            other => other.to_string(),
        };
        write!(out, "\"{key}\": {value}")?;
    }
    out.write_all(b"}\n")
}

/// Reads Mooncake lines: a line with a `session_id` joins that session (its `delay` counts
/// from the session's previous request), any other is a session of its own, as AIPerf reads it.
pub(super) fn read(path: &str, text: &str) -> Result<Vec<ReadRequest>, HashedTraceError> {
    let mut last_time: HashMap<String, Option<f64>> = HashMap::new();
    numbered_lines(text)
        .map(|(line, content)| {
            let fields = Line::parse(path, line, content)?;
            let session = fields.session(path, line);
            let time = fields.time(last_time.entry(session.clone()).or_default());
            Ok(fields.request(session, time, line))
        })
        .collect()
}

/// One Mooncake line's fields.
pub(super) struct Line {
    pub session_id: Option<String>,
    timestamp: Option<f64>,
    delay: Option<f64>,
    input_length: u32,
    output_length: u32,
    hash_ids: Vec<u64>,
}

/// A line as it mostly is, read without building its JSON first.
#[derive(serde::Deserialize)]
struct Typed {
    session_id: Option<Identifier>,
    timestamp: Option<f64>,
    delay: Option<f64>,
    input_length: u32,
    output_length: Option<u32>,
    hash_ids: Option<Vec<u64>>,
}

/// A `session_id`: text, a number, or anything else (no session).
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Identifier {
    Text(String),
    Number(serde_json::Number),
    Other(serde::de::IgnoredAny),
}

impl Line {
    /// The line `content`, line `line` of the file `path`.
    pub(super) fn parse(path: &str, line: usize, content: &str) -> Result<Self, HashedTraceError> {
        let typed = serde_json::from_str::<Typed>(content).ok().filter(|typed| {
            [typed.timestamp, typed.delay]
                .into_iter()
                .flatten()
                .all(|number| number.is_finite() && number >= 0.0)
        });
        if let Some(typed) = typed {
            return Ok(Self {
                session_id: match typed.session_id {
                    Some(Identifier::Text(text)) => Some(text),
                    Some(Identifier::Number(number)) => Some(number.to_string()),
                    Some(Identifier::Other(_)) | None => None,
                },
                timestamp: typed.timestamp,
                delay: typed.delay,
                input_length: typed.input_length,
                output_length: typed.output_length.unwrap_or(0),
                hash_ids: typed.hash_ids.unwrap_or_default(),
            });
        }
        // Read again as JSON, for the error that names what is wrong.
        let record = Record::parse(path, line, content)?;
        Ok(Self {
            session_id: record.identifier("session_id"),
            timestamp: record.number("timestamp")?,
            delay: record.number("delay")?,
            input_length: record.tokens("input_length")?,
            output_length: record
                .number("output_length")?
                .map_or(Ok(0), |_| record.tokens("output_length"))?,
            hash_ids: record.hash_ids("hash_ids")?,
        })
    }

    /// Its session: its `session_id`, else the line itself.
    pub(super) fn session(&self, path: &str, line: usize) -> String {
        self.session_id
            .clone()
            .unwrap_or_else(|| format!("{path}:{line}"))
    }

    /// When it was sent, in seconds: its `timestamp`, else its `delay` after its session's
    /// previous request, sent at `session_last`; noted there as the session's last time.
    pub(super) fn time(&self, session_last: &mut Option<f64>) -> Option<f64> {
        let time = match (self.timestamp, self.delay) {
            (Some(timestamp), _) => Some(timestamp / 1000.0),
            (None, Some(delay)) => session_last.map(|last| last + delay / 1000.0),
            (None, None) => None,
        };
        *session_last = time.or(*session_last);
        time
    }

    pub(super) fn request(self, session: String, time: Option<f64>, line: usize) -> ReadRequest {
        ReadRequest {
            time,
            input_length: self.input_length,
            output_length: self.output_length,
            hash_ids: self.hash_ids,
            line,
            session,
            seed: 0,
        }
    }
}

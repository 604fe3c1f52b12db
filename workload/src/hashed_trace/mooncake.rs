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
    let mut last_time: HashMap<String, f64> = HashMap::new();
    numbered_lines(text)
        .map(|(line, content)| {
            let record = Record::parse(path, line, content)?;
            let session = record
                .identifier("session_id")
                .unwrap_or_else(|| format!("{path}:{line}"));
            let time = match (record.number("timestamp")?, record.number("delay")?) {
                (Some(timestamp), _) => Some(timestamp / 1000.0),
                (None, Some(delay)) => last_time.get(&session).map(|last| last + delay / 1000.0),
                (None, None) => None,
            };
            if let Some(time) = time {
                last_time.insert(session.clone(), time);
            }
            Ok(ReadRequest {
                time,
                input_length: record.tokens("input_length")?,
                output_length: record
                    .number("output_length")?
                    .map_or(Ok(0), |_| record.tokens("output_length"))?,
                hash_ids: record.hash_ids("hash_ids")?,
                line,
                session,
                seed: 0,
            })
        })
        .collect()
}

//! One row of a request log, whatever its shape, as the request it records: its body (as
//! sent when the row kept the bytes), time, endpoint, headers, session id and response.

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::Body;

/// The columns of a row, as its file gave them.
pub(super) enum Columns<'a> {
    /// A JSONL line: each column's JSON text, as written.
    Json(BTreeMap<String, &'a RawValue>),
    /// A Parquet row: each column as a JSON value.
    Parquet(Map<String, Value>),
}

/// A column's value, and the JSON text a string column holds (the body as sent) when the
/// column is one of the JSON-carrying columns (`request`, `body`, `input`, `response`,
/// `output`) and its string parses as JSON.
struct Column {
    value: Value,
    sent: Option<String>,
}

impl Columns<'_> {
    fn has(&self, name: &str) -> bool {
        match self {
            Self::Json(columns) => columns.contains_key(name),
            Self::Parquet(columns) => columns.contains_key(name),
        }
    }

    /// The column `name` as a value (`null` columns are absent).
    fn value(&self, name: &str) -> Result<Option<Value>, String> {
        let value = match self {
            Self::Json(columns) => match columns.get(name) {
                Some(raw) => serde_json::from_str::<Value>(raw.get())
                    .map_err(|error| format!("column `{name}`: {error}"))?,
                None => return Ok(None),
            },
            Self::Parquet(columns) => match columns.get(name) {
                Some(value) => value.clone(),
                None => return Ok(None),
            },
        };
        Ok((!value.is_null()).then_some(value))
    }

    /// A JSON-carrying column: an object or array as written, or a string holding JSON
    /// (the usual case in Parquet and in Langfuse's `input`), parsed.
    fn json(&self, name: &str) -> Result<Option<Column>, String> {
        if let Self::Json(columns) = self
            && let Some(raw) = columns.get(name)
            && raw.get().starts_with(['{', '['])
        {
            let value = serde_json::from_str::<Value>(raw.get())
                .map_err(|error| format!("column `{name}`: {error}"))?;
            return Ok(Some(Column {
                value,
                sent: Some(raw.get().to_owned()),
            }));
        }
        let Some(value) = self.value(name)? else {
            return Ok(None);
        };
        match value {
            Value::String(text) => match serde_json::from_str::<Value>(&text) {
                Ok(parsed @ (Value::Object(_) | Value::Array(_))) => Ok(Some(Column {
                    value: parsed,
                    sent: Some(text),
                })),
                // A plain text (a Langfuse output that is the completion's text).
                _ => Ok(Some(Column {
                    value: Value::String(text),
                    sent: None,
                })),
            },
            value => Ok(Some(Column { value, sent: None })),
        }
    }

    fn text(&self, name: &str) -> Result<Option<String>, String> {
        Ok(match self.value(name)? {
            Some(Value::String(text)) => Some(text),
            Some(Value::Number(number)) => Some(number.to_string()),
            _ => None,
        })
    }
}

/// The shape a row was read as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Shape {
    /// `{"time", "request", "response", "headers", "endpoint"|"url", "session_id"}` (or
    /// `body` for `request`, as OpenAI Batch lines name it).
    Pair,
    /// A Langfuse GENERATION observation: `start_time`, `input`, `provided_model_name` or
    /// `model`, `session_id`, `output`, `usage_details`, `type`.
    Langfuse,
    /// The row is the request body.
    Body,
}

/// A row read as the request it records.
#[derive(Debug)]
pub(super) struct LogRow {
    pub body: Body,
    /// The body, parsed.
    pub value: Value,
    pub url: String,
    /// Every header the row kept, name and value.
    pub headers: Vec<(String, String)>,
    pub time: Option<f64>,
    /// A `session_id` column.
    pub session_id: Option<String>,
    pub response: Option<Value>,
    /// A Langfuse row whose `type` is not `GENERATION` (a span, an event): not a prompt.
    pub not_generation: Option<String>,
}

impl LogRow {
    /// The model the row names: the body's `model`.
    pub fn model(&self) -> Option<&str> {
        self.value.get("model").and_then(Value::as_str)
    }
}

/// The shape of a row, told by its columns.
fn shape(columns: &Columns) -> Shape {
    if columns.has("request") || (columns.has("body") && !columns.has("messages")) {
        Shape::Pair
    } else if columns.has("input")
        && [
            "start_time",
            "provided_model_name",
            "trace_id",
            "usage_details",
        ]
        .iter()
        .any(|name| columns.has(name))
    {
        Shape::Langfuse
    } else {
        Shape::Body
    }
}

/// Reads a row's columns as a request; `whole` is the row's own JSON (a JSONL line), for a
/// row that is a bare body. The error says why the row is bad.
pub(super) fn read_row(columns: &Columns, whole: Option<&str>) -> Result<LogRow, String> {
    let session_id = columns.text("session_id")?;
    match shape(columns) {
        Shape::Pair => {
            let Some(request) = columns.json("request")?.or(columns.json("body")?) else {
                return Err("no request body".into());
            };
            let url = columns
                .text("endpoint")?
                .or(columns.text("url")?)
                .unwrap_or_default();
            Ok(LogRow {
                body: match request.sent {
                    Some(sent) => Body::Sent(sent),
                    None => Body::Rewritten(request.value.clone()),
                },
                value: request.value,
                url,
                headers: headers(columns.value("headers")?.as_ref()),
                time: columns.value("time")?.as_ref().and_then(time_of),
                session_id,
                response: columns.json("response")?.map(|column| column.value),
                not_generation: None,
            })
        }
        Shape::Langfuse => langfuse(columns, session_id),
        Shape::Body => {
            let value = match (columns, whole) {
                (Columns::Json(_), Some(text)) => serde_json::from_str::<Value>(text)
                    .map_err(|error| format!("invalid JSON: {error}"))?,
                (Columns::Parquet(map), _) => Value::Object(map.clone()),
                (Columns::Json(_), None) => return Err("no request body".into()),
            };
            Ok(LogRow {
                body: match whole {
                    Some(text) => Body::Sent(text.to_owned()),
                    None => Body::Rewritten(value.clone()),
                },
                value,
                url: String::new(),
                headers: Vec::new(),
                time: None,
                session_id,
                response: None,
                not_generation: None,
            })
        }
    }
}

/// A Langfuse observation: its `input` is the body, or the messages of a chat body named by
/// its model; its `output` and `usage_details` the response.
fn langfuse(columns: &Columns, session_id: Option<String>) -> Result<LogRow, String> {
    let not_generation = columns
        .text("type")?
        .filter(|kind| !kind.eq_ignore_ascii_case("GENERATION"));
    let model = columns
        .text("provided_model_name")?
        .or(columns.text("model")?);
    let Some(input) = columns.json("input")? else {
        return Err("no `input`".into());
    };
    let (body, value) = match input.value {
        Value::Array(messages) => {
            let mut body = Map::new();
            if let Some(model) = &model {
                body.insert("model".into(), Value::String(model.clone()));
            }
            body.insert("messages".into(), Value::Array(messages));
            let value = Value::Object(body);
            (Body::Reconstructed(value.clone()), value)
        }
        Value::Object(mut body) if !body.contains_key("model") && model.is_some() => {
            if let Some(model) = &model {
                body.insert("model".into(), Value::String(model.clone()));
            }
            let value = Value::Object(body);
            (Body::Reconstructed(value.clone()), value)
        }
        Value::Object(body) => {
            let value = Value::Object(body);
            let body = match input.sent {
                Some(sent) => Body::Sent(sent),
                None => Body::Rewritten(value.clone()),
            };
            (body, value)
        }
        _ => return Err("`input` is neither a messages array nor a request body".into()),
    };
    Ok(LogRow {
        body,
        value,
        url: String::new(),
        headers: Vec::new(),
        time: columns.value("start_time")?.as_ref().and_then(time_of),
        session_id,
        response: langfuse_response(columns)?,
        not_generation,
    })
}

/// A Langfuse generation's `output` (the assistant message, or its text) and the output
/// tokens its `usage_details` count, as a chat completion.
fn langfuse_response(columns: &Columns) -> Result<Option<Value>, String> {
    let output = columns.json("output")?.map(|column| column.value);
    let usage = columns.value("usage_details")?;
    let output_tokens = usage.as_ref().and_then(|usage| {
        ["output", "completion_tokens", "output_tokens"]
            .iter()
            .find_map(|key| usage.get(key).and_then(Value::as_u64))
    });
    if output.is_none() && output_tokens.is_none() {
        return Ok(None);
    }
    let message = match output {
        Some(Value::String(text)) => json!({"role": "assistant", "content": text}),
        Some(message @ Value::Object(_)) => message,
        _ => json!({"role": "assistant", "content": null}),
    };
    let mut response =
        json!({"object": "chat.completion", "choices": [{"index": 0, "message": message}]});
    if let (Some(tokens), Some(object)) = (output_tokens, response.as_object_mut()) {
        object.insert("usage".into(), json!({"completion_tokens": tokens}));
    }
    Ok(Some(response))
}

/// A row's headers: an object of names to a string (or a list of strings, each kept).
fn headers(value: Option<&Value>) -> Vec<(String, String)> {
    let Some(Value::Object(headers)) = value else {
        return Vec::new();
    };
    let mut kept = Vec::new();
    for (name, value) in headers {
        match value {
            Value::String(text) => kept.push((name.clone(), text.clone())),
            Value::Array(values) => kept.extend(
                values
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|text| (name.clone(), text.to_owned())),
            ),
            _ => {}
        }
    }
    kept
}

/// A row's time in seconds since the Unix epoch: a number of seconds (milliseconds when
/// larger than any date in seconds, as session files read it), RFC 3339 text, or
/// ClickHouse's `2025-03-04 10:22:48.123` (UTC).
pub(super) fn time_of(value: &Value) -> Option<f64> {
    match value {
        Value::String(text) => parse_time(text),
        other => kvlint_core::session::recorded_time(other),
    }
}

/// Seconds since the Unix epoch of RFC 3339 text, a UTC date and time without an offset
/// (`2025-03-04 10:22:48.123`, `2025-03-04T10:22:48`), or a date (its midnight, UTC).
pub fn parse_time(text: &str) -> Option<f64> {
    let text = text.trim();
    if let Some(seconds) = kvlint_core::session::unix_seconds(text) {
        return Some(seconds);
    }
    let naive = ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"]
        .iter()
        .find_map(|format| chrono::NaiveDateTime::parse_from_str(text, format).ok())
        .or_else(|| {
            chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
                .ok()
                .map(|date| date.and_time(chrono::NaiveTime::MIN))
        })?;
    let time = naive.and_utc();
    Some(time.timestamp() as f64 + f64::from(time.timestamp_subsec_micros()) / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_in_the_forms_logs_write_them() {
        assert_eq!(parse_time("1970-01-02"), Some(86_400.0));
        assert_eq!(parse_time("1970-01-01 00:01:40.500"), Some(100.5));
        assert_eq!(parse_time("1970-01-01T00:01:40Z"), Some(100.0));
        assert_eq!(parse_time("1970-01-01T01:01:40+01:00"), Some(100.0));
        assert_eq!(
            time_of(&json!(1_700_000_000_000_u64)),
            Some(1_700_000_000.0)
        );
        assert_eq!(parse_time("yesterday"), None);
    }

    fn parquet(value: Value) -> Columns<'static> {
        match value {
            Value::Object(map) => Columns::Parquet(map),
            _ => Columns::Parquet(Map::new()),
        }
    }

    #[test]
    fn a_langfuse_generation_becomes_a_chat_body_with_its_model() {
        let columns = parquet(json!({
            "type": "GENERATION",
            "start_time": "2025-03-04 10:22:48.000",
            "provided_model_name": "gpt-4o",
            "session_id": "s-1",
            "input": "[{\"role\":\"user\",\"content\":\"hi\"}]",
            "output": "{\"role\":\"assistant\",\"content\":\"hello\"}",
            "usage_details": {"input": 5, "output": 2, "total": 7},
        }));
        let row = read_row(&columns, None).unwrap();
        assert_eq!(
            row.value,
            json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
        );
        assert_eq!(row.session_id.as_deref(), Some("s-1"));
        assert_eq!(row.time, parse_time("2025-03-04T10:22:48Z"));
        let response = row.response.unwrap();
        assert_eq!(
            response.pointer("/usage/completion_tokens"),
            Some(&json!(2))
        );
        assert_eq!(
            response.pointer("/choices/0/message/content"),
            Some(&json!("hello"))
        );
        assert!(row.not_generation.is_none());
    }

    #[test]
    fn a_langfuse_span_is_no_generation() {
        let columns = parquet(json!({"type": "SPAN", "start_time": 1, "input": "{\"a\": 1}"}));
        let row = read_row(&columns, None).unwrap();
        assert_eq!(row.not_generation.as_deref(), Some("SPAN"));
    }

    #[test]
    fn a_pair_keeps_its_request_as_sent() {
        let line = r#"{"time": 5, "request": {"model":"m", "messages":[]}, "headers": {"X-A": ["1", "2"]}, "url": "/v1/chat/completions"}"#;
        let columns: BTreeMap<String, &RawValue> = serde_json::from_str(line).unwrap_or_default();
        let row = read_row(&Columns::Json(columns), Some(line)).unwrap();
        assert_eq!(
            row.body,
            Body::Sent(r#"{"model":"m", "messages":[]}"#.into())
        );
        assert_eq!(row.time, Some(5.0));
        assert_eq!(row.headers.len(), 2);
        assert_eq!(row.url, "/v1/chat/completions");
    }
}

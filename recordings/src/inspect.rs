//! Inspect AI eval logs (`samples[].events[]`): each `model` event keeps the request the model
//! API was sent (`call.request`), its long strings moved to the sample's `attachments` and
//! referred to as `attachment://<hash>`, and in recent logs its messages moved to the sample's
//! pool of call messages (`events_data.calls`) and referred to as ranges (`call.call_refs`,
//! `inspect_ai/event/_pool.py`); both are resolved here.
//!
//! A `.eval` log is a zip of `header.json` and one `samples/<id>_epoch_<n>.json` per sample; it
//! is read as the JSON log it stands for (`{"eval": …, "samples": […]}`, the samples in the
//! zip's order), and places are in that text.

use std::io::Read;

use serde_json::{Map, Value};

use super::place::JsonPlaces;
use super::{Body, Container, Interaction, Recording};
use kvlint_request::path::PathSegment;

/// The eval log `text` holds (parsed as `root`), or `None` when it is not one.
pub(super) fn read(root: &Value, text: &str) -> Option<Recording> {
    let root = root.as_object()?;
    if !root.contains_key("eval") {
        return None;
    }
    let samples = root.get("samples")?.as_array()?;
    let mut interactions = Vec::new();
    let mut places = JsonPlaces::new(text);
    for (sample_index, sample) in samples.iter().enumerate() {
        let empty = Map::new();
        let attachments = sample
            .get("attachments")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let events = sample.get("events").and_then(Value::as_array);
        for (event_index, event) in events.into_iter().flatten().enumerate() {
            if event.get("event").and_then(Value::as_str) != Some("model") {
                continue;
            }
            let body = match event.get("call").and_then(|call| request(call, sample)) {
                Some(request) => Body::Rewritten(resolved(&request, attachments)),
                None => Body::None("a model call without its request".into()),
            };
            let path = [
                PathSegment::Key("samples"),
                PathSegment::Index(sample_index),
                PathSegment::Key("events"),
                PathSegment::Index(event_index),
                PathSegment::Key("call"),
                PathSegment::Key("request"),
            ];
            let at = places.place(&path);
            let model = event
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let response = event
                .pointer("/call/response")
                .filter(|response| response.is_object())
                .map(|response| resolved(response, attachments));
            interactions.push(Interaction {
                response,
                conversation: None,
                key_headers: Vec::new(),
                time: None,
                index: interactions.len(),
                method: "POST".into(),
                // The model API is not in the log: the model names the endpoint.
                url: format!("inspect://{model}"),
                body,
                at,
            });
        }
    }
    Some(Recording {
        container: Container::Inspect,
        interactions,
    })
}

/// A call's request, its messages taken back from the sample's pool when they were moved
/// there (`resolve_model_event_calls`: `request[call_key] = pool[start:end] for each ref`).
fn request(call: &Value, sample: &Value) -> Option<Value> {
    let mut request = call.get("request")?.as_object()?.clone();
    if let Some(refs) = call.get("call_refs").and_then(Value::as_array) {
        let pool = sample
            .get("events_data")
            .and_then(|data| data.get("calls"))
            .and_then(Value::as_array)?;
        let mut messages = Vec::new();
        for range in refs {
            let bound = |index| {
                range
                    .get(index)
                    .and_then(Value::as_u64)
                    .map(|bound| bound as usize)
            };
            let (start, end) = (bound(0)?, bound(1)?);
            messages.extend(pool.get(start..end.min(pool.len()))?.iter().cloned());
        }
        let key = call
            .get("call_key")
            .and_then(Value::as_str)
            .unwrap_or("messages");
        request.insert(key.to_owned(), Value::Array(messages));
    }
    Some(Value::Object(request))
}

/// The JSON log a `.eval` zip stands for: its header's `eval`, and its samples in order.
pub(super) fn eval_log_text(bytes: &[u8]) -> Result<String, String> {
    let invalid = |error: zip::result::ZipError| format!("not a readable zip: {error}");
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bytes)).map_err(invalid)?;
    let mut header = None;
    let mut samples = Vec::new();
    let mut left = super::MAX_INFLATED;
    for index in 0..archive.len() {
        let mut member = archive.by_index(index).map_err(invalid)?;
        let name = member.name().map_err(invalid)?.into_owned();
        let is_sample = name.starts_with("samples/") && name.ends_with(".json");
        if name != "header.json" && !is_sample {
            continue;
        }
        let mut text = String::new();
        (&mut member)
            .take(left)
            .read_to_string(&mut text)
            .map_err(|error| format!("`{name}` in the zip cannot be read as text: {error}"))?;
        left = left.saturating_sub(text.len() as u64);
        if left == 0 {
            return Err("the zip holds more than 256 MiB of logs".into());
        }
        if is_sample {
            samples.push(text);
        } else {
            header = Some(text);
        }
    }
    let header: Value = header
        .and_then(|header| serde_json::from_str(&header).ok())
        .ok_or("a zip without an Inspect log's `header.json`")?;
    let eval = header.get("eval").ok_or("`header.json` has no `eval`")?;
    let mut text = format!("{{\"eval\": {eval},\n\"samples\": [\n");
    for (index, sample) in samples.iter().enumerate() {
        if index > 0 {
            text.push_str(",\n");
        }
        text.push_str(sample.trim());
    }
    text.push_str("\n]}\n");
    Ok(text)
}

/// A value with every `attachment://<hash>` string replaced by the attachment's text.
fn resolved(value: &Value, attachments: &Map<String, Value>) -> Value {
    match value {
        Value::String(text) => text
            .strip_prefix("attachment://")
            .and_then(|hash| attachments.get(hash))
            .cloned()
            .unwrap_or_else(|| value.clone()),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| resolved(item, attachments))
                .collect(),
        ),
        Value::Object(object) => Value::Object(
            object
                .iter()
                .map(|(key, item)| (key.clone(), resolved(item, attachments)))
                .collect(),
        ),
        other => other.clone(),
    }
}

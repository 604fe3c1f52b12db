//! Inspect AI eval logs in JSON (`samples[].events[]`): each `model` event keeps the request
//! the model API was sent (`call.request`), its long strings moved to the sample's
//! `attachments` and referred to as `attachment://<hash>` (resolved here).

use serde_json::{Map, Value};

use super::{Body, Container, Interaction, Place, Recording};
use crate::locate::{LineColumn, value_range};
use crate::path::PathSegment;

/// The eval log `text` holds (parsed as `root`), or `None` when it is not one.
pub(super) fn read(root: &Value, text: &str) -> Option<Recording> {
    let root = root.as_object()?;
    if !root.contains_key("eval") {
        return None;
    }
    let samples = root.get("samples")?.as_array()?;
    let mut interactions = Vec::new();
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
            let request = event.get("call").and_then(|call| call.get("request"));
            let body = match request {
                Some(request @ Value::Object(_)) => Body::Rewritten(resolved(request, attachments)),
                _ => Body::None("a model call without its request".into()),
            };
            let path = [
                PathSegment::Key("samples"),
                PathSegment::Index(sample_index),
                PathSegment::Key("events"),
                PathSegment::Index(event_index),
                PathSegment::Key("call"),
                PathSegment::Key("request"),
            ];
            let at = value_range(text, &path)
                .map(|range| LineColumn::of_offset(text, range.start))
                .map_or_else(Place::default, |place| Place {
                    line: place.line,
                    column: place.column,
                });
            let model = event
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or_default();
            interactions.push(Interaction {
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

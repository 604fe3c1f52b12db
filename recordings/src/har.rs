//! HTTP Archive 1.2 (`log.entries[].request`, the body in `postData.text`), as browsers'
//! devtools, mitmproxy, Charles and Polly.js write it.

use base64::Engine;
use serde_json::Value;

use super::place::JsonPlaces;
use super::{Body, Container, Interaction, Recording, body_text, key_headers, response_of};
use kvlint_request::path::PathSegment;

/// The HAR `text` holds (parsed as `root`), or `None` when it is not one.
pub(super) fn read(root: &Value, text: &str) -> Option<Recording> {
    let entries = root.get("log")?.get("entries")?.as_array()?;
    let mut places = JsonPlaces::new(text);
    let interactions = entries
        .iter()
        .enumerate()
        .filter_map(|(index, entry)| {
            let request = entry.get("request")?;
            let field = |key: &str| request.get(key).and_then(Value::as_str).unwrap_or_default();
            let post_data = request.get("postData");
            let body = match post_data.and_then(|data| data.get("text")) {
                Some(Value::String(body)) if !body.is_empty() => Body::Sent(body.clone()),
                _ => Body::None("no body".into()),
            };
            let mut path = vec![
                PathSegment::Key("log"),
                PathSegment::Key("entries"),
                PathSegment::Index(index),
                PathSegment::Key("request"),
            ];
            if post_data.is_some() {
                path.extend([PathSegment::Key("postData"), PathSegment::Key("text")]);
            }
            let at = places.place(&path);
            Some(Interaction {
                index,
                method: field("method").to_ascii_uppercase(),
                url: field("url").to_owned(),
                body,
                at,
                response: entry
                    .pointer("/response/content")
                    .and_then(response_content),
                conversation: None,
                key_headers: request_key_headers(request),
                time: entry
                    .get("startedDateTime")
                    .and_then(Value::as_str)
                    .and_then(kvlint_core::session::unix_seconds),
            })
        })
        .collect();
    Some(Recording {
        container: Container::Har,
        interactions,
    })
}

/// A HAR response's `content`: its `text`, base64 when `encoding` says so.
fn response_content(content: &Value) -> Option<Value> {
    let text = content.get("text")?.as_str()?;
    let body = if content.get("encoding").and_then(Value::as_str) == Some("base64") {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .ok()?;
        body_text(bytes)
    } else {
        Body::Sent(text.to_owned())
    };
    response_of(body)
}

/// The headers (`[{name, value}]`) of a request that keys are read from.
fn request_key_headers(request: &Value) -> Vec<(String, String)> {
    let headers = request.get("headers").and_then(Value::as_array);
    key_headers(headers.into_iter().flatten().filter_map(|header| {
        Some((
            header.get("name")?.as_str()?,
            header.get("value")?.as_str()?,
        ))
    }))
}

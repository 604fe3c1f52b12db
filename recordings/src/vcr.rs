//! VCR cassettes in YAML: vcrpy, pytest-recording and pydantic-ai's serializer
//! (`interactions`, `uri`), go-vcr (`interactions`, `url`), Ruby's VCR and R's vcr
//! (`http_interactions`, the body under `string`).

use base64::Engine;

use super::yaml::Node;
use super::{Body, Container, Interaction, Recording, body_text, key_headers, response_of};

/// Whether a YAML file names a cassette's interactions at its top level.
pub(super) fn looks_like_cassette(text: &str) -> bool {
    text.lines().any(|line| {
        ["interactions:", "http_interactions:", "requests:"]
            .iter()
            .any(|key| line.starts_with(key))
    })
}

/// A cassette serialized as msgpack, zlib-compressed and base64-encoded, the whole file (as
/// LangGraph's documentation stores its cassettes: `AdvancedCompressedSerializer`); `None`
/// when the text is not one.
pub(super) fn read_msgpack(text: &str) -> Option<Recording> {
    let looks_base64 = text.bytes().take(64).all(|byte| {
        byte.is_ascii_alphanumeric() || matches!(byte, b'+' | b'/' | b'=' | b'\n' | b'\r')
    });
    if text.is_empty() || !looks_base64 {
        return None;
    }
    let compact: String = text.split_whitespace().collect();
    let compressed = base64::engine::general_purpose::STANDARD
        .decode(compact)
        .ok()?;
    let packed = super::inflate(&compressed).ok()?;
    let value = rmpv::decode::read_value_ref(&mut packed.as_slice()).ok()?;
    let mut recording = read(&node_of(&value, 0)?)?;
    recording.container = Container::VcrMsgpack;
    Some(recording)
}

/// A msgpack value as a node; `None` past the nesting bound.
fn node_of(value: &rmpv::ValueRef<'_>, depth: usize) -> Option<Node> {
    use rmpv::ValueRef;
    if depth > super::yaml::MAX_DEPTH {
        return None;
    }
    let scalar = |text: String, plain: bool| Node::Scalar {
        text,
        plain,
        tag: None,
        at: Default::default(),
    };
    Some(match value {
        ValueRef::String(text) => scalar(text.as_str().unwrap_or_default().to_owned(), false),
        ValueRef::Binary(bytes) => Node::Bytes(bytes.to_vec()),
        ValueRef::Array(items) => Node::Sequence(
            items
                .iter()
                .map(|item| node_of(item, depth + 1))
                .collect::<Option<_>>()?,
            Default::default(),
        ),
        ValueRef::Map(entries) => Node::Mapping(
            entries
                .iter()
                .map(|(key, value)| {
                    let key = match key {
                        ValueRef::String(key) => key.as_str().unwrap_or_default().to_owned(),
                        other => other.to_string(),
                    };
                    Some((key, node_of(value, depth + 1)?))
                })
                .collect::<Option<_>>()?,
            Default::default(),
        ),
        ValueRef::Nil => scalar("null".into(), true),
        other => scalar(other.to_string(), true),
    })
}

pub(super) fn read(root: &Node) -> Option<Recording> {
    if let (Some(requests), None) = (root.get("requests"), root.get("interactions")) {
        return Some(requests_and_responses(requests, root.get("responses")));
    }
    let (container, list) = match (root.get("http_interactions"), root.get("interactions")) {
        (Some(list), _) => (Container::RubyVcr, list),
        (None, Some(list)) => {
            let go_vcr = list.items().iter().any(|item| {
                item.get("request")
                    .and_then(|request| request.get("url"))
                    .is_some()
            });
            (
                if go_vcr {
                    Container::GoVcr
                } else {
                    Container::VcrPy
                },
                list,
            )
        }
        (None, None) => return None,
    };
    let interactions = list
        .items()
        .iter()
        .enumerate()
        .filter_map(|(index, item)| interaction(index, item.get("request")?, item.get("response")))
        .collect();
    Some(Recording {
        container,
        interactions,
    })
}

/// vcrpy's own form, as langchain's partner packages persist it: `requests` and `responses`,
/// two lists side by side (`langchain_tests.conftest.CustomPersister`).
fn requests_and_responses(requests: &Node, responses: Option<&Node>) -> Recording {
    let responses = responses.map(Node::items).unwrap_or_default();
    let interactions = requests
        .items()
        .iter()
        .enumerate()
        .filter_map(|(index, request)| interaction(index, request, responses.get(index)))
        .collect();
    Recording {
        container: Container::VcrPy,
        interactions,
    }
}

/// One recorded request, with the response recorded for it.
fn interaction(index: usize, request: &Node, response: Option<&Node>) -> Option<Interaction> {
    let text = |key: &str| request.get(key).and_then(Node::as_str).unwrap_or_default();
    let url = match text("uri") {
        "" => text("url"),
        uri => uri,
    };
    let (body, at) = match (request.get("parsed_body"), request.get("body")) {
        (Some(parsed), _) => (Body::Rewritten(parsed.to_json()), parsed.place()),
        (None, Some(body)) => (recorded_body(body), body.place()),
        (None, None) => (Body::None("no body".into()), request.place()),
    };
    let response = response.and_then(|response| {
        let body = match (response.get("parsed_body"), response.get("body")) {
            (Some(parsed), _) => Body::Rewritten(parsed.to_json()),
            (None, Some(body)) => recorded_body(body),
            (None, None) => return None,
        };
        response_of(body)
    });
    // `headers: {Name: [value]}` in every VCR flavour.
    let key_headers = match request.get("headers") {
        Some(Node::Mapping(headers, _)) => {
            key_headers(headers.iter().filter_map(|(name, values)| {
                let value = values.items().first().unwrap_or(values).as_str()?;
                Some((name.as_str(), value))
            }))
        }
        _ => Vec::new(),
    };
    Some(Interaction {
        index,
        method: text("method").to_ascii_uppercase(),
        url: url.to_owned(),
        body,
        at,
        response,
        conversation: None,
        key_headers,
        time: None,
    })
}

/// A body node: a string, base64 under a `binary` tag, or either under `string` (Ruby's
/// `{encoding, string}`, vcrpy's `{string}`).
fn recorded_body(body: &Node) -> Body {
    match body {
        Node::Mapping(..) => match body.get("string") {
            Some(inner) => recorded_body(inner),
            None => Body::None("a body without `string`".into()),
        },
        Node::Scalar {
            text,
            tag: Some(tag),
            ..
        } if tag == "binary" => {
            let compact: String = text.split_whitespace().collect();
            match base64::engine::general_purpose::STANDARD.decode(compact) {
                Ok(bytes) => body_text(bytes),
                Err(error) => Body::None(format!("a binary body that is not base64: {error}")),
            }
        }
        Node::Bytes(bytes) => body_text(bytes.clone()),
        Node::Scalar {
            plain: true, text, ..
        } if matches!(text.as_str(), "" | "~" | "null") => Body::None("no body".into()),
        Node::Scalar { text, .. } => Body::Sent(text.clone()),
        _ => Body::None("a body that is not text".into()),
    }
}

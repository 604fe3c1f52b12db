//! Recorded responses, as one JSON object: a JSON body as it is, a streamed one (server-sent
//! events) put back together in the shape its API answers without streaming — the text
//! generated and the usage the provider reported (OpenAI chat chunks, Responses events,
//! Anthropic message events, Gemini chunks; `docs` of each API's streaming format).

use serde_json::{Map, Value, json};

/// The response `text` holds: JSON, or a stream of `data:` events reassembled; `None` when it is
/// neither.
pub fn parse_response(text: &str) -> Option<Value> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') {
        return serde_json::from_str(trimmed).ok();
    }
    // Gemini's REST stream without SSE is a JSON array of chunks.
    if trimmed.starts_with('[') {
        let chunks: Vec<Value> = serde_json::from_str(trimmed).ok()?;
        return reassemble(chunks);
    }
    let events: Vec<Value> = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str(data.trim()).ok())
        .collect();
    reassemble(events)
}

/// A stream's events as the response they stand for.
fn reassemble(events: Vec<Value>) -> Option<Value> {
    let kind = |event: &Value| event.get("type").and_then(Value::as_str).map(str::to_owned);
    let first = events.first()?;
    // OpenAI Responses: the last event that carries the whole response.
    if kind(first).is_some_and(|kind| kind.starts_with("response.")) {
        return events
            .iter()
            .rev()
            .find_map(|event| {
                event
                    .get("response")
                    .filter(|response| response.get("output").is_some())
            })
            .cloned();
    }
    // Anthropic Messages: `message_start` holds the message and its input usage, deltas the
    // text, `message_delta` the output usage.
    if kind(first).as_deref() == Some("message_start") {
        let mut message = first.get("message").cloned().unwrap_or_else(|| json!({}));
        let mut text = String::new();
        let mut usage = message
            .get("usage")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for event in &events {
            if let Some(delta) = event.get("delta") {
                text.push_str(
                    delta
                        .get("text")
                        .and_then(Value::as_str)
                        .unwrap_or_default(),
                );
            }
            if kind(event).as_deref() == Some("message_delta") {
                merge(&mut usage, event.get("usage"));
            }
        }
        message["content"] = json!([{"type": "text", "text": text}]);
        message["usage"] = Value::Object(usage);
        return Some(message);
    }
    // Gemini: chunks of candidates, usage in the last that has it.
    if first.get("candidates").is_some() || first.get("usageMetadata").is_some() {
        let text: String = events
            .iter()
            .filter_map(|chunk| chunk.pointer("/candidates/0/content/parts"))
            .filter_map(Value::as_array)
            .flatten()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect();
        let usage = events
            .iter()
            .rev()
            .find_map(|chunk| chunk.get("usageMetadata"))
            .cloned();
        let mut response =
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}}]});
        if let Some(usage) = usage {
            response["usageMetadata"] = usage;
        }
        return Some(response);
    }
    // OpenAI chat completion chunks: deltas, usage in the last chunk (`stream_options`), and
    // engines' own fields (llama.cpp's `timings`) as they come.
    let mut content = String::new();
    let mut reasoning = String::new();
    let mut response = Map::new();
    for chunk in &events {
        if let Some(delta) = chunk.pointer("/choices/0/delta") {
            content.push_str(
                delta
                    .get("content")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            );
            for key in ["reasoning_content", "reasoning"] {
                reasoning.push_str(delta.get(key).and_then(Value::as_str).unwrap_or_default());
            }
        }
        for key in ["id", "model", "usage", "timings"] {
            if let Some(value) = chunk.get(key).filter(|value| !value.is_null()) {
                response.insert(key.to_owned(), value.clone());
            }
        }
    }
    let mut message = json!({"role": "assistant", "content": content});
    if !reasoning.is_empty() {
        message["reasoning_content"] = json!(reasoning);
    }
    response.insert("choices".into(), json!([{"index": 0, "message": message}]));
    Some(Value::Object(response))
}

/// Adds the counts of `more` to `usage`, a later event's overriding an earlier's.
fn merge(usage: &mut Map<String, Value>, more: Option<&Value>) {
    for (key, value) in more.and_then(Value::as_object).into_iter().flatten() {
        if !value.is_null() {
            usage.insert(key.clone(), value.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::parse_response;

    #[test]
    fn streams_come_back_as_the_response_they_stand_for() {
        let chat = "data: {\"id\":\"c1\",\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"}}]}\n\n\
            data: {\"id\":\"c1\",\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\n\
            data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":2006,\"prompt_tokens_details\":{\"cached_tokens\":1920}}}\n\n\
            data: [DONE]\n\n";
        let response = parse_response(chat).unwrap();
        assert_eq!(response["choices"][0]["message"]["content"], "Hello");
        assert_eq!(
            response["usage"]["prompt_tokens_details"]["cached_tokens"],
            1920
        );

        let anthropic = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":12,\"cache_read_input_tokens\":4000,\"output_tokens\":1}}}\n\n\
            event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n\
            event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":9}}\n\n";
        let response = parse_response(anthropic).unwrap();
        assert_eq!(response["content"][0]["text"], "Hi");
        assert_eq!(
            response["usage"],
            json!({"input_tokens": 12, "cache_read_input_tokens": 4000, "output_tokens": 9})
        );

        let responses = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"output\":[]}}\n\n\
            event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"output\":[{\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"ok\"}]}],\"usage\":{\"input_tokens\":3000,\"input_tokens_details\":{\"cached_tokens\":2944}}}}\n\n";
        let response = parse_response(responses).unwrap();
        assert_eq!(
            response["usage"]["input_tokens_details"]["cached_tokens"],
            2944
        );

        let gemini = "[{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"A\"}]}}]},{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"B\"}]}}],\"usageMetadata\":{\"promptTokenCount\":5000,\"cachedContentTokenCount\":4096}}]";
        let response = parse_response(gemini).unwrap();
        assert_eq!(
            response["candidates"][0]["content"]["parts"][0]["text"],
            "AB"
        );
        assert_eq!(response["usageMetadata"]["cachedContentTokenCount"], 4096);
        assert!(parse_response("not a response").is_none());
    }
}

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
    // Anthropic Messages: `message_start` holds the message and its input usage, each content
    // block is started, filled by its deltas (text, thinking and its signature, a tool call's
    // input as JSON text) and stopped, `message_delta` holds the output usage.
    if kind(first).as_deref() == Some("message_start") {
        let mut message = first.get("message").cloned().unwrap_or_else(|| json!({}));
        let mut usage = message
            .get("usage")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut blocks = MessageBlocks::default();
        for event in &events {
            let index = event
                .get("index")
                .and_then(Value::as_u64)
                .and_then(|index| usize::try_from(index).ok());
            match (kind(event).as_deref(), index) {
                (Some("content_block_start"), Some(index)) => {
                    if let Some(block) = event.get("content_block") {
                        *blocks.at(index, block) = block.clone();
                    }
                }
                (Some("content_block_delta"), Some(index)) => {
                    if let Some(delta) = event.get("delta") {
                        blocks.apply(index, delta);
                    }
                }
                (Some("content_block_stop"), Some(index)) => blocks.finish(index),
                (Some("message_delta"), _) => {
                    merge(&mut usage, event.get("usage"));
                    // Why the generation ended (`end_turn`, `max_tokens`, ...).
                    for key in ["stop_reason", "stop_sequence"] {
                        if let Some(value) = event.pointer(&format!("/delta/{key}")) {
                            message[key] = value.clone();
                        }
                    }
                }
                _ => {}
            }
        }
        message["content"] = blocks.into_content();
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
    let mut finish_reason = Value::Null;
    let mut response = Map::new();
    for chunk in &events {
        if let Some(reason) = chunk
            .pointer("/choices/0/finish_reason")
            .filter(|reason| !reason.is_null())
        {
            finish_reason = reason.clone();
        }
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
    response.insert(
        "choices".into(),
        json!([{"index": 0, "message": message, "finish_reason": finish_reason}]),
    );
    Some(Value::Object(response))
}

/// The content blocks of a streamed Anthropic message, as its events build them.
#[derive(Default)]
struct MessageBlocks {
    blocks: Vec<Value>,
    /// Per block, the JSON text of a tool call's input received so far.
    input_json: Vec<String>,
}

impl MessageBlocks {
    /// Block `index`, made like `like` (an empty one of its type) when not started.
    fn at(&mut self, index: usize, like: &Value) -> &mut Value {
        // A block index past any real message's: an event of another stream.
        const MAX_BLOCKS: usize = 4096;
        let index = index.min(MAX_BLOCKS);
        if self.blocks.len() <= index {
            self.blocks.resize(index + 1, Value::Null);
            self.input_json.resize(index + 1, String::new());
        }
        let block = &mut self.blocks[index];
        if block.is_null() {
            *block = like.clone();
        }
        block
    }

    fn apply(&mut self, index: usize, delta: &Value) {
        let text = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or_default();
        let append = |block: &mut Value, key: &str, more: &str| {
            let joined = format!(
                "{}{more}",
                block.get(key).and_then(Value::as_str).unwrap_or_default()
            );
            block[key] = Value::String(joined);
        };
        match delta.get("type").and_then(Value::as_str) {
            Some("thinking_delta") => {
                let block = self.at(index, &json!({"type": "thinking", "thinking": ""}));
                append(block, "thinking", text("thinking"));
            }
            Some("signature_delta") => {
                let block = self.at(index, &json!({"type": "thinking", "thinking": ""}));
                block["signature"] = Value::String(text("signature").to_owned());
            }
            Some("input_json_delta") => {
                self.at(index, &json!({"type": "tool_use"}));
                if let Some(json) = self.input_json.get_mut(index.min(self.blocks.len() - 1)) {
                    json.push_str(text("partial_json"));
                }
            }
            // `text_delta`, and deltas of older streams that name no type.
            _ => {
                let block = self.at(index, &json!({"type": "text", "text": ""}));
                append(block, "text", text("text"));
            }
        }
    }

    /// A tool call's input, once its block is stopped.
    fn finish(&mut self, index: usize) {
        let Some(json) = self.input_json.get(index).filter(|json| !json.is_empty()) else {
            return;
        };
        if let Ok(input) = serde_json::from_str::<Value>(json) {
            self.blocks[index]["input"] = input;
        }
    }

    /// The message's `content`: its blocks in order (one empty text block when none came).
    fn into_content(self) -> Value {
        let blocks: Vec<Value> = self
            .blocks
            .into_iter()
            .filter(|block| !block.is_null())
            .collect();
        if blocks.is_empty() {
            return json!([{"type": "text", "text": ""}]);
        }
        Value::Array(blocks)
    }
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
        assert!(response["choices"][0]["finish_reason"].is_null());
        assert_eq!(
            response["usage"]["prompt_tokens_details"]["cached_tokens"],
            1920
        );

        let anthropic = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":12,\"cache_read_input_tokens\":4000,\"output_tokens\":1}}}\n\n\
            event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n\
            event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":9}}\n\n";
        let response = parse_response(anthropic).unwrap();
        assert_eq!(response["content"][0]["text"], "Hi");
        assert_eq!(response["stop_reason"], "end_turn");
        // Thinking with its signature and a tool call come back as the blocks they were.
        let blocks = concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":5}}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Read the \"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"test.\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqSig\"}}\n\n",
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"read_file\",\"input\":{}}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\": \"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"a.py\\\"}\"}}\n\n",
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
        );
        let with_blocks = parse_response(blocks).unwrap();
        assert_eq!(
            with_blocks["content"],
            json!([
                {"type": "thinking", "thinking": "Read the test.", "signature": "EqSig"},
                {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.py"}},
            ])
        );
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

//! What a live engine says of a prompt in its own tokens: a request in the chat shape its
//! template reads, then `/apply-template` and `/tokenize` (llama.cpp) or `/tokenize` with the
//! messages and tools (vLLM, SGLang).

use kvlint_protocol::EngineName;
use kvlint_render::render::openai_chat_body;
use kvlint_request::request::{BodyFormat, Request};
use serde_json::{Value, json};

use super::client::{Client, Failure};

/// A request's messages, tools and model in the chat shape (as a self-hosted engine's
/// Anthropic and Responses endpoints turn a body before its template runs).
pub fn chat_request(request: &Request, model: Option<&str>) -> Value {
    let (messages, tools): (Vec<Value>, Option<Vec<Value>>) = match request.format {
        BodyFormat::OpenAiChat => (
            (0..request.messages.len())
                .filter_map(|index| request.message_value(index).cloned())
                .collect(),
            request.body.get("tools").and_then(Value::as_array).cloned(),
        ),
        _ => openai_chat_body(request),
    };
    let mut body = json!({"messages": messages});
    if let Some(tools) = &tools {
        body["tools"] = json!(tools);
    }
    if let Some(model) = model.or(request.model.as_deref()) {
        body["model"] = json!(model);
    }
    body
}

/// The engine's tokens of a text it generated (no special tokens added), as the next prompt
/// holds them.
pub fn engine_text_tokens(
    client: &Client,
    kind: EngineName,
    text: &str,
) -> Result<Vec<u32>, Failure> {
    let request = match kind {
        EngineName::LlamaCpp => json!({"content": text, "add_special": false}),
        _ => json!({"prompt": text, "add_special_tokens": false}),
    };
    token_ids(&client.post("/tokenize", &request)?)
}

/// The prompt tokens the engine computes for a chat request.
pub fn engine_tokens(client: &Client, kind: EngineName, body: &Value) -> Result<Vec<u32>, Failure> {
    let response = match kind {
        EngineName::LlamaCpp => {
            let prompt = client.post("/apply-template", body)?;
            let prompt = prompt
                .get("prompt")
                .and_then(Value::as_str)
                .ok_or_else(|| Failure("/apply-template: no `prompt` in the response".into()))?;
            client.post(
                "/tokenize",
                &json!({"content": prompt, "add_special": true, "parse_special": true}),
            )?
        }
        _ => {
            let mut request = json!({"messages": body["messages"], "add_generation_prompt": true});
            if let Some(tools) = body.get("tools") {
                request["tools"] = tools.clone();
            }
            if let Some(model) = body.get("model") {
                request["model"] = model.clone();
            }
            client.post("/tokenize", &request)?
        }
    };
    token_ids(&response)
}

/// The `tokens` of a `/tokenize` response (ids, or `{id, piece}` objects).
fn token_ids(response: &Value) -> Result<Vec<u32>, Failure> {
    response
        .get("tokens")
        .and_then(Value::as_array)
        .map(|tokens| {
            tokens
                .iter()
                .filter_map(|token| token.as_u64().or_else(|| token.get("id")?.as_u64()))
                .map(|id| id as u32)
                .collect()
        })
        .ok_or_else(|| Failure("/tokenize: no `tokens` in the response".into()))
}

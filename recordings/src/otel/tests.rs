use serde_json::{Value, json};

use crate::Body;
use crate::{Container, Recording};

/// An OTLP document of spans with these attributes, started in this order.
fn trace(spans: &[(u64, Value)]) -> String {
    let spans: Vec<Value> = spans
        .iter()
        .map(|(start, attributes)| {
            let attributes: Vec<Value> = attributes
                .as_object()
                .unwrap()
                .iter()
                .map(|(key, value)| {
                    let value = match value {
                        Value::String(text) => json!({"stringValue": text}),
                        Value::Number(number) => json!({"intValue": number.to_string()}),
                        other => json!({"stringValue": other.to_string()}),
                    };
                    json!({"key": key, "value": value})
                })
                .collect();
            json!({"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331",
                "name": "chat", "kind": 3, "startTimeUnixNano": start.to_string(), "attributes": attributes})
        })
        .collect();
    serde_json::to_string_pretty(&json!({"resourceSpans": [{"resource": {"attributes": []},
        "scopeSpans": [{"scope": {"name": "test"}, "spans": spans}]}]}))
    .unwrap()
}

/// A file read as every recording is: its trace, if it is one.
fn read(text: &str) -> Option<Recording> {
    Recording::read(text.as_bytes())
        .unwrap()
        .filter(|recording| recording.container == Container::Otlp)
}

fn bodies(text: &str) -> Vec<Body> {
    let recording = read(text).expect("an OTLP trace");
    recording
        .interactions
        .into_iter()
        .map(|interaction| interaction.body)
        .collect()
}

#[test]
fn gen_ai_messages_become_a_chat_body_in_call_order() {
    let later = json!({
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m",
        "gen_ai.system_instructions": r#"[{"type": "text", "content": "Be brief."}]"#,
        "gen_ai.input.messages": json!([
            {"role": "user", "parts": [{"type": "text", "content": "weather?"}]},
            {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "get", "arguments": {"city": "Rome"}}]},
            {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "sunny"}]},
        ]).to_string(),
        "gen_ai.tool.definitions": r#"[{"type": "function", "name": "get", "parameters": {"type": "object"}}]"#,
    });
    let earlier = json!({"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"});
    let bodies = bodies(&trace(&[(20, later), (10, earlier)]));
    assert!(matches!(&bodies[0], Body::None(reason) if reason.contains("not captured")));
    let Body::Reconstructed(body) = &bodies[1] else {
        panic!("{:?}", bodies[1])
    };
    assert_eq!(
        body,
        &json!({"model": "m", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get", "arguments": "{\"city\":\"Rome\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        ], "tools": [{"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}]})
    );
}

#[test]
fn indexed_attributes_of_both_older_conventions_are_read_in_index_order() {
    let open_inference = json!({
        "openinference.span.kind": "LLM",
        "llm.model_name": "m",
        "llm.input_messages.10.message.role": "user",
        "llm.input_messages.10.message.content": "eleventh",
        "llm.input_messages.2.message.role": "assistant",
        "llm.input_messages.2.message.tool_calls.0.tool_call.id": "c1",
        "llm.input_messages.2.message.tool_calls.0.tool_call.function.name": "get",
        "llm.input_messages.2.message.tool_calls.0.tool_call.function.arguments": "{\"a\": 1}",
        "llm.tools.0.tool.json_schema": r#"{"type": "function", "function": {"name": "get"}}"#,
    });
    let gen_ai_prompt = json!({
        "gen_ai.request.model": "m",
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.0.content": "Be brief.",
        "gen_ai.prompt.1.role": "tool",
        "gen_ai.prompt.1.tool_call_id": "c1",
        "gen_ai.prompt.1.content": "sunny",
        "llm.request.functions.0.name": "get",
        "llm.request.functions.0.parameters": "{\"type\": \"object\"}",
    });
    let bodies = bodies(&trace(&[(1, open_inference), (2, gen_ai_prompt)]));
    let [Body::Reconstructed(first), Body::Reconstructed(second)] = &bodies[..] else {
        panic!("{bodies:?}")
    };
    assert_eq!(
        first,
        &json!({"model": "m", "messages": [
            {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get", "arguments": "{\"a\": 1}"}}]},
            {"role": "user", "content": "eleventh"},
        ], "tools": [{"type": "function", "function": {"name": "get"}}]})
    );
    assert_eq!(
        second,
        &json!({"model": "m", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "tool", "content": "sunny", "tool_call_id": "c1"},
        ], "tools": [{"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}]})
    );
}

#[test]
fn adk_spans_hold_the_gemini_request_as_the_sdk_was_given_it() {
    let request = json!({"model": "gemini-2.5-flash",
        "config": {"system_instruction": "Answer briefly.", "tools": [{"function_declarations": [{"name": "get_weather"}]}]},
        "contents": [{"parts": [{"text": "Hi."}], "role": "user"}]});
    let call = json!({"gen_ai.system": "gcp.vertex.agent", "gcp.vertex.agent.llm_request": request.to_string(),
        "gcp.vertex.agent.llm_response": r#"{"content": {"parts": [{"text": "Hello."}], "role": "model"}, "usage_metadata": {"prompt_token_count": 10}}"#});
    // The instrumented SDK's own span of the same call carries no content.
    let sdk = json!({"gen_ai.operation.name": "generate_content", "gen_ai.system": "gemini"});
    let recording = read(&trace(&[(1, call), (2, sdk)])).unwrap();
    let Body::Reconstructed(body) = &recording.interactions[0].body else {
        panic!()
    };
    assert_eq!(body, &request);
    assert_eq!(
        recording.interactions[0].response.as_ref().unwrap()["usage_metadata"]["prompt_token_count"],
        10
    );
    assert!(matches!(&recording.interactions[1].body, Body::None(_)));
}

#[test]
fn a_collector_file_has_one_document_per_line_and_spans_are_placed_on_theirs() {
    let call = json!({"openinference.span.kind": "LLM", "input.mime_type": "application/json",
        "input.value": r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}]}"#});
    let line = |start| {
        serde_json::to_string(
            &serde_json::from_str::<Value>(&trace(&[(start, call.clone())])).unwrap(),
        )
        .unwrap()
    };
    let text = format!("{}\n{}\n", line(1), line(2));
    let recording = read(&text).unwrap();
    let lines: Vec<usize> = recording
        .interactions
        .iter()
        .map(|interaction| interaction.at.line)
        .collect();
    assert_eq!(lines, [1, 2]);
    assert!(
        matches!(&recording.interactions[1].body, Body::Reconstructed(body) if body["messages"][0]["content"] == "hi")
    );
    // Not traces: a session file, and JSON without spans.
    assert!(read(r#"{"model": "m", "messages": []}"#).is_none());
    assert!(read("{\"resourceSpans\": []}\n{\"messages\": []}\n").is_none());
}

/// The cache usage a span reports, under OpenTelemetry's GenAI names, comes back as the
/// response's usage: read and written, for the reported-usage audit.
#[test]
fn the_cache_usage_attributes_become_the_response_usage() {
    let attributes = json!({
        "gen_ai.usage.input_tokens": 5000,
        "gen_ai.usage.cache_read.input_tokens": 2048,
        "gen_ai.usage.cache_creation.input_tokens": 2900,
        "gen_ai.output.messages": "[{\"role\": \"assistant\", \"parts\": [{\"type\": \"text\", \"content\": \"ok\"}]}]",
    });
    let response = super::response(attributes.as_object().unwrap()).unwrap();
    let usage = kvlint_core::cache::reported_usage(&response).unwrap();
    assert_eq!(
        (
            usage.prompt_tokens,
            usage.cached_tokens,
            usage.cache_write_tokens
        ),
        (Some(5000), 2048, Some(2900))
    );
}

/// pydantic-ai's spans (`UsageBase.opentelemetry_attributes`): the older `details` names, the
/// newer `cache_write` name, and a cache read left out when it is zero.
#[test]
fn pydantic_ai_s_cache_usage_names_are_read_too() {
    let usage_of = |attributes: Value| {
        let response = super::response(attributes.as_object().unwrap()).unwrap();
        let usage = kvlint_core::cache::reported_usage(&response).unwrap();
        (
            usage.prompt_tokens,
            usage.cached_tokens,
            usage.cache_write_tokens,
        )
    };
    let details = json!({
        "gen_ai.usage.input_tokens": 4000,
        "gen_ai.usage.details.cache_read_tokens": 1024,
        "gen_ai.usage.details.cache_write_tokens": 512,
    });
    assert_eq!(usage_of(details), (Some(4000), 1024, Some(512)));
    let first_turn = json!({
        "gen_ai.usage.input_tokens": 3000,
        "gen_ai.usage.cache_write.input_tokens": 2900,
    });
    assert_eq!(usage_of(first_turn), (Some(3000), 0, Some(2900)));
}
